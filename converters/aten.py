"""The one translation table from PyTorch ops to ONNX for torch.onnx.export(dynamo=True), used by inference
export (converters/torch.py) and training-step export (training/export.py).

Each lossops operator names its PyTorch counterparts in its record (`OpDef.torch`), and its translations are
made from the record and PyTorch's own schema of each op: the op's tensor arguments are the node's inputs in
order, its other arguments the node's attributes, by name. They emit the lossops node itself: the exporter
looks the schema up (registered by `opset.script_opset()`), and an @onnxscript.script function would be
inlined and lose the node. The aten ops torch.onnx lacks or gets wrong are written out in converters/aten_ops.py.
Needs torch and onnxscript.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import logging
from collections.abc import Callable

from .. import opset
from ..extras import require
from ..opset.spec import OpDef
from .aclnn import reduction_name

torch = require("torch", "exporting from PyTorch")
from . import torch_ops  # noqa: E402, F401 - defines torch.ops.lossops.*, which training export traces
from .aten_ops import WRITTEN  # noqa: E402

lossops_op = opset.script_opset()

# what a non-tensor argument of a PyTorch schema is, as the exporter reads a translation's annotations
_ARGUMENT_TYPES = {"int": int, "SymInt": int, "bool": bool, "float": float}


def _overload(name: str):
    namespace, op = name.split("::")
    return getattr(getattr(torch.ops, namespace), op).default


# aten's cross entropy takes class indices or probabilities; lossops has an operator for each
PROBABILITIES = {"CrossEntropyLoss": "SoftTargetCrossEntropyLoss"}


def translation(op: OpDef, name: str) -> Callable:
    """The translation of PyTorch op `name` ("namespace::name") into a node of `op`, with the op's own signature.
    Raises ValueError when PyTorch has no such op or its arguments do not map onto the record."""
    try:
        schema = _overload(name)._schema
    except (AttributeError, RuntimeError):
        raise ValueError(f"{op.name}: PyTorch has no op {name} (a lossops:: op is defined in "
                         "converters/torch_ops.py)") from None
    parameters, annotations, tensors = [], {}, []
    for arg in schema.arguments:
        kind = inspect.Parameter.KEYWORD_ONLY if arg.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = arg.default_value if arg.has_default_value() else inspect.Parameter.empty
        parameters.append(inspect.Parameter(arg.name, kind, default=default))
        if "Tensor" in str(arg.type):
            tensors.append(arg.name)
        else:
            annotations[arg.name] = _ARGUMENT_TYPES.get(str(arg.type))
    attributes = [a for a in op.attributes if a.name in annotations]
    if len(tensors) != len(op.inputs) or len(attributes) != len(annotations) or None in annotations.values():
        raise ValueError(f"{op.name}: the arguments of {schema} do not map onto its inputs "
                         f"{[i.name for i in op.inputs]} and attributes {[a.name for a in op.attributes]}")
    signature = inspect.Signature(parameters)

    def translate(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        attrs = {a.name: reduction_name(values[a.name], op.name) if a.name == "reduction" else a.kind(values[a.name])
                 for a in attributes}
        target = getattr(values.get("target"), "dtype", None)
        if op.name in PROBABILITIES and target is not None and target.is_floating_point():
            record = opset.get(PROBABILITIES[op.name])  # its inputs are in the same order
            return getattr(lossops_op, record.name)(*(values[t] for t in tensors),
                                                    **{k: v for k, v in attrs.items() if k in record.defaults()})
        return getattr(lossops_op, op.name)(*(values[t] for t in tensors), **attrs)

    translate.__signature__ = signature
    translate.__annotations__ = annotations
    translate.__name__ = translate.__qualname__ = name.replace("::", "_")
    return translate

def translation_table() -> dict:
    """{torch OpOverload: translation} for torch.onnx.export's custom_translation_table: every operator's
    PyTorch ops, and the ones written out."""
    _torchlib_listed_once()
    table = {_overload(name): translation(op, name) for op in opset.OPS.values() for name in op.torch}
    return table | {_overload(name): function for name, function in WRITTEN.items()}


@functools.cache
def decompositions() -> dict | None:
    """The decompositions torch.onnx.export applies before it translates (PyTorch's, less the ops it translates,
    translation_table's included): a graph traced with them leaves the exporter nothing to decompose, so it need
    not trace the graph once more to do it. None where torch's internals differ."""
    table = translation_table()  # first: it makes the list of torchlib's functions once
    try:
        from torch.onnx._internal.exporter import _decomp, _registration

        with _quiet(_registration.__name__):  # the exporter says what it skips when it builds its own
            registry = _registration.ONNXRegistry.from_torchlib()
        for op, function in table.items():
            registry.register_op(op, function)
        return _decomp.create_onnx_friendly_decomposition_table(set(_decomp.get_onnx_implemented_overloads(registry)))
    except (ImportError, AttributeError, TypeError):
        return None


@contextlib.contextmanager
def _quiet(name: str):
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _torchlib_listed_once() -> None:
    """torch.onnx.export builds its registry anew on every call from onnxscript's list of torchlib functions,
    and onnxscript parses each function's source again to make that list: the same list every time, so it is
    made once per process (a torchlib function registered after the first export would not be listed; only
    onnxscript's own modules register them). Only a speed-up: where torch's internals differ, nothing changes."""
    try:
        from torch.onnx._internal._lazy_import import onnxscript_apis

        apis = importlib.import_module(onnxscript_apis.__name__)
        listed = apis.get_torchlib_ops
    except (ImportError, AttributeError):
        return
    if not hasattr(listed, "cache_info"):
        apis.get_torchlib_ops = functools.cache(listed)
