"""The per-call reads of ONNX Runtime's C API, compiled with numba: one Python-to-native step per Compute
instead of ~6 ctypes calls per input (each ~0.6 us; they were half of the host's fixed cost at 1e3 elements).

The ORT functions are called through their addresses in the `OrtApi` table with every argument passed as a
64-bit integer: they all take pointers and size_t and return an `OrtStatus*` (or nothing), which is the same
machine signature on x86-64 and aarch64.
"""

from __future__ import annotations

import ctypes as C
from functools import cache

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .ort_api import slot

MAX_RANK = 64  # numpy's own limit (NPY_MAXDIMS); a higher rank returns TOO_MANY_DIMS
TOO_MANY_DIMS = -1
_NAMES = ("KernelContext_GetInputCount", "KernelContext_GetInput", "GetTensorTypeAndShape", "GetDimensionsCount",
          "GetDimensions", "ReleaseTensorTypeAndShapeInfo", "GetTensorMutableData", "KernelContext_GetOutput")
(_INPUT_COUNT, _INPUT, _TYPE_AND_SHAPE, _DIMS_COUNT, _DIMS, _RELEASE_INFO, _DATA, _OUTPUT) = range(len(_NAMES))


@cache
def table(api_address: int) -> np.ndarray:
    """The addresses of the functions above in the OrtApi at `api_address`."""
    entries = C.cast(api_address, C.POINTER(C.c_void_p))
    return np.array([entries[slot(name)] for name in _NAMES], np.int64)


@intrinsic
def _ccall(typingctx, fn, args):
    """Call the C function at address `fn` with 64-bit integer arguments; its result as int64."""
    if not (isinstance(fn, types.Integer) and isinstance(args, types.BaseTuple)
            and all(isinstance(t, types.Integer) and t.bitwidth == 64 for t in args)):
        return None

    def codegen(context, builder, sig, llargs):
        i64 = ir.IntType(64)
        values = [builder.extract_value(llargs[1], k) for k in range(len(args))]
        target = builder.inttoptr(llargs[0], ir.FunctionType(i64, [i64] * len(values)).as_pointer())
        return builder.call(target, values)

    return types.int64(fn, args), codegen


@numba.njit(cache=True)
def read_inputs(fns, context, meta):
    """Row i of `meta` gets [present, data address, rank, dims...] of input i. Returns an OrtStatus* (0: ok)."""
    scratch = np.zeros(1, np.int64)
    out = scratch.ctypes.data
    status = _ccall(fns[_INPUT_COUNT], (context, out))
    count = scratch[0]
    for i in range(meta.shape[0]):
        meta[i, 0] = 0
        if status or i >= count:
            continue
        status = _ccall(fns[_INPUT], (context, np.int64(i), out))
        value = scratch[0]
        if status or value == 0:
            continue
        status = _ccall(fns[_TYPE_AND_SHAPE], (value, out))
        if status:
            continue
        info = scratch[0]
        status = _ccall(fns[_DIMS_COUNT], (info, out))
        rank = scratch[0]
        if status == 0 and rank > MAX_RANK:
            _ccall(fns[_RELEASE_INFO], (info,))
            return TOO_MANY_DIMS
        if status == 0:
            status = _ccall(fns[_DIMS], (info, meta[i, 3:].ctypes.data, rank))
        _ccall(fns[_RELEASE_INFO], (info,))
        if status == 0:
            status = _ccall(fns[_DATA], (value, out))
            meta[i, 0], meta[i, 1], meta[i, 2] = 1, scratch[0], rank
    return status


@numba.njit(cache=True)
def allocate_output(fns, context, dims, result):
    """Output 0 with shape `dims`; result[0] = its data address. Returns an OrtStatus* (0: ok)."""
    out = result.ctypes.data
    status = _ccall(fns[_OUTPUT], (context, np.int64(0), dims.ctypes.data, np.int64(dims.size), out))
    if status == 0:
        status = _ccall(fns[_DATA], (result[0], out))
    return status
