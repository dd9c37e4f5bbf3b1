"""The lossops conformance suite: graph-level cases with golden data in the ONNX node-test format
(`golden.py`), backends and a runner (`runner.py`, `lossops conformance`), and an adapter for onnx's
backend-test Runner (`onnx_backend.py`)."""

if __name__ != "lossops.conformance":  # the repository root is the package `lossops` (docs/design.md)
    raise ImportError(f"import lossops.conformance, not {__name__}: this folder is a subpackage of lossops")
