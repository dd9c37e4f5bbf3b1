"""A differential test at the sizes where the kernels' engine changes its plan.

The engine splits a call into tiles of TILE elements, groups tiles into tasks (the unit a thread takes), streams
large elementwise outputs past the cache, reads a broadcast operand as a repeated run only while its period fits
in a tile, and splits a sum back over broadcast axes into tasks with accumulators of their own once the work is
large enough. Each threshold is read from the engine, and every operator is run on shapes just below, at and
above it: on the kernels inside onnxruntime (the session's threads), on the kernels' serial numpy front end
(bit-identical: results must not depend on the thread count) and on the standard-op decomposition in a plain
onnxruntime, the first and last held to PyTorch float64 under the conformance tolerance.

The matrix covers every (operator, dtype, reduction, attribute value, operand layout) once, at a threshold
chosen by rotation, and every (operator, threshold, side, dtype) once, with the layout rotated. `pytest
--plans=full` runs the whole product instead (for a nightly run: tens of minutes on 2 cores).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

from lossops import opset
from lossops.conformance.backends import BACKENDS
from lossops.conformance.cases import DTYPES, Spec, np_dtype, spec_case
from lossops.conformance.specs import draw
from lossops.conformance.tolerance import compare
from lossops.opset.spec import BROADCAST, EXACT, LOG_PROBABILITY
from lossops.ort_ext.arrays import _planned, run
from lossops.ort_ext.kernels import engine
from lossops.ort_ext.kernels.native import STREAMING_STORES
from lossops.ort_ext.kernels.registry import KERNELS

from record import MAX_ULPS

TILED = [name for name, k in KERNELS.items() if not k.rows and not k.sequences]

# Operand layouts of the inputs that broadcast (the engine's FULL, PERIODIC and GENERAL kinds, an absent
# optional input) and, where an input may broadcast `input` up (`sums_back`), the engine's SUMBACK layouts.
FITS_LAYOUTS = ("full", "per-class", "per-row", "scalar", "absent")
SUMBACK_LAYOUTS = ("sum-rows", "sum-columns", "sum-added-axis")


@dataclass(frozen=True)
class Point:
    """A size to test: F's element count n, split as rows x columns (columns: the class axis)."""

    name: str
    rows: int
    columns: int

    @property
    def n(self) -> int:
        return self.rows * self.columns


def _split(name: str, n: int, columns: int = 0) -> Point:
    """n as rows x columns, with the largest column count up to 1500 that divides it (n itself when prime)."""
    if not columns:
        columns = next((c for c in range(min(n, 1500), 0, -1) if n % c == 0 and c > 1), 1)
        if columns == 1:
            columns = n
    return Point(name, n // columns, columns)


def thresholds(op_name: str, dtype: str) -> list[Point]:
    """The sizes where the engine's plan for `op_name` changes, each just below, at and just above."""
    task = KERNELS[op_name].task_tiles * engine.TILE
    stream = engine.STREAM_BYTES // np_dtype(dtype).itemsize
    # tiles; tasks (one, two, three: more tasks than this machine's threads); an elementwise output of STREAM_BYTES
    bounds = {"tile": engine.TILE, "task": task, "tasks-2": 2 * task, "tasks-3": 3 * task, "stream": stream}
    points = [_split(f"{name}{side:+d}", limit + side) for name, limit in bounds.items() for side in (-1, 0, 1)]
    # a per-class operand is read as a run while its period fits in a tile, gathered past it
    return points + [Point(f"period-{c}", 3 * task // c + 1, c) for c in (engine.TILE, engine.TILE + 1)]


def sums_back(op_name: str) -> bool:
    """Whether the operator's output (an input's shape: its gradient) sums back what another input broadcasting
    it up computes over (KlDivBackward: `target` may enlarge `input`; KlDivTargetBackward the other way)."""
    op = opset.get(op_name)
    return op.output_shape != "full" and any(i.shape == BROADCAST for i in op.inputs)


def sumback_points(op_name: str) -> list[Point]:
    """The sum back over broadcast axes: one task up to SUMBACK_SPREAD times the output, split past it; the
    64-tile task boundary that once ended the sum early."""
    task = KERNELS[op_name].task_tiles * engine.TILE
    c = 1024
    rows = {"task": task // c, "spread": 2 * engine.SUMBACK_SPREAD, "spread-3": 3 * engine.SUMBACK_SPREAD}
    return [Point(f"sumback-{name}{side:+d}", r + side, c) for name, r in rows.items() for side in (-1, 0, 1)]


def layouts(op_name: str) -> tuple[str, ...]:
    return FITS_LAYOUTS + (SUMBACK_LAYOUTS if sums_back(op_name) else ())


def spec(op_name: str, point: Point, layout: str, attrs: dict, seed: int) -> Spec:
    """One node on `point`'s shape: inputs that broadcast take `layout`; grad_output is a scalar where the
    loss was reduced. A sum-back layout shrinks the input whose gradient the output is instead (the other one
    keeps the full shape)."""
    op = opset.get(op_name)
    r = np.random.default_rng(seed)
    full = (point.rows, point.columns)
    forms = {"full": full, "per-class": (point.columns,), "per-row": (point.rows, 1), "scalar": (), "absent": None}
    shrunk = {"sum-rows": (1, point.columns), "sum-columns": (point.rows, 1), "sum-added-axis": (point.columns,)}
    output = shrunk.get(layout, full)
    inputs = []
    for i in op.inputs:
        if i.name == op.output_shape:
            shape = output
        elif i.shape == EXACT or i.name == "input" or (i.shape == BROADCAST and layout in shrunk):
            shape = full
        elif i.name == "grad_output" and attrs.get("reduction", "mean") != "none" and op.output_shape != "full":
            shape = ()  # the gradient of a reduced loss
        elif layout in shrunk:
            shape = full if i.name == "grad_output" else None if i.optional else ()
        else:
            shape = forms[layout] if (i.optional or layout != "absent") else full
        domain = LOG_PROBABILITY if attrs.get("log_target") and i.name == "target" else i.domain
        inputs.append(None if shape is None else draw(r, domain, shape))
    n = point.n
    out = int(np.prod(output))
    reduced = op.reduces and attrs.get("reduction", "mean") != "none"
    summed = n if reduced else (n // max(out, 1) if op.output_shape != "full" and out < n else 0)
    return Spec(f"{op_name}_{point.name}_{layout}", op_name, inputs, attrs, summed)


def attribute_sets(op_name: str, enums: bool | None = None) -> list[dict]:
    """Every combination of the attributes' test values (`enums`: of the enum attributes only, or of the
    numbers only)."""
    attributes = [a for a in opset.get(op_name).attributes if enums is None or a.enum == enums]
    return [dict(zip([a.name for a in attributes], values, strict=True))
            for values in itertools.product(*(a.values for a in attributes))]


def matrix(full: bool) -> list[tuple[str, Point, str, dict, str]]:
    """(operator, point, layout, attributes, dtype) cases: a covering design, or the whole product."""
    cases = []
    for op_name in TILED:  # the tile engine's plans (the class losses': tests/test_rows.py)
        sizes = {d: thresholds(op_name, d) for d in DTYPES}
        extra = sumback_points(op_name) if sums_back(op_name) else []
        if full:
            for d, attrs, layout in itertools.product(DTYPES, attribute_sets(op_name), layouts(op_name)):
                for point in (extra if layout in SUMBACK_LAYOUTS else sizes[d]):
                    cases.append((op_name, point, layout, attrs, d))
            continue
        # every enum setting (the engine applies the reduction) in every layout and type; the numbers (alpha,
        # gamma: a tile's arithmetic, not the plan) take turns
        turn = itertools.count()
        numbers = attribute_sets(op_name, enums=False)
        for enums, layout, d in itertools.product(attribute_sets(op_name, enums=True), layouts(op_name), DTYPES):
            points = extra if layout in SUMBACK_LAYOUTS else sizes[d]
            k = next(turn)
            cases.append((op_name, points[k % len(points)], layout, enums | numbers[k % len(numbers)], d))
        turn = itertools.count()
        attribute_list = attribute_sets(op_name)
        for d in DTYPES:
            for point in sizes[d]:
                k = next(turn)
                cases.append((op_name, point, FITS_LAYOUTS[k % len(FITS_LAYOUTS)],
                              attribute_list[k % len(attribute_list)], d))
        for k, point in enumerate(extra):
            cases.append((op_name, point, SUMBACK_LAYOUTS[k % 3], attribute_list[k % len(attribute_list)],
                          DTYPES[k % len(DTYPES)]))
    return cases


def pytest_generate_tests(metafunc):
    if "plan_case" in metafunc.fixturenames:
        cases = matrix(metafunc.config.getoption("plans") == "full")
        ids = [f"{op}-{p.name}-{layout}-{'-'.join(map(str, a.values()))}-{d}" for op, p, layout, a, d in cases]
        metafunc.parametrize("plan_case", cases, ids=ids)


def test_kernels_match_decomposition_and_pytorch_across_plans(plan_case):
    op_name, point, layout, attrs, dtype = plan_case
    s = spec(op_name, point, layout, attrs, seed=point.n)
    case = spec_case(s, dtype)
    inputs = [None if a is None else a.astype(np_dtype(dtype)) for a in s.inputs]
    in_ort = BACKENDS["kernels"](case.model, case.inputs)
    serial = run(op_name, inputs, **attrs)
    assert in_ort.tobytes() == serial.tobytes(), "the kernels inside onnxruntime differ from the serial front end"
    for backend, got in (("kernels", in_ort), ("decomposition", BACKENDS["decomposition"](case.model, case.inputs))):
        ok, ulps, message = case.check(got)
        MAX_ULPS[(f"plans-{backend}", dtype)] = max(MAX_ULPS[(f"plans-{backend}", dtype)],
                                                    ulps if np.isfinite(ulps) else 0)
        assert ok, f"{backend}: {message}"


def test_matrix_crosses_every_threshold():
    """The covering design reaches each threshold from both sides in every dtype, every layout of every
    operator, and the plans it is meant to: several tasks, streamed stores, periodic and gathered operands,
    sum-backs in one task and in several."""
    cases = matrix(full=False)
    for op_name in TILED:
        mine = [c for c in cases if c[0] == op_name]
        for d in DTYPES:
            assert {p.name for _, p, _, _, dd in mine if dd == d} >= {p.name for p in thresholds(op_name, d)}
        assert {layout for _, _, layout, _, _ in mine} == set(layouts(op_name))
    seen = set()
    for op_name, point, layout, attrs, dtype in cases:
        s = spec(op_name, point, layout, attrs, seed=0)
        plan = _planned(op_name, [None if a is None else a.astype(np_dtype(dtype)) for a in s.inputs], attrs)[0][0]
        kinds = {int(k) for k in plan["operands"]["kind"]}
        seen.add(("tasks>1", int(plan["ntasks"]) > 1))
        seen.add(("stream", bool(plan["stream"])))
        seen |= {("periodic", engine.PERIODIC in kinds), ("general", engine.GENERAL in kinds)}
        if plan["mode"] == engine.SUMBACK:
            seen.add(("sumback-tasks>1", int(plan["ntasks"]) > 1))
    expected = {(name, flag) for name in ("tasks>1", "periodic", "general", "sumback-tasks>1", "stream")
                for flag in (True, False)}
    if not STREAMING_STORES:  # not x86-64: no streamed stores
        expected.discard(("stream", True))
    assert seen >= expected


PREFETCHING = [name for name in TILED if KERNELS[name].prefetch]


def _full_operands(op_name: str, attrs: dict, dtype: str) -> int:
    """How many of the operator's operands the engine reads FULL when every input has the whole shape."""
    s = spec(op_name, Point("small", 2, 3), "full", attrs, seed=0)
    plan = _planned(op_name, [None if a is None else a.astype(np_dtype(dtype)) for a in s.inputs], attrs)[0][0]
    return sum(int(k) == engine.FULL for k in plan["operands"]["kind"])


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize(("op_name", "dtype"), [(op, DTYPES[k % len(DTYPES)]) for k, op in enumerate(PREFETCHING)])
def test_prefetched_steps_match_pytorch_and_the_tile_at_once(op_name, dtype, reduction):
    """A call whose FULL operands reach PREFETCH_BYTES runs in prefetching steps (in the kernels that ask for
    it): just below the threshold the plan says no, just above it yes. There, with a last tile and step that are
    partial, the kernels inside onnxruntime follow PyTorch float64 within the conformance tolerance and the
    serial front end to the bit; with reduction `none` the result also equals, bit for bit, slices of it computed
    under the threshold (the tile at once). The dtypes take turns over the operators."""
    attrs = attribute_sets(op_name)[0] | ({"reduction": reduction} if "reduction" in attribute_sets(op_name)[0] else {})
    per_element = _full_operands(op_name, attrs, dtype) * np_dtype(dtype).itemsize
    at = -(-engine.PREFETCH_BYTES // per_element)
    for n, expected in ((at - 1, 0), (at + engine.TILE // 2 + 7, 1)):
        s = spec(op_name, Point("prefetch", 1, n), "full", attrs, seed=n)
        inputs = [None if a is None else a.astype(np_dtype(dtype)) for a in s.inputs]
        assert int(_planned(op_name, inputs, attrs)[0][0]["prefetch"]) == expected, n
    case = spec_case(s, dtype)
    in_ort = BACKENDS["kernels"](case.model, case.inputs)
    assert in_ort.tobytes() == run(op_name, inputs, **attrs).tobytes()
    ok, _, message = case.check(in_ort)
    assert ok, message
    if attrs.get("reduction") == "none":  # elementwise and unscaled: each element depends on its own inputs only
        half = n // 2
        parts = [run(op_name, [a if a is None or a.ndim == 0 else a[..., part] for a in inputs], **attrs)
                 for part in (slice(0, half), slice(half, n))]
        assert np.concatenate(parts, axis=-1).tobytes() == in_ort.tobytes()


@pytest.mark.parametrize("op_name", ["KlDiv", "KlDiv-mean", "KlDivBackward"])
def test_more_than_2_to_31_elements(op_name, request):
    """A computed shape of 2**31 + 2**16 elements through broadcasting (an element count past int32), on the
    kernels inside onnxruntime: KlDiv's float16 output has that many elements (4 GiB); its mean sums them
    (over 2**20 tiles: partial sums of several tiles each); KlDivBackward sums them back to a (2**16, 1)
    input. Held to the formula in float64, a block of rows at a time (PyTorch would need 16 GiB for the
    float64 copy). In the full setting only: it takes minutes and about 10 GiB."""
    if request.config.getoption("plans") != "full":
        pytest.skip("a nightly case: run with --plans=full")
    rows, columns = 1 << 16, (1 << 15) + 1
    r = np.random.default_rng(31)
    x = np.log(r.uniform(0.01, 1, size=(rows, 1))).astype(np.float16)
    t = r.uniform(0.01, 1, size=(1, columns)).astype(np.float16)
    x64, t64 = x.astype(np.float64), t.astype(np.float64)
    if op_name == "KlDiv-mean":
        spec_ = Spec("huge", "KlDiv", [x64, t64], {"reduction": "mean", "log_target": 0})
        got = BACKENDS["kernels"](spec_case(spec_, "float16").model, [x, t])
        # sum over i, j of t_j (log t_j - x_i), divided by the count
        total = rows * float((t64 * np.log(t64)).sum()) - float(t64.sum()) * float(x64.sum())
        ok, _, message = compare(got, np.array(total / (rows * columns)), "float16", rows * columns)
        assert ok, message
    elif op_name == "KlDiv":
        spec_ = Spec("huge", op_name, [x64, t64], {"reduction": "none", "log_target": 0})
        got = BACKENDS["kernels"](spec_case(spec_, "float16").model, [x, t])
        assert got.shape == (rows, columns)
        block = 256
        for lo in range(0, rows, block):
            expected = t64 * (np.log(t64) - x64[lo:lo + block])
            ok, _, message = compare(got[lo:lo + block], expected, "float16")
            assert ok, f"rows {lo}+: {message}"
    else:
        g = np.array(1.5, np.float16)
        spec_ = Spec("huge", op_name, [np.float64(1.5), x64, t64], {"reduction": "sum", "log_target": 0}, columns)
        got = BACKENDS["kernels"](spec_case(spec_, "float16").model, [g, x, t])
        expected = np.broadcast_to(-1.5 * t64.sum(), (rows, 1))  # -t * g summed over the columns
        ok, _, message = compare(got, expected, "float16", columns)
        assert ok, message
