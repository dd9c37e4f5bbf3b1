"""The gradient table: for each forward operator, the node that computes its gradient with respect to
`input` (targets and weights are data, not differentiated). The PyTorch training export and the
differentiation-engine adapters all read this table."""

from __future__ import annotations

from dataclasses import dataclass

from onnx import NodeProto

from .registry import get, make_node, node_attributes


@dataclass(frozen=True)
class Gradient:
    backward: str  # the lossops operator computing d loss / d input
    # the backward's inputs: "grad_output" (the loss's gradient) or the name of a forward input
    inputs: tuple[str, ...]


GRADIENTS: dict[str, Gradient] = {
    "BinaryCrossEntropyWithLogits": Gradient("BinaryCrossEntropyWithLogitsBackward",
                                             ("grad_output", "input", "target", "weight", "pos_weight")),
    "BinaryCrossEntropy": Gradient("BinaryCrossEntropyBackward", ("grad_output", "input", "target", "weight")),
    "KlDiv": Gradient("KlDivBackward", ("grad_output", "input", "target")),
}


def gradient_node(forward: NodeProto, grad_output: str, grad_input: str) -> NodeProto:
    """The backward node for a forward lossops node: same attributes, inputs wired per the table."""
    gradient = GRADIENTS[forward.op_type]
    formal = [i.name for i in get(forward.op_type).inputs]
    given = dict(zip(formal, forward.input, strict=False))
    inputs = [grad_output if name == "grad_output" else given.get(name, "") for name in gradient.inputs]
    while inputs and not inputs[-1]:
        inputs.pop()
    return make_node(gradient.backward, inputs, [grad_input], **node_attributes(forward))
