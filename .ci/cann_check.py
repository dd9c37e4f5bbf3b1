"""What can be shown of the Ascend path with the real onnxruntime-cann wheel and no NPU: the provider is
compiled in, asking for it without the toolkit gives lossops' clear error (not a silent CPU run), and the
graphs lossops lowers for CANN, and the models carrying lossops' functions, run on this build's CPU provider and
match the conformance goldens (a sample of them)."""

import sys

import numpy as np
import onnxruntime
from onnx import TensorProto

from lossops.cli import main
from lossops.conformance.runner import run
from lossops.demo import demo_model
from lossops.ort_ext import InferenceSession, cann

print(f"onnxruntime {onnxruntime.__version__}, numpy {np.__version__}, "
      f"providers {onnxruntime.get_available_providers()}")
assert cann.PROVIDER in onnxruntime.get_available_providers(), "the wheel should list CANNExecutionProvider"
main(["doctor"])
try:
    InferenceSession(demo_model(TensorProto.FLOAT).SerializeToString(), providers=[cann.PROVIDER])
    sys.exit("a CANN session without the toolkit must not be created")
except cann.CannUnavailable as e:
    print(f"CANN session without the toolkit: {type(e).__name__}: {e}")
# decomposition: the specialised functions (resolved by `overload`) on this older onnxruntime; a sample (each case
# form in one element type, the types in turn), as the tests run every case on the current onnxruntime
sys.exit(run(["cann-lowered", "decomposition", "cann"], failures_only=True, sample=True))
