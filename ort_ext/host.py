"""Runs the numpy kernels inside ONNX Runtime through onnxruntime-extensions, without its Python-op layer.

Why not `onnxruntime_extensions.onnx_op`: its handler converts every element through a Python list
(~70 ns each), aborts the process on any Python exception, cannot take float16/bfloat16 and has neither
optional inputs nor optional attributes. Instead each operator is an `OrtCustomOp` built with ctypes and
handed to the extensions library's `AddExternalCustomOp`; the library registers it when a session options
object loads it. Inputs and outputs are numpy views over ORT's own buffers (no copy), an error becomes an
`OrtStatus` that `run()` raises as an ordinary exception, and nothing but a C `free` runs when ORT destroys
a kernel (safe at interpreter shutdown).

The library registers external ops only in its `ai.onnx.contrib` domain, so the session rewrites lossops
nodes to `ai.onnx.contrib::Lossops<Op>` (prefixed: a name that collides with another op there makes the
library's registration loop forever). One OrtCustomOp per operator and element type: ORT selects by type.
Per call, the inputs' shapes and addresses are read by one compiled function (`ort_calls.py`), not by ctypes.
"""

from __future__ import annotations

import ctypes as C
import threading
from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from ..opset import OPS
from ..opset.spec import OpDef
from . import ort_api, ort_calls
from .kernels import KERNELS, InvalidInput

KERNEL_DOMAIN = "ai.onnx.contrib"
ELEMENT_TYPES: dict[int, np.dtype] = {
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.DOUBLE: np.dtype(np.float64),
    TensorProto.FLOAT16: np.dtype(np.float16),
}
try:  # onnx depends on ml_dtypes for bfloat16 arrays
    import ml_dtypes

    ELEMENT_TYPES[TensorProto.BFLOAT16] = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - old onnx without ml_dtypes: bfloat16 runs on the decomposition
    pass


def kernel_op_type(op_type: str) -> str:
    return f"Lossops{op_type}"


_libc = C.CDLL(None)
_libc.malloc.restype = C.c_void_p
_libc.malloc.argtypes = [C.c_size_t]
_FREE = C.cast(_libc.free, C.c_void_p).value


@dataclass
class _Registered:
    op: OpDef
    elem_type: int
    struct: ort_api.OrtCustomOp
    name: C.Array


@dataclass(frozen=True)
class _Config:
    """What one kernel instance computes: interned, so that Compute reads one integer from the kernel's C
    state and the set stays bounded however many sessions are created."""

    op: OpDef
    dtype: np.dtype
    attrs: dict

    @property
    def kernel(self):
        return KERNELS[self.op.name]


_registered: list[_Registered] = []
_by_address: dict[int, int] = {}
_configs: list[_Config] = []
_config_ids: dict[tuple, int] = {}
_lock = threading.Lock()


def _status_on_error(fn):
    """ctypes turns an escaping exception into a NULL return, which ORT reads as success: never let one out."""

    def wrapper(*args):
        try:
            return fn(*args)
        except BaseException as e:
            return _report(e)

    return wrapper


_api_address: list[int] = []


def _report(e: BaseException) -> int | None:
    if not _api_address:  # cannot happen after _create_kernel's first line; NULL would read as success
        return None
    msg = str(e) if isinstance(e, (InvalidInput, ValueError)) else f"{type(e).__name__}: {e}"
    return ort_api.api(_api_address[0]).status(msg)


def _create_kernel(op_ptr, api_address, info, kernel_out):
    if not _api_address:  # first, so that any failure below can still be reported as an OrtStatus
        _api_address.append(api_address)
    entry = _registered[_by_address[C.addressof(op_ptr.contents)]]
    api = ort_api.api(api_address)
    given: dict[str, object] = {}
    for a in entry.op.attributes:
        key = a.name.encode()
        if a.kind is str:
            size = C.c_size_t(0)
            status = api.KernelInfoGetAttribute_string(info, key, None, C.byref(size))
            if status:
                api.ReleaseStatus(status)
                continue
            buf = C.create_string_buffer(size.value)
            if status := api.KernelInfoGetAttribute_string(info, key, buf, C.byref(size)):
                return status
            given[a.name] = buf.value.decode()
        else:
            value = C.c_int64()
            status = api.KernelInfoGetAttribute_int64(info, key, C.byref(value))
            if status:
                api.ReleaseStatus(status)
                continue
            given[a.name] = value.value
    try:
        attrs = entry.op.resolve(given)
    except ValueError as e:
        return api.status(str(e))
    key = (entry.op.name, entry.elem_type, tuple(sorted(attrs.items())))
    with _lock:
        if key not in _config_ids:
            _config_ids[key] = len(_configs)
            _configs.append(_Config(entry.op, ELEMENT_TYPES[entry.elem_type], attrs))
    # Kernel state lives in C memory so that ORT can release it with free(), without calling into Python.
    block = _libc.malloc(8)
    C.c_int64.from_address(block).value = _config_ids[key]
    kernel_out[0] = block
    return None


class _Buffer:
    """Exposes an ORT buffer to numpy through the array interface (cheaper than building ctypes arrays)."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, shape: tuple[int, ...], typestr: str, readonly: bool):
        self.__array_interface__ = {"data": (address, readonly), "shape": shape, "typestr": typestr, "version": 3}


def _array(address: int, shape: tuple[int, ...], dtype: np.dtype, writable: bool) -> np.ndarray:
    """A numpy array over an OrtValue's buffer (no copy)."""
    if 0 in shape:
        return np.empty(shape, dtype)
    # bfloat16 has no array-interface type string: map its bits as uint16 and view them
    raw = np.asarray(_Buffer(address, shape, f"<u{dtype.itemsize}" if dtype.kind == "V" else dtype.str,
                             not writable))
    return raw.view(dtype) if dtype.kind == "V" else raw


class _OrtError(Exception):
    def __init__(self, status: int):
        self.status = status


def _compute(kernel, context):
    api = ort_api.api(_api_address[0])
    fns = ort_calls.table(_api_address[0])
    config = _configs[C.c_int64.from_address(kernel).value]
    name, dtype = config.op.name, config.dtype
    try:
        meta = np.empty((len(config.op.inputs), 3 + ort_calls.MAX_RANK), np.int64)
        status = ort_calls.read_inputs(fns, context, meta)
        if status == ort_calls.TOO_MANY_DIMS:
            raise InvalidInput(f"an input has more than {ort_calls.MAX_RANK} dimensions (numpy's limit)")
        if status:
            return status
        inputs = [_array(row[1], tuple(row[3:3 + row[2]]), dtype, False) if row[0] else None
                  for row in meta.tolist()]

        def alloc(shape: tuple[int, ...]) -> np.ndarray:
            result = np.zeros(1, np.int64)
            if status := ort_calls.allocate_output(fns, context, np.array(shape, np.int64), result):
                raise _OrtError(status)
            return _array(int(result[0]), shape, dtype, True)

        with np.errstate(all="ignore"):
            config.kernel(*inputs, **config.attrs, alloc=alloc)
        return None
    except _OrtError as e:
        return e.status
    except InvalidInput as e:
        return api.status(f"{name}: {e}")
    except Exception as e:
        return api.status(f"{name}: internal error in the lossops kernel: {type(e).__name__}: {e}", ort_api.ORT_FAIL)


# ctypes function objects must live as long as the process: ORT keeps the pointers.
_CALLBACKS = {
    "CreateKernelV2": ort_api.CreateKernelV2(_status_on_error(_create_kernel)),
    "KernelComputeV2": ort_api.KernelComputeV2(_status_on_error(_compute)),
    "GetExecutionProviderType": ort_api.GetString(lambda op: None),
    "GetInputType": ort_api.GetIndexed(lambda op, i: _registered[_by_address[C.addressof(op.contents)]].elem_type),
    "GetInputTypeCount": ort_api.GetCount(lambda op: len(_registered[_by_address[C.addressof(op.contents)]].op.inputs)),
    "GetOutputType": ort_api.GetIndexed(lambda op, i: _registered[_by_address[C.addressof(op.contents)]].elem_type),
    "GetOutputTypeCount": ort_api.GetCount(lambda op: 1),
    "GetInputCharacteristic": ort_api.GetIndexed(
        lambda op, i: ort_api.INPUT_OPTIONAL if _registered[_by_address[C.addressof(op.contents)]].op.inputs[i].optional
        else ort_api.INPUT_REQUIRED),
    "GetOutputCharacteristic": ort_api.GetIndexed(lambda op, i: ort_api.INPUT_REQUIRED),
    "GetInputMemoryType": ort_api.GetIndexed(lambda op, i: 0),
    "GetName": ort_api.GetString(lambda op: C.addressof(_registered[_by_address[C.addressof(op.contents)]].name)),
}


def _add_all() -> None:
    """Hand every operator x element type to the extensions library, once per process."""
    from onnxruntime_extensions import get_library_path

    lib = C.CDLL(get_library_path())
    lib.AddExternalCustomOp.argtypes = [C.c_void_p]
    lib.AddExternalCustomOp.restype = C.c_bool
    for op in OPS.values():
        for elem_type in ELEMENT_TYPES:
            struct = ort_api.OrtCustomOp()
            struct.version = ort_api.OP_VERSION
            for field, callback in _CALLBACKS.items():
                setattr(struct, field, callback)
            struct.KernelDestroy = _FREE
            entry = _Registered(op, elem_type, struct, C.create_string_buffer(kernel_op_type(op.name).encode()))
            _by_address[C.addressof(struct)] = len(_registered)
            _registered.append(entry)
            if not lib.AddExternalCustomOp(C.addressof(struct)):
                raise RuntimeError("onnxruntime-extensions refused AddExternalCustomOp")


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

    with _lock:
        if not _registered:
            _add_all()
        try:
            sess_options.get_session_config_entry(_MARK)
            return
        except RuntimeError:
            pass
        sess_options.register_custom_ops_library(get_library_path())
        sess_options.add_session_config_entry(_MARK, "1")
