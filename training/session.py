"""Runs exported training steps with onnxruntime: the state (parameters, buffers, optimizer state) stays in
OrtValues fed back each step; the eval-mode forward runs on the same state; checkpoints are checkpoint.py's."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime
from onnx import ModelProto, helper, numpy_helper

from ..extras import require
from ..ort_ext.session import InferenceSession, Mode, array, ortvalue
from . import checkpoint
from .optimizers import gradient_name, new_name

if TYPE_CHECKING:
    from .export import TrainingStep


class TrainingSession:
    """Steps a `TrainingStep` (from `lossops.training.export_training_step`) in onnxruntime."""

    def __init__(self, step: TrainingStep, mode: Mode = "decomposition",
                 sess_options: onnxruntime.SessionOptions | None = None, seed: int | None = None):
        """`seed`: every random op of the step (dropout) draws from a generator seeded from it, so that two
        sessions with the same seed take the same steps on the same batches; None draws a fresh seed."""
        self.definition = step
        self.mode, self.sess_options, self.seed = mode, sess_options, seed
        self.session = InferenceSession(_seeded(step.model, seed), sess_options, mode=mode)
        self._eval_session: InferenceSession | None = None
        self._accumulating: tuple[InferenceSession, InferenceSession] | None = None
        self.state = {n: ortvalue(v) for n, v in step.state.items()}
        self.steps = 0  # steps taken
        self.lr = step.optimizer.lr  # used by `step` when it is given none
        self.hyper = dict(step.hyper)  # the other hyper-parameters `step` uses when it is given none
        self.history: list[float] = []  # the loss of every step taken
        self._outputs = step.outputs

    def step(self, data: Sequence[np.ndarray] | Mapping[str, np.ndarray], lr: float | None = None,
             **hyper: float) -> float:
        """One optimizer step on one batch (arrays in the order of `definition.data`, or by name); the loss.
        `lr` and the optimizer's other hyper-parameters (`momentum`, `beta1`, `weight_decay`, ...: the keys of
        `definition.hyper`) apply to this step; `self.lr` and `self.hyper` where not given."""
        feeds = dict(self.state) | self._scalars(lr, hyper) | self._data(data, "step")
        loss, *new, _ = self.session.run_with_ort_values(self._outputs, feeds)
        self.state = dict(zip(self.state, new, strict=True))
        return self._stepped(float(array(loss)))

    def step_accumulated(self, batches: Sequence[Sequence[np.ndarray] | Mapping[str, np.ndarray]],
                         lr: float | None = None, **hyper: float) -> float:
        """One optimizer step on the mean gradient of several micro-batches, as PyTorch accumulates
        `(loss / len(batches)).backward()` over them (buffers such as BatchNorm's statistics are updated by each
        micro-batch, in order); the mean of their losses."""
        if not batches:
            raise ValueError("TrainingSession.step_accumulated: no micro-batches")
        d = self.definition
        if self._accumulating is None:
            self._accumulating = (InferenceSession(_seeded(d.gradient_model, self.seed), self.sess_options,
                                                   mode=self.mode),
                                  InferenceSession(d.update_model, self.sess_options, mode=self.mode))
        gradients, update = self._accumulating
        share = 1.0 / len(batches)
        total, losses = None, []
        for batch in batches:
            feeds = {n: self.state[n] for n in d.module_state} | self._data(batch, "step_accumulated")
            outputs = gradients.run_with_ort_values(None, feeds)
            self.state.update(zip(d.mutated, outputs[:len(d.mutated)], strict=True))
            losses.append(float(array(outputs[len(d.mutated)])))
            grads = [array(g) for g in outputs[len(d.mutated) + 1:]]
            scaled = [g * g.dtype.type(share) for g in grads]  # in the parameter's type, as PyTorch's .grad
            total = scaled if total is None else [t + g for t, g in zip(total, scaled, strict=True)]
        names = [i.name for i in d.update_model.graph.input]
        feeds = {n: self.state[n] for n in names if n in self.state} | self._scalars(lr, hyper)
        feeds |= {gradient_name(p): ortvalue(g) for p, g in zip(d.trained, total, strict=True)}
        outputs = [o.name for o in d.update_model.graph.output]
        for name, value in zip(outputs, update.run_with_ort_values(outputs, feeds), strict=True):
            if name != new_name(d.step_input):
                self.state[name.removesuffix(".new")] = value
        return self._stepped(float(np.mean(losses)))

    def _data(self, data, caller: str) -> dict[str, onnxruntime.OrtValue]:
        names = self.definition.data
        if not isinstance(data, Mapping):
            if len(data) != len(names):
                raise ValueError(f"TrainingSession.{caller}: expected {len(names)} arrays ({', '.join(names)}), "
                                 f"got {len(data)}")
            data = dict(zip(names, data, strict=True))
        return {k: ortvalue(v) for k, v in data.items()}

    def _scalars(self, lr: float | None, hyper: dict[str, float]) -> dict[str, onnxruntime.OrtValue]:
        unknown = set(hyper) - set(self.hyper)
        if unknown:
            raise ValueError(f"TrainingSession: {sorted(unknown)} are not hyper-parameters of this step's "
                             f"{type(self.definition.optimizer).__name__}; it takes lr and {sorted(self.hyper)} "
                             "(a hyper-parameter that was 0 at export is not in the graph)")
        d = self.definition
        values = {d.lr_input: self.lr if lr is None else lr, **self.hyper, **hyper}
        scalars = {n: ortvalue(np.float64(v)) for n, v in values.items()}
        return scalars | {d.step_input: ortvalue(np.int64(self.steps))}

    def _stepped(self, loss: float) -> float:
        self.steps += 1
        self.history.append(loss)
        return loss

    def fit(self, batches: Iterable[Sequence[np.ndarray]], steps: int | None = None,
            lr: float | Callable[[int], float] | None = None, progress: bool | None = None,
            **hyper: float | Callable[[int], float]) -> list[float]:
        """Step over `batches` (at most `steps` of them); `lr` and the other hyper-parameters are each a number or
        a function of the step index (a schedule: OneCycleLR's momentum is `momentum=` or `beta1=`). `progress`:
        a tqdm bar (True needs tqdm; None shows one when tqdm is installed and stderr is a terminal). Returns
        the losses of these steps."""
        import itertools
        import sys

        from ..extras import available

        batches = itertools.islice(batches, steps)
        if progress or (progress is None and available("tqdm") and sys.stderr.isatty()):
            tqdm = require("tqdm", "the training progress bar")
            batches = tqdm.tqdm(batches, total=steps, unit="step")
        losses = []
        for batch in batches:
            rate = lr(self.steps) if callable(lr) else lr
            losses.append(self.step(batch, rate, **{k: v(self.steps) if callable(v) else v for k, v in hyper.items()}))
            if hasattr(batches, "set_postfix"):
                batches.set_postfix(loss=f"{losses[-1]:.4g}", refresh=False)
        return losses

    def state_dict(self) -> dict[str, np.ndarray]:
        """The module's state (parameters and buffers) under its state_dict keys; a tied parameter under each of
        its names (one array), and no buffer registered with persistent=False, as PyTorch's state_dict has it."""
        d = self.definition
        own = {n: array(self.state[n]) for n in d.module_state if n not in d.not_saved}
        return own | {alias: own[name] for alias, name in d.aliases.items()}

    def parameters(self) -> dict[str, np.ndarray]:
        return {n: array(self.state[n]) for n in self.definition.parameters}

    def evaluate(self, *inputs: np.ndarray) -> np.ndarray:
        """The module's eval-mode output on `inputs` with the current state (BatchNorm's running statistics)."""
        if self._eval_session is None:
            self._eval_session = InferenceSession(self.definition.eval_model,
                                                  self.sess_options, mode=self.mode)
        state = self.definition.module_state
        feeds = {n: self.state[n] for n in state}
        names = [i.name for i in self.definition.eval_model.graph.input if i.name not in state]
        if len(inputs) != len(names):
            raise ValueError(f"TrainingSession.evaluate: expected {len(names)} arrays ({', '.join(names)}), "
                             f"got {len(inputs)}")
        feeds.update({n: ortvalue(a) for n, a in zip(names, inputs, strict=True)})
        return array(self._eval_session.run_with_ort_values(None, feeds)[0])

    def inference_model(self) -> ModelProto:
        """The eval-mode module with the current state as initializers: a model to deploy."""
        model = ModelProto()
        model.CopyFrom(self.definition.eval_model)
        state = set(self.definition.module_state)
        kept = [v for v in model.graph.input if v.name not in state]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model.graph.initializer.extend(numpy_helper.from_array(array(self.state[n]), n)
                                       for n in self.definition.module_state)
        return model

    def save(self, path: str) -> None:
        """Write the whole state (module, optimizer, step count) and the loss history to a safetensors file
        (training/checkpoint.py)."""
        checkpoint.save(self, path)

    def load(self, path: str) -> None:
        """Restore a state `save` wrote; its entries must match this step's, by name, shape and type."""
        checkpoint.load(self, path)


# ONNX's random ops and the type of their `seed` attribute
_RANDOM = {"Dropout": int, "RandomNormal": float, "RandomNormalLike": float, "RandomUniform": float,
           "RandomUniformLike": float, "Bernoulli": float, "Multinomial": float}


def _seeded(model: ModelProto, seed: int | None) -> ModelProto:
    """`model` with each random op's `seed` attribute set from `seed` (one per op, in graph order), or `model`
    itself when `seed` is None."""
    if seed is None or not any(n.op_type in _RANDOM for n in model.graph.node):
        return model
    out = ModelProto()
    out.CopyFrom(model)
    for k, node in enumerate(n for n in out.graph.node if n.op_type in _RANDOM):
        kept = [a for a in node.attribute if a.name != "seed"]
        del node.attribute[:]
        node.attribute.extend([*kept, helper.make_attribute("seed", _RANDOM[node.op_type](seed + k))])
    return out
