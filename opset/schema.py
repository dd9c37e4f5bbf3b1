"""ONNX OpSchemas built from the operator definitions, with their shape-inference functions."""

from __future__ import annotations

import onnx
from onnx import AttributeProto, defs, helper

from . import shapes
from .spec import INDEX_TYPE, TENSOR_TYPES, OpDef
from .versions import DOMAIN, VERSION


def _attribute_value(a: AttributeProto) -> object:
    return helper.get_attribute_value(a).decode() if a.type == AttributeProto.STRING else helper.get_attribute_value(a)


def _inference_function(op: OpDef):
    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        given = {}
        for a in op.attributes:
            proto = ctx.get_attribute(a.name)
            if proto is not None:
                given[a.name] = _attribute_value(proto)
        attrs = op.resolve(given)
        found: dict[str, shapes.Shape] = {}
        elem_type = 0
        for i, formal in enumerate(op.inputs):
            if i >= ctx.get_num_inputs() or not ctx.has_input(i):
                continue
            t = ctx.get_input_type(i)
            if t is None or not t.HasField("tensor_type"):
                continue
            found[formal.name] = shapes.of_type(t)
            if not formal.indices:
                elem_type = elem_type or t.tensor_type.elem_type
        missing = [f.name for f in op.inputs if not f.optional and f.name not in found]
        if missing:  # types not known yet (e.g. inside an untyped function body): nothing to infer
            return
        try:
            out_shape = shapes.infer(op, found, attrs)
        except ValueError as e:
            raise ValueError(f"{op.name}: {e}") from None
        out = helper.make_tensor_type_proto(elem_type, None)
        if out_shape is not None:
            out = helper.make_tensor_type_proto(elem_type, list(out_shape))
        ctx.set_output_type(0, out)

    return infer


def make_schema(op: OpDef) -> defs.OpSchema:
    P = defs.OpSchema.FormalParameter
    optional = defs.OpSchema.FormalParameterOption.Optional
    single = defs.OpSchema.FormalParameterOption.Single
    schema = defs.OpSchema(
        op.name, DOMAIN, VERSION, op.doc,
        inputs=[P(i.name, "I" if i.indices else "T", i.doc, param_option=optional if i.optional else single)
                for i in op.inputs],
        outputs=[P(op.output.name, "T", op.output.doc)],
        type_constraints=[("T", list(TENSOR_TYPES.values()), "float16, bfloat16, float or double; one for all."),
                          *([("I", [INDEX_TYPE], "Class indices and lengths.")] if any(i.indices for i in op.inputs)
                            else [])],
        attributes=[defs.OpSchema.Attribute(a.name, helper.make_attribute(a.name, a.default), a.doc)
                    for a in op.attributes],
    )
    schema.set_type_and_shape_inference_function(_inference_function(op))
    return schema
