"""Shortcuts the tests share: single-node models and running them on a backend."""

from __future__ import annotations

import numpy as np
from onnx import ModelProto

from lossops.conformance.backends import BACKENDS
from lossops.conformance.cases import node_model


def single_node_model(op: str, inputs: list[np.ndarray | None], dtype_name: str, attrs: dict,
                      symbolic: bool = False) -> tuple[ModelProto, dict[str, np.ndarray]]:
    return node_model(op, inputs, dtype_name, attrs, symbolic)


def run(backend: str, model: ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return BACKENDS[backend](model, [feeds[v.name] for v in model.graph.input])
