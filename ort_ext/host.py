"""Runs the lossops kernels inside ONNX Runtime, through onnxruntime-extensions, with no Python per run.

Why not `onnxruntime_extensions.onnx_op`: its handler converts every element through a Python list, aborts
the process on any Python exception, cannot take float16/bfloat16 and has neither optional inputs nor
optional attributes (FACTS.md). Instead each operator and element type is an `OrtCustomOp` handed to the
extensions library's `AddExternalCustomOp`, and the function ORT calls per run is compiled (numba `cfunc`):
it reads the inputs' shapes and data through the OrtApi table, lets the engine check them against the
operator's rules, allocates the output through ORT, and runs the tiles on the session's own intra-op threads
(`KernelContext_ParallelFor`: the session's thread setting holds, and nothing of lossops' lives in a thread
that a fork or Ctrl-C could leave behind). Every error becomes an OrtStatus that `run()` raises.

Python runs only when a session is created: `CreateKernelV2` reads and checks the node's attributes and
writes the kernel's state into C memory, which ORT releases with C `free`. The compiled functions are made
immortal, so that they outlive the interpreter's teardown like the C memory they serve.

The library registers external ops only in its `ai.onnx.contrib` domain, so `prepare` renames lossops nodes
to `ai.onnx.contrib::Lossops<Op>` (prefixed: a name that collides with another op there makes the library's
registration loop forever).
"""

from __future__ import annotations

import ctypes as C
import functools
import threading

import numpy as np
from numba import cfunc, types

from ..opset import OPS
from . import capi
from .kernels import KERNELS, engine
from .kernels.native import stack, view

KERNEL_DOMAIN = "ai.onnx.contrib"
ELEMENT_TYPES = tuple(engine.ELEMENT_TYPES)  # the kernels' types, each with its storage dtype there

# A kernel's state: int64 words in C memory (written at session creation, read by every run).
COMPUTE, API, WORKER, ELEM_TYPE, ITEMSIZE, REDUCTION, LOG_TARGET = range(7)
STATE_WORDS = 7
_PLAN_BYTES = engine.PLAN_BYTES  # a module constant: `stack` takes a literal
_API_WORDS = 512  # a bound for viewing the OrtApi table (its highest slot used here is 274)
S = capi.SLOTS
_CREATE_STATUS, _MUTABLE_DATA, _ELEMENT_TYPE, _DIMS_COUNT, _DIMS, _TYPE_AND_SHAPE = (
    S["CreateStatus"], S["GetTensorMutableData"], S["GetTensorElementType"], S["GetDimensionsCount"],
    S["GetDimensions"], S["GetTensorTypeAndShape"])
_INPUT_COUNT, _INPUT, _OUTPUT, _RELEASE_INFO, _PARALLEL_FOR = (
    S["KernelContext_GetInputCount"], S["KernelContext_GetInput"], S["KernelContext_GetOutput"],
    S["ReleaseTensorTypeAndShapeInfo"], S["KernelContext_ParallelFor"])
_OUT_OF_MEMORY = np.frombuffer(b"lossops: out of memory for a kernel's workspace of ", np.uint8).copy()
_BYTES = np.frombuffer(b" bytes", np.uint8).copy()
_COMPUTE = types.int64(types.int64, types.int64)  # OrtStatus* (void* kernel, OrtKernelContext*), as integers
_WORKER = types.void(types.int64, types.uint64)  # void (void* plan, size_t task)


def kernel_op_type(op_type: str) -> str:
    return f"Lossops{op_type}"


@functools.cache
def compiled(op_name: str) -> tuple[int, int]:
    """(compute, worker): the addresses of the compiled functions ORT calls for `op_name` (compiled on first
    use, from numba's cache when it has them)."""
    n_inputs = len(OPS[op_name].inputs)
    op = op_name  # a literal for the engine's per-operator entry points

    @cfunc(_WORKER, cache=True, error_model="numpy", nogil=True)
    def worker(plan, i):
        engine.task(op, plan, i)

    @cfunc(_COMPUTE, cache=True, error_model="numpy", nogil=True)
    def compute(kernel, context):
        state = view(kernel, STATE_WORDS, np.int64)
        api = view(state[API], _API_WORDS, np.int64)
        plan = stack(_PLAN_BYTES)
        w = view(plan, engine.PLAN_WORDS, np.int64)
        for k in range(engine.OPERANDS):
            w[k] = 0
        w[engine.ELEM_TYPE], w[engine.ITEMSIZE] = state[ELEM_TYPE], state[ITEMSIZE]
        w[engine.REDUCTION], w[engine.LOG_TARGET] = state[REDUCTION], state[LOG_TARGET]
        out = view(stack(16), 2, np.int64)  # out-parameters of the API calls
        out_address = out.ctypes.data
        status = capi.call(api[_INPUT_COUNT], (context, out_address))
        count = out[0]
        for j in range(n_inputs):
            a = engine.OPERANDS + j * engine.OPERAND_WORDS
            w[a + engine.O_PRESENT] = 0
            if status or j >= count:
                continue
            status = capi.call(api[_INPUT], (context, np.int64(j), out_address))
            value = out[0]
            if status or value == 0:  # an absent optional input
                continue
            status = capi.call(api[_TYPE_AND_SHAPE], (value, out_address))
            if status:
                continue
            info = out[0]
            status = capi.call(api[_ELEMENT_TYPE], (info, out_address))
            elem_type = out[0] & 0xFFFFFFFF  # an enum (int) written into a 64-bit slot
            if status == 0:
                status = capi.call(api[_DIMS_COUNT], (info, out_address))
            rank = out[0]
            if status == 0 and rank <= engine.MAX_RANK:  # a larger rank is reported by the engine
                status = capi.call(api[_DIMS], (info, plan + 8 * (a + engine.O_DIMS), rank))
            capi.call(api[_RELEASE_INFO], (info,))
            if status == 0:
                status = capi.call(api[_MUTABLE_DATA], (value, out_address))
            w[a + engine.O_PRESENT], w[a + engine.O_ADDRESS] = 1, out[0]
            w[a + engine.O_ELEM_TYPE], w[a + engine.O_RANK] = elem_type, rank
        if status:
            return status
        if engine.plan(op, plan):
            return capi.call(api[_CREATE_STATUS], (np.int64(capi.ORT_INVALID_ARGUMENT), plan + engine.MESSAGE))
        status = capi.call(api[_OUTPUT], (context, np.int64(0), plan + 8 * engine.OUT_DIMS, w[engine.OUT_RANK],
                                          out_address))
        if status == 0:
            status = capi.call(api[_MUTABLE_DATA], (out[0], out_address))
        if status:
            return status
        w[engine.OUT_ADDRESS] = out[0]
        workspace = 0
        if w[engine.WORKSPACE_BYTES]:
            workspace = capi.malloc(w[engine.WORKSPACE_BYTES] + 64)
            if workspace == 0:
                msg = view(plan + engine.MESSAGE, engine.MESSAGE_BYTES, np.uint8)
                pos = engine.put_int(msg, engine.put(msg, 0, _OUT_OF_MEMORY), w[engine.WORKSPACE_BYTES])
                msg[engine.put(msg, pos, _BYTES)] = 0
                return capi.call(api[_CREATE_STATUS], (np.int64(capi.ORT_FAIL), plan + engine.MESSAGE))
            w[engine.WORKSPACE] = (workspace + 63) // 64 * 64
        engine.start(op, plan)
        tasks = w[engine.NTASKS]
        if tasks > 1:
            status = capi.call(api[_PARALLEL_FOR], (context, state[WORKER], tasks, np.int64(0), plan))
        elif tasks == 1:
            engine.task(op, plan, 0)
        if status == 0:
            engine.finish(op, plan)
        if workspace:
            capi.free(workspace)
        return status

    _immortal(worker, compute)
    return compute.address, worker.address


@cfunc(_COMPUTE, cache=True)
def _trampoline(kernel, context):
    """KernelComputeV2 of every lossops op: the state's first word is its operator's compute function (so
    an operator is compiled when a session first uses it, not when the library is registered)."""
    return capi.call(view(kernel, 1, np.int64)[0], (kernel, context))


def _immortal(*objects) -> None:
    """Keep compiled functions (and the machine code they own) alive through interpreter teardown: a session
    still running in another thread then must not jump into freed memory."""
    for obj in objects:
        C.pythonapi.Py_IncRef(C.py_object(obj))


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
        self.struct.KernelComputeV2 = _trampoline.address
        self.struct.KernelDestroy = capi.FREE


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
            "GetInputType": capi.GetIndexed(lambda op, i: self._op(op).elem_type),
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

    def _attribute(self, api: capi.Api, info, name: str, kind: type):
        """The node's attribute `name` if it has one of type `kind`, None if it has none; ValueError if it has
        one of another type (KernelInfo can only be asked for a name and a type)."""
        key = name.encode()
        if kind is str:
            size = C.c_size_t(0)
            if status := api.KernelInfoGetAttribute_string(info, key, None, C.byref(size)):
                api.ReleaseStatus(status)
            else:
                buffer = C.create_string_buffer(size.value)
                if status := api.KernelInfoGetAttribute_string(info, key, buffer, C.byref(size)):
                    raise ValueError(api.message(status))
                return buffer.value.decode("utf-8", "replace")
        else:
            value = C.c_int64()
            if status := api.KernelInfoGetAttribute_int64(info, key, C.byref(value)):
                api.ReleaseStatus(status)
            else:
                return value.value
        other = C.c_float()  # present with another type? (a FLOAT log_target of 1.0 must not read as absent)
        if not (status := api.KernelInfoGetAttribute_float(info, key, C.byref(other))):
            return other.value
        api.ReleaseStatus(status)
        if kind is not str:
            size = C.c_size_t(0)
            if not (status := api.KernelInfoGetAttribute_string(info, key, None, C.byref(size))):
                return "(a string)"
            api.ReleaseStatus(status)
        return None

    def _create_kernel(self, op_pointer, api_address, info, kernel_out):
        entry = self._op(op_pointer)
        api = self._api(api_address)
        given = {}
        for a in entry.op.attributes:
            value = self._attribute(api, info, a.name, a.kind)
            if value is not None:
                given[a.name] = value
        attrs = entry.op.resolve(given)  # ValueError names the operator and the attribute
        compute, worker = compiled(entry.op.name)
        state = capi.c_alloc(8 * STATE_WORDS)  # released by ORT through C free (KernelDestroy)
        words = (C.c_int64 * STATE_WORDS).from_address(state)
        words[COMPUTE], words[API], words[WORKER] = compute, api_address, worker
        words[ELEM_TYPE], words[ITEMSIZE] = entry.elem_type, engine.ELEMENT_TYPES[entry.elem_type].itemsize
        words[REDUCTION] = engine.REDUCTION_CODES[attrs["reduction"]]
        words[LOG_TARGET] = attrs.get("log_target", 0)
        kernel_out[0] = state
        return None

    def register_all(self) -> None:
        """Hand every operator x element type to the extensions library, once per process, before the
        library is first loaded into session options (it reads its list then)."""
        from onnxruntime_extensions import get_library_path

        with self._lock:
            if self._ops:
                return
            library = C.CDLL(get_library_path())
            library.AddExternalCustomOp.argtypes, library.AddExternalCustomOp.restype = [C.c_void_p], C.c_bool
            for name in KERNELS:
                for elem_type in ELEMENT_TYPES:
                    entry = _Registered(name, elem_type, self._callbacks)
                    self._ops[C.addressof(entry.struct)] = entry
                    if not library.AddExternalCustomOp(C.addressof(entry.struct)):
                        raise RuntimeError("onnxruntime-extensions refused AddExternalCustomOp")


HOST = Host()


def kernels_available() -> bool:
    try:
        import onnxruntime_extensions  # noqa: F401
    except ImportError:
        return False
    return True


_MARK = "lossops.kernels_registered"  # a session config entry: travels with the options object


def add_kernels(sess_options) -> None:
    """Register the lossops kernels on an `onnxruntime.SessionOptions` (for models prepared by
    `lossops.ort_ext.prepare`). Idempotent: ORT refuses a session whose options loaded the library twice."""
    from onnxruntime_extensions import get_library_path

    HOST.register_all()
    try:
        sess_options.get_session_config_entry(_MARK)
        return
    except RuntimeError:
        pass
    sess_options.register_custom_ops_library(get_library_path())
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
