"""The lossops kernels: one tile loop per operator (`<operator>.py`, attached to its record with `@kernel` and
found by registry.py), and the core that checks, lays out and runs a call (`engine.py`, on the record of
`layout.py`), both compiled: ahead of time into a wheel's libraries, or by numba in this process
(ort_ext/machine_code/loader.py decides which).

This module is the numpy front end, `run`: the kernels on numpy arrays, serially, for tests and for use without a
session. It imports neither numba nor ONNX Runtime; the host (ort_ext/host.py) runs the same code inside a
session, on the session's threads.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np
from onnx import TensorProto

from .. import opset
from .kernels import layout
from .machine_code import loader


class InvalidInput(ValueError):
    """An input that the operator's contract rejects; the message names the operator, the input and the rule."""


ELEMENT_TYPES: dict[np.dtype, int] = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
                                      np.dtype(np.float16): TensorProto.FLOAT16}
try:  # onnx depends on ml_dtypes for bfloat16 arrays
    import ml_dtypes

    ELEMENT_TYPES[np.dtype(ml_dtypes.bfloat16)] = TensorProto.BFLOAT16
except ImportError:  # pragma: no cover
    pass


_STEP = {"plan": ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64),
         "start": ctypes.CFUNCTYPE(None, ctypes.c_int64),
         "task": ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_uint64),
         "finish": ctypes.CFUNCTYPE(None, ctypes.c_int64)}


def entry_points(op_name: str, code: loader.Code | None = None, elem_type: int | None = None):
    """The compiled steps of one operator's call (plan, start, task, finish), callable with a PLAN's address:
    of `code`, or of the process's machine code (loader.code()); for `elem_type` (where compiled on
    demand) or any. Without `elem_type`, only checks that the operator has a kernel here."""
    code = code or loader.code()
    if code is None:
        raise RuntimeError("lossops: the kernels are not available here (see the note above); "
                           "pip install 'lossops[jit]' for them")
    if op_name not in code.ops:
        raise ValueError(f"'{op_name}' has no lossops kernel; the kernels are {sorted(code.ops)}")
    return None if elem_type is None else _steps(op_name, code, elem_type)


@functools.cache
def _steps(op_name: str, code: loader.Code, elem_type: int):
    kinds = ("plan", "start", "task", "finish")
    return tuple(_STEP[kind](address) for kind, address in zip(kinds, code.addresses(op_name, kinds, elem_type),
                                                                    strict=True))


def message(plan: np.ndarray) -> str:
    """The error message a failed plan holds."""
    raw = plan["message"][0].tobytes()
    return raw[:raw.index(b"\0")].decode("utf-8", "replace")


def _planned(op_name: str, inputs: list[np.ndarray | None], attributes: dict,
             code: loader.Code | None = None):
    """(plan, arrays, dtype) of a call on numpy arrays, checked; InvalidInput when the inputs break the
    operator's contract."""
    entry_points(op_name, code)  # RuntimeError without machine code, ValueError for an operator without a kernel
    op = opset.get(op_name)
    attrs = op.resolve(attributes)
    formal = op.inputs
    if len(inputs) > len(formal):
        raise InvalidInput(f"{op_name}: takes at most {len(formal)} inputs, got {len(inputs)}")
    arrays = [None if a is None else np.require(a, requirements="C") for a in inputs]  # keeps rank 0
    first = next((k for k, a in enumerate(arrays) if a is not None), None)
    if first is None or arrays[first].dtype not in ELEMENT_TYPES:
        got = "no inputs" if first is None else f"input '{formal[first].name}' of element type {arrays[first].dtype}"
        raise InvalidInput(f"{op_name}: got {got}; expected float16, bfloat16, float or double tensors")
    dtype = arrays[first].dtype
    steps = entry_points(op_name, code, ELEMENT_TYPES[dtype])
    plan = np.zeros(1, layout.PLAN)
    p = plan[0]
    p["elem_type"], p["itemsize"] = ELEMENT_TYPES[dtype], dtype.itemsize
    p["reduction"] = layout.REDUCTION_CODES[attrs["reduction"]]
    p["params"] = layout.param_values(op, attrs)
    for j, a in enumerate(arrays):
        if a is None:
            continue
        if a.ndim > layout.MAX_RANK:  # numpy stops at 64 dims; the engine reports more for ORT's inputs
            raise InvalidInput(f"{op_name}: input '{formal[j].name}' has rank {a.ndim}")
        o = plan["operands"][0, j]
        o["present"], o["address"], o["rank"] = 1, a.ctypes.data, a.ndim
        o["elem_type"] = ELEMENT_TYPES.get(a.dtype, TensorProto.INT64 if a.dtype == np.int64 else 0)
        o["dims"][:a.ndim] = a.shape
    if steps[0](plan.ctypes.data):
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
    return run_with(None, op_name, inputs, **attributes)


def run_with(code: loader.Code | None, op_name: str, inputs: list[np.ndarray | None],
             **attributes) -> np.ndarray:
    """`run` on the machine code `code` (None: the process's)."""
    plan, _pointed_at, dtype = _planned(op_name, inputs, attributes, code)  # the plan points into these
    storage = layout.ELEMENT_TYPES[ELEMENT_TYPES[dtype]]
    out = _empty_aligned(tuple(plan["out_dims"][0, :plan["out_rank"][0]]), dtype)
    workspace = _empty_aligned((int(plan["workspace_bytes"][0]),), np.dtype(np.uint8))
    plan["out_address"] = out.view(storage).ctypes.data if out.size else 0
    plan["workspace"] = workspace.ctypes.data
    _, start, task, finish = entry_points(op_name, code, ELEMENT_TYPES[dtype])
    address = plan.ctypes.data
    start(address)
    for i in range(int(plan["ntasks"][0])):
        task(address, i)
    finish(address)
    return out


__all__ = ["InvalidInput", "entry_points", "run", "run_with", "workspace_bytes"]
