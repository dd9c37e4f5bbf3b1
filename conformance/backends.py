"""The backends the conformance runner can hold to the suite."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import onnxruntime
from onnx import ModelProto

from .. import opset
from ..ort_ext import InferenceSession, library_path
from ..ort_ext.session import run_with_bfloat16
from . import consumers

Runner = Callable[[ModelProto, list[np.ndarray]], np.ndarray]


@functools.cache
def _native_options() -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(library_path())
    return options


def native(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    """The native custom-op library in a plain onnxruntime: what C, C++, Java, C# and Triton hosts load."""
    from ..ort_ext.session import for_native_library

    session = onnxruntime.InferenceSession(for_native_library(model).SerializeToString(), _native_options(),
                                           providers=["CPUExecutionProvider"])
    return run_with_bfloat16(session, None, _feeds(model, inputs))[0]


def _feeds(model: ModelProto, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    return {v.name: a for v, a in zip(model.graph.input, inputs, strict=True)}


def kernels(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    """The lossops kernels inside onnxruntime (through onnxruntime-extensions)."""
    return InferenceSession(model.SerializeToString(), mode="kernels").run(None, _feeds(model, inputs))[0]


def decomposition(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    """A plain onnxruntime running the model's standard-op functions; lossops only attaches them."""
    session = onnxruntime.InferenceSession(opset.with_functions(model).SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return run_with_bfloat16(session, None, _feeds(model, inputs))[0]


def lowered(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    """`lossops.converters.lower` (no lossops domain left) on a plain onnxruntime."""
    from ..converters import lower

    session = onnxruntime.InferenceSession(lower(model)[0].SerializeToString(), providers=["CPUExecutionProvider"])
    return run_with_bfloat16(session, None, _feeds(model, inputs))[0]


def cann_lowered(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    """The graph lossops hands the CANN provider (`lower(for_provider="cann")`), run on onnxruntime's CPU
    provider: what can be checked of the Ascend path without an NPU."""
    from ..converters import lower

    session = onnxruntime.InferenceSession(lower(model, for_provider="cann")[0].SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return run_with_bfloat16(session, None, _feeds(model, inputs))[0]


def reference(model: ModelProto, inputs: list[np.ndarray]) -> np.ndarray:
    """onnx.reference.ReferenceEvaluator with the lossops reference operators."""
    from onnx.reference import ReferenceEvaluator

    from .reference_ops import REFERENCE_OPS

    with np.errstate(all="ignore"):  # IEEE inf/NaN are results here, not warnings
        return ReferenceEvaluator(model, new_ops=REFERENCE_OPS).run(None, _feeds(model, inputs))[0]


BACKENDS: dict[str, Runner] = {"kernels": kernels, "native": native, "decomposition": decomposition,
                               "lowered": lowered, "cann-lowered": cann_lowered, "reference": reference,
                               **{name: consumers.runner(name) for name in consumers.CONSUMERS}}


def unavailable(name: str) -> str | None:
    if name == "cann":
        from ..ort_ext.cann import why_unavailable

        return why_unavailable()
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; expected one of {[*BACKENDS, 'cann']}")
    if name == "kernels":  # never the decomposition under the kernels' name
        from ..ort_ext.host import why_no_kernels

        return why_no_kernels() or None
    if name == "native":
        from ..ort_ext.host import why_no_native_kernels

        return why_no_native_kernels() or None
    return consumers.unavailable(name) if name in consumers.CONSUMERS else None


def known_limit(name: str, case: str, dtype: str) -> str | None:
    """The declared reason backend `name` cannot run this case, if any (consumers.py)."""
    if name == "reference":
        limit = consumers.LOG_OF_SOFTMAX
        return limit.reason if limit.applies(case, dtype) else None
    return consumers.CONSUMERS[name].limit(case, dtype) if name in consumers.CONSUMERS else None
