"""Export from PyTorch into graphs with lossops nodes: torch.onnx.export(dynamo=True) with a translation
table for the aten loss ops. Needs the optional dependency `lossops[torch]`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from onnx import ModelProto

from .. import opset
from ..extras import require

if TYPE_CHECKING:
    import onnx_ir

torch = require("torch", "exporting from PyTorch")
from .aten import translation_table  # noqa: E402


def export(module, args: tuple, **kwargs: Any) -> ModelProto:
    """`torch.onnx.export(module, args, dynamo=True, **kwargs)` with the lossops translations (yours in
    `custom_translation_table` win); returns the model with the lossops functions and a loadable IR version.
    Dynamic dims declared through `dynamic_shapes` stay symbolic."""
    table = {**translation_table(), **kwargs.pop("custom_translation_table", {})}
    program = torch.onnx.export(module, args, dynamo=True, custom_translation_table=table, **kwargs)
    return opset.with_functions(program.model_proto)


def simplify(model: onnx_ir.Model) -> None:
    """Clean an exported `onnx_ir.Model` in place as `torch.onnx.export(optimize=True)` does (functions inlined,
    constants folded, onnxscript's node-by-node rewrite rules, common subexpressions and unused nodes removed), with
    fewer rules: not its slices-to-Split rule, whose matcher walks the whole graph once per Slice node, quadratic in
    the graph's size (a transformer's training step has thousands of nodes); not its fusions into convolutions and
    Gemm, which need constant weights that a training step's parameters are not."""
    import onnx_ir.passes.common as common
    from onnxscript.optimizer import fold_constants
    from onnxscript.rewriter import RewritePass

    common.InlinePass()(model)
    for _ in range(2):  # the exporter's two rounds: a rewrite can make a constant foldable and back
        changed = bool(fold_constants(model, onnx_shape_inference=True))
        changed = RewritePass(_rules())(model).modified or changed
        common.RemoveUnusedNodesPass()(model)
        if not changed:
            break
    for step in (common.RemoveUnusedFunctionsPass(), common.RemoveUnusedOpsetsPass(),
                 common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
                 common.DeduplicateInitializersPass(), common.CommonSubexpressionEliminationPass(),
                 common.RemoveUnusedNodesPass()):
        step(model)


def _rules() -> list:
    from onnxscript.rewriter.rules import common as r

    return [r.add_0_rule, r.sub_0_rule, r.mul_by_1_rule, r.div_by_1_rule, r.dropout_zero_rule,
            r.dropout_inference_rule, r.cast_cast_rule, r.no_op_cast_rule, r.no_op_expand_rule, r.no_op_transpose_rule,
            r.flatten_to_reshape_rule, r.reshape_reshape_rule, r.squeeze_reshape_1d_rule, r.transpose_transpose_rule,
            r.unsqueeze_unsqueeze_rule, r.collapse_slice_rule, r.collapse_slice2_rule, r.cast_constant_of_shape_rule,
            r.cast_constant_of_shape_without_value_rule, r.one_reshape_matmul_reshape_rule,
            r.two_reshapes_matmul_reshape_rule, r.no_op_dynamic_scatter_nd_rule, r.no_op_static_scatter_nd_rule,
            r.min_min_rule, r.max_max_rule, r.min_max_rule, r.max_min_rule, r.successive_relu_rule,
            r.successive_clip_rule, r.successive_clip_relu_rule, r.successive_relu_clip_rule]
