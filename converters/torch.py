"""Export from PyTorch into graphs with lossops nodes: torch.onnx.export(dynamo=True) with a translation
table for the aten loss ops. Needs the optional dependency `lossops[torch]`."""

from __future__ import annotations

from typing import Any

from onnx import ModelProto

from .. import opset
from ..extras import require

torch = require("torch", "exporting from PyTorch")
from .aten import translation_table  # noqa: E402


def export(module, args: tuple, **kwargs: Any) -> ModelProto:
    """`torch.onnx.export(module, args, dynamo=True, **kwargs)` with the lossops translations (yours in
    `custom_translation_table` win); returns the model with the lossops functions and a loadable IR version.
    Dynamic dims declared through `dynamic_shapes` stay symbolic."""
    table = {**translation_table(), **kwargs.pop("custom_translation_table", {})}
    program = torch.onnx.export(module, args, dynamo=True, custom_translation_table=table, **kwargs)
    return opset.with_functions(program.model_proto)
