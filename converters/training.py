"""Training-step graphs: forward, loss, backward (PyTorch's autograd differentiates; lossops backward
operators compute the loss gradients) and an in-graph SGD update, as one ONNX model that a plain
onnxruntime runs. Needs torch."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import ModelProto, helper, numpy_helper

from .. import opset
from ..extras import require
from .aclnn import reduction_name

torch = require("torch", "training-step export")


@dataclass(frozen=True)
class SGD:
    """torch.optim.SGD(lr, momentum) without dampening, Nesterov or weight decay. The momentum buffer
    starts at zero, which gives PyTorch's first step (buffer = gradient)."""

    lr: float
    momentum: float = 0.0


@dataclass
class TrainingStep:
    """The exported step: `model` maps (parameters, momentum buffers, data) to (loss, new parameters, new
    buffers). Names are the ONNX input names, in order."""

    model: ModelProto
    parameters: dict[str, np.ndarray]  # initial values, from the module
    buffers: list[str] = field(default_factory=list)  # momentum buffers, one per parameter (empty: momentum 0)
    data: list[str] = field(default_factory=list)
    loss: str = "loss"


def translation_table() -> dict:
    """aten/lossops torch ops -> lossops nodes, for forward and backward (the backward from the gradient table)."""
    from . import torch_ops  # noqa: F401 - registers torch.ops.lossops.*

    op = opset.script_opset()
    bce_backward = getattr(op, opset.get("BinaryCrossEntropy").gradient.backward)
    bcewl_backward = getattr(op, opset.get("BinaryCrossEntropyWithLogits").gradient.backward)
    kl_backward = getattr(op, opset.get("KlDiv").gradient.backward)

    def bce(input, target, weight=None, reduction: int = 1):
        return op.BinaryCrossEntropy(input, target, weight, reduction=reduction_name(reduction, "BinaryCrossEntropy"))

    def bce_grad(grad_output, input, target, weight=None, reduction: int = 1):
        return bce_backward(grad_output, input, target, weight,
                            reduction=reduction_name(reduction, "BinaryCrossEntropyBackward"))

    def bcewl(input, target, weight=None, pos_weight=None, reduction: int = 1):
        return op.BinaryCrossEntropyWithLogits(input, target, weight, pos_weight,
                                               reduction=reduction_name(reduction, "BinaryCrossEntropyWithLogits"))

    def bcewl_grad(grad_output, input, target, weight=None, pos_weight=None, reduction: int = 1):
        return bcewl_backward(grad_output, input, target, weight, pos_weight,
                              reduction=reduction_name(reduction, "BinaryCrossEntropyWithLogitsBackward"))

    def kl(input, target, reduction: int = 1, log_target: bool = False):
        return op.KlDiv(input, target, reduction=reduction_name(reduction, "KlDiv"), log_target=int(log_target))

    def kl_grad(grad_output, input, target, reduction: int = 1, log_target: bool = False):
        return kl_backward(grad_output, input, target, reduction=reduction_name(reduction, "KlDivBackward"),
                           log_target=int(log_target))

    aten, lossops = torch.ops.aten, torch.ops.lossops
    return {aten.binary_cross_entropy.default: bce, aten.binary_cross_entropy_backward.default: bce_grad,
            lossops.binary_cross_entropy_with_logits.default: bcewl,
            lossops.binary_cross_entropy_with_logits_backward.default: bcewl_grad,
            lossops.kl_div.default: kl, lossops.kl_div_backward.default: kl_grad}


def export_training_step(module, loss_fn, example_inputs: tuple, optimizer: SGD) -> TrainingStep:
    """Export one SGD step of `loss_fn(module(*module_args), *loss_args)` with
    `example_inputs = (module_args, loss_args)`."""
    from torch._functorch.aot_autograd import aot_export_module

    from .torch_ops import LossopsLosses

    module_args, loss_args = (tuple(a) for a in example_inputs)

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.module = module

        def forward(self, *args):
            return (loss_fn(self.module(*args[:len(module_args)]), *args[len(module_args):]),)

    step = Step()
    with LossopsLosses():
        joint, signature = aot_export_module(step, module_args + loss_args, trace_joint=True, output_loss_index=0,
                                             decompositions={})
    names = list(signature.parameters)
    if signature.buffers:
        raise ValueError(f"modules with buffers are not supported yet: {signature.buffers}")
    state = dict(step.named_parameters())
    params = [state[n].detach() for n in names]
    data = [f"input_{k}" for k in range(len(module_args))] + [f"target_{k}" for k in range(len(loss_args))]
    program = torch.onnx.export(joint, tuple(params) + module_args + loss_args, dynamo=True,
                                custom_translation_table=translation_table(), input_names=names + data,
                                verbose=False)
    model = program.model_proto
    gradient_outputs = [o.name for o in model.graph.output[1:]]
    grads_by_param = dict(zip(signature.backward_signature.gradients_to_parameters.values(),
                              gradient_outputs, strict=True))
    _append_sgd(model, names, [grads_by_param[n] for n in names], optimizer)
    return TrainingStep(opset.with_functions(model), {n: p.numpy() for n, p in zip(names, params, strict=True)},
                        [f"{n}.momentum" for n in names] if optimizer.momentum else [], data)


def _append_sgd(model: ModelProto, params: list[str], grads: list[str], optimizer: SGD) -> None:
    """Graph outputs become (loss, new parameters, new momentum buffers)."""
    graph = model.graph
    loss = graph.output[0]
    loss.name = _rename_output(model, loss.name, "loss")
    types = {v.name: v.type for v in graph.input}
    del graph.output[:]
    graph.output.append(loss)
    new_params, new_buffers = [], []
    for p, g in zip(params, grads, strict=True):
        elem = types[p].tensor_type.elem_type
        lr = _scalar(model, f"{p}.lr", optimizer.lr, elem)
        step = g
        if optimizer.momentum:
            buffer = f"{p}.momentum"
            graph.input.append(helper.make_value_info(buffer, types[p]))
            momentum = _scalar(model, f"{p}.momentum_factor", optimizer.momentum, elem)
            scaled = f"{buffer}.scaled"
            graph.node.append(helper.make_node("Mul", [buffer, momentum], [scaled]))
            graph.node.append(helper.make_node("Add", [scaled, g], [f"{buffer}.new"]))
            step = f"{buffer}.new"
            new_buffers.append(helper.make_value_info(step, types[p]))
        graph.node.append(helper.make_node("Mul", [step, lr], [f"{p}.step"]))
        graph.node.append(helper.make_node("Sub", [p, f"{p}.step"], [f"{p}.new"]))
        new_params.append(helper.make_value_info(f"{p}.new", types[p]))
    graph.output.extend(new_params + new_buffers)


def _scalar(model: ModelProto, name: str, value: float, elem: int) -> str:
    array = np.array(value, dtype=helper.tensor_dtype_to_np_dtype(elem))
    model.graph.initializer.append(numpy_helper.from_array(array, name))
    return name


def _rename_output(model: ModelProto, old: str, new: str) -> str:
    for node in model.graph.node:
        node.output[:] = [new if o == old else o for o in node.output]
        node.input[:] = [new if i == old else i for i in node.input]
    return new

