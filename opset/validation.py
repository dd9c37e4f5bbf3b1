"""What a lossops node must be before anything builds, lowers or runs it, checked in one place.

onnx's shape inference and onnxruntime let through what would run silently wrong: an unknown attribute
(`reduce="sum"` would run as mean), an attribute of the wrong type, a lossops import of another version, a
required input given as "". `problems` finds them; `validate_nodes` raises the first as a ValueError that
names the operator, the node and what was expected. Every entry point calls it: `opset.make_node`,
`opset.validate` (so `prepare` and `InferenceSession` in every mode), `with_functions`, `lower` and
`lossops check`.
"""

from __future__ import annotations

from onnx import AttributeProto, ModelProto, NodeProto, helper

from .registry import OPS, get
from .spec import UNKNOWN_ATTRIBUTE, NotSingle
from .versions import DOMAIN, VERSION
from .walk import model_nodes


def node_label(node: NodeProto, index: int | None = None) -> str:
    """How messages name a node: its op type (with its domain, where not ONNX's) and its name, or its first
    output where it has none; with `index`, its position in the graph first (listings)."""
    name = node.name or (node.output[0] if node.output and node.output[0] else "(unnamed)")
    domain = "" if node.domain in ("", "ai.onnx") else f"{node.domain}::"
    return (f"#{index} " if index is not None else "") + f"{domain}{node.op_type} node '{name}'"


def node_problems(node: NodeProto, labelled: bool = True) -> list[str]:
    """What is wrong with one lossops node (operator, inputs, outputs, attributes), each as a sentence that
    starts with the node's label (`labelled=False`: without it, for a listing that names the node itself)."""
    op = OPS.get(node.op_type)
    if op is None:
        return [f"'{node.op_type}' is not a lossops operator; the operators are {', '.join(OPS)}"]
    found = []
    if len(node.output) != 1 or not node.output[0]:
        found.append(f"has {len(node.output)} output(s) {list(node.output)}; expected exactly one, named")
    if len(node.input) > len(op.inputs):
        found.append(f"has {len(node.input)} inputs; {op.name} takes at most {len(op.inputs)}")
    for k, i in enumerate(op.inputs):
        if not i.optional and (k >= len(node.input) or not node.input[k]):
            found.append(f"input '{i.name}' (#{k}) is required; expected a tensor name, got "
                         + ("''" if k < len(node.input) else "none"))
    expected = {a.name: a for a in op.attributes}
    for a in node.attribute:
        spec = expected.get(a.name)
        try:
            if spec is None:
                raise ValueError(UNKNOWN_ATTRIBUTE.format(op=op.name, name=a.name, names=op.attribute_names))
            spec.check(op.name, attribute_value(a))  # its type (a FLOAT log_target of 1.0 is not 1) and value
        except ValueError as e:
            found.append(str(e).removeprefix(op.name + ": "))
    return [f"{node_label(node)}: {p}" for p in found] if labelled else found


def attribute_value(a: AttributeProto) -> bytes | int | float | NotSingle:
    """An attribute as the checks take it, as ONNX Runtime hands it to a kernel: a STRING's exact bytes, an INT,
    a FLOAT, or what else it is."""
    if a.type == AttributeProto.STRING:
        return a.s
    if a.type in (AttributeProto.INT, AttributeProto.FLOAT):
        return helper.get_attribute_value(a)
    return NotSingle(AttributeProto.AttributeType.Name(a.type))


def import_problems(model: ModelProto) -> list[str]:
    """A lossops import of a version lossops does not define (a lossops node with no lossops import is
    onnx's to report)."""
    imports = [o.version for o in (*model.opset_import, *(i for f in model.functions for i in f.opset_import))
               if o.domain == DOMAIN]
    wrong = sorted({v for v in imports if v != VERSION})
    if not wrong:
        return []
    return [f"the model imports the '{DOMAIN}' domain at version {', '.join(map(str, wrong))}; lossops defines "
            f"version {VERSION} only"]


def problems(model: ModelProto) -> list[str]:
    """`import_problems`, then everything `node_problems` finds in the model's lossops nodes."""
    return import_problems(model) + [p for node in model_nodes(model) if node.domain == DOMAIN
                                     for p in node_problems(node)]


def validate_nodes(model: ModelProto) -> None:
    """Raise ValueError with the first problem (and how many more there are)."""
    found = problems(model)
    if found:
        more = f" (and {len(found) - 1} more problem(s))" if len(found) > 1 else ""
        raise ValueError(found[0] + more)


def make_node(op_type: str, inputs: list[str], outputs: list[str], name: str | None = None, **attrs) -> NodeProto:
    """A lossops node; attribute values are checked now, so a typo fails here and not at run time."""
    op = get(op_type)
    # a float attribute given as a Python int (alpha=1) is meant as the float; onnx would store an INT
    attrs = {k: float(v) if k in op.defaults() and op.attribute(k).kind is float and type(v) is int else v
             for k, v in attrs.items()}
    op.resolve(attrs)
    node = helper.make_node(op_type, inputs, outputs, name=name, domain=DOMAIN, **attrs)
    problems = node_problems(node)
    if problems:
        raise ValueError(problems[0])
    return node
