"""The lossops kernels: one compiled tile loop per operator (`<operator>.py`), attached to the operator's
record with `@kernel`, and the compiled core that checks, lays out and runs a call (`engine.py`).

Nothing here imports ONNX Runtime: the host (ort_ext/host.py) runs these kernels inside a session, on its
threads; `run` runs them on numpy arrays, serially, for tests and for use without a session.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from onnx import TensorProto

from . import cache  # first: every compiled function of lossops must be cached under its locators

cache.install()

from ... import opset  # noqa: E402
from ...opset.spec import OpDef  # noqa: E402
from . import engine  # noqa: E402


class InvalidInput(ValueError):
    """An input that the operator's contract rejects; the message names the operator, the input and the rule."""


@dataclass(frozen=True)
class Kernel:
    """What the engine needs of an operator, all of it fixed when numba compiles the operator's entry points.

    `tile(v0, v1, v2, v3, v4, out, m, scale, flag, tmp)` computes `out[:m]` from the operand views (in schema
    order; inputs the loop does not read get a placeholder), `scale` (mean/batchmean factor of a gradient),
    `flag` (log_target) and `tmp`, a compute-type scratch tile.
    """

    op: OpDef
    tile: Callable
    reads: tuple[bool, ...]  # per input slot (padded to engine.MAX_INPUTS): does the loop read its data
    task_tiles: int  # tiles per task: a task is the unit of work handed to a thread

    @property
    def roles(self) -> tuple[int, ...]:
        return tuple(engine.RULE_CODES[i.shape] for i in self.op.inputs)

    @property
    def optional(self) -> tuple[bool, ...]:
        return tuple(i.optional for i in self.op.inputs)

    @property
    def principal(self) -> int:
        return self.op.principal

    @property
    def reduces(self) -> bool:
        return self.op.reduces

    @property
    def output_input(self) -> bool:
        return self.op.output_shape == "input"

    @property
    def names(self) -> np.ndarray:
        """The operator's name and its inputs' names, NUL-separated, for the engine's error messages."""
        text = "\0".join([self.op.name, *(i.name for i in self.op.inputs)]) + "\0"
        return np.frombuffer(text.encode(), np.uint8).copy()


KERNELS: dict[str, Kernel] = {}


def kernel(op_name: str, *, reads: tuple[str, ...], task_elements: int):
    """Register a tile loop as the kernel of `op_name`; it reads the data of the inputs named in `reads`.
    `task_elements` is how much work a thread takes at a time: enough that handing it over costs little
    (measured in `lossops bench`: 64K elements for the memory-bound loops, 16K for those with exp/log)."""
    op = opset.get(op_name)

    def register(tile):
        names = [i.name for i in op.inputs]
        unknown = set(reads) - set(names)
        if unknown:
            raise ValueError(f"{op_name}: reads unknown inputs {sorted(unknown)}")
        slots = tuple(n in reads for n in names) + (False,) * (engine.MAX_INPUTS - len(names))
        KERNELS[op_name] = Kernel(op, tile, slots, max(1, task_elements // engine.TILE))
        return tile

    return register


# the loops register themselves on import
from . import (  # noqa: E402, F401
    binary_cross_entropy,
    binary_cross_entropy_backward,
    binary_cross_entropy_with_logits,
    binary_cross_entropy_with_logits_backward,
    kl_div,
    kl_div_backward,
)

ELEMENT_TYPES: dict[np.dtype, int] = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
                                      np.dtype(np.float16): TensorProto.FLOAT16}
try:  # onnx depends on ml_dtypes for bfloat16 arrays
    import ml_dtypes

    ELEMENT_TYPES[np.dtype(ml_dtypes.bfloat16)] = TensorProto.BFLOAT16
except ImportError:  # pragma: no cover
    pass


@functools.cache
def entry_points(op_name: str):
    """The engine's compiled entry points for one operator, callable from Python with a PLAN's address."""
    if op_name not in KERNELS:
        raise ValueError(f"'{op_name}' has no lossops kernel; the kernels are {sorted(KERNELS)}")

    @numba.njit(cache=True)
    def plan(address):
        return engine.plan(op_name, address)

    @numba.njit(cache=True)
    def start(address):
        engine.start(op_name, address)

    @numba.njit(cache=True)
    def task(address, i):
        engine.task(op_name, address, i)

    @numba.njit(cache=True)
    def finish(address):
        engine.finish(op_name, address)

    return plan, start, task, finish


def message(plan: np.ndarray) -> str:
    """The error message a failed plan holds."""
    raw = plan["message"][0].tobytes()
    return raw[:raw.index(b"\0")].decode("utf-8", "replace")


def _planned(op_name: str, inputs: list[np.ndarray | None], attributes: dict):
    """(plan, arrays, dtype) of a call on numpy arrays, checked; InvalidInput when the inputs break the
    operator's contract."""
    if op_name not in KERNELS:
        raise ValueError(f"'{op_name}' has no lossops kernel; the kernels are {sorted(KERNELS)}")
    kernel_ = KERNELS[op_name]
    attrs = kernel_.op.resolve(attributes)
    formal = kernel_.op.inputs
    if len(inputs) > len(formal):
        raise InvalidInput(f"{op_name}: takes at most {len(formal)} inputs, got {len(inputs)}")
    arrays = [None if a is None else np.require(a, requirements="C") for a in inputs]  # keeps rank 0
    first = next((k for k, a in enumerate(arrays) if a is not None), None)
    if first is None or arrays[first].dtype not in ELEMENT_TYPES:
        got = "no inputs" if first is None else f"input '{formal[first].name}' of element type {arrays[first].dtype}"
        raise InvalidInput(f"{op_name}: got {got}; expected float16, bfloat16, float or double tensors")
    dtype = arrays[first].dtype
    plan = np.zeros(1, engine.PLAN)
    p = plan[0]
    p["elem_type"], p["itemsize"] = ELEMENT_TYPES[dtype], dtype.itemsize
    p["reduction"] = engine.REDUCTION_CODES[attrs["reduction"]]
    p["log_target"] = attrs.get("log_target", 0)
    for j, a in enumerate(arrays):
        if a is None:
            continue
        if a.ndim > engine.MAX_RANK:  # numpy stops at 64 dims; the engine reports more for ORT's inputs
            raise InvalidInput(f"{op_name}: input '{formal[j].name}' has rank {a.ndim}")
        o = plan["operands"][0, j]
        o["present"], o["address"], o["rank"] = 1, a.ctypes.data, a.ndim
        o["elem_type"] = ELEMENT_TYPES.get(a.dtype, 0)
        o["dims"][:a.ndim] = a.shape
    if entry_points(op_name)[0](plan.ctypes.data):
        raise InvalidInput(message(plan))
    return plan, arrays, dtype


def workspace_bytes(op_name: str, inputs: list[np.ndarray | None], **attributes) -> int:
    """The heap memory a call of `op_name` on these inputs takes besides its output."""
    return int(_planned(op_name, inputs, attributes)[0]["workspace_bytes"][0])


def _empty_aligned(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """np.empty at a 64-byte boundary, as ONNX Runtime allocates outputs and ort_ext/host.py the workspace, so
    that this path runs the kernels on the same alignment (large outputs stream here too)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def run(op_name: str, inputs: list[np.ndarray | None], **attributes) -> np.ndarray:
    """Run an operator's kernel on numpy arrays (inputs in schema order, None for an absent optional input),
    serially; the result is a new array. Raises InvalidInput when the inputs break the operator's contract."""
    plan, _pointed_at, dtype = _planned(op_name, inputs, attributes)  # the plan points into these: keep them alive
    storage = engine.ELEMENT_TYPES[ELEMENT_TYPES[dtype]]
    out = _empty_aligned(tuple(plan["out_dims"][0, :plan["out_rank"][0]]), dtype)
    workspace = _empty_aligned((int(plan["workspace_bytes"][0]),), np.dtype(np.uint8))
    plan["out_address"] = out.view(storage).ctypes.data if out.size else 0
    plan["workspace"] = workspace.ctypes.data
    _, start, task, finish = entry_points(op_name)
    address = plan.ctypes.data
    start(address)
    for i in range(int(plan["ntasks"][0])):
        task(address, i)
    finish(address)
    return out


__all__ = ["KERNELS", "InvalidInput", "Kernel", "entry_points", "kernel", "run", "workspace_bytes"]
