"""What the lossops operators are: schemas, decompositions and helpers to build models that use them."""

if __name__ != "lossops.opset":  # the repository root is the package `lossops` (docs/design.md)
    raise ImportError(f"import lossops.opset, not {__name__}: this folder is a subpackage of lossops")

from .model import check, make_model, validate, with_functions
from .registry import (
    MIN_FUNCTION_OPSET,
    OPS,
    Specialisation,
    expand,
    function,
    functions,
    get,
    node_attributes,
    opset_imports,
    register,
    specialisations,
    specialise,
)
from .validation import make_node
from .versions import DOMAIN, IR_VERSION, ONNX_OPSET, VERSION

register()  # once, when the package is imported: onnx's checker and inference then know the lossops schemas

__all__ = [
    "DOMAIN", "IR_VERSION", "MIN_FUNCTION_OPSET", "ONNX_OPSET", "OPS", "VERSION", "Specialisation", "check", "expand",
    "function", "functions", "get", "make_model", "make_node", "node_attributes", "opset_imports", "register",
    "script_opset", "specialisations", "specialise", "validate", "with_functions",
]


def script_opset():
    """The onnxscript Opset object for writing lossops nodes in @onnxscript.script functions."""
    from ..extras import require

    onnxscript = require("onnxscript", "writing lossops nodes with onnxscript")
    return onnxscript.values.Opset(DOMAIN, VERSION)
