"""What the lossops operators are: schemas, decompositions and helpers to build models that use them."""

if __name__ != "lossops.opset":  # the repository root is the package `lossops` (README, Design)
    raise ImportError(f"import lossops.opset, not {__name__}: this folder is a subpackage of lossops")

from .model import check, make_model, validate, with_functions
from .registry import OPS, expand, function, functions, get, make_node, node_attributes, opset_imports, register
from .versions import DOMAIN, IR_VERSION, ONNX_OPSET, VERSION

__all__ = [
    "DOMAIN", "IR_VERSION", "ONNX_OPSET", "OPS", "VERSION", "check", "expand", "function", "functions", "get",
    "make_model", "make_node", "node_attributes", "opset_imports", "register", "script_opset", "validate",
    "with_functions",
]


def script_opset():
    """The onnxscript Opset object for writing lossops nodes in @onnxscript.script functions."""
    from ..extras import require

    onnxscript = require("onnxscript", "writing lossops nodes with onnxscript")
    register()
    return onnxscript.values.Opset(DOMAIN, VERSION)
