"""Training-step graphs: forward, loss, backward (PyTorch's autograd differentiates; lossops backward
operators compute the loss gradients) and the optimizer update, as one ONNX model that a plain
onnxruntime runs; and the module's eval-mode forward over the same state. Needs torch.

The step graph's inputs are the state (parameters, module buffers, optimizer state, in that order), the
run-time scalars `lr` (float64) and `step` (int64: steps taken before this one), then the data; its outputs
are `loss` and the new value of every state entry and of `step`, each named `<input>.new`. Parameters and
buffers keep the module's state_dict names.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
from onnx import ModelProto, TensorProto, helper

from .. import opset
from ..extras import require
from ..opset.builder import Nodes
from .optimizers import LR, SGD, STEP, Adam, AdamW, Optimizer, clip_by_global_norm, describe, new_name, slot_name

torch = require("torch", "training-step export", extra="train")
from .aten import translation_table  # noqa: E402

__all__ = ["SGD", "Adam", "AdamW", "TrainingStep", "export_training_step"]


@dataclass
class TrainingStep:
    """An exported step, its eval-mode forward and the initial state (see the module docstring)."""

    model: ModelProto
    eval_model: ModelProto  # (parameters, buffers, module inputs) -> module output, eval mode
    state: dict[str, np.ndarray]  # initial values of every state input, in input order
    parameters: list[str]  # names of the parameters (trained or frozen), module order
    trained: list[str]  # the parameters that get gradients
    buffers: list[str]  # the module's buffers (BatchNorm statistics, captured tensors)
    optimizer: Optimizer
    max_grad_norm: float | None
    data: list[str] = field(default_factory=list)  # module inputs (input_k), then loss arguments (target_k)
    lr_input: str = LR  # the run-time scalars' input names
    step_input: str = STEP

    @property
    def outputs(self) -> list[str]:
        """The step graph's outputs: the loss, the new value of each state entry, the new step count."""
        return ["loss", *map(new_name, self.state), new_name(STEP)]

    @property
    def settings(self) -> dict:
        """The optimizer and its settings as JSON-able data (kept with a checkpoint)."""
        return describe(self.optimizer)

    @property
    def module_state(self) -> list[str]:
        return self.parameters + self.buffers


def export_training_step(module, loss_fn, example_inputs: tuple, optimizer: Optimizer | None = None,
                         max_grad_norm: float | None = None) -> TrainingStep:
    """Export one optimizer step of `loss_fn(module(*module_args), *loss_args)` with `example_inputs =
    (module_args, loss_args)`. `module` is in train mode during the step (BatchNorm updates its running
    statistics as PyTorch does); tensors the loss reads from the module (a registered `pos_weight` buffer)
    are state, not arguments. `max_grad_norm` clips the gradients by their global norm first."""
    from torch._functorch.aot_autograd import aot_export_module

    from .torch_ops import LossopsLosses

    optimizer = optimizer or SGD()
    module_args, loss_args = (tuple(a) for a in example_inputs)

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.module = module

        def forward(self, *args):
            return (loss_fn(self.module(*args[:len(module_args)]), *args[len(module_args):]),)

    step = Step().train()
    with LossopsLosses():
        joint, signature = aot_export_module(step, module_args + loss_args, trace_joint=True, output_loss_index=0,
                                             decompositions={})
    strip = len("module.")
    params = [n[strip:] for n in signature.parameters]
    buffers = [n[strip:] for n in signature.buffers]
    mutated = [n[strip:] for n in signature.buffers_to_mutate.values()]
    trained = [n[strip:] for n in signature.backward_signature.gradients_to_parameters.values()]
    module_state = {k: v.clone() for k, v in module.state_dict().items()}  # the step's own initial copy
    data = [f"input_{k}" for k in range(len(module_args))] + [f"target_{k}" for k in range(len(loss_args))]
    clash = {LR, STEP, "loss"} & set(params + buffers)
    if clash:
        raise ValueError(f"training-step export: the module has state named {sorted(clash)}, which the step "
                         "graph uses for its own inputs and outputs")
    program = torch.onnx.export(joint, tuple(module_state[n] for n in params + buffers) + module_args + loss_args,
                                dynamo=True, custom_translation_table=translation_table(),
                                input_names=params + buffers + data, verbose=False)
    model = program.model_proto
    outputs = [o.name for o in model.graph.output]
    loss = outputs[len(mutated)]
    new_buffers = dict(zip(mutated, outputs[:len(mutated)], strict=True))
    grads = dict(zip(trained, outputs[len(mutated) + 1:], strict=True))
    slots = _append_update(model, params, buffers, new_buffers, loss, grads, optimizer, max_grad_norm)
    initial = {n: module_state[n].numpy() for n in params + buffers}
    initial.update({slot: np.zeros_like(initial[param]) for slot, param in slots.items()})  # as torch.optim starts
    return TrainingStep(opset.with_functions(model), _export_eval(module, params + buffers, module_args),
                        initial, params, trained, buffers, optimizer, max_grad_norm, data)


def _append_update(model: ModelProto, params: list[str], buffers: list[str], new_buffers: dict[str, str],
                   loss: str, grads: dict[str, str], optimizer: Optimizer,
                   max_grad_norm: float | None) -> dict[str, str]:
    """Rewire the joint graph's outputs into the step graph's (module docstring); returns the optimizer's
    state inputs, each with its parameter, in input order."""
    graph = model.graph
    scalars = [helper.make_tensor_value_info(LR, TensorProto.DOUBLE, []),
               helper.make_tensor_value_info(STEP, TensorProto.INT64, [])]
    types = {v.name: v.type for v in [*graph.input, *graph.output, *scalars]}  # outputs: the loss's own type
    elems = {n: t.tensor_type.elem_type for n, t in types.items()}
    g = Nodes("optim/", graph.node, graph.initializer)
    data_inputs = list(graph.input)[len(params) + len(buffers):]
    del graph.input[len(params) + len(buffers):]
    del graph.output[:]

    def output(source: str, name: str, like: str) -> None:
        graph.node.append(helper.make_node("Identity", [source], [name], name=name))
        graph.output.append(helper.make_value_info(name, types[like]))

    output(loss, "loss", like=loss)
    new_step = g.op("Add", STEP, g.const(1, TensorProto.INT64))
    step_double = g.op("Cast", new_step, to=TensorProto.DOUBLE)
    first = g.op("Equal", STEP, g.const(0, TensorProto.INT64), hint="first_step")
    trained = [p for p in params if p in grads]
    grad_values = [grads[p] for p in trained]
    if max_grad_norm is not None:
        grad_values = clip_by_global_norm(g, grad_values, [elems[p] for p in trained], max_grad_norm)
    slots: dict[str, str] = {}
    new_params = {}
    for p, grad in zip(trained, grad_values, strict=True):
        state = {s: slot_name(p, s) for s in optimizer.slots}
        slots.update(dict.fromkeys(state.values(), p))
        new_params[p], updated = optimizer.update(g, p, grad, state, elems[p], first, LR, step_double)
        for s, value in updated.items():
            new_params[slot_name(p, s)] = value
    for p in params:  # frozen parameters (no gradient) come back unchanged
        output(new_params.get(p, p), new_name(p), like=p)
    for b in buffers:
        # the exporter writes num_batches_tracked + 1 with a constant of shape [1], which makes it [1]
        value = g.op("Reshape", new_buffers[b], g.op("Shape", b)) if b in new_buffers else b
        output(value, new_name(b), like=b)
    for s, p in slots.items():
        types[s] = types[p]
        graph.input.append(helper.make_value_info(s, types[s]))
        output(new_params[s], new_name(s), like=s)
    graph.input.extend(scalars + data_inputs)
    output(new_step, new_name(STEP), like=STEP)
    return slots


def _export_eval(module, state: list[str], module_args: tuple) -> ModelProto:
    """The module's eval-mode forward with its state as graph inputs (before the module inputs)."""
    from torch.func import functional_call

    from .torch import export

    evaluated = copy.deepcopy(module).eval()

    class Eval(torch.nn.Module):
        def forward(self, *args):
            return functional_call(evaluated, dict(zip(state, args[:len(state)], strict=True)), args[len(state):])

    values = evaluated.state_dict()
    return export(Eval(), tuple(values[n] for n in state) + module_args, verbose=False,
                  input_names=state + [f"input_{k}" for k in range(len(module_args))])


def load_into_torch(path: str, module, optimizer=None) -> None:
    """Load a checkpoint that `TrainingSession.save` wrote into a PyTorch `module` (strict: every key) and,
    if given, into `optimizer`, a torch.optim optimizer over `module.parameters()` of the same kind, so that
    training can go on in PyTorch."""
    require("safetensors", "loading training checkpoints")
    from safetensors.torch import load_file

    tensors = load_file(path)
    module.load_state_dict({k: v for k, v in tensors.items() if k != STEP and "/" not in k}, strict=True)
    if optimizer is None:
        return
    state = {}
    for index, (name, _) in enumerate(module.named_parameters()):
        slots = {k.split("/", 1)[1]: v for k, v in tensors.items() if k.split("/", 1)[0] == name and "/" in k}
        if "exp_avg" in slots:  # Adam keeps its step count per parameter, as a float tensor
            slots["step"] = tensors[STEP].to(torch.float32)
        if slots:
            state[index] = slots
    saved = optimizer.state_dict()
    saved["state"] = state
    optimizer.load_state_dict(saved)
