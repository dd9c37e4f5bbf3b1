"""Every operator has every layer: a test that fails when an operator lacks its kernel, its PyTorch oracle,
its conformance cases (each case runs in all four dtypes), its onnx.reference op, its aten names, and its
aclnn API or its place in the gradient table. Adding an operator means adding each of these (its record in
opset/<operator>.py first)."""

from __future__ import annotations

import pytest

from lossops import opset
from lossops.conformance.cases import node_specs
from lossops.conformance.oracle import ORACLES
from lossops.conformance.reference_ops import REFERENCE_OPS
from lossops.ort_ext.kernels import KERNELS


@pytest.mark.parametrize("name", list(opset.OPS))
def test_every_operator_has_every_layer(name):
    op = opset.OPS[name]
    assert name in KERNELS, f"{name} has no kernel (ort_ext/kernels, @kernel)"
    assert name in ORACLES, f"{name} has no PyTorch oracle (conformance/oracle.py)"
    assert any(s.op == name for s in node_specs()), f"{name} has no conformance cases (conformance/cases.py)"
    assert name in {c.__name__ for c in REFERENCE_OPS}, f"{name} has no onnx.reference op"
    assert op.torch, f"{name} names no aten operator (OpDef.torch)"
    backward_of = {o.gradient.backward for o in opset.OPS.values() if o.gradient}
    assert op.aclnn is not None or op.gradient is not None or name in backward_of, \
        f"{name} has neither an aclnn API nor a place in the gradient table"
    if op.gradient:
        assert op.gradient.backward in opset.OPS, f"{name}'s gradient {op.gradient.backward} is not an operator"
