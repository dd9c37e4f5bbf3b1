"""The mapping between aclnn call arguments and lossops nodes, both ways.

aclnn APIs take `int64_t reduction` (0 none, 1 mean, 2 sum, 3 batchmean; PyTorch's aten ops use the same
codes for the first three), `bool logTarget`, `nullptr` for an absent optional tensor, and write a reduced
result into a tensor of shape [1]; the ONNX operators take a string attribute, an int attribute, an empty
input name, and return a rank-0 tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx import NodeProto

from .. import opset

REDUCTION_CODES = {0: "none", 1: "mean", 2: "sum", 3: "batchmean"}

# aclnn API name -> (lossops operator, aclnn tensor argument names in lossops input order)
APIS = {
    "aclnnBinaryCrossEntropyWithLogits": ("BinaryCrossEntropyWithLogits", ("self", "target", "weightOptional",
                                                                           "posWeightOptional")),
    "aclnnBinaryCrossEntropyBackward": ("BinaryCrossEntropyBackward", ("gradOutput", "self", "target",
                                                                       "weightOptional")),
    "aclnnKlDivBackward": ("KlDivBackward", ("gradOutput", "self", "target")),
}


@dataclass
class AclnnCall:
    """One aclnn call: tensor arguments by aclnn name (None: nullptr), reduction code, logTarget."""

    api: str
    tensors: dict[str, str | None]
    reduction: int = 1
    log_target: bool = False
    out: str = "out"
    extra: dict = field(default_factory=dict)


def reduction_name(code: int, op: str) -> str:
    allowed = opset.get(op).attribute("reduction").allowed
    name = REDUCTION_CODES.get(code)
    if name not in allowed:
        raise ValueError(f"{op}: aclnn reduction code {code} has no meaning here; expected one of "
                         + ", ".join(f"{c} ({n})" for c, n in REDUCTION_CODES.items() if n in allowed))
    return name


def reduction_code(name: str) -> int:
    return next(c for c, n in REDUCTION_CODES.items() if n == name)


def to_node(call: AclnnCall) -> NodeProto:
    """The lossops node for an aclnn call (the [1]-shaped reduced `out` becomes the node's rank-0 output)."""
    try:
        op, names = APIS[call.api]
    except KeyError:
        raise ValueError(f"unknown aclnn API {call.api!r}; expected one of {sorted(APIS)}") from None
    attrs: dict = {"reduction": reduction_name(call.reduction, op)}
    if op == "KlDivBackward":
        attrs["log_target"] = int(call.log_target)
    inputs = [call.tensors.get(n) or "" for n in names]
    while inputs and not inputs[-1]:
        inputs.pop()
    return opset.make_node(op, inputs, [call.out], **attrs)


def to_call(node: NodeProto) -> AclnnCall:
    """The aclnn call for a lossops node. A reduced result is rank 0 in ONNX; aclnn wants `out` of shape [1],
    so a caller that allocates it reshapes (`reduced_output_shape`)."""
    api = next(a for a, (op, _) in APIS.items() if op == node.op_type)
    names = APIS[api][1]
    attrs = opset.get(node.op_type).resolve(opset.node_attributes(node))
    tensors = {n: (node.input[k] if k < len(node.input) and node.input[k] else None) for k, n in enumerate(names)}
    return AclnnCall(api, tensors, reduction_code(attrs["reduction"]), bool(attrs.get("log_target", 0)),
                     node.output[0])


def reduced_output_shape(node: NodeProto) -> list[int] | None:
    """[1] where aclnn writes a reduced result (BinaryCrossEntropyWithLogits with mean/sum), else None."""
    attrs = opset.get(node.op_type).resolve(opset.node_attributes(node))
    return [1] if node.op_type == "BinaryCrossEntropyWithLogits" and attrs["reduction"] != "none" else None
