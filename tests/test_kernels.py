"""Kernel internals that the operator tests do not isolate: float16 rounding and the block tiling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lossops.ort_ext.kernels import parallel
from lossops.ort_ext.kernels.half import to_float16


def test_float16_rounding_matches_numpy_bit_for_bit():
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2**32, size=2 * 10**6, dtype=np.uint64).astype(np.uint32).view(np.float32)
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16).astype(np.float32)
    with np.errstate(invalid="ignore"):  # NaN halves
        midpoints = ((halves[:-1].astype(np.float64) + halves[1:]) / 2).astype(np.float32)
    x = np.concatenate([random_bits, halves, midpoints, np.nextafter(midpoints, 0), np.nextafter(midpoints, 1),
                        np.float32([65519.99, 65520, 65504, 2.98e-8, 5.96e-8, -0.0, np.inf, -np.inf])])
    got = np.empty(x.shape, np.float16)
    with np.errstate(all="ignore"):
        to_float16(x, got)
        expected = x.astype(np.float16)
    same = (got.view(np.uint16) == expected.view(np.uint16)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), x[~same][:5]


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
