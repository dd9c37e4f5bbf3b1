"""Runs exported training steps with onnxruntime: the state (parameters, buffers, optimizer state) stays in
OrtValues fed back each step; checkpoints are safetensors files; the eval-mode forward runs on the same state.

Checkpoints are safetensors rather than `torch.save` pickles: the format loads without torch and without
running code (a pickle can run any code on load), and PyTorch reads it with `safetensors.torch.load_file`.
Module state keeps the module's state_dict keys, so `module.load_state_dict` takes it once the optimizer
entries (`<param>/<slot>`, `step`) are left out; `lossops.converters.training.load_into_torch` does that and
also fills a torch.optim optimizer's state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime
from onnx import ModelProto, numpy_helper

from ..extras import require
from .session import InferenceSession, Mode

if TYPE_CHECKING:
    from ..converters.training import TrainingStep

FORMAT = "lossops.training-state/1"  # the checkpoint's metadata says which layout it has


class TrainingSession:
    """Steps a `TrainingStep` (from `lossops.converters.training.export_training_step`) in onnxruntime."""

    def __init__(self, step: TrainingStep, mode: Mode = "decomposition",
                 sess_options: onnxruntime.SessionOptions | None = None):
        self.definition = step
        self.mode, self.sess_options = mode, sess_options
        self.session = InferenceSession(step.model, sess_options, mode=mode)  # parsed once: a ModelProto throughout
        self._eval_session: InferenceSession | None = None
        self.state = {n: _ortvalue(v) for n, v in step.state.items()}
        self.steps = 0  # steps taken
        self.lr = step.optimizer.lr  # used by `step` when it is given none
        self.history: list[float] = []  # the loss of every step taken
        self._outputs = step.outputs

    def step(self, data: Sequence[np.ndarray] | Mapping[str, np.ndarray], lr: float | None = None) -> float:
        """One optimizer step on one batch (arrays in the order of `definition.data`, or by name); the loss."""
        names = self.definition.data
        if not isinstance(data, Mapping):
            if len(data) != len(names):
                raise ValueError(f"TrainingSession.step: expected {len(names)} arrays ({', '.join(names)}), "
                                 f"got {len(data)}")
            data = dict(zip(names, data, strict=True))
        feeds = dict(self.state)
        feeds[self.definition.lr_input] = _ortvalue(np.float64(self.lr if lr is None else lr))
        feeds[self.definition.step_input] = _ortvalue(np.int64(self.steps))
        feeds.update({k: _ortvalue(v) for k, v in data.items()})
        loss, *new, _ = self.session.run_with_ort_values(self._outputs, feeds)
        self.state = dict(zip(self.state, new, strict=True))
        self.steps += 1
        self.history.append(float(loss.numpy()))
        return self.history[-1]

    def fit(self, batches: Iterable[Sequence[np.ndarray]], steps: int | None = None,
            lr: float | Callable[[int], float] | None = None, progress: bool | None = None) -> list[float]:
        """Step over `batches` (at most `steps` of them); `lr` is a number or a function of the step index
        (a schedule). `progress`: a tqdm bar (True needs tqdm; None shows one when tqdm is installed and
        stderr is a terminal). Returns the losses of these steps."""
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
            losses.append(self.step(batch, rate))
            if hasattr(batches, "set_postfix"):
                batches.set_postfix(loss=f"{losses[-1]:.4g}", refresh=False)
        return losses

    def state_dict(self) -> dict[str, np.ndarray]:
        """The module's state (parameters and buffers) under its state_dict keys."""
        return {n: self.state[n].numpy() for n in self.definition.module_state}

    def parameters(self) -> dict[str, np.ndarray]:
        return {n: self.state[n].numpy() for n in self.definition.parameters}

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
        feeds.update({n: _ortvalue(a) for n, a in zip(names, inputs, strict=True)})
        return self._eval_session.run_with_ort_values(None, feeds)[0].numpy()

    def inference_model(self) -> ModelProto:
        """The eval-mode module with the current state as initializers: a model to deploy."""
        model = ModelProto()
        model.CopyFrom(self.definition.eval_model)
        state = set(self.definition.module_state)
        kept = [v for v in model.graph.input if v.name not in state]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model.graph.initializer.extend(numpy_helper.from_array(v, n) for n, v in self.state_dict().items())
        return model

    def save(self, path: str) -> None:
        """Write the whole state (module, optimizer, step count) and the loss history to a safetensors file."""
        require("safetensors", "saving training checkpoints")
        from safetensors.numpy import save_file

        d = self.definition
        tensors = {n: np.require(v.numpy(), requirements="C") for n, v in self.state.items()}  # keeps rank 0
        tensors[d.step_input] = np.array(self.steps, dtype=np.int64)
        metadata = {"format": FORMAT, "optimizer": json.dumps(d.settings), "lr": repr(self.lr),
                    "max_grad_norm": json.dumps(d.max_grad_norm), "history": json.dumps(self.history)}
        save_file(tensors, path, metadata=metadata)

    def load(self, path: str) -> None:
        """Restore a state `save` wrote; its entries must match this step's, by name, shape and type."""
        require("safetensors", "loading training checkpoints")
        from safetensors import safe_open

        with safe_open(path, framework="numpy") as f:
            metadata = f.metadata() or {}
            if metadata.get("format") != FORMAT:
                raise ValueError(f"{path}: not a lossops training checkpoint (format {metadata.get('format')!r}; "
                                 f"expected {FORMAT!r})")
            if _settings(json.loads(metadata["optimizer"])) != _settings(self.definition.settings):
                raise ValueError(f"{path}: saved with optimizer {metadata['optimizer']}; this step uses "
                                 f"{json.dumps(self.definition.settings)}")
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        step = self.definition.step_input
        expected = set(self.state) | {step}
        if set(tensors) != expected:
            raise ValueError(f"{path}: its entries do not match this training step's (missing "
                             f"{sorted(expected - set(tensors))}, unexpected {sorted(set(tensors) - expected)})")
        for name, value in self.state.items():
            saved = tensors[name]
            if saved.shape != tuple(value.shape()) or saved.dtype != value.numpy().dtype:
                raise ValueError(f"{path}: {name} is {saved.dtype}{list(saved.shape)}; this step has "
                                 f"{value.numpy().dtype}{value.shape()}")
        self.state = {n: _ortvalue(tensors[n]) for n in self.state}
        self.steps = int(tensors[step])
        self.lr = float(metadata["lr"])
        self.history = json.loads(metadata["history"])


def _settings(optimizer: dict) -> dict:
    """What must agree between a checkpoint's optimizer and a step's: all but the default learning rate."""
    return {k: v for k, v in json.loads(json.dumps(optimizer)).items() if k != "lr"}


def _ortvalue(array) -> onnxruntime.OrtValue:
    return onnxruntime.OrtValue.ortvalue_from_numpy(np.require(array, requirements="C"))
