"""Every operator has every layer: a test that fails when an operator lacks its kernel, its conformance module
(PyTorch oracle, cases in all four dtypes, the bench's eager baseline), its aten names with their export
translations, its aclnn API or its place in the gradient table, and its benchmark rows. Adding an operator means
adding its three modules, found by the operator's name (opset/ops/<operator>.py, ort_ext/kernels/ops/<operator>.py,
conformance/ops/<operator>.py), a PyTorch op where aten has none, its benchmark rows, and regenerating the docs;
the walkthrough below does it with a dummy."""

from __future__ import annotations

import json

import pytest
import torch

from lossops import opset, regenerate
from lossops.bench import runs
from lossops.cli import verbs_table
from lossops.conformance import ops
from lossops.conformance.cases import node_specs
from lossops.converters.aten import translation
from lossops.ort_ext.kernels.registry import KERNELS


def benched() -> set[str]:
    """The operators the stored benchmark runs (docs/bench.json) have rows for."""
    return {r["op"] for run in runs(json.loads((regenerate.ROOT / "docs" / "bench.json").read_text()))
            for r in run["rows"]}


def missing_layers(name: str, specs=None, measured: set[str] | None = None) -> list[str]:
    """The layers operator `name` lacks, each with the file where it is added."""
    op = opset.OPS[name]
    specs = node_specs() if specs is None else specs
    measured = benched() if measured is None else measured
    missing = []
    if name not in KERNELS:
        missing.append("kernel (ort_ext/kernels/ops/<operator>.py, @kernel)")
    module = ops.module(name)
    for part, what in (("oracle", "PyTorch oracle"), ("specs", "conformance cases"), ("eager", "bench baseline")):
        if not hasattr(module, part):
            missing.append(f"{what} (conformance/ops/<operator>.py, {part})")
    if hasattr(module, "specs") and not any(s.op == name for s in specs):
        missing.append("conformance cases (conformance/ops/<operator>.py, specs returns none)")
    if not op.torch:
        missing.append("aten names (OpDef.torch)")
    for torch_name in op.torch:
        try:
            translation(op, torch_name)
        except ValueError:
            missing.append(f"PyTorch op {torch_name} (converters/torch_ops.py, torch.library.custom_op)")
    backward_of = {g.backward for o in opset.OPS.values() for g in (o.gradient, o.target_gradient) if g}
    if op.aclnn is None and op.gradient is None and name not in backward_of:
        missing.append("aclnn API or a place in the gradient table (OpDef)")
    if name not in measured and not op.classes and not op.sequences:  # the bench measures kernels
        missing.append("benchmark rows (lossops bench --op <operator> --update docs/bench.json)")
    return missing


@pytest.mark.parametrize("name", list(opset.OPS))
def test_every_operator_has_every_layer(name):
    op = opset.OPS[name]
    assert not missing_layers(name), f"{name} lacks: {'; '.join(missing_layers(name))}"
    for gradient in (op.gradient, op.target_gradient):
        if gradient:
            assert gradient.backward in opset.OPS, f"{name}'s gradient {gradient.backward} is not an operator"
            assert set(gradient.inputs) <= {"grad_output"} | {i.name for i in op.inputs}, gradient


# the PyTorch op each walkthrough's dummy is: the signature of the operator it copies
def _dummy_kl_div(input: torch.Tensor, target: torch.Tensor, reduction: int, log_target: bool) -> torch.Tensor:
    return torch.nn.functional.kl_div(input, target, reduction=opset.spec.REDUCTIONS[reduction], log_target=log_target)


def _dummy_smooth_l1(input: torch.Tensor, target: torch.Tensor, reduction: int, beta: float) -> torch.Tensor:
    return torch.nn.functional.smooth_l1_loss(input, target, reduction=opset.spec.REDUCTIONS[reduction], beta=beta)


DUMMIES = {"KlDiv": _dummy_kl_div, "SmoothL1Loss": _dummy_smooth_l1}  # an enum attribute; a float one


@pytest.mark.parametrize("template", list(DUMMIES))
def test_adding_an_operator_walkthrough(monkeypatch, template):
    """Adding an operator, walked through with a dummy one (a copy of `template`'s record under a new name: one
    with an enum attribute, one with a float attribute): the record alone is caught with every layer it lacks,
    and each addition removes one, until none is missing; then its decomposition runs, held to its oracle. The
    files a new operator touches: its three modules (record, tile, conformance module) and, where aten has no
    op for it, a PyTorch op; its schema, shape inference, decomposition, validation, docs, aclnn mapping, export
    translation, CLI choices and onnx.reference op come from the record, and every registry finds the modules
    by the operator's name."""
    import dataclasses
    import sys
    import types

    from lossops.conformance.backends import BACKENDS
    from lossops.conformance.cases import spec_case
    from lossops.conformance.specs import Spec

    base = opset.OPS[template]
    torch_name = f"lossops::dummy_{template.lower()}"
    dummy = dataclasses.replace(base, name="DummyLoss", torch=(torch_name,), aclnn=None, gradient=None)
    monkeypatch.setitem(opset.OPS, "DummyLoss", dummy)
    specs = node_specs()
    assert missing_layers("DummyLoss", specs) == [
        "kernel (ort_ext/kernels/ops/<operator>.py, @kernel)",
        "PyTorch oracle (conformance/ops/<operator>.py, oracle)",
        "conformance cases (conformance/ops/<operator>.py, specs)",
        "bench baseline (conformance/ops/<operator>.py, eager)",
        f"PyTorch op {torch_name} (converters/torch_ops.py, torch.library.custom_op)",
        "aclnn API or a place in the gradient table (OpDef)",
        "benchmark rows (lossops bench --op <operator> --update docs/bench.json)",
    ]
    monkeypatch.setitem(KERNELS, "DummyLoss", KERNELS[template])
    cases = types.ModuleType("lossops.conformance.ops.dummy_loss")  # conformance/ops/dummy_loss.py
    template_cases = ops.module(template)
    cases.oracle, cases.eager = template_cases.oracle, template_cases.eager
    like = next(s for s in specs if s.op == template and s.attrs.get("beta", 0) != 1.0)
    cases.specs = lambda: [Spec("dummy", "DummyLoss", like.inputs, like.attrs, like.summed)]
    monkeypatch.setitem(sys.modules, cases.__name__, cases)
    specs = [*specs, *cases.specs()]
    if not hasattr(torch.ops.lossops, torch_name.split("::")[1]):  # a PyTorch op stays defined for the process
        torch.library.custom_op(torch_name, mutates_args=())(DUMMIES[template])
    monkeypatch.setitem(opset.OPS, "DummyLoss", dataclasses.replace(dummy, gradient=base.gradient))
    # `lossops bench --op DummyLoss --update docs/bench.json` measured it
    assert missing_layers("DummyLoss", specs, benched() | {"DummyLoss"}) == []
    case = spec_case(cases.specs()[0], "float32")  # its decomposition runs from the record alone
    ok, _, message = case.check(BACKENDS["decomposition"](case.model, case.inputs))
    assert ok, message
    # and `lossops docs` names the documents that now lack it: the reference and the guide's operator table
    assert regenerate.stale(verbs_table()) == [regenerate.ROOT / "docs" / "operators.md", regenerate.GUIDE]
    assert "## DummyLoss" in regenerate.expected(verbs_table())[regenerate.ROOT / "docs" / "operators.md"]


def test_a_kernel_with_more_parameters_than_the_plan_carries_is_refused(monkeypatch):
    """The plan carries layout.MAX_PARAMS parameters: an operator with more cannot get a kernel silently."""
    import dataclasses

    from lossops.opset.spec import Attribute
    from lossops.ort_ext.kernels import layout
    from lossops.ort_ext.kernels.registry import kernel

    extra = tuple(Attribute(f"p{k}", "a number", 1.0, low=0.0) for k in range(layout.MAX_PARAMS + 1))
    crowded = dataclasses.replace(opset.OPS["KlDiv"], name="Crowded", attributes=(*opset.OPS["KlDiv"].attributes[:1],
                                                                                   *extra))
    monkeypatch.setitem(opset.OPS, "Crowded", crowded)
    with pytest.raises(ValueError, match=f"Crowded: {layout.MAX_PARAMS + 1} parameters; the kernels carry at most"):
        kernel("Crowded", reads=("input",), task_elements=1024)
