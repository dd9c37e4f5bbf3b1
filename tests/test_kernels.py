"""Kernel internals that the operator tests do not isolate: float16/bfloat16 conversions, the block tiling,
the fused loops' operand forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lossops.ort_ext.kernels import fused, parallel


def _bit_versions():
    """The loops' float16 conversions written on the bits, used where the CPU has no F16C instructions."""
    import numba

    @numba.njit
    def narrow_bits(src, dst):
        for i in range(src.size):
            dst[i] = fused.float_to_half(src[i])

    @numba.njit
    def widen_bits(src, dst):
        for i in range(src.size):
            dst[i] = fused.half_to_float(src[i])

    return (lambda s, d: narrow_bits(s, d.view(np.uint16))), (lambda s, d: widen_bits(s.view(np.uint16), d))


@pytest.mark.parametrize("path", ["loops", "bits"])
def test_float16_rounding_matches_numpy_bit_for_bit(path):
    to_half = fused.narrow if path == "loops" else _bit_versions()[0]
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2**32, size=2 * 10**6, dtype=np.uint64).astype(np.uint32).view(np.float32)
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16).astype(np.float32)
    with np.errstate(invalid="ignore"):  # NaN halves
        midpoints = ((halves[:-1].astype(np.float64) + halves[1:]) / 2).astype(np.float32)
    x = np.concatenate([random_bits, halves, midpoints, np.nextafter(midpoints, 0), np.nextafter(midpoints, 1),
                        np.float32([65519.99, 65520, 65504, 2.98e-8, 5.96e-8, -0.0, np.inf, -np.inf])])
    got = np.empty(x.shape, np.float16)
    with np.errstate(all="ignore"):
        to_half(x, got)
        expected = x.astype(np.float16)
    same = (got.view(np.uint16) == expected.view(np.uint16)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), x[~same][:5]


@pytest.mark.parametrize("path", ["loops", "bits"])
def test_float16_widening_is_exact(path):
    to_float = fused.widen if path == "loops" else _bit_versions()[1]
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16)
    got = np.empty(halves.shape, np.float32)
    to_float(halves, got)
    expected = halves.astype(np.float32)
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), halves[~same][:5]


@pytest.mark.parametrize("shape", [(), (0, 3), (5,), (3, 70001), (300, 1000), (2, 3, 50000), (1, 1, 200000)])
def test_blocks_tile_the_array_exactly_once(shape):
    covered = np.zeros(shape, np.int32)
    for ix in parallel.blocks(shape):
        covered[ix] += 1
        assert covered[ix].size <= max(parallel.BLOCK, 1)
    assert (covered == 1).all()
    assert len(parallel.blocks(shape)) >= (math.prod(shape) // parallel.BLOCK)


def test_blocks_run_on_several_threads():
    seen = set()
    import threading

    def record(ix):
        seen.add(threading.get_ident())
        return ix

    if parallel.num_threads() < 2:
        pytest.skip("this machine gives the process one CPU")
    results = parallel.for_each_block((64, parallel.BLOCK), record)
    assert results == parallel.blocks((64, parallel.BLOCK))  # in block order
    assert len(seen) >= 2


def test_bfloat16_conversions_match_ml_dtypes_bit_for_bit():
    import ml_dtypes

    bf16 = np.arange(2**16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    wide = np.empty(bf16.shape, np.float32)
    fused.widen(bf16, wide)
    assert np.array_equal(wide.view(np.uint32), bf16.astype(np.float32).view(np.uint32))
    x = np.random.default_rng(1).integers(0, 2**32, size=10**6, dtype=np.uint64).astype(np.uint32).view(np.float32)
    got = np.empty(x.shape, ml_dtypes.bfloat16)
    fused.narrow(x, got)
    with np.errstate(all="ignore"):
        expected = x.astype(ml_dtypes.bfloat16)
    same = (got.view(np.uint16) == expected.view(np.uint16)) | (np.isnan(x) & np.isnan(got.astype(np.float32)))
    assert same.all(), x[~same][:5]


# Operand forms of the fused loops: full, trailing-axes (per class), materialised (N, 1), scalar, absent.
SHAPE = (3, 70001)  # 210003 elements: two threads, thread split and scalar runs not aligned to the rows
FORMS = {"full": SHAPE, "per-class": (SHAPE[1],), "per-row": (SHAPE[0], 1), "scalar": (1, 1), "absent": None}


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("form", list(FORMS))
def test_fused_loops_equal_numpy_in_the_compute_type(form, dtype):
    """The compiled loops do the same IEEE operations in the same order as this numpy formula, so the
    results must be identical, bit for bit, whatever the operand layout, dtype and thread split."""
    import ml_dtypes

    from lossops.ort_ext.kernels import binary_cross_entropy_backward, kl_div_backward

    t = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    ct = np.float64 if t == np.float64 else np.float32
    r = np.random.default_rng(2)
    x, y = r.uniform(0.001, 0.999, SHAPE).astype(t), r.uniform(size=SHAPE).astype(t)
    other = None if FORMS[form] is None else r.normal(size=FORMS[form]).astype(t)
    g = r.normal(size=SHAPE).astype(t)
    one = np.ones((), t)
    c = lambda a: (one if a is None else a).astype(ct)  # noqa: E731
    with np.errstate(all="ignore"):
        for weight, grad in ((other, g), (None, other if other is not None else g)):
            got = binary_cross_entropy_backward(grad, x, y, weight, reduction="mean")
            d = np.maximum((ct(1) - c(x)) * c(x), ct(np.float32(1e-12)))
            expected = ((c(x) - c(y)) * c(grad) / d * c(weight) * ct(1 / x.size)).astype(t)
            assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), (weight is None, "bce")
        for log_target in (0, 1):
            grad = g if other is None else other
            got = kl_div_backward(grad, x, y, reduction="none", log_target=log_target)
            expected = (-((np.exp(c(y)) if log_target else c(y)) * c(grad))).astype(t)
            assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), "kl"


def test_block_scratch_is_disjoint_within_a_block_and_reused_across_blocks():
    starts = []
    f64 = np.dtype(np.float64)

    def block(ix):
        a, b = parallel.scratch((parallel.BLOCK,), f64), parallel.scratch((7, 3), f64)
        assert not np.shares_memory(a, b) and a.base is not None  # both carved from the thread's arena
        assert parallel.scratch((9 * parallel.BLOCK,), f64).base is None  # beyond the arena: a fresh array
        starts.append(a.__array_interface__["data"][0])

    parallel.for_each_block((8 * parallel.BLOCK,), block)
    assert len(starts) == 8 and len(set(starts)) <= parallel.num_threads()  # each thread reuses its memory
    assert parallel.scratch((4,), f64).base is None  # outside a block: a fresh array, never handed out again
