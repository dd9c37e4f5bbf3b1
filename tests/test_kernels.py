"""Kernel internals that the operator tests do not isolate: float16/bfloat16 conversions, the rounding of
reduced totals, every operand layout the engine chooses, the pairwise sums and the plan it makes."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numba
import numpy as np
import pytest
import torch

from lossops import bench, opset
from lossops.conformance.backends import BACKENDS
from lossops.conformance.cases import Spec, spec_case
from lossops.conformance.tolerance import compare
from lossops.ort_ext.arrays import InvalidInput, _planned, run
from lossops.ort_ext.kernels import engine, halves
from lossops.ort_ext.kernels.native import STREAMING_STORES, view
from lossops.ort_ext.kernels.registry import KERNELS

BF16 = np.dtype(ml_dtypes.bfloat16)


@numba.njit
def _narrow_hw(src, dst):
    for i in range(src.size):
        halves.store(dst, i, src[i])


@numba.njit
def _narrow_bits(src, dst):
    for i in range(src.size):
        dst[i] = halves.float_to_half(src[i])


@numba.njit
def _widen(src, dst):
    for i in range(src.size):
        dst[i] = halves.load(src[i])


@numba.njit
def _widen_bits(src, dst):
    for i in range(src.size):
        dst[i] = halves.half_to_float(src[i])


@numba.njit
def _store_rounded(src, dst):
    for i in range(src.size):
        halves.store_rounded(dst, i, src[i])


def _random_floats(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("path", ["loops", "bits"])
def test_float16_rounding_matches_numpy_bit_for_bit(path):
    """The loops' rounding (LLVM's with F16C; the bit version without) against numpy's cast, over random bit
    patterns, every half, every midpoint between halves and their neighbours."""
    halves_ = np.arange(2**16, dtype=np.uint16).view(np.float16).astype(np.float32)
    with np.errstate(invalid="ignore"):  # NaN halves
        midpoints = ((halves_[:-1].astype(np.float64) + halves_[1:]) / 2).astype(np.float32)
    x = np.concatenate([_random_floats(2 * 10**6, 0), halves_, midpoints, np.nextafter(midpoints, 0),
                        np.nextafter(midpoints, 1), np.float32([65519.99, 65520, 65504, 2.98e-8, 5.96e-8, -0.0,
                                                                np.inf, -np.inf])])
    got = np.empty(x.shape, np.uint16)
    with np.errstate(all="ignore"):
        (_narrow_hw if path == "loops" else _narrow_bits)(x, got)
        expected = x.astype(np.float16).view(np.uint16)
    same = (got == expected) | (np.isnan(got.view(np.float16)) & np.isnan(expected.view(np.float16)))
    assert same.all(), x[~same][:5]


@pytest.mark.parametrize("path", ["loops", "bits"])
def test_float16_widening_is_exact(path):
    bits = np.arange(2**16, dtype=np.uint16)
    got = np.empty(bits.shape, np.float32)
    (_widen if path == "loops" else _widen_bits)(bits, got)
    expected = bits.view(np.float16).astype(np.float32)
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), bits[~same][:5]


def test_bfloat16_conversions_match_ml_dtypes_bit_for_bit():
    bits = np.arange(2**16, dtype=np.uint16).view(np.int16)
    wide = np.empty(bits.shape, np.float32)
    _widen(bits, wide)
    assert np.array_equal(wide.view(np.uint32), bits.view(BF16).astype(np.float32).view(np.uint32))
    x = _random_floats(10**6, 1)
    got = np.empty(x.shape, np.int16)
    _narrow_hw(x, got)
    with np.errstate(all="ignore"):
        expected = x.astype(BF16)
    same = (got == expected.view(np.int16)) | (np.isnan(x) & np.isnan(got.view(BF16).astype(np.float32)))
    assert same.all(), x[~same][:5]


def _nearest_even(x: float, grid: np.ndarray, bits: np.ndarray) -> int:
    """Index of the value of `grid` (sorted, finite, exact in float64) nearest to x, exactly; a tie goes to
    the value whose bit pattern `bits` ends in 0 (round half to even)."""
    k = int(np.searchsorted(grid, x))
    if k == 0 or k == len(grid):
        return min(max(k, 0), len(grid) - 1)
    below, above = Fraction(float(grid[k - 1])), Fraction(float(grid[k]))
    d_below, d_above = Fraction(x) - below, above - Fraction(x)
    if d_below != d_above:
        return k - 1 if d_below < d_above else k
    return k - 1 if bits[k - 1] % 2 == 0 else k


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_totals_are_rounded_once(dtype):
    """A float64 total goes to float16/bfloat16 with one rounding (through float32 rounded to odd), not
    two: checked against exact nearest-even rounding, on totals placed just off the midpoints between two
    representable values, where rounding twice goes wrong."""
    storage = np.uint16 if dtype == "float16" else np.int16
    t = np.dtype(np.float16) if dtype == "float16" else BF16
    patterns = np.arange(2**16, dtype=np.uint16)
    with np.errstate(invalid="ignore"):  # NaN patterns, dropped below
        values = patterns.view(storage).view(t).astype(np.float64)
    keep = np.isfinite(values) & ~((values == 0) & (patterns >= 0x8000))  # one zero
    order = np.argsort(values[keep], kind="stable")
    grid, bits = values[keep][order], patterns[keep][order]
    rng = np.random.default_rng(3)
    picks = rng.integers(0, len(grid) - 1, size=3000)
    mid = (grid[picks] + grid[picks + 1]) / 2
    off = np.abs(grid[picks + 1] - grid[picks]) * 2.0**-30  # below float32's resolution of the gap
    x = np.concatenate([mid, mid + off, mid - off, rng.normal(size=2000) * 100])
    got = np.empty(x.shape, storage)
    _store_rounded(x, got)
    expected = np.array([grid[_nearest_even(v, grid, bits)] for v in x])
    assert np.array_equal(got.view(t).astype(np.float64), expected)


@numba.njit
def _exactness(v):
    return halves.widened(v), halves.holds_float16(v)


def test_what_the_storage_makes_exact_holds():
    """The soft margin kernels skip the product's rounding error where `widened` holds (float16 and bfloat16
    products are exact in float32, bfloat16 where the product stays in float32's normal range); where
    `holds_float16`, BCE takes log(1 - x) for log1p(-x) (exact for every float16 in [0, 1]) and BCE and KL
    take a log without the scaling of subnormals (no float16 is subnormal in float32)."""
    storage = (np.uint16, np.int16, np.float32, np.float64)
    assert [_exactness(np.zeros(1, t)) for t in storage] == [(True, True), (True, False), (False, False),
                                                             (False, False)]
    every = np.arange(2**16, dtype=np.uint16).view(np.float16).astype(np.float32)
    assert np.abs(every[np.isfinite(every) & (every != 0)]).min() >= np.finfo(np.float32).tiny
    unit = every[(every >= 0) & (every <= 1)]
    assert np.array_equal((np.float32(1) - unit).astype(np.float64), 1.0 - unit.astype(np.float64))
    rng = np.random.default_rng(0)
    halves_ = np.arange(2**16, dtype=np.uint16).view(np.float16)
    halves_ = halves_[np.isfinite(halves_)].astype(np.float32)
    a, b = rng.choice(halves_, 10**6), rng.choice(halves_, 10**6)
    assert np.array_equal((a * b).astype(np.float64), a.astype(np.float64) * b.astype(np.float64))
    bf = rng.uniform(-30, 30, (2, 10**6)).astype(np.float32).astype(BF16).astype(np.float32)
    a, b = np.ldexp(bf[0], rng.integers(-60, 60, 10**6)), bf[1]
    assert np.array_equal((a * b).astype(np.float64), a.astype(np.float64) * b.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tile_sum_is_accurate_and_in_a_fixed_order(dtype):
    """float32 terms in one float64 run: within m units of 2**-53 of their magnitude (any order's bound); float64
    terms in blocks of 128 summed in at least 4 vector lanes, then pairwise: within 128 / 4 + 2 + 3 < 40 units.
    Magnitudes spread over 2**40, so that float64 additions do round."""
    rng = np.random.default_rng(5)
    values = (rng.normal(size=engine.TILE) * np.exp2(rng.integers(0, 40, engine.TILE))).astype(dtype)
    exact = float(sum(Fraction(float(v)) for v in values))
    got = engine.tile_sum(values, 0, values.size)
    units = values.size if dtype == np.float32 else 40
    assert abs(got - exact) <= units * 2.0**-53 * float(np.abs(values.astype(np.float64)).sum())
    assert got == engine.tile_sum(values.copy(), 0, values.size)  # bit-identical when repeated
    assert engine.tile_sum(values, 7, 100) == engine.tile_sum(values[7:107].copy(), 0, 100)
    parts = rng.normal(size=1000)
    assert engine.pairwise(parts.copy(), 1000) == engine.pairwise(parts.copy(), 1000)
    assert engine.pairwise(np.zeros(0), 0) == 0.0


def _plan(op: str, shapes: dict[int, tuple], n_inputs: int) -> np.ndarray:
    """The plan the engine makes for inputs of these shapes (the inputs are kept alive in `_keep`)."""
    plan = np.zeros(1, engine.PLAN)
    plan["elem_type"], plan["itemsize"] = engine.FLOAT, 4
    arrays = []
    for j, shape in shapes.items():
        a = np.ones(shape, np.float32)
        arrays.append(a)
        o = plan["operands"][0, j]
        o["present"], o["address"], o["rank"], o["elem_type"] = 1, a.ctypes.data, a.ndim, engine.FLOAT
        o["dims"][:a.ndim] = a.shape
    from lossops.ort_ext.arrays import entry_points

    assert entry_points(op, None, engine.FLOAT)[0](plan.ctypes.data) == engine.OK
    _keep.append(arrays)
    return plan


_keep: list = []


def test_layouts_are_merged_and_classified():
    """(N, C) with a per-class weight: two merged dims, the weight PERIODIC with period C; a per-row weight
    (N, 1) is GENERAL; a scalar PERIODIC with period 1; an absent input ABSENT; a full one FULL."""
    bce_backward = "BinaryCrossEntropyBackward"  # grad_output, input, target, weight
    plan = _plan(bce_backward, {0: (), 1: (300, 7), 2: (300, 7), 3: (7,)}, 4)
    kinds = list(plan["operands"][0, :4]["kind"])
    assert plan["rank"][0] == 2 and list(plan["dims"][0, :2]) == [300, 7]
    assert kinds == [engine.PERIODIC, engine.FULL, engine.FULL, engine.PERIODIC]
    assert list(plan["operands"][0, :4]["period"][[0, 3]]) == [1, 7]
    plan = _plan(bce_backward, {0: (), 1: (300, 7), 2: (300, 7), 3: (300, 1)}, 4)
    assert plan["operands"][0, 3]["kind"] == engine.GENERAL
    plan = _plan(bce_backward, {0: (), 1: (2, 3, 4), 2: (2, 3, 4)}, 4)
    assert plan["rank"][0] == 1 and plan["dims"][0, 0] == 24  # all contiguous: one dim
    assert plan["operands"][0, 3]["kind"] == engine.ABSENT
    kl = _plan("KlDivBackward", {0: (), 1: (1, 5), 2: (4, 5)}, 3)  # input broadcast up: summed back
    assert kl["mode"][0] == engine.SUMBACK and list(kl["out_dims"][0, :2]) == [1, 5]
    assert kl["operands"][0, 1]["kind"] == engine.UNREAD  # the kernel never reads input's data


# Operand forms: full, trailing-axes (per class), per row (gathered), scalar, absent.
SHAPE = (3, 70001)  # 210003 elements: several tasks, tiles and periods that do not line up with rows
FORMS = {"full": SHAPE, "per-class": (SHAPE[1],), "per-row": (SHAPE[0], 1), "scalar": (1, 1), "absent": None}


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("form", list(FORMS))
def test_an_operands_layout_does_not_change_the_result(form, dtype):
    """A broadcast operand (read periodically, gathered per tile, a scalar, absent meaning 1) gives the bits that
    the same values materialised in full give: the layout decides how elements are fetched, never what is
    computed. (Correctness against PyTorch is held in test_operators.py and test_plans.py.)"""
    t = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    r = np.random.default_rng(2)
    x, y = r.uniform(0.001, 0.999, SHAPE).astype(t), r.uniform(size=SHAPE).astype(t)
    other = None if FORMS[form] is None else r.normal(size=FORMS[form]).astype(t)
    full = np.ones(SHAPE, t) if other is None else np.broadcast_to(other, SHAPE).copy()
    g = r.normal(size=SHAPE).astype(t)

    def same(a, b):
        return np.array_equal(np.atleast_1d(a).view(np.uint8), np.atleast_1d(b).view(np.uint8))

    with np.errstate(all="ignore"):
        for reduction in ("none", "mean"):
            assert same(run("BinaryCrossEntropyBackward", [g, x, y, other], reduction=reduction),
                        run("BinaryCrossEntropyBackward", [g, x, y, full], reduction=reduction)), ("weight", reduction)
            assert same(run("BinaryCrossEntropyWithLogits", [x, y, None, other], reduction=reduction),
                        run("BinaryCrossEntropyWithLogits", [x, y, None, full], reduction=reduction)), ("pos_weight",
                                                                                                      reduction)
        if other is not None:
            assert same(run("KlDivBackward", [other, x, y], reduction="none"),
                        run("KlDivBackward", [full, x, y], reduction="none")), "grad_output"


def test_plan_record_words_match_the_dtype():
    """The compiled code reads the plan as int64 words at offsets taken from the PLAN dtype: a field written
    through the numpy record must be read back through the word view."""
    plan = np.zeros(1, engine.PLAN)
    plan["n"], plan["scale"] = 12345, 0.25
    plan["operands"][0, 3]["dims"][2] = 77
    words = view(plan.ctypes.data, engine.PLAN_WORDS, np.int64)
    assert words[engine.N] == 12345
    assert view(plan.ctypes.data, engine.PLAN_WORDS, np.float64)[engine.SCALE] == 0.25
    assert words[engine.OPERANDS + 3 * engine.OPERAND_WORDS + engine.O_DIMS + 2] == 77


def test_source_stamp_is_taken_at_import():
    """The stamp reflects the sources the process imported, not files changed under it later: a fresh process
    has it as soon as the kernels' front end is imported, before any machine code is loaded or compiled."""
    import subprocess
    import sys

    code = ("from lossops.ort_ext.arrays import run; from lossops.ort_ext.machine_code import loader as m; "
            "print(m.source_stamp.cache_info().currsize, m.source_stamp.cache_info().misses)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["1", "1"], done.stderr[-2000:]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op_name", sorted(name for name, k in KERNELS.items() if not k.rows and not k.sequences))
def test_streamed_outputs_follow_pytorch_and_equal_plain_stores(op_name, dtype):
    """An elementwise output of STREAM_BYTES or more is written with non-temporal stores on x86-64. Through
    onnxruntime it must follow PyTorch float64 within the conformance tolerance, and equal, bit for bit, what
    plain stores write in both front ends (each element depends on its own inputs only, so slices under the
    threshold are the reference)."""
    n = engine.STREAM_BYTES // np.dtype(dtype).itemsize + 4099  # and a last tile that is not 32-byte whole
    feeds = bench.sample(op_name, n, "float64", "none")
    spec = Spec(f"streamed_{op_name}", op_name, [feeds.get(i.name) for i in opset.get(op_name).inputs],
                {"reduction": "none"})
    case = spec_case(spec, dtype)
    inputs = [None if a is None else a.astype(dtype) for a in spec.inputs]
    assert _planned(op_name, inputs, {"reduction": "none"})[0]["stream"][0] == STREAMING_STORES
    in_ort = BACKENDS["kernels"](case.model, case.inputs)
    ok, _, msg = case.check(in_ort)
    assert ok, msg
    whole = run(op_name, inputs, reduction="none")
    assert np.array_equal(in_ort.view(np.uint8), whole.view(np.uint8))
    step = 200_003
    for lo in range(0, n, step):
        part = run(op_name, [None if a is None else a[lo:lo + step] for a in inputs], reduction="none")
        assert np.array_equal(part.view(np.uint8), whole[lo:lo + step].view(np.uint8)), lo


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("beta", [1e30, 1e-30, 1e-40, 0.3])
def test_smooth_l1_at_extreme_betas_follows_pytorch(beta, dtype):
    """SmoothL1Loss and its gradient with differences on beta's scale, on the kernels and on the decomposition,
    held to PyTorch float64: at a float32 beta of 1e30 z * z overflows and at 1e-30 it underflows (both divide
    before they multiply), at 1e-40 beta and the losses are subnormal in float32."""
    r = np.random.default_rng(7)
    x, y = (r.standard_normal((3, 1001)) * beta for _ in range(2))
    g = r.standard_normal((3, 1001))
    b = float(np.float32(beta))  # the attribute is a float32
    xt = torch.tensor(x.astype(dtype).astype(np.float64), requires_grad=True)
    loss = torch.nn.functional.smooth_l1_loss(xt, torch.tensor(y.astype(dtype).astype(np.float64)),
                                              reduction="none", beta=b)
    loss.backward(torch.tensor(g.astype(dtype).astype(np.float64)))
    for op_name, inputs, ref in (("SmoothL1Loss", [x, y], loss.detach().numpy()),
                                 ("SmoothL1LossBackward", [g, x, y], xt.grad.numpy())):
        spec = Spec(f"extreme_beta_{op_name}", op_name, [a.astype(dtype) for a in inputs],
                    {"reduction": "none", "beta": beta})
        case = spec_case(spec, dtype)
        for backend in ("kernels", "decomposition"):
            ok, _, message = compare(BACKENDS[backend](case.model, case.inputs), ref, dtype)
            assert ok, f"{op_name} on {backend}: {message}"


@pytest.mark.parametrize("op_name", ["CtcLoss", "CtcLossBackward"])
def test_a_bad_ctc_label_or_length_is_refused_before_any_read(op_name):
    """A target label that is the blank, C or beyond, or negative, and a length beyond its bound, name the operator,
    the input, the value and its place (with C and the blank for a label) before anything is read."""
    op = opset.get(op_name)
    lp = np.log(np.full((4, 2, 3), 1 / 3, np.float32))

    def call(targets, input_lengths=(4, 4)):
        given = {"grad_output": np.float32(1), "log_probs": lp, "targets": targets,
                 "input_lengths": np.array(input_lengths), "target_lengths": np.array([2, 1])}
        return run(op_name, [given[i.name] for i in op.inputs], reduction="sum", blank=0)

    for bad in (0, 3, 1 << 40, -1):
        with pytest.raises(InvalidInput, match=rf"{op_name}: input 'targets' must hold class indices in \[0, C\) "
                                              rf"other than blank, up to each target length; it holds {bad} at flat "
                                              rf"index 2 \(C = 3, blank 0\)"):
            call(np.array([[1, 2], [bad, 1]]))
    with pytest.raises(InvalidInput, match=rf"{op_name}: input 'input_lengths' .*4.* holds 5 at index 1"):
        call(np.array([[1, 2], [1, 1]]), input_lengths=(4, 5))
    call(np.array([[1, 2], [2, 0]]))  # past a sequence's target length a value is not checked, as in PyTorch
