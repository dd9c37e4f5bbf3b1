"""Building single-node models for the tests and running them on each backend."""

from __future__ import annotations

import numpy as np
import onnxruntime
from onnx import ModelProto, TensorProto, helper

from lossops import opset
from lossops.ort_ext import InferenceSession
from lossops.ort_ext.session import run_with_bfloat16

ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
        "float64": TensorProto.DOUBLE}


def single_node_model(op: str, inputs: list[np.ndarray | None], dtype_name: str, attrs: dict,
                      symbolic: bool = False) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """A model with one lossops node; absent optional inputs are left out of the node."""
    formal = [i.name for i in opset.get(op).inputs]
    names = [name if a is not None else "" for name, a in zip(formal, inputs, strict=False)]
    while names and not names[-1]:
        names.pop()
    feeds = {n: a for n, a in zip(formal, inputs, strict=False) if a is not None}

    def dims(n: str, a: np.ndarray) -> list:
        return [f"{n}_{k}" for k in range(a.ndim)] if symbolic else list(a.shape)

    graph = helper.make_graph(
        [opset.make_node(op, names, ["output"], **attrs)], "case",
        [helper.make_tensor_value_info(n, ELEM[dtype_name], dims(n, a)) for n, a in feeds.items()],
        [helper.make_tensor_value_info("output", ELEM[dtype_name], None)],
    )
    model = helper.make_model(graph, opset_imports=opset.opset_imports(), ir_version=opset.IR_VERSION)
    return model, feeds


def run(backend: str, model: ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    if backend == "kernels":
        session = InferenceSession(model.SerializeToString(), mode="kernels")
    elif backend == "decomposition":  # a plain onnxruntime, no lossops at run time
        session = onnxruntime.InferenceSession(opset.with_functions(model).SerializeToString(),
                                               providers=["CPUExecutionProvider"])
    else:
        raise ValueError(backend)
    return run_with_bfloat16(session, None, feeds)[0]
