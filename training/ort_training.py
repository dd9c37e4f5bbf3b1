"""Hand the gradient table to onnxruntime-training's gradient builder (for users pinned to the deprecated
onnxruntime-training 1.19.2, which lives in an environment of its own: it conflicts with onnxruntime).

Its registry is keyed by "domain::op_type" and a definition's attributes are constants, so one definition
serves every node of an operator: `register` takes the attribute values to use (PyTorch's defaults unless
given) and the definition applies to all nodes of that operator in the model being differentiated."""

from __future__ import annotations

from .. import opset


def gradient_definition(forward: str, **attributes) -> list[tuple]:
    """The definition in onnxruntime-training's form: [(op_type/domain, inputs, outputs, attributes)], with
    I(k) the forward's k-th input, GO(0) the loss gradient, GI(0) the gradient of input 0."""
    gradient = opset.get(forward).gradient
    formal = [i.name for i in opset.get(forward).inputs]
    inputs = ["GO(0)" if name == "grad_output" else f"I({formal.index(name)})" for name in gradient.inputs]
    values = opset.get(gradient.backward).resolve(attributes)
    attrs = {k: {"value": v, "dtype": "string" if isinstance(v, str) else "int"} for k, v in values.items()}
    return [((gradient.backward, opset.DOMAIN), inputs, ["GI(0)"], attrs)]


def register(forward: str, **attributes) -> None:
    """Register the gradient of `forward` with onnxruntime-training (needs that package)."""
    from onnxruntime.capi import _pybind_state as C  # onnxruntime-training's build has the registry
    from onnxruntime.training.ortmodule._custom_gradient_registry import _to_gradient_definition

    C.register_gradient_definition(f"{opset.DOMAIN}::{forward}",
                                   _to_gradient_definition(gradient_definition(forward, **attributes)))
