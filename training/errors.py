"""What to tell a user whose training step cannot be exported: the op that stops it, who stops it (PyTorch's
tracer or the ONNX exporter), and what lossops advises. Needs torch."""

from __future__ import annotations

import re

# an op's name without its overload -> lossops' advice
ADVICE = {
    "aten._ctc_loss": "the CTC loss is a dynamic program over time whose intermediate shape depends on the "
                      "lengths; lossops has no exportable form of it yet: compute it in PyTorch",
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
        if isinstance(e, DynamicOutputShapeException | DataDependentOutputException):
            op = _name(str(e.func))
            what = ("an output whose shape depends on the values of its inputs"
                    if isinstance(e, DynamicOutputShapeException) else "a Python decision on a tensor's value")
            return _error(f"PyTorch cannot trace the step into a graph: {op} needs {what}", op, chain[0])
        match = re.search(r"No ONNX function found for <OpOverload\(op='([^']+)', overload='([^']+)'\)>", str(e))
        if match:
            op = match.group(1)
            return _error(f"the ONNX exporter has no translation for {op}.{match.group(2)}", op, chain[0])
        if isinstance(e, ValueError) and str(e).startswith(("convolution_backward:", "scaled_dot_product_attention:")):
            return _error(f"lossops' translation refuses it: {e}", None, chain[0])
    return None


def _name(op: str) -> str:
    """aten.x.default -> aten.x"""
    return op.rsplit(".", 1)[0] if op.count(".") >= 2 else op


def _error(what: str, op: str | None, cause: BaseException) -> StepExportError:
    advice = ADVICE.get(_name(op), DEFAULT) if op else "the message says what it takes"
    return StepExportError(f"export_training_step: {what}; {advice}.", cause)
