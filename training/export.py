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
import dataclasses
import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from onnx import ModelProto, TensorProto, helper

from .. import opset
from ..extras import require
from ..opset.builder import Nodes
from .optimizers import (
    LR,
    SGD,
    STEP,
    Optimizer,
    clip_by_global_norm,
    describe,
    gradient_name,
    new_name,
    slot_name,
)

torch = require("torch", "training-step export", extra="train")
require("onnxscript", "training-step export", extra="train")  # torch.onnx's exporter, lossops' translations
from ..converters.aten import decompositions, translation_table  # noqa: E402
from ..converters.torch import simplify  # noqa: E402
from . import bfloat16, check  # noqa: E402
from .check import StepCheck, Traced  # noqa: E402
from .errors import explain  # noqa: E402
from .joint import Joint, exported_program, trace  # noqa: E402
from .twin import without_dropout  # noqa: E402

__all__ = ["TrainingStep", "export_training_step"]


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
    dims: dict[str, dict[int, str]] = field(default_factory=dict)  # each data input's symbolic axes, named
    aliases: dict[str, str] = field(default_factory=dict)  # a tied parameter's other names -> its state entry
    # gradient accumulation: (parameters, buffers, data) -> (new mutated buffers, loss, gradients), and the
    # optimizer's step alone (`_update_model`)
    gradient_model: ModelProto | None = field(default=None, repr=False)
    update_model: ModelProto | None = field(default=None, repr=False)
    mutated: list[str] = field(default_factory=list)  # the buffers a step updates, in the gradient model's order
    # buffers registered with persistent=False: state the step reads, left out of state_dict and checkpoints as
    # PyTorch leaves them out
    not_saved: list[str] = field(default_factory=list)
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
    def hyper(self) -> dict[str, float]:
        """The optimizer's run-time hyper-parameters besides the learning rate, with their values at export."""
        return self.optimizer.hyper

    @property
    def settings(self) -> dict:
        """The optimizer and its settings as JSON-able data (kept with a checkpoint)."""
        return describe(self.optimizer)

    @property
    def module_state(self) -> list[str]:
        return self.parameters + self.buffers


def export_training_step(module, loss_fn, example_inputs: tuple, optimizer: Optimizer | None = None,
                         max_grad_norm: float | None = None, verify: bool = True,
                         dynamic_shapes: str | tuple | None = "batch") -> TrainingStep:
    """Export one optimizer step of `loss_fn(module(*module_args), *loss_args)` with `example_inputs =
    (module_args, loss_args)`. `module` is in train mode during the step (BatchNorm updates its running
    statistics as PyTorch does); tensors the loss reads from the module (a registered `pos_weight` buffer)
    are state, not arguments; tensors it captures otherwise (a loss module's `weight`, a closure's tensor)
    are constants of the step (pass one as a loss argument to make it an input). `max_grad_norm` clips the
    gradients by their global norm first.

    Before it returns, the exported forward and backward run on the example batch in onnxruntime and are
    compared with PyTorch autograd on the same batch (in float64 where the module runs in float64);
    a disagreement raises `StepCheckError` naming the output and the first op that differs. `verify=False`
    skips that check (training/check.py).

    `dynamic_shapes`: "batch" (the default) makes the first axis of every data input symbolic, so that the step,
    `evaluate` and the inference model take batches of any size (axes PyTorch finds equal share the name
    `batch`); `((module_arg_specs), (loss_arg_specs))` names axes as torch.export does, one `{axis: name}` (or
    None) per argument, e.g. `(({0: "batch", 1: "seq"},), ({0: "batch"},))`; None exports the example's shapes.
    An axis the module's code fixes to its size (`x.view(32, -1)`) stays fixed, with a warning."""
    optimizer = optimizer or SGD()
    module_args, loss_args = (tuple(a) for a in example_inputs)
    module_state = _state_of(module)  # the step's own initial copy
    asked = _asked_dims(dynamic_shapes, module_args, loss_args)
    traced, joint = _trace(module, loss_fn, module_args, loss_args, module_state, asked)
    params, buffers, mutated, trained = joint.parameters, joint.buffers, joint.mutated, joint.trained
    clash = {LR, STEP, "loss", *optimizer.hyper} & set(params + buffers)
    if clash:
        raise ValueError(f"training-step export: the module has state named {sorted(clash)}, which the step "
                         "graph uses for its own inputs and outputs")
    report = None
    if verify:
        report = _verify(traced, joint, module, loss_fn, module_args, loss_args, module_state)
    model = ModelProto()
    model.CopyFrom(traced.model)
    outputs = [o.name for o in model.graph.output]
    loss = outputs[len(mutated)]
    new_buffers = dict(zip(mutated, outputs[:len(mutated)], strict=True))
    grads = dict(zip(trained, outputs[len(mutated) + 1:], strict=True))
    slots = _append_update(model, params, buffers, new_buffers, loss, grads, optimizer, max_grad_norm)
    model = bfloat16.in_float32(model)  # the optimizer's nodes (standard ops: the functions the model carries hold)
    update = bfloat16.in_float32(_update_model(model, trained, slots, optimizer, max_grad_norm))
    initial = {n: check.to_numpy(module_state[n]) for n in params + buffers}
    initial.update({slot: np.zeros_like(initial[param]) for slot, param in slots.items()})  # as torch.optim starts
    data = _data_names(module_args, loss_args)
    evaluated = functools.partial(_export_eval, copy.deepcopy(module).eval(), params + buffers, module_args,
                                  traced.dims[:len(module_args)])
    saved = module.state_dict().keys()
    return TrainingStep(model, initial, params, trained, buffers, optimizer, max_grad_norm, data, check=report,
                        eval_export=evaluated, dims=dict(zip(data, traced.dims, strict=True)), aliases=joint.aliases,
                        gradient_model=traced.model, update_model=update, mutated=mutated,
                        not_saved=[b for b in buffers if b not in saved])


def _state_of(module) -> dict:
    """A copy of the module's state by name: its state_dict, and the buffers registered with persistent=False
    (transformers' `position_ids`), which the forward reads though state_dict leaves them out."""
    state = {k: v.clone() for k, v in module.state_dict().items()}
    state.update({k: v.detach().clone() for k, v in module.named_buffers() if k not in state})
    return state


def _data_names(module_args: tuple, loss_args: tuple) -> list[str]:
    return [f"input_{k}" for k in range(len(module_args))] + [f"target_{k}" for k in range(len(loss_args))]


def _asked_dims(dynamic_shapes, module_args: tuple, loss_args: tuple) -> list[dict[int, str]]:
    """`export_training_step`'s `dynamic_shapes` as one {axis: name} per data input."""
    data, names = module_args + loss_args, _data_names(module_args, loss_args)
    if dynamic_shapes is None:
        return [{} for _ in data]
    if dynamic_shapes == "batch":  # the first input's first axis is `batch`; others are named for their input
        return [{0: "batch" if k == 0 else f"{names[k]}_dim0"} if t.dim() else {} for k, t in enumerate(data)]
    try:
        specs = [*dynamic_shapes[0], *dynamic_shapes[1]]
        if len(specs) != len(data):
            raise ValueError
        asked = [{int(a): str(n) for a, n in (spec or {}).items()} for spec in specs]
    except (TypeError, ValueError, IndexError, AttributeError):
        raise ValueError("export_training_step: dynamic_shapes is 'batch', None, or ((module_arg_specs), "
                         "(loss_arg_specs)) with one {axis: name} or None per argument "
                         f"({len(module_args)} and {len(loss_args)} here); got {dynamic_shapes!r}") from None
    for spec, tensor, name in zip(asked, data, names, strict=True):
        if any(not 0 <= a < tensor.dim() for a in spec):
            raise ValueError(f"export_training_step: dynamic_shapes names axes {sorted(spec)} of {name}, which has "
                             f"{tensor.dim()}")
    return asked


def _trace(module, loss_fn, module_args: tuple, loss_args: tuple, module_state: dict,
           dims: list[dict[int, str]] | None = None) -> tuple[Traced, Joint]:
    """The joint forward/backward graph of the step, traced by aot_autograd (lossops custom ops for the losses
    that have them) and exported to ONNX, and what the trace found (names, dims). Tensors the step captures
    become constants of the graph; the axes `dims` names stay symbolic where the module allows
    (training/joint.py). A step that cannot be exported with symbolic axes is exported with the example's
    shapes, with a warning that says why."""
    from ..converters.torch_ops import LossopsLosses

    data = _data_names(module_args, loss_args)
    try:
        with LossopsLosses():
            joint = trace(module, loss_fn, module_args, loss_args, dims, decompositions())
        for k, axis, size in joint.fixed:
            why = ("PyTorch takes an axis of size 0 or 1 as fixed: export with a larger example" if size < 2 else
                   "the module's code depends on that size")
            warnings.warn(f"export_training_step: axis {axis} of {data[k]} stays {size}: {why}", stacklevel=4)
        params, buffers = joint.parameters, joint.buffers
        arguments = tuple(module_state[n] for n in params + buffers) + module_args + loss_args
        outputs = [f"buffer {n}" for n in joint.mutated] + ["loss"] + [f"grad {n}" for n in joint.trained]
        traced = Traced(joint.graph, None, arguments, outputs, joint.dims)
        program = _to_onnx(joint, arguments, params + buffers + data, check.dynamic_shapes(traced))
        simplify(program.model)  # the exporter's own optimize is quadratic in a step's size
    except Exception as e:
        if dims and any(dims):
            try:
                static = _trace(module, loss_fn, module_args, loss_args, module_state, None)
            except Exception:
                pass
            else:
                warnings.warn(f"export_training_step: the step takes the example's shapes only; with symbolic axes "
                              f"the export failed: {type(e).__name__}: {check.first_line(e)}", stacklevel=3)
                return static
        explained = explain(e)
        if explained is None:
            raise
        raise explained from None
    # the functions are attached once, here: the check's session, the step and the gradient model carry them
    traced.model = opset.with_functions(bfloat16.in_float32(program.model_proto))
    return traced, joint


def _to_onnx(joint: Joint, arguments: tuple, names: list[str], dynamic_shapes: tuple | None):
    """torch.onnx.export of the joint graph (its own optimize off: converters.torch.simplify cleans it), handed
    over as an ExportedProgram so that the exporter does not capture it again; where that fails, the graph itself,
    captured by the exporter, whose failure is the one explained."""
    options = dict(dynamo=True, custom_translation_table=translation_table(), input_names=names, verbose=False,
                   optimize=False)
    try:
        return torch.onnx.export(exported_program(joint.graph, joint.decomposed), **options)
    except Exception:  # a graph torch.export's verifier refuses, or one only its own capture makes exportable
        return torch.onnx.export(joint.graph, arguments, dynamic_shapes=dynamic_shapes, **options)


def _verify(traced: Traced, joint: Joint, module, loss_fn, module_args: tuple, loss_args: tuple,
            module_state: dict) -> StepCheck:
    """check.check on the traced step, or on its twin without dropout where it draws random numbers."""
    twin = bool(check.random_ops(traced.joint))
    if twin:
        model = without_dropout(traced.model)
        if model is not None:
            try:
                return check.check(dataclasses.replace(traced, model=model), module, loss_fn, module_args, loss_args,
                                   joint.mutated, joint.trained, translation_table(), twin=True)
            except check.StepCheckError:
                pass  # a twin traced without dropout decides, and can name the op where the step parts from PyTorch
        with check.NoDropout():
            traced, _ = _trace(module, loss_fn, module_args, loss_args, module_state, traced.dims)
        left = check.random_ops(traced.joint)
        if left:
            raise check.StepCheckError(
                f"export_training_step: the step draws random numbers with {', '.join(left)}, which the check "
                f"against PyTorch cannot compare draw for draw (dropout it can: it checks a twin without "
                f"dropout). {check.HOW_TO_SKIP}.")
    return check.check(traced, module, loss_fn, module_args, loss_args, joint.mutated, joint.trained,
                            translation_table(), twin=twin)


def _append_update(model: ModelProto, params: list[str], buffers: list[str], new_buffers: dict[str, str],
                   loss: str, grads: dict[str, str], optimizer: Optimizer,
                   max_grad_norm: float | None) -> dict[str, str]:
    """Rewire the joint graph's outputs into the step graph's (module docstring); returns the optimizer's
    state inputs, each with its parameter, in input order."""
    graph = model.graph
    types = {v.name: v.type for v in [*graph.input, *graph.output, *_scalars(optimizer)]}  # the loss's own type
    g = Nodes("optim/", graph.node, graph.initializer)
    data_inputs = list(graph.input)[len(params) + len(buffers):]
    del graph.input[len(params) + len(buffers):]
    del graph.output[:]

    def output(source: str, name: str, like: str) -> None:
        graph.node.append(helper.make_node("Identity", [source], [name], name=name))
        graph.output.append(helper.make_value_info(name, types[like]))

    output(loss, "loss", like=loss)
    new_params, slots, new_step = _optimizer_nodes(g, grads, types, optimizer, max_grad_norm)
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
    graph.input.extend(_scalars(optimizer) + data_inputs)
    output(new_step, new_name(STEP), like=STEP)
    return slots


def _scalars(optimizer: Optimizer) -> list:
    """The step graph's run-time scalars: the learning rate, the steps taken, the other hyper-parameters."""
    return ([helper.make_tensor_value_info(LR, TensorProto.DOUBLE, []),
             helper.make_tensor_value_info(STEP, TensorProto.INT64, [])]
            + [helper.make_tensor_value_info(h, TensorProto.DOUBLE, []) for h in optimizer.hyper])


def _optimizer_nodes(g: Nodes, grads: dict[str, str], types: dict, optimizer: Optimizer,
                     max_grad_norm: float | None) -> tuple[dict[str, str], dict[str, str], str]:
    """The optimizer's step for parameters `grads` (name -> its gradient's value), written with `g`: (new value
    of each parameter and optimizer state entry, the state entries with their parameter, the new step count)."""
    elems = {n: t.tensor_type.elem_type for n, t in types.items()}
    new_step = g.op("Add", STEP, g.const(1, TensorProto.INT64))
    step_double = g.op("Cast", new_step, to=TensorProto.DOUBLE)
    first = g.op("Equal", STEP, g.const(0, TensorProto.INT64), hint="first_step")
    trained = list(grads)
    grad_values = [grads[p] for p in trained]
    if max_grad_norm is not None:
        grad_values = clip_by_global_norm(g, grad_values, [elems[p] for p in trained], max_grad_norm)
    hyper = {h: h for h in optimizer.hyper}  # each is the step graph's input of its name
    slots: dict[str, str] = {}
    new_values = {}
    for p, grad in zip(trained, grad_values, strict=True):
        state = {s: slot_name(p, s) for s in optimizer.slots}
        slots.update(dict.fromkeys(state.values(), p))
        new_values[p], updated = optimizer.update(g, p, grad, state, elems[p], first, LR, step_double, hyper)
        for s, value in updated.items():
            new_values[slot_name(p, s)] = value
    return new_values, slots, new_step


def _update_model(step_model: ModelProto, trained: list[str], slots: dict[str, str], optimizer: Optimizer,
                  max_grad_norm: float | None) -> ModelProto:
    """The optimizer's step alone, for gradient accumulation: (trained parameters, their state, the run-time
    scalars, gradients `<param>.grad`) -> (new parameters, new state, new step count), outputs named as the
    step graph's."""
    types = {v.name: v.type for v in [*step_model.graph.input, *step_model.graph.output]}
    graph = helper.make_graph([], "lossops_optimizer_step", [], [])
    g = Nodes("optim/", graph.node, graph.initializer)
    grads = {p: gradient_name(p) for p in trained}
    for p in trained:
        types[gradient_name(p)] = types[p]
    new_values, _, new_step = _optimizer_nodes(g, grads, types, optimizer, max_grad_norm)
    inputs = [*trained, *slots, *(n for n in types if n in {LR, STEP, *optimizer.hyper}), *grads.values()]
    graph.input.extend(helper.make_value_info(n, types[n]) for n in inputs)
    for name in [*trained, *slots]:
        graph.node.append(helper.make_node("Identity", [new_values[name]], [new_name(name)]))
        graph.output.append(helper.make_value_info(new_name(name), types[name]))
    graph.node.append(helper.make_node("Identity", [new_step], [new_name(STEP)]))
    graph.output.append(helper.make_value_info(new_name(STEP), types[new_name(STEP)]))
    return opset.make_model(graph, opset_imports=list(step_model.opset_import))


def _export_eval(evaluated, state: list[str], module_args: tuple, dims: list[dict[int, str]]) -> ModelProto:
    """The eval-mode forward of module `evaluated` (a copy) with its state as graph inputs (before the module
    inputs), the axes `dims` names symbolic."""
    from torch.func import functional_call

    from ..converters.torch import export

    class Eval(torch.nn.Module):
        def forward(self, *args):
            return functional_call(evaluated, dict(zip(state, args[:len(state)], strict=True)), args[len(state):])

    values = _state_of(evaluated)
    symbols = {name: torch.export.Dim(name) for d in dims for name in d.values()}
    shapes = [None] * len(state) + [{a: symbols[n] for a, n in d.items()} or None for d in dims]
    return bfloat16.in_float32(export(Eval().eval(), tuple(values[n] for n in state) + module_args, verbose=False,
                                      input_names=state + [f"input_{k}" for k in range(len(module_args))],
                                      dynamic_shapes=(tuple(shapes),) if symbols else None))
