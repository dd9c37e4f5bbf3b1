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
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from onnx import ModelProto, TensorProto, helper

from .. import opset
from ..extras import require
from ..opset.builder import Nodes
from .optimizers import LR, SGD, STEP, Adam, AdamW, Optimizer, clip_by_global_norm, describe, new_name, slot_name

torch = require("torch", "training-step export", extra="train")
from . import step_check  # noqa: E402
from .aten import translation_table  # noqa: E402
from .export_errors import StepExportError, explain  # noqa: E402
from .joint import trace  # noqa: E402
from .step_check import StepCheck, StepCheckError, Traced  # noqa: E402

__all__ = ["SGD", "Adam", "AdamW", "StepCheckError", "StepExportError", "TrainingStep", "export_training_step"]


@dataclass
class TrainingStep:
    """An exported step, its eval-mode forward and the initial state (see the module docstring)."""

    model: ModelProto
    state: dict[str, np.ndarray]  # initial values of every state input, in input order
    parameters: list[str]  # names of the parameters (trained or frozen), module order
    trained: list[str]  # the parameters that get gradients
    buffers: list[str]  # the module's buffers (BatchNorm statistics, captured tensors)
    optimizer: Optimizer
    max_grad_norm: float | None
    data: list[str] = field(default_factory=list)  # module inputs (input_k), then loss arguments (target_k)
    lr_input: str = LR  # the run-time scalars' input names
    step_input: str = STEP
    check: StepCheck | None = None  # what the export's check against PyTorch found (None: not checked)
    # the eval-mode forward, or how to export it: it is exported when first used
    eval_export: ModelProto | Callable[[], ModelProto] | None = field(default=None, repr=False)

    @property
    def eval_model(self) -> ModelProto:
        """(parameters, buffers, module inputs) -> module output, in eval mode (exported on first use)."""
        if callable(self.eval_export):
            self.eval_export = self.eval_export()
        return self.eval_export

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
                         max_grad_norm: float | None = None, verify: bool = True) -> TrainingStep:
    """Export one optimizer step of `loss_fn(module(*module_args), *loss_args)` with `example_inputs =
    (module_args, loss_args)`. `module` is in train mode during the step (BatchNorm updates its running
    statistics as PyTorch does); tensors the loss reads from the module (a registered `pos_weight` buffer)
    are state, not arguments; tensors it captures otherwise (a loss module's `weight`, a closure's tensor)
    are constants of the step (pass one as a loss argument to make it an input). `max_grad_norm` clips the
    gradients by their global norm first.

    Before it returns, the exported forward and backward run on the example batch in onnxruntime and are
    compared with PyTorch autograd on the same batch (in float64 where the module runs in float64);
    a disagreement raises `StepCheckError` naming the output and the first op that differs. `verify=False`
    skips that check (converters/step_check.py)."""
    optimizer = optimizer or SGD()
    module_args, loss_args = (tuple(a) for a in example_inputs)
    module_state = {k: v.clone() for k, v in module.state_dict().items()}  # the step's own initial copy
    traced, names = _trace(module, loss_fn, module_args, loss_args, module_state)
    params, buffers, mutated, trained = names
    clash = {LR, STEP, "loss"} & set(params + buffers)
    if clash:
        raise ValueError(f"training-step export: the module has state named {sorted(clash)}, which the step "
                         "graph uses for its own inputs and outputs")
    report = None
    if verify:
        report = _verify(traced, module, loss_fn, module_args, loss_args, module_state, names)
    model = ModelProto()
    model.CopyFrom(traced.model)
    outputs = [o.name for o in model.graph.output]
    loss = outputs[len(mutated)]
    new_buffers = dict(zip(mutated, outputs[:len(mutated)], strict=True))
    grads = dict(zip(trained, outputs[len(mutated) + 1:], strict=True))
    slots = _append_update(model, params, buffers, new_buffers, loss, grads, optimizer, max_grad_norm)
    initial = {n: _numpy(module_state[n]) for n in params + buffers}
    initial.update({slot: np.zeros_like(initial[param]) for slot, param in slots.items()})  # as torch.optim starts
    data = [f"input_{k}" for k in range(len(module_args))] + [f"target_{k}" for k in range(len(loss_args))]
    evaluated = functools.partial(_export_eval, copy.deepcopy(module).eval(), params + buffers, module_args)
    return TrainingStep(opset.with_functions(model), initial, params, trained, buffers, optimizer, max_grad_norm,
                        data, check=report, eval_export=evaluated)


def _trace(module, loss_fn, module_args: tuple, loss_args: tuple, module_state: dict,
           ) -> tuple[Traced, tuple[list[str], list[str], list[str], list[str]]]:
    """The joint forward/backward graph of the step, traced by aot_autograd (lossops custom ops for the losses
    that have them) and exported to ONNX, and the names of (parameters, buffers, mutated buffers, parameters
    with gradients). Tensors the step captures become constants of the graph."""
    from .torch_ops import LossopsLosses

    try:
        with LossopsLosses():
            joint = trace(module, loss_fn, module_args, loss_args)
        params, buffers, mutated, trained = joint.parameters, joint.buffers, joint.mutated, joint.trained
        data = [f"input_{k}" for k in range(len(module_args))] + [f"target_{k}" for k in range(len(loss_args))]
        arguments = tuple(module_state[n] for n in params + buffers) + module_args + loss_args
        program = torch.onnx.export(joint.graph, arguments, dynamo=True, custom_translation_table=translation_table(),
                                    input_names=params + buffers + data, verbose=False)
    except Exception as e:
        explained = explain(e)
        if explained is None:
            raise
        raise explained from None
    outputs = [f"buffer {n}" for n in mutated] + ["loss"] + [f"grad {n}" for n in trained]
    return Traced(joint.graph, program.model_proto, arguments, outputs), (params, buffers, mutated, trained)


def _verify(traced: Traced, module, loss_fn, module_args: tuple, loss_args: tuple, module_state: dict,
            names: tuple) -> StepCheck:
    """step_check.check on the traced step, or on its twin without dropout where it draws random numbers."""
    params, _, mutated, trained = names
    twin = bool(step_check.random_ops(traced.joint))
    if twin:
        with step_check.NoDropout():
            traced, _ = _trace(module, loss_fn, module_args, loss_args, module_state)
        left = step_check.random_ops(traced.joint)
        if left:
            raise step_check.StepCheckError(
                f"export_training_step: the step draws random numbers with {', '.join(left)}, which the check "
                f"against PyTorch cannot compare draw for draw (dropout it can: it checks a twin without "
                f"dropout). {step_check.HOW_TO_SKIP}.")
    return step_check.check(traced, module, loss_fn, module_args, loss_args, params, mutated, trained,
                            translation_table(), twin=twin)


def _numpy(tensor) -> np.ndarray:
    return step_check._numpy(tensor)


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


def _export_eval(evaluated, state: list[str], module_args: tuple) -> ModelProto:
    """The eval-mode forward of module `evaluated` (a copy) with its state as graph inputs (before the module
    inputs)."""
    from torch.func import functional_call

    from .torch import export

    class Eval(torch.nn.Module):
        def forward(self, *args):
            return functional_call(evaluated, dict(zip(state, args[:len(state)], strict=True)), args[len(state):])

    values = evaluated.state_dict()
    return export(Eval().eval(), tuple(values[n] for n in state) + module_args, verbose=False,
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
