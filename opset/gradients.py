"""The gradient of a forward operator as a node, from its record's `gradient` (which operator computes
d loss / d input, and how its inputs are wired). The training-step export and the differentiation-engine
adapters use it."""

from __future__ import annotations

from onnx import NodeProto

from .registry import OPS, get, make_node, node_attributes

DIFFERENTIABLE = [name for name, op in OPS.items() if op.gradient is not None]


def gradient_node(forward: NodeProto, grad_output: str, grad_input: str) -> NodeProto:
    """The backward node for a forward lossops node: same attributes, inputs wired per the record."""
    op = get(forward.op_type)
    if op.gradient is None:
        raise ValueError(f"{op.name} has no gradient operator; the differentiable ones are {DIFFERENTIABLE}")
    given = dict(zip([i.name for i in op.inputs], forward.input, strict=False))
    inputs = [grad_output if name == "grad_output" else given.get(name, "") for name in op.gradient.inputs]
    while inputs and not inputs[-1]:
        inputs.pop()
    return make_node(op.gradient.backward, inputs, [grad_input], **node_attributes(forward))
