"""Runs the lossops kernels inside ONNX Runtime, through onnxruntime-extensions, with no Python per run.

Why not `onnxruntime_extensions.onnx_op`: its handler converts every element through a Python list, aborts
the process on any Python exception, cannot take float16/bfloat16 and has neither optional inputs nor
optional attributes. Instead each operator and element type is an `OrtCustomOp` handed to the
extensions library's `AddExternalCustomOp`, and the function ORT calls per run is machine code (prebuilt, or
compiled by numba: machine_code/loader.py, machine_code/compiled.py): it reads the inputs' shapes and data
through the OrtApi table, lets the engine check them against the operator's rules, allocates the output
through ORT, and runs the tiles on the session's own intra-op threads (`KernelContext_ParallelFor`: the
session's thread setting holds, and nothing of lossops' lives in a thread that a fork or Ctrl-C could leave
behind). Every error becomes an OrtStatus that `run()` raises.

Python runs only when a session is created: `CreateKernelV2` reads and checks the node's attributes and
writes the kernel's state into C memory, which ORT releases with C `free`. The machine code is never unloaded,
so that it outlives the interpreter's teardown like the C memory it serves.

The library registers external ops only in its `ai.onnx.contrib` domain, so `prepare` renames lossops nodes
to `ai.onnx.contrib::Lossops<Op>` (prefixed: a name that collides with another op there makes the library's
registration loop forever).
"""

from __future__ import annotations

import ctypes as C
import importlib.util
import threading
from pathlib import Path

from ..opset import OPS
from ..opset.spec import NotSingle
from .kernels import layout, targets
from .kernels.layout import (
    S_API,
    S_COMPUTE,
    S_ELEM_TYPE,
    S_ITEMSIZE,
    S_PARAMS,
    S_REDUCTION,
    S_WORKER,
    STATE_WORDS,
)
from .machine_code import capi, library, loader

KERNEL_DOMAIN = "ai.onnx.contrib"
ELEMENT_TYPES = tuple(layout.ELEMENT_TYPES)  # the kernels' types, each with its storage dtype there


def kernel_op_type(op_type: str) -> str:
    return f"Lossops{op_type}"


def compiled(op_name: str, elem_type: int | None = None) -> tuple[int, int]:
    """(compute, worker): the addresses of the machine code ORT calls for `op_name` on `elem_type` (compiled by
    numba on first use, for that type only, where the code is not prebuilt). ValueError for an operator without
    a kernel."""
    code = loader.code()
    if code is None:
        raise RuntimeError("lossops: the kernels are not available here")
    compute, worker = code.addresses(op_name, ("compute", "task"), elem_type)
    return compute, worker


class _Registered:
    """One OrtCustomOp (an operator for one element type) and the C strings it points to."""

    def __init__(self, op_name: str, elem_type: int, callbacks: dict):
        self.op = OPS[op_name]
        self.elem_type = elem_type
        self.name = C.create_string_buffer(kernel_op_type(op_name).encode())
        self.struct = capi.OrtCustomOp()
        self.struct.version = capi.OP_VERSION
        for field, callback in callbacks.items():
            setattr(self.struct, field, callback)
        self.struct.KernelComputeV2 = loader.code().trampoline()
        self.struct.KernelDestroy = capi.FREE

    def input_type(self, i: int) -> int:
        """Input i's element type: the node's T, or int64 for class indices."""
        return layout.INT64 if self.op.inputs[i].indices else self.elem_type


class Host:
    """lossops' kernels as seen by ONNX Runtime: the registered OrtCustomOps and what CreateKernelV2 needs."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ops: dict[int, _Registered] = {}  # by the address of the struct ORT hands back
        self._apis: dict[int, capi.Api] = {}
        # ctypes callbacks must live as long as the process: ORT keeps the pointers
        self._callbacks = {
            "CreateKernelV2": capi.CreateKernelV2(self._status_on_error(self._create_kernel)),
            "GetExecutionProviderType": capi.GetString(lambda op: None),
            "GetName": capi.GetString(lambda op: C.addressof(self._op(op).name)),
            "GetInputType": capi.GetIndexed(lambda op, i: self._op(op).input_type(i)),
            "GetInputTypeCount": capi.GetCount(lambda op: len(self._op(op).op.inputs)),
            "GetOutputType": capi.GetIndexed(lambda op, i: self._op(op).elem_type),
            "GetOutputTypeCount": capi.GetCount(lambda op: 1),
            "GetInputCharacteristic": capi.GetIndexed(
                lambda op, i: capi.INPUT_OPTIONAL if self._op(op).op.inputs[i].optional else capi.INPUT_REQUIRED),
            "GetOutputCharacteristic": capi.GetIndexed(lambda op, i: capi.INPUT_REQUIRED),
            "GetInputMemoryType": capi.GetIndexed(lambda op, i: 0),
        }

    def _op(self, struct_pointer) -> _Registered:
        return self._ops[C.addressof(struct_pointer.contents)]

    def _api(self, address: int) -> capi.Api:
        if address not in self._apis:
            api = capi.Api(address)
            api.self_check()
            self._apis[address] = api
        return self._apis[address]

    def _status_on_error(self, fn):
        """ctypes turns an escaping exception into a NULL return, which ORT reads as success: never let one out."""

        def wrapper(op, api_address, info, kernel_out):
            try:
                return fn(op, api_address, info, kernel_out)
            except BaseException as e:  # reported to ORT, which raises it in the caller
                try:
                    api = self._api(api_address)
                except BaseException:  # the table itself is unusable: nothing better to return
                    return None
                message = str(e) if isinstance(e, ValueError) else f"lossops: {type(e).__name__}: {e}"
                return api.status(message)

        return wrapper

    @staticmethod
    def _attribute(api: capi.Api, info, name: str) -> bytes | int | float | NotSingle | None:
        """The node's attribute `name` as the native library reads it (custom_ops.c, `read_attribute`): a string's
        exact bytes, an int, a float, what else it is (`NotSingle`), or None where the node has none. KernelInfo
        can only be asked for a name and a type, and says "No attribute with name" only where there is none."""
        key, size = name.encode(), C.c_size_t(0)
        failed = api.failed(api.KernelInfoGetAttribute_string(info, key, None, C.byref(size)))
        if failed is None:
            buffer = C.create_string_buffer(size.value)
            failed = api.failed(api.KernelInfoGetAttribute_string(info, key, buffer, C.byref(size)))
            if failed is not None:
                raise ValueError(failed)
            return buffer.raw[:max(size.value - 1, 0)]
        if failed.startswith("No attribute with name"):
            return None
        for kind, ctype in (("int64", C.c_int64), ("float", C.c_float)):
            value = ctype()
            if api.failed(getattr(api, f"KernelInfoGetAttribute_{kind}")(info, key, C.byref(value))) is None:
                return value.value
        for kind, onnx_type in (("float", "FLOATS"), ("int64", "INTS")):  # they succeed on a list of any kind
            size.value = 0
            got = api.failed(getattr(api, f"KernelInfoGetAttributeArray_{kind}")(info, key, None, C.byref(size)))
            if got is None and size.value:
                return NotSingle(onnx_type)
        allocator, tensor = C.c_void_p(), C.c_void_p()
        if (failed := api.failed(api.GetAllocatorWithDefaultOptions(C.byref(allocator)))) is not None:
            raise ValueError(failed)
        if api.failed(api.KernelInfoGetAttribute_tensor(info, key, allocator, C.byref(tensor))) is None:
            api.ReleaseValue(tensor)
            return NotSingle("TENSOR")
        return NotSingle("STRINGS")  # the C API has a getter for no other kind: a list of strings, in practice

    def _create_kernel(self, op_pointer, api_address, info, kernel_out):
        entry = self._op(op_pointer)
        api = self._api(api_address)
        given = {}
        for a in entry.op.attributes:
            value = self._attribute(api, info, a.name)
            if value is not None:
                given[a.name] = value
        attrs = entry.op.resolve(given)  # ValueError names the operator and the attribute
        compute, worker = compiled(entry.op.name, entry.elem_type)
        state = capi.c_alloc(8 * STATE_WORDS)  # released by ORT through C free (KernelDestroy)
        words = (C.c_int64 * STATE_WORDS).from_address(state)
        words[S_COMPUTE], words[S_API], words[S_WORKER] = compute, api_address, worker
        words[S_ELEM_TYPE], words[S_ITEMSIZE] = entry.elem_type, layout.ELEMENT_TYPES[entry.elem_type].itemsize
        words[S_REDUCTION] = layout.REDUCTION_CODES[attrs["reduction"]]
        (C.c_double * layout.MAX_PARAMS).from_address(state + 8 * S_PARAMS)[:] = layout.param_values(entry.op, attrs)
        kernel_out[0] = state
        return None

    def register_all(self) -> None:
        """Hand every operator x element type to the extensions library, once per process, before the
        library is first loaded into session options (it reads its list then)."""
        with self._lock:
            if self._ops:
                return
            library = C.CDLL(extensions_library())
            library.AddExternalCustomOp.argtypes, library.AddExternalCustomOp.restype = [C.c_void_p], C.c_bool
            for name in loader.code().ops:
                for elem_type in ELEMENT_TYPES:
                    entry = _Registered(name, elem_type, self._callbacks)
                    self._ops[C.addressof(entry.struct)] = entry
                    if not library.AddExternalCustomOp(C.addressof(entry.struct)):
                        raise RuntimeError("onnxruntime-extensions refused AddExternalCustomOp")


HOST = Host()


def extensions_library() -> str:
    """onnxruntime-extensions' shared library, found without importing its package (whose __init__ imports torch
    where torch is installed: seconds per process)."""
    spec = importlib.util.find_spec("onnxruntime_extensions")
    found = sorted(Path(spec.origin).parent.glob("_extensions_pydll*")) if spec and spec.origin else []
    if not found:
        raise RuntimeError("lossops: onnxruntime-extensions is not installed (or has no library): "
                           "pip install onnxruntime-extensions")
    return str(found[0])


def kernel_ops() -> tuple[str, ...]:
    """The operators with a kernel (the others run as their decomposition, kernels or not)."""
    code = loader.code()
    return () if code is None else code.ops


def kernels_available() -> bool:
    """Whether sessions run the lossops kernels here: onnxruntime-extensions is installed and machine code for
    them exists (prebuilt, or numba to compile it; loader.py says once why not)."""
    return not why_no_kernels()


def why_no_kernels() -> str:
    """Why sessions run the decomposition instead of the kernels here ("" where they run the kernels)."""
    if importlib.util.find_spec("onnxruntime_extensions") is None:
        return "onnxruntime-extensions is not installed"
    return loader.why_none() if loader.code() is None else ""


def why_no_native_kernels() -> str:
    """Why the native library (library.py) registers no kernel here ("" where it does): this install has none,
    none of its kernel libraries can be used on this CPU, or LOSSOPS_KERNELS=none."""
    try:
        chosen = library.choice(library.library_path())
    except RuntimeError as e:
        return str(e).removeprefix("lossops: ")
    return "" if chosen in targets.LEVELS else chosen.removeprefix("lossops: ")


_MARK = "lossops.kernels_registered"  # a session config entry: travels with the options object


def add_kernels(sess_options) -> None:
    """Register the lossops kernels on an `onnxruntime.SessionOptions` (for models prepared by
    `lossops.ort_ext.prepare`). Idempotent: ORT refuses a session whose options loaded the library twice."""
    HOST.register_all()
    try:
        sess_options.get_session_config_entry(_MARK)
        return
    except RuntimeError:
        pass
    sess_options.register_custom_ops_library(extensions_library())
    sess_options.add_session_config_entry(_MARK, "1")


ALREADY_REGISTERED = ("these SessionOptions already have onnxruntime-extensions registered "
                      "(register_custom_ops_library); lossops registers it itself with its kernels: pass "
                      "SessionOptions without it")


def refuse_a_second_registration(sess_options) -> None:
    """SessionOptions do not say which libraries they hold, and options that loaded onnxruntime-extensions
    twice fail at session creation with onnxruntime's "Conflicting with a registered kernel" (for ArgSort).
    A one-node session on the options tells now, where the message can say what to do; skipped where such a
    session would write a file (profiling, an optimised-model path)."""
    import onnxruntime
    from onnx import TensorProto, helper

    if sess_options.enable_profiling or sess_options.optimized_model_filepath:
        return
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    try:
        onnxruntime.InferenceSession(model.SerializeToString(), sess_options, providers=["CPUExecutionProvider"])
    except Exception as e:
        if "Conflicting with a registered kernel" in str(e):
            raise ValueError(ALREADY_REGISTERED) from None
        raise
