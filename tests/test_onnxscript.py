"""Writing lossops nodes with onnxscript (no `from __future__ import annotations`: onnxscript reads the
annotations as objects)."""

import numpy as np
import onnxruntime
from onnxscript import FLOAT, script
from onnxscript import opset21 as op

from lossops import opset
from lossops.ort_ext import InferenceSession

lossops_op = opset.script_opset()


@script(default_opset=op)
def head(logits: FLOAT["N", 4], labels: FLOAT["N", 4]) -> FLOAT:  # noqa: F821
    return lossops_op.BinaryCrossEntropyWithLogits(op.Mul(logits, 2.0), labels, reduction="sum")


def test_onnxscript_model_runs_on_kernels_and_plain_onnxruntime():
    model = opset.make_model(head.to_model_proto().graph)
    x = np.linspace(-3, 3, 8, dtype=np.float32).reshape(2, 4)
    t = np.ones((2, 4), np.float32)
    expected = np.logaddexp(0, -2 * x.astype(np.float64)).sum()  # -log(sigmoid(2x)) summed, with y = 1
    got = InferenceSession(model.SerializeToString()).run(None, {"logits": x, "labels": t})[0]
    plain = onnxruntime.InferenceSession(model.SerializeToString()).run(None, {"logits": x, "labels": t})[0]
    np.testing.assert_allclose(got, expected, rtol=2e-6)
    np.testing.assert_allclose(plain, expected, rtol=2e-6)
