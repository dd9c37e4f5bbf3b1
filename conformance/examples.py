"""One worked example per operator for docs/operators.md, rendered from the conformance suite's stored cases (as
onnx's node tests double as its operator docs): the operator's first float32 case in the suite that is a single
node with small, non-empty inputs and a finite result."""

from __future__ import annotations

import numpy as np
from onnx import AttributeProto, helper

from ..opset.versions import DOMAIN
from .golden import Golden

_MOST = 24  # elements per input: an example is read, not scrolled


def _single_node(g: Golden, op_type: str) -> bool:
    nodes = g.model.graph.node
    return len(nodes) == 1 and nodes[0].domain == DOMAIN and nodes[0].op_type == op_type


def first_case(op_type: str, goldens: list[Golden]) -> Golden | None:
    for g in goldens:
        if (_single_node(g, op_type) and g.dtype == "float32" and np.isfinite(g.expected).all()
                and all(0 < a.size <= _MOST for a in g.inputs)):
            return g
    return None


def _assigned(name: str, a: np.ndarray) -> str:
    prefix = f"{name} = "
    text = np.array2string(a, precision=8, max_line_width=110, separator=", ", floatmode="maxprec", prefix=prefix)
    return prefix + (text if a.ndim else f"{text}  (rank 0)")


def worked_example(op_type: str, goldens: list[Golden]) -> list[str]:
    """Markdown lines: the node, its inputs and the expected output, or nothing where `goldens` (the suite:
    `golden.load_all()`, read once by the caller) has no case for it."""
    g = first_case(op_type, goldens)
    if g is None:
        return []
    node = g.model.graph.node[0]

    def value(a: AttributeProto) -> str:
        v = helper.get_attribute_value(a)
        return repr(v.decode() if isinstance(v, bytes) else v)

    arguments = [n or '""' for n in node.input] + [f"{a.name}={value(a)}" for a in node.attribute]
    call = f"{node.output[0]} = {op_type}({', '.join(arguments)})"
    lines = [f"Example (the conformance case `{g.name}`; `lossops conformance -k {g.name}` runs it):", "",
             "```", call]
    named = {v.name: a for v, a in zip(g.model.graph.input, g.inputs, strict=True)}
    lines += [_assigned(name, named[name]) for name in node.input if name]
    lines += [_assigned(node.output[0], g.expected), "```", ""]
    return lines
