"""The check `export_training_step` runs before it returns: the exported forward and backward, run in
onnxruntime on the example batch, against PyTorch autograd on the same batch.

The reference is autograd on a copy of the module in float64 (where the module runs in float64); the same
autograd in the module's own precision says how far that precision alone strays from it. An exported value
passes when it is no further from the float64 reference than a few times PyTorch's own rounding, or a small
fraction of the value's size (`FLOOR`). When a value fails, the exported graph is run again with every op's
output exposed, beside the traced graph in PyTorch, and the first op whose values part names the culprit.

Random ops cannot be compared draw for draw: a step whose graph draws random numbers (dropout) is checked as a
twin without dropout, which differs from the exported step only there: the exported graph with its dropout kept
off (training/twin.py), or where the graph has no such twin, the step traced again with every dropout
probability set to 0.
Needs torch.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from onnx import ModelProto

from ..extras import require

torch = require("torch", "training-step export", extra="train")
import torch.nn.functional as F  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

# PyTorch's own rounding error times SLACK, or FLOOR times the reference's largest magnitude, whichever is larger
SLACK = 16
FLOOR = {torch.float64: 1e-11, torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
# when localising: an op's exported output differs from PyTorch's (same precision, same inputs) beyond this
LOCATE = {torch.float64: 1e-9, torch.float32: 1e-3, torch.float16: 3e-2, torch.bfloat16: 1e-1}

HOW_TO_SKIP = ("export_training_step(..., verify=False) skips this check, which runs the exported step once on "
               "the example batch in onnxruntime and once in PyTorch, and changes nothing else")


class StepCheckError(ValueError):
    """The exported step computes something PyTorch does not (or it cannot be checked)."""


@dataclass
class StepCheck:
    """What the check compared: each output's error relative to its reference's size (loss, `grad <parameter>`,
    `buffer <name>`; `check` says how a value that is zero up to rounding is measured), in what precision the
    reference ran, and how long the comparison took."""

    errors: dict[str, float] = field(default_factory=dict)  # the worst over the batches checked
    reference: str = "float64"
    twin: bool = False  # checked on a twin without dropout (the step draws random numbers)
    seconds: float = 0.0
    batches: list[str] = field(default_factory=list)  # what was checked: the example, and a shorter one

    @property
    def worst(self) -> float:
        return max(self.errors.values(), default=0.0)


@dataclass
class Traced:
    """A traced joint graph and what the check needs to run it both ways."""

    joint: object  # torch.fx.GraphModule: (parameters, buffers, data) -> (new buffers, loss, gradients)
    model: ModelProto  # its export, with the lossops functions: same inputs and outputs
    arguments: tuple  # the real values of its inputs, in order
    outputs: list[str]  # "buffer <name>", "loss", "grad <name>": what each output is, in order
    dims: list[dict[int, str]] = field(default_factory=list)  # the data inputs' symbolic axes, named


def random_ops(joint) -> list[str]:
    """The ops of a traced graph that draw random numbers."""
    return sorted({str(n.target) for n in joint.graph.nodes
                   if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
                   and torch.Tag.nondeterministic_seeded in n.target.tags})


class NoDropout(torch.overrides.TorchFunctionMode):
    """While active, dropout of every kind (the functional forms, attention's dropout_p, recurrent layers'
    dropout between layers) is off: the twin the check traces and PyTorch's reference both run without it."""

    DROPOUTS = frozenset({F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout,
                          torch.dropout, torch.alpha_dropout, torch.feature_dropout, torch.feature_alpha_dropout})
    RECURRENT = frozenset({torch.lstm, torch.gru, torch.rnn_tanh, torch.rnn_relu})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self.DROPOUTS:
            return args[0] if args else kwargs["input"]
        if func is F.scaled_dot_product_attention:
            kwargs["dropout_p"] = 0.0
            if len(args) > 4:
                args = (*args[:4], 0.0, *args[5:])
        elif func in self.RECURRENT:  # (..., dropout, train, ...): the float argument is the dropout
            args = tuple(0.0 if type(a) is float else a for a in args)
        return func(*args, **kwargs)


class Float64(torch.overrides.TorchFunctionMode):
    """While active, a floating tensor of lower precision that reaches a torch function (a constant a loss
    captured, a tensor the forward makes) is used in float64: with the module and its inputs in float64,
    the whole step runs in float64."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        def up(value):
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64:
                return value.double()
            return value

        return func(*pytree.tree_map(up, tuple(args)), **pytree.tree_map(up, dict(kwargs or {})))


def check(traced: Traced, module, loss_fn: Callable, module_args: tuple, loss_args: tuple,
          mutated: list[str], trained: list[str], translation: dict, twin: bool = False) -> StepCheck:
    """Run `traced.model` in onnxruntime and compare every output with PyTorch autograd (module docstring), on the
    example batch and, where the step has symbolic axes, on the example cut one shorter along each of them.
    Raises StepCheckError naming the worst output and the first op whose values differ."""
    from ..ort_ext import InferenceSession

    started = time.perf_counter()
    session = InferenceSession(traced.model, _quiet_options(), mode="decomposition")
    report = StepCheck(twin=twin)
    batches = [("the example batch", traced.arguments, module_args, loss_args)]
    shorter = _shorter(traced, module_args, loss_args)
    if shorter is not None:
        batches.append(shorter)
    for k, (batch, arguments, margs, largs) in enumerate(batches):
        try:
            own, untrained = _autograd(module, loss_fn, margs, largs, trained, mutated, float64=False)
        except Exception:
            if k == 0:
                raise
            break  # PyTorch refuses the shorter batch (bags whose offsets point past it): nothing to compare
        if untrained:
            raise StepCheckError(
                f"export_training_step: PyTorch autograd gives {', '.join(untrained)} a gradient on {batch}, and the "
                f"exported step computes none for {'it' if len(untrained) == 1 else 'them'}: the step would leave "
                f"{'it' if len(untrained) == 1 else 'them'} untrained. {HOW_TO_SKIP}.")
        try:
            precise, _ = _autograd(module, loss_fn, margs, largs, trained, mutated, float64=True)
        except Exception as e:  # any failure means: no float64 reference for this module
            precise = own
            report.reference = (f"the module's precision (it does not run in float64: {type(e).__name__}: "
                                f"{first_line(e)})")
        got = session.run(None, _feeds(traced, arguments))
        failures = _compare(traced.outputs, got, own, precise, report)
        if failures:
            _, what, error, scale, allowed = max(failures)
            where = locate(traced, translation, arguments)
            raise StepCheckError(
                f"export_training_step: the exported step does not compute what PyTorch autograd computes on "
                f"{batch}{' (checked without dropout)' if twin else ''}: {what} differs by up to {error:.3g} "
                f"where PyTorch's values reach {scale:.3g} (PyTorch's own rounding allows {allowed:.3g}; "
                f"{len(failures)} of {len(traced.outputs)} outputs differ). {where} {HOW_TO_SKIP}.")
        report.batches.append(batch)
    report.seconds = time.perf_counter() - started
    return report


def _compare(outputs: list[str], got: list[np.ndarray], own: dict, precise: dict, report: StepCheck) -> list[tuple]:
    """Record each output's error in `report`; (how far past the allowance, output, error, scale, allowance) of
    each that fails."""
    failures = []
    for what, value in zip(outputs, got, strict=True):
        dtype = own[what].dtype
        want, rounding = precise[what].double().numpy(), (own[what].double() - precise[what].double()).numpy()
        scale = _largest(want)
        floor = FLOOR.get(dtype, 1e-5)
        allowed = max(SLACK * _largest(rounding), floor * scale, np.finfo(np.float64).tiny)
        error = _difference(value.astype(np.float64), want)
        # relative to the value's size; a value that is zero up to rounding is measured against the size at
        # which its rounding would be the floor (so a passing output reports at most the floor)
        relative = error / max(scale, allowed / floor) if error else 0.0
        report.errors[what] = max(report.errors.get(what, 0.0), relative)
        if error > allowed:
            failures.append((error / allowed, what, error, scale, allowed))
    return failures


def _shorter(traced: Traced, module_args: tuple, loss_args: tuple) -> tuple | None:
    """(label, graph arguments, module args, loss args) of the example cut one shorter along every symbolic
    axis longer than 2 (PyTorch treats sizes 0 and 1 apart), or None where there is none."""
    count = len(traced.arguments) - len(module_args) - len(loss_args)
    data = list(traced.arguments[count:])
    sizes = {}
    for k, axes in enumerate(traced.dims):
        for axis, name in axes.items():
            if data[k].shape[axis] > 2:
                sizes[name] = data[k].shape[axis] - 1
                data[k] = data[k].narrow(axis, 0, sizes[name])
    if not sizes:
        return None
    label = "the example batch cut to " + ", ".join(f"{name}={size}" for name, size in sizes.items())
    return (label, (*traced.arguments[:count], *data), tuple(data[:len(module_args)]),
            tuple(data[len(module_args):]))


def _feeds(traced: Traced, arguments: tuple) -> dict[str, np.ndarray]:
    names = [i.name for i in traced.model.graph.input]
    return {n: to_numpy(v) for n, v in zip(names, arguments, strict=True)}


def to_numpy(tensor) -> np.ndarray:
    """A tensor's values as numpy's (bfloat16 as ml_dtypes.bfloat16, which torch's .numpy() refuses)."""
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.detach().numpy()


def _largest(array: np.ndarray) -> float:
    """The largest |value| of the finite values (0 where there is none)."""
    largest = float(np.max(np.abs(array), initial=0.0))
    if math.isfinite(largest):  # every value finite: one pass (a step's gradients are millions of values)
        return largest
    finite = np.abs(array[np.isfinite(array)])
    return float(finite.max()) if finite.size else 0.0


def _difference(got: np.ndarray, want: np.ndarray) -> float:
    """The largest |got - want|, where NaN matches NaN and an infinity the same infinity; inf where one is
    NaN or infinite and the other not."""
    if got.shape != want.shape:
        return math.inf
    largest = float(np.max(np.abs(got - want), initial=0.0))
    if math.isfinite(largest):  # both finite everywhere: the plain difference, in one pass
        return largest
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    if not np.all(same | (np.isfinite(got) & np.isfinite(want))):
        return math.inf
    delta = np.where(same, 0.0, np.abs(got - want))
    return float(delta.max()) if delta.size else 0.0


def _autograd(module, loss_fn, module_args: tuple, loss_args: tuple, trained: list[str], mutated: list[str],
              float64: bool) -> tuple[dict, list[str]]:
    """({output: tensor} as PyTorch autograd computes it on copies of the module and the loss, without dropout;
    the parameters outside `trained` to which it gives a gradient)."""
    module, loss_fn = copy.deepcopy(module), copy.deepcopy(loss_fn)
    modes = contextlib.ExitStack()
    if float64:
        module = module.double()
        if isinstance(loss_fn, torch.nn.Module):
            loss_fn = loss_fn.double()
        module_args, loss_args = (tuple(a.double() if a.is_floating_point() else a for a in args)
                                  for args in (module_args, loss_args))
        modes.enter_context(Float64())
        modes.callback(torch.set_default_dtype, torch.get_default_dtype())
        torch.set_default_dtype(torch.float64)
    modes.enter_context(NoDropout())
    parameters = dict(module.named_parameters(remove_duplicate=False))
    with modes:
        loss = loss_fn(module.train()(*module_args), *loss_args)
        others = [n for n, p in module.named_parameters() if p.requires_grad and n not in trained]
        wanted = [parameters[n] for n in trained + others]
        grads = torch.autograd.grad(loss, wanted, allow_unused=True)
    untrained = [n for n, g in zip(others, grads[len(trained):], strict=True) if g is not None]
    values = {"loss": loss.detach()}
    state = dict(module.named_buffers())
    values.update({f"buffer {n}": state[n].detach() for n in mutated})
    values.update({f"grad {n}": torch.zeros_like(p) if g is None else g.detach()
                   for n, p, g in zip(trained, wanted, grads, strict=False)})
    return values, untrained


def dynamic_shapes(traced: Traced) -> tuple | None:
    """torch.onnx.export's dynamic_shapes for the traced graph's inputs (None where every axis is static)."""
    symbols = {name: torch.export.Dim(name) for axes in traced.dims for name in axes.values()}
    if not symbols:
        return None
    count = len(traced.arguments) - len(traced.dims)
    return (*[None] * count, *({a: symbols[n] for a, n in axes.items()} or None for axes in traced.dims))


def _quiet_options():
    """One-off sessions: ORT's threads must not spin on after the run, beside PyTorch's."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def first_line(error: BaseException) -> str:
    """An exception's message, its first line only (exporters' run to pages)."""
    return (str(error).strip().splitlines() or [""])[0]


def locate(traced: Traced, translation: dict, arguments: tuple) -> str:
    """A sentence naming the first op of the traced graph whose exported value differs from PyTorch's, both
    computed in the module's precision from the same inputs; or saying why none was found."""
    from ..ort_ext import InferenceSession

    joint = traced.joint
    graph = copy.deepcopy(joint.graph)
    probes = [n for n in graph.nodes if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)
              and n.target is not torch.ops.aten.detach.default]
    (output,) = [n for n in graph.nodes if n.op == "output"]
    output.args = (tuple(probes),)
    probe = torch.fx.GraphModule(joint, graph)
    try:
        with torch.no_grad():
            expected = probe(*arguments)
        program = torch.onnx.export(probe, traced.arguments, dynamo=True, custom_translation_table=translation,
                                    input_names=[i.name for i in traced.model.graph.input], verbose=False,
                                    optimize=False, dynamic_shapes=dynamic_shapes(traced))
        got = InferenceSession(program.model_proto, _quiet_options(), mode="decomposition").run(
            None, _feeds(traced, arguments))
    except Exception as e:  # the localisation is a diagnosis: its own failure is reported
        return f"(The op could not be located: {type(e).__name__}: {first_line(e)}.)"
    for node, value, want in zip(probes, got, expected, strict=True):
        want, value = to_numpy(want).astype(np.float64), value.astype(np.float64)
        error, scale = _difference(value, want), _largest(want)
        if error > LOCATE.get(node.meta["val"].dtype, 0.0) * scale:
            op = node.target if node.target.__module__ != "_operator" else node.args[0].target
            which = f", output {node.args[1]}" if node.target.__module__ == "_operator" else ""
            return (f"The first op whose exported value differs: {op}{which} (traced node '{node.name}'), by up to "
                    f"{error:.3g} where PyTorch's values reach {scale:.3g}.")
    return "(Every op matches PyTorch on its own inputs: the difference builds up from rounding.)"
