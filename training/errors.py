"""What to tell a user whose training step cannot be exported: the op that stops it, who stops it (PyTorch's
tracer or the ONNX exporter), and what lossops advises. Needs torch."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

# an op's name without its overload -> lossops' advice
ADVICE = {
    "aten._ctc_loss": "the CTC loss is a dynamic program over time whose intermediate shape depends on the "
                      "lengths; lossops' exportable form of F.ctc_loss takes float32 or float64 log-probabilities "
                      "of shape (T, N, C) or (T, C) and integer lengths: cast the log-probabilities to float32",
    "aten.rrelu_with_noise_functional": "RReLU draws a random slope per element in training, which has no ONNX form; "
                             "LeakyReLU with the mean slope ((lower + upper) / 2) is the deterministic equivalent",
}
DEFAULT = ("lossops has no translation of it either; write the module with an equivalent composition of other ops, "
           "and please report the op to lossops")


class StepExportError(RuntimeError):
    """A training step that cannot be exported; `.cause` is the tracer's or exporter's own exception."""

    def __init__(self, message: str, cause: BaseException):
        super().__init__(message)
        self.cause = cause


def explain(error: BaseException) -> StepExportError | None:
    """The one-paragraph error for a failed trace or export, or None where it is not one we recognise."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    chain = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    for e in chain:
        if isinstance(e, DynamicOutputShapeException):
            op = _name(str(e.func))
            return _error(f"PyTorch cannot trace the step into a graph: {op} needs an output whose shape depends "
                          f"on the values of its inputs{_where(e)}", op, chain[0])
        # a value read into Python (.item(), bool(tensor)), or a size that depends on one, then branched on
        if isinstance(e, DataDependentOutputException) or type(e).__name__ == "GuardOnDataDependentSymNode":
            return StepExportError(
                "export_training_step: PyTorch cannot trace the step into a graph: the code takes a Python "
                f"decision on a value computed from the data{_where(e)}. {DECISION}.", chain[0])
        match = re.search(r"No ONNX function found for <OpOverload\(op='([^']+)', overload='([^']+)'\)>", str(e))
        if match:
            op = match.group(1)
            return _error(f"the ONNX exporter has no translation for {op}.{match.group(2)}", op, chain[0])
        if isinstance(e, ValueError) and str(e).startswith(("convolution_backward:", "scaled_dot_product_attention:")):
            return _error(f"lossops' translation refuses it: {e}", None, chain[0])
    return None


DECISION = ("In your own code, compute both outcomes and choose with torch.where; in a library's (transformers), "
            "a setting that avoids the decision lets the step export: an argument the model takes already prepared "
            "(a 4-D attention mask), attn_implementation=\"eager\", or leaving out an input that changes "
            "nothing (an all-ones attention_mask)")


def _where(error: BaseException) -> str:
    """' at FILE:LINE in FUNCTION', the innermost frame of the traceback outside PyTorch: the user's or a library's
    code that took the decision; '' where every frame is PyTorch's."""
    import traceback

    package = Path(__file__).resolve().parents[1]
    inside = (str(Path(importlib.util.find_spec("torch").origin).parent),
              *(str(package / room) for room in ("training", "converters", "opset", "ort_ext")))
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(inside)]
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {frame.filename}:{frame.lineno} in {frame.name}"


def _name(op: str) -> str:
    """aten.x.default -> aten.x"""
    return op.rsplit(".", 1)[0] if op.count(".") >= 2 else op


def _error(what: str, op: str | None, cause: BaseException) -> StepExportError:
    advice = ADVICE.get(_name(op), DEFAULT) if op else "the message says what it takes"
    return StepExportError(f"export_training_step: {what}; {advice}.", cause)
