"""The mapping between aclnn call arguments and lossops nodes, both ways.

aclnn APIs take the reduction as `int64_t reduction` (0 none, 1 mean, 2 sum, 3 batchmean; PyTorch's aten ops
use the same codes for the first three) or, for cross entropy, as `char* reductionOptional`; `bool logTarget`;
`nullptr` for an absent optional tensor; and write a reduced result into a tensor of shape [1]. The ONNX operators
take a string attribute, an int attribute, an empty input name, and return a rank-0 tensor. The CTC APIs compute
per-sequence losses only and take the lengths as host arrays; the gradient APIs of cross entropy, NLL and CTC
read what their forward API also wrote (`Aclnn.forward_outputs`), which the lossops gradients recompute.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx import NodeProto

from .. import opset
from ..opset.spec import REDUCTIONS, OpDef

# aclnn API name -> the lossops operator whose record names it
APIS = {op.aclnn.api: op for op in opset.OPS.values() if op.aclnn is not None}


@dataclass
class AclnnCall:
    """One aclnn call: tensor arguments by aclnn name (None: nullptr, or for `forward_outputs` what the caller
    takes from the forward call), the reduction (its code or its name, as the API takes it; None where it takes
    none), logTarget, other scalar arguments by aclnn name (ignoreIndex, labelSmoothing, blank)."""

    api: str
    tensors: dict[str, str | None]
    reduction: int | str | None = 1
    log_target: bool = False
    out: str = "out"
    scalars: dict[str, int | float] = field(default_factory=dict)


def reduction_name(code: int, op: str) -> str:
    """The reduction attribute for an aten/aclnn `int64_t reduction` code, checked against the operator."""
    allowed = opset.get(op).attribute("reduction").allowed
    name = REDUCTIONS[code] if 0 <= code < len(REDUCTIONS) else None
    if name not in allowed:
        raise ValueError(f"{op}: reduction code {code} has no meaning here; expected one of "
                         + ", ".join(f"{REDUCTIONS.index(n)} ({n})" for n in allowed))
    return name


def _reduction(call: AclnnCall, op: OpDef) -> str:
    """The reduction attribute for a call's reduction argument, in the form the API takes it."""
    form = op.aclnn.reduction
    if form == "":
        if call.reduction not in (None, 0, "none"):
            raise ValueError(f"{call.api} takes no reduction (it computes 'none'); got {call.reduction!r}")
        return "none"
    if form == "name":
        allowed = op.attribute("reduction").allowed
        if call.reduction not in allowed:
            raise ValueError(f"{call.api}: reductionOptional {call.reduction!r} has no meaning here; expected one "
                             f"of {', '.join(map(repr, allowed))}")
        return call.reduction
    if not isinstance(call.reduction, int):
        raise ValueError(f"{call.api} takes the reduction as an int64 code; got {call.reduction!r}")
    return reduction_name(call.reduction, op.name)


def to_node(call: AclnnCall) -> NodeProto:
    """The lossops node for an aclnn call (the [1]-shaped reduced `out` becomes the node's rank-0 output). The
    arguments a gradient API reads from its forward call are left out (the node recomputes them), except the
    log-probabilities aclnnCrossEntropyLossGrad takes, which stand for the logits: their softmax is the logits'."""
    try:
        op = APIS[call.api]
    except KeyError:
        raise ValueError(f"unknown aclnn API {call.api!r}; expected one of {sorted(APIS)}") from None
    attrs: dict = {"reduction": _reduction(call, op)}
    if any(a.name == "log_target" for a in op.attributes):
        attrs["log_target"] = int(call.log_target)
    unknown = sorted(set(call.scalars) - {name for name, _ in op.aclnn.scalars})
    if unknown:
        raise ValueError(f"{call.api} has no scalar argument {unknown[0]!r}; expected one of "
                         f"{[name for name, _ in op.aclnn.scalars]}")
    attrs.update({attr: call.scalars[name] for name, attr in op.aclnn.scalars if name in call.scalars})
    inputs = [call.tensors.get(n) or "" for n in op.aclnn.arguments]
    while inputs and not inputs[-1]:
        inputs.pop()
    return opset.make_node(op.name, inputs, [call.out], **attrs)


def to_call(node: NodeProto) -> AclnnCall:
    """The aclnn call for a lossops node. A reduced result is rank 0 in ONNX; aclnn wants `out` of shape [1],
    so a caller that allocates it reshapes (`reduced_output_shape`). The arguments in the API's
    `forward_outputs` are None: the caller passes what its forward call wrote."""
    op = opset.get(node.op_type)
    if op.aclnn is None:
        raise ValueError(f"{op.name} has no aclnn API; the aclnn operators are {sorted(a.name for a in APIS.values())}")
    attrs = op.resolve(opset.node_attributes(node))
    reduction: int | str | None = attrs["reduction"]
    if op.aclnn.reduction == "":
        if reduction != "none":
            raise ValueError(f"{op.name} node '{node.output[0]}': {op.aclnn.api} computes reduction 'none' only; "
                             f"the node's {reduction!r} is that call and then PyTorch's reduction of its result")
        reduction = None
    elif op.aclnn.reduction == "code":
        reduction = REDUCTIONS.index(reduction)
    tensors = {n: (node.input[k] if k < len(node.input) and node.input[k] and n not in op.aclnn.forward_outputs
                   else None) for k, n in enumerate(op.aclnn.arguments)}
    tensors.update({n: None for n in op.aclnn.forward_outputs})
    return AclnnCall(op.aclnn.api, tensors, reduction, bool(attrs.get("log_target", 0)), node.output[0],
                     {name: attrs[attr] for name, attr in op.aclnn.scalars})


def reduced_output_shape(node: NodeProto) -> list[int] | None:
    """[1] where aclnn writes a reduced result (BinaryCrossEntropyWithLogits with mean/sum), else None."""
    op = opset.get(node.op_type)
    reduced = op.reduces and op.resolve(opset.node_attributes(node))["reduction"] != "none"
    return [1] if op.aclnn is not None and reduced else None
