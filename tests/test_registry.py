"""Every operator has every layer: a test that fails when an operator lacks its kernel, its PyTorch oracle,
its conformance cases (each case runs in all four dtypes), its aten names with their
export translations, and its aclnn API or its place in the gradient table. Adding an operator means adding
each of these (its record in opset/<operator>.py first); the walkthrough below does it with a dummy."""

from __future__ import annotations

import pytest

from lossops import opset
from lossops.conformance.cases import node_specs
from lossops.conformance.oracle import ORACLES
from lossops.converters.aten import TRANSLATIONS
from lossops.ort_ext.kernels.registry import KERNELS


def missing_layers(name: str, specs=None) -> list[str]:
    """The layers operator `name` lacks, each with the file where it is added."""
    op = opset.OPS[name]
    specs = node_specs() if specs is None else specs
    missing = []
    if name not in KERNELS:
        missing.append("kernel (ort_ext/kernels/<operator>.py, @kernel)")
    if name not in ORACLES:
        missing.append("PyTorch oracle (conformance/oracle.py, @oracle)")
    if not any(s.op == name for s in specs):
        missing.append("conformance cases (conformance/cases.py, @spec_source)")
    if not op.torch:
        missing.append("aten names (OpDef.torch)")
    missing += [f"export translation of {t} (converters/aten.py, @translates)" for t in op.torch
                if t not in TRANSLATIONS]
    backward_of = {o.gradient.backward for o in opset.OPS.values() if o.gradient}
    if op.aclnn is None and op.gradient is None and name not in backward_of:
        missing.append("aclnn API or a place in the gradient table (OpDef)")
    return missing


@pytest.mark.parametrize("name", list(opset.OPS))
def test_every_operator_has_every_layer(name):
    op = opset.OPS[name]
    assert not missing_layers(name), f"{name} lacks: {'; '.join(missing_layers(name))}"
    if op.gradient:
        assert op.gradient.backward in opset.OPS, f"{name}'s gradient {op.gradient.backward} is not an operator"


def test_adding_an_operator_walkthrough(monkeypatch):
    """Adding an operator, walked through with a dummy one (a copy of KlDiv's record under a new name): the
    record alone is caught with every layer it lacks, and each registration removes one, until none is
    missing. The files a new operator touches: its record (opset/<operator>.py, listed in opset/registry.py),
    its kernel module, the oracle, the cases and the translation, 6 in all (the onnx.reference op is made
    from the record); the schema,
    shape inference, decomposition, validation, docs, aclnn mapping and CLI choices come from the record."""
    import dataclasses

    from lossops.conformance.cases import Spec

    kl = opset.OPS["KlDiv"]
    dummy = dataclasses.replace(kl, name="DummyLoss", torch=("lossops::dummy_loss",), aclnn=None, gradient=None)
    monkeypatch.setitem(opset.OPS, "DummyLoss", dummy)
    specs = node_specs()
    assert missing_layers("DummyLoss", specs) == [
        "kernel (ort_ext/kernels/<operator>.py, @kernel)",
        "PyTorch oracle (conformance/oracle.py, @oracle)",
        "conformance cases (conformance/cases.py, @spec_source)",
        "export translation of lossops::dummy_loss (converters/aten.py, @translates)",
        "aclnn API or a place in the gradient table (OpDef)",
    ]
    monkeypatch.setitem(KERNELS, "DummyLoss", KERNELS["KlDiv"])
    monkeypatch.setitem(ORACLES, "DummyLoss", ORACLES["KlDiv"])
    specs = [*specs, Spec("dummy", "DummyLoss", next(s for s in specs if s.op == "KlDiv").inputs)]
    monkeypatch.setitem(TRANSLATIONS, "lossops::dummy_loss", TRANSLATIONS["lossops::kl_div"])
    monkeypatch.setitem(opset.OPS, "DummyLoss", dataclasses.replace(dummy, gradient=kl.gradient))  # KlDivBackward
    assert missing_layers("DummyLoss", specs) == []
