"""The few pieces of ONNX Runtime's C API that the kernel host calls, through ctypes.

No package on the registries ships onnxruntime_c_api.h, so the layouts are written here from the public
header. `OrtApi` is a table of function pointers that only ever grows at the end, so the slot numbers below
hold for every release the host supports (read from the 1.x headers; checked at run time by the tests).
"""

from __future__ import annotations

import ctypes as C
from functools import cache

VP = C.c_void_p
SIZE = C.c_size_t
I64P = C.POINTER(C.c_int64)

ORT_INVALID_ARGUMENT = 2
ORT_FAIL = 1

# slot: (name, restype, argtypes)
_SLOTS = {
    0: ("CreateStatus", VP, (C.c_int, C.c_char_p)),
    51: ("GetTensorMutableData", VP, (VP, C.POINTER(VP))),
    61: ("GetDimensionsCount", VP, (VP, C.POINTER(SIZE))),
    62: ("GetDimensions", VP, (VP, I64P, SIZE)),
    65: ("GetTensorTypeAndShape", VP, (VP, C.POINTER(VP))),
    86: ("KernelInfoGetAttribute_int64", VP, (VP, C.c_char_p, I64P)),
    87: ("KernelInfoGetAttribute_string", VP, (VP, C.c_char_p, C.c_char_p, C.POINTER(SIZE))),
    88: ("KernelContext_GetInputCount", VP, (VP, C.POINTER(SIZE))),
    90: ("KernelContext_GetInput", VP, (VP, SIZE, C.POINTER(VP))),
    91: ("KernelContext_GetOutput", VP, (VP, SIZE, I64P, SIZE, C.POINTER(VP))),
    93: ("ReleaseStatus", None, (VP,)),
    99: ("ReleaseTensorTypeAndShapeInfo", None, (VP,)),
}


def slot(name: str) -> int:
    return next(k for k, (n, _, _) in _SLOTS.items() if n == name)


class OrtApi:
    """Callable slots of one `const OrtApi*`."""

    def __init__(self, address: int):
        table = C.cast(address, C.POINTER(VP))
        for slot, (name, restype, argtypes) in _SLOTS.items():
            setattr(self, name, C.CFUNCTYPE(restype, *argtypes)(table[slot]))

    def status(self, message: str, code: int = ORT_INVALID_ARGUMENT) -> int:
        return self.CreateStatus(code, message.encode("utf-8", "replace"))


@cache
def api(address: int) -> OrtApi:
    return OrtApi(address)


class OrtCustomOp(C.Structure):
    """struct OrtCustomOp (onnxruntime_c_api.h), version 16: CreateKernelV2/KernelComputeV2 return status."""


_OP = C.POINTER(OrtCustomOp)
CreateKernelV2 = C.CFUNCTYPE(VP, _OP, VP, VP, C.POINTER(VP))
KernelComputeV2 = C.CFUNCTYPE(VP, VP, VP)
GetString = C.CFUNCTYPE(VP, _OP)
GetIndexed = C.CFUNCTYPE(C.c_int, _OP, SIZE)
GetCount = C.CFUNCTYPE(SIZE, _OP)

OrtCustomOp._fields_ = [
    ("version", C.c_uint32),
    ("CreateKernel", VP),
    ("GetName", GetString),
    ("GetExecutionProviderType", GetString),
    ("GetInputType", GetIndexed),
    ("GetInputTypeCount", GetCount),
    ("GetOutputType", GetIndexed),
    ("GetOutputTypeCount", GetCount),
    ("KernelCompute", VP),
    ("KernelDestroy", VP),
    ("GetInputCharacteristic", GetIndexed),
    ("GetOutputCharacteristic", GetIndexed),
    ("GetInputMemoryType", GetIndexed),
    ("GetVariadicInputMinArity", VP),
    ("GetVariadicInputHomogeneity", VP),
    ("GetVariadicOutputMinArity", VP),
    ("GetVariadicOutputHomogeneity", VP),
    ("CreateKernelV2", CreateKernelV2),
    ("KernelComputeV2", KernelComputeV2),
    ("InferOutputShapeFn", VP),
    ("GetStartVersion", VP),
    ("GetEndVersion", VP),
    ("GetMayInplace", VP),
    ("ReleaseMayInplace", VP),
    ("GetAliasMap", VP),
    ("ReleaseAliasMap", VP),
]
OP_VERSION = 16
INPUT_REQUIRED, INPUT_OPTIONAL = 0, 1
