"""What the three kernels share: input checks, compute precision and block helpers."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from . import fused
from .parallel import scratch

Alloc = Callable[[tuple[int, ...]], np.ndarray]


class InvalidInput(ValueError):
    """An input that the operator's contract rejects; the message names the input and the expectation."""


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16 and bfloat16 compute in float32; float and double in themselves (OPS.md)."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def same_dtype(**arrays: np.ndarray | None) -> np.dtype:
    present = {k: a for k, a in arrays.items() if a is not None}
    first, *rest = present.items()
    for name, a in rest:
        if a.dtype != first[1].dtype:
            raise InvalidInput(f"input '{name}' has element type {a.dtype}; expected {first[1].dtype} "
                               f"like input '{first[0]}' (all inputs share one type T)")
    return first[1].dtype


def check_fits(name: str, a: np.ndarray | None, shape: tuple[int, ...]) -> None:
    """`a` must broadcast to exactly `shape`."""
    if a is None or a.shape == shape:
        return
    ok = a.ndim <= len(shape) and all(d in (1, s) for d, s in zip(a.shape[::-1], shape[::-1], strict=False))
    if not ok:
        raise InvalidInput(f"input '{name}' has shape {a.shape}; expected a shape broadcastable to {shape}")


def operand(a: np.ndarray | None, shape: tuple[int, ...], ct: np.dtype) -> np.ndarray | None:
    """An input as a view of `shape`. Inputs smaller than `shape` (weights, scalars) are converted to the
    compute type once, here; full-size ones stay in T and are converted block by block (`load`)."""
    if a is None or a.shape == shape:
        return a
    return np.broadcast_to(a.astype(ct, copy=False), shape)


def load(view: np.ndarray | None, ct: np.dtype) -> np.ndarray | None:
    """A block of an operand in the compute type (a copy only when T is float16/bfloat16)."""
    if view is None or view.dtype == ct:
        return view
    out = scratch(view.shape, ct)
    if view.dtype in fused.STORAGE and view.flags.c_contiguous and ct == np.float32:
        fused.widen(view, out)  # numpy's half casts are scalar code (~1.2 ns per element)
    else:
        np.copyto(out, view, casting="unsafe")
    return out


def result_buffer(out: np.ndarray | None, ct: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Where a block computes: the output itself when it has the compute type, else a scratch buffer."""
    return out if out is not None and out.dtype == ct else scratch(shape, ct)


def finish(result: np.ndarray, out: np.ndarray | None) -> None:
    """Round a block's result into the output (once), unless it was computed there."""
    if out is None or result is out:
        return
    if out.dtype in fused.STORAGE and result.dtype == np.float32 and out.flags.c_contiguous:
        fused.narrow(result, out)
    else:
        np.copyto(out, result, casting="unsafe")


def emit(loss: np.ndarray, out: np.ndarray | None, ix) -> float | None:
    """End of a loss block: round into the output (reduction none), or return the block's sum."""
    if out is None:
        # float64 losses keep numpy's pairwise sum: a float64 accumulator in any order is not more accurate
        return fused.total(loss) if loss.dtype == np.float32 else float(np.add.reduce(loss, axis=None))
    finish(loss, out[ix])
    return None


def reduced(partial_sums: list[float], reduction: str, shape: tuple[int, ...], alloc: Alloc) -> np.ndarray:
    """The scalar output of a `mean`/`sum` loss from its blocks' sums (added exactly across blocks); `mean`
    of an empty input is NaN, as in PyTorch."""
    total = math.fsum(partial_sums)
    count = math.prod(shape)
    result = alloc(())
    result[...] = total if reduction == "sum" else (total / count if count else math.nan)
    return result
