"""Multi-threaded elementwise execution for the kernels.

`for_each_range` splits a flat range across threads for the compiled loops (`fused.py`; they release the
GIL). `for_each_block` serves the numpy kernels, those bound by exp/log1p, which numpy vectorises: each is a
pipeline of in-place numpy ufuncs over one block, whose buffers stay in the L2 cache between passes, so a
pipeline of N passes costs about one pass over memory. numpy releases the GIL inside ufunc loops, so blocks
run in parallel on threads.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Elements per block: 256 KB per float32 buffer, so a pipeline's 3-6 buffers stay in a 2 MB L2, and a block
# is long enough (~10-40 us of work) that the ~1 us of Python per ufunc call is small (measured: 16K-element
# blocks were 2-3x slower at 1e7 elements, 256K slightly slower than 64K).
BLOCK = 1 << 16
MIN_PARALLEL = 4 * BLOCK  # below this, one thread: waking a second one costs more than it saves
MIN_PARALLEL_RANGE = 1 << 17  # the same for a compiled loop (~0.2-1 ns per element)

Index = tuple  # of ints, slices or Ellipsis


def num_threads() -> int:
    """Threads the kernels use: LOSSOPS_NUM_THREADS, else the number of CPUs this process may use."""
    env = os.environ.get("LOSSOPS_NUM_THREADS")
    return max(1, int(env)) if env else _cpus()


@functools.cache
def _cpus() -> int:  # a system call: read once (kernel calls at 1e3 elements take ~10 us in all)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=num_threads(), thread_name_prefix="lossops")
        return _pool


def blocks(shape: tuple[int, ...]) -> list[Index]:
    """Indices that tile an array of `shape` into blocks of about BLOCK elements, in memory order."""
    size = math.prod(shape)
    if size == 0:
        return []
    if size <= BLOCK:
        return [(Ellipsis,)]  # the whole array; a[...] is a view even at rank 0, where a[()] is a scalar
    # split along the first axis whose trailing extent fits in a block
    axis = next(a for a in range(len(shape)) if math.prod(shape[a + 1:]) <= BLOCK)
    step = max(1, BLOCK // math.prod(shape[axis + 1:]))
    return [(*outer, slice(i, min(i + step, shape[axis])))
            for outer in np.ndindex(*shape[:axis]) for i in range(0, shape[axis], step)]


def _chunks(items: list, parts: int) -> Iterator[list]:
    size = -(-len(items) // parts)
    for k in range(0, len(items), size):
        yield items[k:k + size]


class _Arena(threading.local):
    """Each thread's memory for block temporaries, handed out by `scratch` and taken back after every block.
    numpy's own allocations of 256 KB went to mmap and back: 12,000 page faults in one 1e7-element call of
    BCE-with-logits with reduction mean (measured), a quarter of its time."""

    SIZE = 8 * BLOCK * 8  # eight float64 temporaries of a full block

    def __init__(self):
        self.memory = np.empty(0, np.uint8)
        self.used = 0
        self.in_block = False


_arena = _Arena()
SCRATCH_BYTES = _Arena.SIZE  # held by each thread that has run a numpy kernel block


def scratch(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised array that lives until the current block of `for_each_block` ends (elsewhere, or
    beyond the arena's size, a fresh array)."""
    nbytes = math.prod(shape) * dtype.itemsize
    if not _arena.in_block or _arena.used + nbytes > _Arena.SIZE:
        return np.empty(shape, dtype)
    if not _arena.memory.size:
        _arena.memory = np.empty(_Arena.SIZE, np.uint8)
    start = _arena.used
    _arena.used += -(-nbytes // 64) * 64  # keep each temporary on its own cache lines
    return _arena.memory[start:start + nbytes].view(dtype).reshape(shape)


def _run(fn: Callable[[Index], object], index: list[Index]) -> list:
    # IEEE results (inf from overflow, NaN from 0/0) are the operators' answers, not warnings; errstate is
    # per thread, so it is set here, where the work runs.
    results = []
    with np.errstate(all="ignore"):
        _arena.in_block = True
        try:
            for ix in index:
                _arena.used = 0  # the previous block's temporaries are dead: blocks return floats or None
                results.append(fn(ix))
        finally:
            _arena.in_block = False
    return results


def for_each_block(shape: tuple[int, ...], fn: Callable[[Index], object]) -> list:
    """fn(index) for every block of `shape`, on up to num_threads() threads; results in block order."""
    index = blocks(shape)
    threads = num_threads()
    if threads == 1 or math.prod(shape) < MIN_PARALLEL:
        return _run(fn, index)
    groups = list(_chunks(index, threads))
    futures = [_executor().submit(_run, fn, g) for g in groups[1:]]
    results = _run(fn, groups[0])  # the calling thread works too
    for f in futures:
        results.extend(f.result())
    return results


def for_each_range(n: int, fn: Callable[[int, int], object]) -> None:
    """fn(lo, hi) over [0, n) split into one contiguous range per thread (fn releases the GIL)."""
    threads = num_threads() if n >= MIN_PARALLEL_RANGE else 1
    if threads == 1:
        fn(0, n)
        return
    bounds = [n * k // threads for k in range(threads + 1)]
    futures = [_executor().submit(fn, lo, hi) for lo, hi in itertools.pairwise(bounds[1:])]
    fn(bounds[0], bounds[1])  # the calling thread works too
    for f in futures:
        f.result()
