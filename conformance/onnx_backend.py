"""The suite through onnx's backend-test API: any `onnx.backend.base.Backend` (prepare/run) can be held to it
with onnx's own `Runner`, and lossops provides two such backends for onnxruntime.

    import unittest
    from lossops.conformance.onnx_backend import ConformanceRunner, OnnxRuntimeBackend
    unittest.TextTestRunner().run(ConformanceRunner(OnnxRuntimeBackend).test_suite)

Runner compares with numpy's assert_allclose and the rtol/atol each case's data.json gives.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime
from onnx import ModelProto
from onnx.backend.base import Backend, BackendRep
from onnx.backend.test.case.test_case import TestCase
from onnx.backend.test.runner import Runner

from .. import opset
from ..ort_ext import InferenceSession
from ..ort_ext.session import run_with_bfloat16
from .golden import DATA_DIR


class _SessionRep(BackendRep):
    def __init__(self, session: onnxruntime.InferenceSession):
        self.session = session

    def run(self, inputs, **kwargs):
        names = [i.name for i in self.session.get_inputs()]
        if isinstance(inputs, dict):
            feeds = inputs
        else:
            feeds = dict(zip(names, inputs if isinstance(inputs, (list, tuple)) else [inputs], strict=False))
        return run_with_bfloat16(self.session, None, {k: np.asarray(v) for k, v in feeds.items()})


class OnnxRuntimeBackend(Backend):
    """A plain onnxruntime: lossops nodes run as their standard-op functions (attached in prepare)."""

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", **kwargs) -> BackendRep:
        session = onnxruntime.InferenceSession(opset.with_functions(model).SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        return _SessionRep(session)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


class LossopsKernelsBackend(OnnxRuntimeBackend):
    """onnxruntime with the lossops kernels."""

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", **kwargs) -> BackendRep:
        return _SessionRep(InferenceSession(model.SerializeToString(), mode="kernels"))


class ConformanceRunner(Runner):
    """onnx's Runner, with the lossops suite in place of onnx's own cases."""

    def __init__(self, backend: type[Backend], parent_module: str | None = None, root: Path = DATA_DIR):
        with np.errstate(all="ignore"):  # Runner builds onnx's own cases first; their inf/NaN are intended
            super().__init__(backend, parent_module)
        self._test_items.clear()  # Runner collected onnx's own cases; keep its machinery, use ours
        for directory in sorted(root.iterdir()):
            if not (directory / "model.onnx").exists():
                continue
            meta = json.loads((directory / "data.json").read_text())
            case = TestCase(name=directory.name, model_name=directory.name, url=None, model_dir=str(directory),
                            model=None, data_sets=None, kind="lossops", rtol=meta["rtol"], atol=meta["atol"])
            self._add_model_test(case, "Lossops")
