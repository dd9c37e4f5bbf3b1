"""Export from PyTorch into graphs with lossops nodes: torch.onnx.export(dynamo=True) with a translation
table for the aten loss ops. Needs the optional dependency `lossops[torch]`."""

from __future__ import annotations

from typing import Any

from onnx import ModelProto

from .. import opset
from ..extras import require
from .aclnn import reduction_name

torch = require("torch", "exporting from PyTorch")


def translation_table() -> dict:
    """aten overload -> onnxscript function emitting the lossops node (the schemas must be registered:
    onnxscript looks them up; a @script function would be inlined and lose the node)."""
    lossops_op = opset.script_opset()

    def bce_with_logits(input, target, weight=None, pos_weight=None, reduction: int = 1):
        return lossops_op.BinaryCrossEntropyWithLogits(
            input, target, weight, pos_weight, reduction=reduction_name(reduction, "BinaryCrossEntropyWithLogits"))

    def bce_backward(grad_output, input, target, weight=None, reduction: int = 1):
        return lossops_op.BinaryCrossEntropyBackward(
            grad_output, input, target, weight, reduction=reduction_name(reduction, "BinaryCrossEntropyBackward"))

    aten = torch.ops.aten
    return {aten.binary_cross_entropy_with_logits.default: bce_with_logits,
            aten.binary_cross_entropy_backward.default: bce_backward}


def export(module, args: tuple, **kwargs: Any) -> ModelProto:
    """`torch.onnx.export(module, args, dynamo=True, **kwargs)` with the lossops translations (yours in
    `custom_translation_table` win); returns the model with the lossops functions and a loadable IR version.
    Dynamic dims declared through `dynamic_shapes` stay symbolic."""
    table = {**translation_table(), **kwargs.pop("custom_translation_table", {})}
    program = torch.onnx.export(module, args, dynamo=True, custom_translation_table=table, **kwargs)
    return opset.with_functions(program.model_proto)
