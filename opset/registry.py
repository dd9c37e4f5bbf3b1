"""The operator set: the list of definitions, schema registration, FunctionProtos and node helpers."""

from __future__ import annotations

import atexit
import threading

from onnx import AttributeProto, FunctionProto, NodeProto, TensorProto, defs, helper

from . import (
    binary_cross_entropy,
    binary_cross_entropy_backward,
    binary_cross_entropy_with_logits,
    binary_cross_entropy_with_logits_backward,
    kl_div,
    kl_div_backward,
)
from .builder import Builder, Static, compute_type
from .schema import make_schema
from .spec import OpDef
from .versions import DOMAIN, ONNX_OPSET, VERSION

OPS: dict[str, OpDef] = {
    m.DEFINITION.name: m.DEFINITION
    for m in (binary_cross_entropy_with_logits, binary_cross_entropy_backward, kl_div_backward,
              binary_cross_entropy, kl_div, binary_cross_entropy_with_logits_backward)
}

_lock = threading.Lock()


def register() -> None:
    """Register the lossops schemas in onnx.defs (checker, shape inference). Idempotent and thread-safe."""
    with _lock:
        added = False
        for op in OPS.values():
            if not defs.has(op.name, DOMAIN):
                defs.register_schema(make_schema(op))
                added = True
        if added and not _deregister_at_exit:
            # onnx keeps the schemas (and their Python inference functions) in a C++ static; onnx 1.19 destroys
            # it after Python has finalised and then waits forever for the GIL (measured: the process hangs at
            # exit). Dropping them while Python still runs avoids that.
            atexit.register(_deregister)
            _deregister_at_exit.append(True)


_deregister_at_exit: list[bool] = []


def _deregister() -> None:
    for op in OPS.values():
        if defs.has(op.name, DOMAIN):
            defs.deregister_schema(op.name, VERSION, DOMAIN)


def get(op_type: str) -> OpDef:
    try:
        return OPS[op_type]
    except KeyError:
        raise ValueError(f"'{op_type}' is not a lossops operator; the operators are {sorted(OPS)}") from None


def function(op: OpDef, onnx_opset: int = ONNX_OPSET) -> FunctionProto:
    """The generic standard-op decomposition of `op`: any dtype of T, any attribute values.

    It dispatches with `If` on the attribute values and on the precision (float64 for double, float32 for
    the others). Every input must be present: `model.with_functions` fills absent optional inputs with 1.
    """
    names = [i.name for i in op.inputs]
    b = Builder(op, TensorProto.FLOAT, None, prefix="_")
    out = b.by_precision(names[0], lambda s: op.decompose(s, *names))
    b.nodes.append(helper.make_node("Identity", [out], [op.output.name]))
    return helper.make_function(
        DOMAIN, op.name, names, [op.output.name], b.nodes, [helper.make_opsetid("", onnx_opset)],
        attributes=[], attribute_protos=[helper.make_attribute(a.name, a.default) for a in op.attributes],
        doc_string=op.summary,
    )


# The bodies compare string attributes with Equal (opset 19+); their other ops mean the same from 19 to 21.
MIN_FUNCTION_OPSET = 19


def functions(onnx_opset: int = ONNX_OPSET) -> list[FunctionProto]:
    """The FunctionProtos of every operator, to put in `ModelProto.functions` of a model whose default-domain
    opset is `onnx_opset` (at least MIN_FUNCTION_OPSET; a function must import the model's version)."""
    if onnx_opset < MIN_FUNCTION_OPSET:
        raise ValueError(f"the lossops functions need default-domain opset >= {MIN_FUNCTION_OPSET}, not {onnx_opset}")
    return [function(op, onnx_opset) for op in OPS.values()]


def expand(node: NodeProto, elem_type: int, prefix: str, static: Static | None = None) -> list[NodeProto]:
    """The decomposition of one node whose attributes and element type are known, as standard-op nodes
    that read the node's inputs and write its output. Absent optional inputs must have been filled, unless
    `static` is given: then constants become `static.initializers` (for providers such as CANN that claim
    no Constant nodes), absent inputs become 1 and static shapes replace shape computations."""
    op = get(node.op_type)
    attrs = op.resolve(node_attributes(node))
    b = Builder(op, compute_type(elem_type), attrs, prefix=prefix, static=static)
    names = list(node.input) + [""] * (len(op.inputs) - len(node.input))
    out = op.decompose(b, *names)
    b.nodes.append(helper.make_node("Cast", [out], [node.output[0]], to=elem_type))
    return b.nodes


def node_attributes(node: NodeProto) -> dict[str, object]:
    return {a.name: (a.s.decode() if a.type == AttributeProto.STRING else helper.get_attribute_value(a))
            for a in node.attribute}


def make_node(op_type: str, inputs: list[str], outputs: list[str], name: str | None = None, **attrs) -> NodeProto:
    """A lossops node; attribute values are checked now, so a typo fails here and not at run time."""
    op = get(op_type)
    op.resolve(attrs)
    if len(inputs) > len(op.inputs):
        raise ValueError(f"{op_type}: takes at most {len(op.inputs)} inputs, got {len(inputs)}")
    return helper.make_node(op_type, inputs, outputs, name=name, domain=DOMAIN, **attrs)


def opset_imports() -> list:
    return [helper.make_opsetid("", ONNX_OPSET), helper.make_opsetid(DOMAIN, VERSION)]
