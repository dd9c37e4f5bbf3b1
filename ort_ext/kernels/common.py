"""What the three kernels share: input checks, compute precision and writing the result."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

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
    if a is None:
        return
    ok = a.ndim <= len(shape) and all(d in (1, s) for d, s in zip(a.shape[::-1], shape[::-1], strict=False))
    if not ok:
        raise InvalidInput(f"input '{name}' has shape {a.shape}; expected a shape broadcastable to {shape}")


def as_compute(a: np.ndarray | None, dtype: np.dtype) -> np.ndarray | None:
    return None if a is None else a.astype(dtype, copy=False)


def store(value: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Write `value` (compute precision) into `out` (T), rounding once."""
    np.copyto(out, value, casting="unsafe")
    return out


def reduce(loss: np.ndarray, reduction: str) -> np.ndarray:
    """mean/sum of an elementwise loss; `mean` of an empty tensor is NaN, as in PyTorch."""
    total = np.add.reduce(loss, axis=None)
    if reduction == "sum":
        return total
    with np.errstate(invalid="ignore"):
        return total / loss.dtype.type(loss.size)
