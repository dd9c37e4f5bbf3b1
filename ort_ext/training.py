"""Runs exported training-step graphs with onnxruntime: parameters and momentum buffers stay OrtValues and
are fed back each step (no conversion to numpy between steps)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import onnxruntime
from onnx import ModelProto

from .session import InferenceSession, Mode


class TrainingSession:
    """Steps a model whose inputs are (parameters, data, momentum buffers) and outputs (loss, new parameters,
    new buffers), as `lossops.converters.training.export_training_step` writes it."""

    def __init__(self, model: ModelProto, parameters: Mapping[str, np.ndarray], buffers: Iterable[str] = (),
                 mode: Mode = "decomposition"):
        self.session = InferenceSession(model.SerializeToString(), mode=mode)
        self.names = list(parameters)
        self.buffer_names = list(buffers)
        self.state = {n: onnxruntime.OrtValue.ortvalue_from_numpy(np.array(v)) for n, v in parameters.items()}
        self.state.update({b: onnxruntime.OrtValue.ortvalue_from_numpy(np.zeros_like(parameters[p]))
                           for b, p in zip(self.buffer_names, self.names, strict=False)})
        self.outputs = [o.name for o in self.session.get_outputs()]

    def step(self, data: Mapping[str, np.ndarray]) -> float:
        feeds = dict(self.state)
        feeds.update({k: onnxruntime.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v)) for k, v in data.items()})
        loss, *new = self.session.run_with_ort_values(self.outputs, feeds)
        for name, value in zip(self.names + self.buffer_names, new, strict=True):
            self.state[name] = value
        return float(loss.numpy())

    def parameters(self) -> dict[str, np.ndarray]:
        return {n: self.state[n].numpy() for n in self.names}
