"""Every fact about ONNX Runtime's C interface that lossops relies on, in one place: the OrtApi slots it
calls, the OrtCustomOp struct it fills, and C allocation (compiled code calls the slots through compiled.py).

No package on the registries ships onnxruntime_c_api.h (PyPI's onnxruntime and onnxruntime-extensions, npm's
onnxruntime-node and Debian bookworm have none), so the slots are numbers. `OrtApi` is a
table of function pointers that only grows at its end: a slot keeps its meaning in every later release.
Sources: onnxruntime_c_api.h of ORT 1.17 (slots 0-274; KernelContext_ParallelFor is 274, PR #18980),
cross-checked against an independent binding's byte offsets (slot * 8) and against Debian's header of ORT 1.21
(its OrtApi entries counted), and `self_check` runs a few of them on the live table at the first kernel a
process creates.
"""

from __future__ import annotations

import ctypes as C

# OrtApi slot (0-based index into the function-pointer table): the ones lossops calls, by name.
SLOTS = {
    "CreateStatus": 0,  # OrtStatus* (OrtErrorCode, const char*): copies the message
    "GetErrorMessage": 2,  # const char* (const OrtStatus*)
    "CreateCustomOpDomain": 26,  # (const char* domain, OrtCustomOpDomain** out)
    "CustomOpDomain_Add": 27,  # (OrtCustomOpDomain*, const OrtCustomOp*)
    "AddCustomOpDomain": 28,  # (OrtSessionOptions*, OrtCustomOpDomain*)
    "GetTensorMutableData": 51,  # (OrtValue*, void** out)
    "GetTensorElementType": 60,  # (const OrtTensorTypeAndShapeInfo*, ONNXTensorElementDataType* out)
    "GetDimensionsCount": 61,  # (const OrtTensorTypeAndShapeInfo*, size_t* out)
    "GetDimensions": 62,  # (const OrtTensorTypeAndShapeInfo*, int64_t* dims, size_t count)
    "GetTensorTypeAndShape": 65,  # (const OrtValue*, OrtTensorTypeAndShapeInfo** out)
    "KernelInfoGetAttribute_float": 85,  # (const OrtKernelInfo*, const char* name, float* out)
    "KernelInfoGetAttribute_int64": 86,  # (const OrtKernelInfo*, const char* name, int64_t* out)
    "KernelInfoGetAttribute_string": 87,  # (const OrtKernelInfo*, const char* name, char* out, size_t* size)
    # (const OrtKernelInfo*, const char* name, float*/int64_t* out, size_t* size): NULL out asks for the size
    "KernelInfoGetAttributeArray_float": 162,
    "KernelInfoGetAttributeArray_int64": 163,
    "GetAllocatorWithDefaultOptions": 78,  # (OrtAllocator** out)
    "KernelInfoGetAttribute_tensor": 236,  # (const OrtKernelInfo*, const char* name, OrtAllocator*, OrtValue** out)
    "ReleaseValue": 96,  # void (OrtValue*)
    "KernelContext_GetInputCount": 88,  # (const OrtKernelContext*, size_t* out)
    "KernelContext_GetInput": 90,  # (const OrtKernelContext*, size_t index, const OrtValue** out)
    "KernelContext_GetOutput": 91,  # (OrtKernelContext*, size_t index, const int64_t* dims, size_t n, OrtValue**)
    "ReleaseStatus": 93,  # void (OrtStatus*)
    "ReleaseTensorTypeAndShapeInfo": 99,  # void (OrtTensorTypeAndShapeInfo*)
    # (const OrtKernelContext*, void (*fn)(void* usr, size_t i), size_t total, size_t num_batch, void* usr):
    # fn(usr, i) for i in [0, total) on the session's intra-op threads (serially without a pool); since 1.17
    "KernelContext_ParallelFor": 274,
}
# The slots a C host calls to run a model (conformance/node_test_runner.c: lossops' library in a process without
# Python), from the same header, counted the same way.
HOST_SLOTS = {
    "CreateEnv": 3,  # (OrtLoggingLevel, const char* logid, OrtEnv** out)
    "CreateSession": 7,  # (const OrtEnv*, const char* model_path, const OrtSessionOptions*, OrtSession** out)
    "Run": 9,  # (OrtSession*, const OrtRunOptions*, names, const OrtValue* const*, size_t, names, size_t, OrtValue**)
    "CreateSessionOptions": 10,  # (OrtSessionOptions** out)
    "SetIntraOpNumThreads": 24,  # (OrtSessionOptions*, int)
    "CreateTensorWithDataAsOrtValue": 49,  # (const OrtMemoryInfo*, void*, size_t, const int64_t*, size_t, type, out)
    "GetTensorShapeElementCount": 64,  # (const OrtTensorTypeAndShapeInfo*, size_t* out)
    "CreateCpuMemoryInfo": 69,  # (OrtAllocatorType, OrtMemType, OrtMemoryInfo** out)
    "RegisterCustomOpsLibrary_V2": 228,  # (OrtSessionOptions*, const char* library_path); since 1.14
    # the release functions run from ReleaseEnv (92) to ReleaseCustomOpDomain (101), ReleaseStatus (93) and
    # ReleaseTensorTypeAndShapeInfo (99) among them
    "ReleaseSession": 95,  # void (OrtSession*)
}
ORT_FAIL, ORT_INVALID_ARGUMENT = 1, 2  # OrtErrorCode
API_VERSION = 17  # the OrtApi version asked for: the first with KernelContext_ParallelFor (ONNX Runtime 1.17)


def slot_address(api: int, name: str) -> int:
    """The address of OrtApi function `name` in the table at `api`."""
    return C.cast(api, C.POINTER(C.c_void_p))[SLOTS[name]]


# --- C memory from Python --------------------------------------------------------------------------------

_libc = C.CDLL(None)
_libc.malloc.restype, _libc.malloc.argtypes = C.c_void_p, [C.c_size_t]
FREE = C.cast(_libc.free, C.c_void_p).value  # ORT frees kernel state through this (KernelDestroy)


def c_alloc(nbytes: int) -> int:
    """Memory that ORT can release with C `free` (a kernel's state: nothing calls back into Python)."""
    address = _libc.malloc(nbytes)
    if not address:
        raise MemoryError(f"malloc({nbytes}) failed")
    return address


# --- OrtCustomOp (onnxruntime_c_api.h), version 16: CreateKernelV2/KernelComputeV2 return an OrtStatus* ---

class OrtCustomOp(C.Structure):
    pass


VP, SIZE = C.c_void_p, C.c_size_t
_OP = C.POINTER(OrtCustomOp)
CreateKernelV2 = C.CFUNCTYPE(VP, _OP, VP, VP, C.POINTER(VP))  # (op, const OrtApi*, const OrtKernelInfo*, void**)
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
    ("KernelComputeV2", VP),  # OrtStatus* (void* kernel, OrtKernelContext*): a compiled function
    ("InferOutputShapeFn", VP),
    ("GetStartVersion", VP),
    ("GetEndVersion", VP),
    ("GetMayInplace", VP),
    ("ReleaseMayInplace", VP),
    ("GetAliasMap", VP),
    ("ReleaseAliasMap", VP),
]
OP_VERSION = 16  # the struct version: ORT reads the fields up to KernelComputeV2 and passes OrtApi version 16
INPUT_REQUIRED, INPUT_OPTIONAL = 0, 1  # OrtCustomOpInputOutputCharacteristic


# --- ctypes views of the few slots Python calls at session creation ----------------------------------------

_PROTOTYPES = {
    "CreateStatus": (VP, C.c_int, C.c_char_p),
    "GetErrorMessage": (C.c_char_p, VP),
    "KernelInfoGetAttribute_float": (VP, VP, C.c_char_p, C.POINTER(C.c_float)),
    "KernelInfoGetAttribute_int64": (VP, VP, C.c_char_p, C.POINTER(C.c_int64)),
    "KernelInfoGetAttribute_string": (VP, VP, C.c_char_p, C.c_char_p, C.POINTER(SIZE)),
    "KernelInfoGetAttributeArray_float": (VP, VP, C.c_char_p, VP, C.POINTER(SIZE)),
    "KernelInfoGetAttributeArray_int64": (VP, VP, C.c_char_p, VP, C.POINTER(SIZE)),
    "GetAllocatorWithDefaultOptions": (VP, C.POINTER(VP)),
    "KernelInfoGetAttribute_tensor": (VP, VP, C.c_char_p, VP, C.POINTER(VP)),
    "ReleaseValue": (None, VP),
    "KernelContext_ParallelFor": (VP, VP, VP, SIZE, SIZE, VP),
    "ReleaseStatus": (None, VP),
}


class Api:
    """ctypes-callable slots of one `const OrtApi*` (for Python at session creation; compiled code uses
    `call` on `slot_address`)."""

    def __init__(self, address: int):
        self.address = address
        for name, (restype, *argtypes) in _PROTOTYPES.items():
            setattr(self, name, C.CFUNCTYPE(restype, *argtypes)(slot_address(address, name)))

    def status(self, message: str, code: int = ORT_INVALID_ARGUMENT) -> int:
        return self.CreateStatus(code, message.encode("utf-8", "replace"))

    def message(self, status: int) -> str:
        return (self.GetErrorMessage(status) or b"").decode("utf-8", "replace")

    def failed(self, status: int | None) -> str | None:
        """A call's failure as its message (the status released), or None where it succeeded."""
        if not status:
            return None
        try:
            return self.message(status)
        finally:
            self.ReleaseStatus(status)

    def self_check(self) -> None:
        """Run slots whose behaviour is known on the live table; ValueError if any is not what SLOTS says."""
        probe = self.status("lossops self-check", ORT_FAIL)
        try:
            if self.message(probe) != "lossops self-check":
                raise ValueError("CreateStatus/GetErrorMessage")
        finally:
            self.ReleaseStatus(probe)
        refused = self.KernelContext_ParallelFor(None, None, 1, 0, None)  # a NULL context must be refused
        if not refused:
            raise ValueError("KernelContext_ParallelFor accepted a NULL context")
        self.ReleaseStatus(refused)
