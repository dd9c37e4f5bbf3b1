"""Prepare a model for ONNX Runtime and run it: kernels where lossops is installed, decomposition elsewhere."""

from __future__ import annotations

import contextlib
import ctypes
import os
import warnings
from typing import Literal

import numpy as np
import onnx
import onnxruntime
from onnx import ModelProto, NodeProto, helper

from .. import opset
from ..converters.lowering import lower
from ..opset import validation
from ..opset.model import Types, attach_functions, elem_type_of, inline_lossops_callers, stamp, value_types
from ..opset.walk import lossops_nodes, nodes
from . import cann, host

Mode = Literal["kernels", "decomposition"]  # and "cann", chosen by asking for CANNExecutionProvider


def load(model: str | os.PathLike | bytes | ModelProto) -> ModelProto:
    if isinstance(model, ModelProto):
        return model
    if isinstance(model, bytes):
        try:
            loaded = onnx.load_from_string(model)
        except Exception as e:  # protobuf's DecodeError
            raise ValueError(f"not an ONNX model: the bytes do not parse as one ({e})") from None
    else:
        loaded = onnx.load(os.fspath(model))
    if not loaded.HasField("graph"):
        raise ValueError("not an ONNX model: it has no graph")
    return loaded


def prepare(model: str | os.PathLike | bytes | ModelProto, sess_options: onnxruntime.SessionOptions | None = None,
            mode: Mode = "kernels") -> bytes:
    """Check `model` against the lossops schemas and return the bytes onnxruntime should load.

    mode "kernels": lossops nodes run on the lossops kernels, which this call registers on `sess_options`
    (so `onnxruntime.InferenceSession(prepare(m, so), so)` is the one-call way with your own options).
    mode "decomposition": lossops nodes run as their standard-op functions; nothing is registered.
    Options that already have onnxruntime-extensions registered are refused here, with a message saying so.
    """
    prepared = _prepare(model, sess_options, mode)
    if mode == "kernels" and host.kernels_available():
        host.refuse_a_second_registration(sess_options)  # milliseconds, once per call: only for the user's own session
    return prepared


def _prepare(model: str | os.PathLike | bytes | ModelProto, sess_options: onnxruntime.SessionOptions | None,
             mode: Mode) -> bytes:
    model = load(model)
    types = opset.validate(model)  # the model's one shape inference: its types serve every step below
    _validate_kernel_nodes(model)
    if mode == "decomposition" or not host.kernels_available():
        return attach_functions(model, types).SerializeToString()
    if mode != "kernels":
        raise ValueError(f"mode is {mode!r}; expected 'kernels' or 'decomposition'")
    if sess_options is None:
        raise ValueError("prepare(mode='kernels') needs the SessionOptions the session will use")
    prepared = inline_lossops_callers(model)  # lossops nodes in user functions too; no lossops functions
    with_kernel = set(host.kernel_ops())
    if any(node.op_type not in with_kernel for _, node in lossops_nodes(prepared)):
        # operators without a kernel run as their function, beside the kernels of the others
        prepared = _functions_of(attach_functions(prepared, types), lambda op: op not in with_kernel)
    elems = _jit_element_types(prepared, types)
    for _, node in lossops_nodes(prepared):
        if node.op_type not in with_kernel:
            continue
        try:  # here rather than inside ORT's kernel creation: errors surface as Python's
            host.compiled(node.op_type, elems.get(node.output[0]))
        except KeyboardInterrupt:  # not the compiler's hundreds of frames
            raise KeyboardInterrupt(f"lossops: compiling the kernels of {node.op_type} was interrupted") from None
        node.domain = host.KERNEL_DOMAIN
        node.op_type = host.kernel_op_type(node.op_type)
    if not any(o.domain == host.KERNEL_DOMAIN for o in prepared.opset_import):
        prepared.opset_import.append(helper.make_opsetid(host.KERNEL_DOMAIN, 1))
    stamp(prepared)
    host.add_kernels(sess_options)
    return prepared.SerializeToString()


def for_native_library(model: ModelProto) -> ModelProto:
    """`model` as a host of the native library (`library_path()`: C, C++, Java, C#) loads it: carrying the
    functions of its lossops operators that have no kernel (the library registers the others), a copy where it
    has any such node, else `model` itself."""
    with_kernel = set(host.kernel_ops())
    if all(node.op_type in with_kernel for _, node in lossops_nodes(model)):
        return model
    return _functions_of(opset.with_functions(model), lambda op: op not in with_kernel)


def _functions_of(model: ModelProto, keep) -> ModelProto:
    """`model` carrying only the lossops functions of the operators `keep(op_type)` accepts."""
    kept = [f for f in model.functions if f.domain != opset.DOMAIN or keep(f.name)]
    del model.functions[:]
    model.functions.extend(kept)
    return model


def _jit_element_types(model: ModelProto, types: Types) -> dict[str, int]:
    """Where numba compiles the kernels on demand: each lossops node's element type (by its output's name), so
    that only that type's code is compiled; empty where the machine code is prebuilt (it serves every type).
    `types`: the model's before its user functions were inlined."""
    from .machine_code.loader import Jit, code

    if not isinstance(code(), Jit):
        return {}
    found, inlined = {}, None
    for _, node in lossops_nodes(model):
        try:
            found[node.output[0]] = elem_type_of(node, types)
        except ValueError:  # a node inlined from a user function: its values are new
            inlined = inlined or value_types(model)
            with contextlib.suppress(ValueError):  # unknown even then: every type is compiled
                found[node.output[0]] = elem_type_of(node, inlined)
    return found


def _validate_kernel_nodes(model: ModelProto) -> None:
    """Nodes written by hand in the kernels' own domain (`ai.onnx.contrib::Lossops<Op>`, what `prepare` makes of
    lossops nodes) are held to the lossops node's rules: ONNX Runtime hands a custom op only the attributes it
    asks for, so an unknown one (`reduce`, a `log_target` on an operator without it) would be ignored."""
    for node in nodes(model.graph.node):
        name = node.op_type.removeprefix(host.kernel_op_type(""))
        if node.domain != host.KERNEL_DOMAIN or name == node.op_type or name not in opset.OPS:
            continue
        as_lossops = NodeProto()
        as_lossops.CopyFrom(node)
        as_lossops.domain, as_lossops.op_type = opset.DOMAIN, name
        found = validation.node_problems(as_lossops)
        if found:
            raise ValueError(f"{node.domain}::{node.op_type} (the kernel of lossops {name}): {found[0]}")


def bfloat16_dtype() -> np.dtype | None:
    """ml_dtypes' bfloat16 (onnx depends on ml_dtypes), or None without it."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover
        return None
    return np.dtype(ml_dtypes.bfloat16)


def ortvalue(array) -> onnxruntime.OrtValue:
    """An OrtValue of a numpy array, ml_dtypes.bfloat16 included (onnxruntime's own refuses it)."""
    a = np.require(array, requirements="C")  # keeps rank 0 (ascontiguousarray would make it rank 1)
    if a.dtype == bfloat16_dtype():
        return onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), onnx.TensorProto.BFLOAT16)
    return onnxruntime.OrtValue.ortvalue_from_numpy(a)


def array(value: onnxruntime.OrtValue) -> np.ndarray:
    """An OrtValue's tensor as a numpy array (a copy), bfloat16 as ml_dtypes.bfloat16."""
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    shape = tuple(value.shape())
    count = int(np.prod(shape, dtype=np.int64))
    raw = (ctypes.c_uint16 * count).from_address(value.data_ptr()) if count else []
    return np.array(raw, dtype=np.uint16).view(bfloat16_dtype()).reshape(shape)


def run_with_bfloat16(session: onnxruntime.InferenceSession, output_names, feeds: dict, run_options=None) -> list:
    """`session.run` that also takes and returns ml_dtypes.bfloat16 arrays (onnxruntime's `run` refuses them)."""
    values = {name: ortvalue(a) for name, a in feeds.items()}
    names = output_names or [o.name for o in session.get_outputs()]
    return [array(value) for value in session.run_with_ort_values(names, values, run_options)]


class InferenceSession(onnxruntime.InferenceSession):
    """`onnxruntime.InferenceSession` for models with lossops nodes: same constructor and `run`.

    The model is checked with the lossops schemas, its IR version stamped, and its lossops nodes run on
    the lossops kernels (`mode="kernels"`, the default when onnxruntime-extensions is installed) or on
    their standard-op decomposition (`mode="decomposition"`). Asking for CANNExecutionProvider lowers the
    lossops nodes for CANN's graph mode and raises `CannUnavailable` when CANN cannot run, unless
    `allow_cpu_fallback=True` (then it warns and runs on the CPU).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, *,
                 mode: Mode = "kernels", allow_cpu_fallback: bool = False, **kwargs):
        if sess_options is not None and not isinstance(sess_options, onnxruntime.SessionOptions):
            raise TypeError(f"sess_options is a {type(sess_options).__name__}; expected onnxruntime.SessionOptions "
                            "(or None)")
        sess_options = sess_options or onnxruntime.SessionOptions()
        providers = list(providers or ["CPUExecutionProvider"])
        names = [p[0] if isinstance(p, tuple) else p for p in providers]
        cann_kept = False
        if cann.PROVIDER in names:  # the Ascend path: lowered for CANN's graph mode, never a silent CPU run
            model_bytes, providers, provider_options, cann_kept = self._prepare_cann(
                path_or_bytes, providers, names, provider_options, allow_cpu_fallback)
            self.lossops_mode = "cann"
        else:
            self.lossops_mode = mode if host.kernels_available() else "decomposition"
            model_bytes = _prepare(path_or_bytes, sess_options, self.lossops_mode)  # conflicts: caught below
        try:
            super().__init__(model_bytes, sess_options, providers, provider_options, **kwargs)
        except Exception as e:
            if "Conflicting with a registered kernel" in str(e) and self.lossops_mode == "kernels":
                raise ValueError(host.ALREADY_REGISTERED) from None
            raise
        if self.lossops_mode == "cann" and cann_kept and cann.PROVIDER not in self.get_providers():
            self._cpu_fallback_or_raise("onnxruntime created the session without the CANN provider",
                                        allow_cpu_fallback)
        # onnxruntime's run() refuses ml_dtypes.bfloat16 arrays: only models with bfloat16 inputs or outputs take
        # the slower path that converts them (the others pay one attribute check per run)
        self._converts_bfloat16 = any(v.type == "tensor(bfloat16)" for v in (*self.get_inputs(), *self.get_outputs()))
        # onnxruntime's Python run() re-reads the graph's inputs to validate each feed, a cost that shows in a
        # small loss call (docs/speed.md). On a CPU-only session (no provider fallback, no graph capture) the
        # same checks are made from names read once here.
        self._required = frozenset(i.name for i in self.get_inputs() if not i.type.startswith("optional"))
        self._output_names = [o.name for o in self.get_outputs()]
        self._direct = self._binding_callable()

    def _binding_callable(self) -> bool:
        binding = getattr(getattr(self, "_sess", None), "run", None)  # onnxruntime's own attribute: checked
        return self.get_providers() == ["CPUExecutionProvider"] and callable(binding)

    def set_providers(self, providers=None, provider_options=None):
        super().set_providers(providers, provider_options)
        self._direct = self._binding_callable()

    @staticmethod
    def _prepare_cann(model, providers, names, provider_options, allow_cpu_fallback):
        """(lowered model, provider names, provider options, whether CANN stays in) for a session that asked
        for CANN."""
        lowered, _ = lower(load(model), for_provider="cann")
        given = list(provider_options) if provider_options else [{} for _ in providers]
        options = [p[1] if isinstance(p, tuple) else o for p, o in zip(providers, given, strict=True)]
        options = [cann.provider_options(o) if n == cann.PROVIDER else dict(o) for n, o in zip(names, options,
                                                                                              strict=True)]
        reason = cann.why_unavailable()
        if reason:
            InferenceSession._cpu_fallback_or_raise(reason, allow_cpu_fallback)
            kept = [(n, o) for n, o in zip(names, options, strict=True) if n != cann.PROVIDER]
            names, options = [n for n, _ in kept] or ["CPUExecutionProvider"], [o for _, o in kept] or [{}]
        return lowered.SerializeToString(), list(names), options, reason is None

    @staticmethod
    def _cpu_fallback_or_raise(reason: str, allow_cpu_fallback: bool) -> None:
        if not allow_cpu_fallback:
            raise cann.CannUnavailable(f"CANNExecutionProvider was requested but cannot run: {reason}. "
                                       "Pass allow_cpu_fallback=True to run on the CPU instead.")
        warnings.warn(f"CANNExecutionProvider cannot run ({reason}); running on the CPU as allowed",
                      RuntimeWarning, stacklevel=3)

    def run(self, output_names, input_feed, run_options=None):
        """`onnxruntime.InferenceSession.run`; bfloat16 inputs and outputs are ml_dtypes.bfloat16 arrays."""
        try:
            if self._converts_bfloat16:
                return run_with_bfloat16(self, output_names, input_feed, run_options)
            if (self._direct and type(input_feed) is dict and self._required <= input_feed.keys()
                    and onnxruntime.OrtValue not in map(type, input_feed.values())):
                return self._sess.run(output_names or self._output_names, input_feed, run_options)
            return super().run(output_names, input_feed, run_options)  # its checks and messages, OrtValue feeds
        except Exception as e:
            wrong = self._foreign_feed(input_feed)
            if wrong:
                raise TypeError(wrong) from e
            raise

    def _foreign_feed(self, input_feed) -> str | None:
        """Where onnxruntime's message names no input: a feed of an ml_dtypes type (bfloat16, float8...) that
        its graph input does not have ("Numpy_type 256 can't be converted to MLDataType")."""
        if not isinstance(input_feed, dict):
            return None
        for i in self.get_inputs():
            a = input_feed.get(i.name)
            if isinstance(a, np.ndarray) and a.dtype.kind == "V" and i.type != f"tensor({a.dtype})":
                return f"input '{i.name}' is a numpy array of {a.dtype}; the model expects {i.type}"
        return None
