"""PyTorch export, fusion of exporter patterns, lowering, and the aclnn argument mapping."""

from __future__ import annotations

import io
import logging
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
import torch.nn.functional as F

from lossops import opset
from lossops.converters import aclnn, fuse, lower
from lossops.converters.torch import export
from lossops.ort_ext import InferenceSession

logging.getLogger("torch").setLevel(logging.ERROR)
VARIANTS = [(r, w, p) for r in ("none", "mean", "sum") for w in (False, True) for p in (False, True)]


class Loss(torch.nn.Module):
    """Linear layer + binary_cross_entropy_with_logits with optional weight and pos_weight."""

    def __init__(self, reduction: str, weight: bool, pos_weight: bool):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)
        self.reduction = reduction
        self.weight = torch.rand(3) if weight else None
        self.pos_weight = torch.rand(3) + 0.5 if pos_weight else None

    def forward(self, features, labels):
        return F.binary_cross_entropy_with_logits(self.linear(features) * 100, labels, weight=self.weight,
                                                  pos_weight=self.pos_weight, reduction=self.reduction)


def _inputs(batch: int = 5):
    g = torch.Generator().manual_seed(batch)
    return torch.randn(batch, 4, generator=g), torch.rand(batch, 3, generator=g)


def _run(model: onnx.ModelProto, args, plain: bool = False) -> np.ndarray:
    feeds = {i.name: a.numpy() for i, a in zip(model.graph.input, args, strict=True)}
    if plain:
        return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, feeds)[0]
    return InferenceSession(model.SerializeToString()).run(None, feeds)[0]


def _close(got, expected):
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6 * np.abs(expected).max())


@pytest.mark.parametrize(("reduction", "weight", "pos_weight"), VARIANTS)
def test_export_with_dynamic_batch(reduction, weight, pos_weight):
    module = Loss(reduction, weight, pos_weight)
    batch = torch.export.Dim("batch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = export(module, _inputs(), dynamic_shapes={"features": {0: batch}, "labels": {0: batch}})
    assert [n.op_type for n in model.graph.node if n.domain == opset.DOMAIN] == ["BinaryCrossEntropyWithLogits"]
    assert "Sigmoid" not in {n.op_type for n in model.graph.node}
    assert model.ir_version == opset.IR_VERSION
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # the batch stayed symbolic
    opset.check(model)
    for batch_size in (5, 11):  # another batch than the example: the dim is dynamic
        args = _inputs(batch_size)
        expected = module(*args).detach().double().numpy()
        _close(_run(model, args), expected)
        _close(_run(model, args, plain=True), expected)


def test_export_bce_backward():
    class Backward(torch.nn.Module):
        def forward(self, grad, probs, labels):
            return torch.ops.aten.binary_cross_entropy_backward(grad, probs, labels, None, 1)

    args = (torch.tensor(2.0), torch.rand(4, 3) * 0.9 + 0.05, torch.rand(4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = export(Backward(), args)
    assert [n.op_type for n in model.graph.node if n.domain == opset.DOMAIN] == ["BinaryCrossEntropyBackward"]
    _close(_run(model, args), Backward()(*args).double().numpy())


@pytest.mark.parametrize("op", ["BinaryCrossEntropy", "KlDiv"])
def test_export_uses_the_shared_translation_table(op):
    """Inference export and training export read one table: F.binary_cross_entropy and F.kl_div export as
    lossops nodes too, and run like PyTorch."""
    import torch.nn.functional as F

    class Loss(torch.nn.Module):
        def forward(self, x, y):
            if op == "KlDiv":
                return F.kl_div(torch.log_softmax(x, -1), torch.softmax(y, -1), reduction="batchmean")
            return F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y), reduction="sum")

    args = (torch.randn(4, 3), torch.randn(4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = export(Loss(), args)
    assert [n.op_type for n in model.graph.node if n.domain == opset.DOMAIN] == [op]
    _close(_run(model, args), Loss()(*(a.double() for a in args)).numpy())
    _close(_run(model, args, plain=True), Loss()(*(a.double() for a in args)).numpy())


def _exported(module, args, exporter: str) -> onnx.ModelProto:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            return torch.onnx.export(module, args, dynamo=True, verbose=False).model_proto
        buffer = io.BytesIO()
        torch.onnx.export(module, args, buffer, dynamo=False, opset_version=17)
        return onnx.load_from_string(buffer.getvalue())


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize(("reduction", "weight", "pos_weight"), VARIANTS)
def test_fuse_exporter_patterns(exporter, reduction, weight, pos_weight):
    """Logits of +-200 (times the Linear's output scale): the exported model returns inf, the fused one
    PyTorch's value."""
    module = Loss(reduction, weight, pos_weight)
    args = _inputs()
    exported = _exported(module, args, exporter)
    expected = module(*args).detach().double().numpy()
    assert not np.isfinite(_run(exported, args, plain=True)).all()  # the defect fusion repairs
    fused, report = fuse(exported)
    assert len(report) == 1 and f"(reduction {reduction})" in report[0]
    lossops_nodes = [n for n in fused.graph.node if n.domain == opset.DOMAIN]
    assert len(lossops_nodes) == 1
    assert not {"Sigmoid", "Log"} & {n.op_type for n in fused.graph.node}
    _close(_run(fused, args), expected)
    _close(_run(fused, args, plain=True), expected)


def _focal(x, y, alpha: float, gamma: float, reduction: str):
    """torchvision.ops.sigmoid_focal_loss, written out as torchvision writes it (torchvision is not a dependency)."""
    p = torch.sigmoid(x)
    loss = F.binary_cross_entropy_with_logits(x, y, reduction="none") * ((1 - (p * y + (1 - p) * (1 - y))) ** gamma)
    if alpha >= 0:
        loss = (alpha * y + (1 - alpha) * (1 - y)) * loss
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


class FocalLoss(torch.nn.Module):
    """A Linear layer whose large logits (+-200 and beyond) feed torchvision's focal loss."""

    def __init__(self, alpha: float, gamma: float, reduction: str):
        super().__init__()
        torch.manual_seed(0)
        self.linear, self.alpha, self.gamma, self.reduction = torch.nn.Linear(4, 3), alpha, gamma, reduction

    def forward(self, features, labels):
        return _focal(self.linear(features) * 100, labels, self.alpha, self.gamma, self.reduction)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize(("alpha", "gamma"), [(0.25, 2.0), (-1.0, 1.5), (0.5, 0.0)])
def test_fuse_torchvision_focal_loss(alpha, gamma, reduction):
    """The dynamo export of torchvision's focal loss returns inf at large logits; fused, it is one
    SigmoidFocalLoss node with the module's alpha and gamma, held to the float64 oracle on the same logits."""
    from lossops.conformance.oracle import ORACLES

    module = FocalLoss(alpha, gamma, reduction)
    args = _inputs()
    exported = _exported(module, args, "dynamo")
    assert not np.isfinite(_run(exported, args, plain=True)).all()  # the defect fusion repairs
    fused, report = fuse(exported)
    assert report == [f"fused lossops::SigmoidFocalLoss node '{fused.graph.node[-1].name}' (reduction {reduction})"], \
        report
    node = next(n for n in fused.graph.node if n.domain == opset.DOMAIN)
    assert opset.node_attributes(node) == {"reduction": reduction, "alpha": alpha, "gamma": gamma}
    assert not {"Sigmoid", "Log", "Pow"} & {n.op_type for n in fused.graph.node}
    logits = (module.linear(args[0]) * 100).detach().numpy()
    expected = ORACLES["SigmoidFocalLoss"](logits, args[1].numpy(), None, reduction=reduction, alpha=alpha,
                                           gamma=gamma)
    _close(_run(fused, args), expected)
    _close(_run(fused, args, plain=True), expected)


@pytest.mark.parametrize(("loss", "exporter", "target_rows"),
                         [("mse_loss", "dynamo", 6), ("mse_loss", "dynamo", 1), ("mse_loss", "torchscript", 6),
                          ("l1_loss", "dynamo", 6), ("l1_loss", "dynamo", 1)])  # TorchScript exports no l1_loss
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fuse_mse_and_l1_loss(loss, exporter, target_rows, reduction):
    """A reduced F.mse_loss or F.l1_loss as each exporter writes it (the dynamo one expands a broadcast target
    first) becomes one MseLoss or L1Loss node, held to PyTorch in float64."""
    function = getattr(F, loss)

    class Loss(torch.nn.Module):
        def forward(self, x, y):
            return function(x, y, reduction=reduction)

    args = (torch.randn(6, 5), torch.randn(target_rows, 5))
    fused, report = fuse(_exported(Loss(), args, exporter))
    node = next(n for n in fused.graph.node if n.domain == opset.DOMAIN)
    op_type = {"mse_loss": "MseLoss", "l1_loss": "L1Loss"}[loss]
    assert report == [f"fused lossops::{op_type} node '{node.name}' (reduction {reduction})"], report
    assert not {"Sub", "Mul", "Abs", "ReduceMean", "ReduceSum", "Squeeze"} & {n.op_type for n in fused.graph.node}
    with warnings.catch_warnings():  # torch warns about the broadcast target, which is the case
        warnings.simplefilter("ignore")
        expected = function(*(a.double() for a in args), reduction=reduction).numpy()
    _close(_run(fused, args), expected)
    _close(_run(fused, args, plain=True), expected)


# F.nll_loss of (N, C) log_softmax as the TorchScript exporter and lossops' export write it (the dynamo exporter
# decomposes it into a gather, and views (N, C, d) as (N, C, d, 1) around it: not fused)
CROSS_ENTROPY_FORMS = [("cross_entropy", e) for e in ("dynamo", "torchscript", "lossops")] + [
    ("nll_loss_of_log_softmax", e) for e in ("torchscript", "lossops")]


@pytest.mark.parametrize(("form", "exporter"), CROSS_ENTROPY_FORMS)
@pytest.mark.parametrize(("reduction", "weighted", "ignore_index"),
                         [("mean", False, -100), ("sum", True, 1), ("none", True, -100), ("mean", True, 2)])
def test_fuse_cross_entropy(exporter, form, reduction, weighted, ignore_index):
    """F.cross_entropy on (N, C, d) logits, and F.nll_loss of F.log_softmax on (N, C), as each exporter writes
    them (lossops' own export translates cross_entropy to its node already), become one CrossEntropyLoss node,
    held to PyTorch in float64 with a row ignored."""
    def loss(x, t, weight):
        if form == "cross_entropy":
            return F.cross_entropy(x, t, weight, ignore_index=ignore_index, reduction=reduction)
        return F.nll_loss(F.log_softmax(x, 1), t, weight, ignore_index=ignore_index, reduction=reduction)

    weight = torch.tensor([0.5, 2.0, 1.0, 1.5]) if weighted else None

    class Loss(torch.nn.Module):
        def forward(self, x, t):
            return loss(x, t, weight)

    shape = (5, 4, 3) if form == "cross_entropy" else (5, 4)
    x, t = torch.randn(shape) * 3, torch.randint(0, 4, (5, *shape[2:]))
    t.view(-1)[2] = ignore_index
    exported = export(Loss(), (x, t)) if exporter == "lossops" else _exported(Loss(), (x, t), exporter)
    fused, report = fuse(exported)
    nodes = [n.op_type for n in fused.graph.node if n.domain == opset.DOMAIN]
    assert nodes == ["CrossEntropyLoss"], (nodes, report)
    assert not {"SoftmaxCrossEntropyLoss", "LogSoftmax", "NegativeLogLikelihoodLoss"} & {
        n.op_type for n in fused.graph.node}
    expected = loss(x.double(), t, None if weight is None else weight.double()).numpy()
    _close(_run(fused, (x, t)), expected)
    _close(_run(fused, (x, t), plain=True), expected)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_export_cross_entropy_of_probabilities(reduction):
    """aten's cross_entropy_loss with a float target (probabilities) exports as SoftTargetCrossEntropyLoss, its
    weight and label smoothing kept, held to PyTorch in float64; with class indices it stays CrossEntropyLoss."""
    weight = torch.tensor([0.5, 2.0, 1.0, 1.5])

    class Loss(torch.nn.Module):
        def forward(self, x, t):
            return F.cross_entropy(x, t, weight, reduction=reduction, label_smoothing=0.2)

    x, t = torch.randn(5, 4, 3) * 3, torch.softmax(torch.randn(5, 4, 3), 1)
    model = export(Loss(), (x, t))
    assert [n.op_type for n in model.graph.node if n.domain == opset.DOMAIN] == ["SoftTargetCrossEntropyLoss"]
    expected = F.cross_entropy(x.double(), t.double(), weight.double(), reduction=reduction,
                               label_smoothing=0.2).numpy()
    _close(_run(model, (x, t)), expected)
    indices = export(Loss(), (x, torch.randint(0, 4, (5, 3))))
    assert [n.op_type for n in indices.graph.node if n.domain == opset.DOMAIN] == ["CrossEntropyLoss"]


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize(("reduction", "weighted"), [("mean", False), ("sum", True), ("none", True)])
def test_fuse_cross_entropy_of_probabilities(exporter, reduction, weighted):
    """F.cross_entropy of (N, C, d) logits against probabilities: both exporters write ONNX's
    SoftmaxCrossEntropyLoss with the float target, which onnxruntime refuses to load; fused, it is one
    SoftTargetCrossEntropyLoss node, held to PyTorch in float64."""
    weight = torch.tensor([0.5, 2.0, 1.0, 1.5]) if weighted else None

    class Loss(torch.nn.Module):
        def forward(self, x, t):
            return F.cross_entropy(x, t, weight, reduction=reduction)

    x, t = torch.randn(5, 4, 3) * 3, torch.softmax(torch.randn(5, 4, 3), 1)
    exported = _exported(Loss(), (x, t), exporter)
    fused, report = fuse(exported)
    nodes = [n.op_type for n in fused.graph.node if n.domain == opset.DOMAIN]
    expected = F.cross_entropy(x.double(), t.double(), None if weight is None else weight.double(),
                               reduction=reduction).numpy()
    assert [n.op_type for n in exported.graph.node if n.op_type == "SoftmaxCrossEntropyLoss"]
    with pytest.raises(Exception, match="SoftmaxCrossEntropyLoss"):
        onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    assert nodes == ["SoftTargetCrossEntropyLoss"], (nodes, report)
    assert "SoftmaxCrossEntropyLoss" not in {n.op_type for n in fused.graph.node}
    _close(_run(fused, (x, t)), expected)
    _close(_run(fused, (x, t), plain=True), expected)


# A soft-target cross entropy as people write it (timm's SoftTargetCrossEntropy, distillation, label smoothing by
# hand): (form, the reduction the fused node has, and the one node a graph output keeps besides it).
SOFT_TARGET_FORMS = {
    "timm": (lambda x, p: torch.sum(-p * F.log_softmax(x, dim=1), dim=1).mean(), "mean", None),
    "negated-mean": (lambda x, p: -(p * F.log_softmax(x, dim=1)).sum(dim=1).mean(), "mean", None),
    "negated-product": (lambda x, p: (-(p * x.log_softmax(1))).sum(1).mean(), "mean", None),
    "negated-rows": (lambda x, p: (-(p * x.log_softmax(1)).sum(1)).sum(), "sum", None),
    "rows": (lambda x, p: -torch.sum(p * F.log_softmax(x, dim=1), dim=1), "none", None),
    "whole-sum-over-batch": (lambda x, p: -(p * F.log_softmax(x, dim=1)).sum() / x.shape[0], "sum", "Div"),
}


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize("form", list(SOFT_TARGET_FORMS))
@pytest.mark.parametrize("shape", [(6, 5), (5, 4, 3)])
def test_fuse_hand_written_soft_target_cross_entropy(exporter, form, shape):
    """`sum(-p * log_softmax(x, 1), 1)`, reduced or not, negated anywhere: one SoftTargetCrossEntropyLoss node,
    held to PyTorch in float64 on the kernels and in plain onnxruntime."""
    loss, reduction, kept = SOFT_TARGET_FORMS[form]

    class Loss(torch.nn.Module):
        def forward(self, x, p):
            return loss(x, p)

    g = torch.Generator().manual_seed(5)
    x, p = torch.randn(shape, generator=g) * 4, torch.softmax(torch.randn(shape, generator=g), 1)
    fused, report = fuse(_exported(Loss(), (x, p), exporter))
    nodes = [n for n in fused.graph.node if n.op_type != "Constant"]
    assert [n.op_type for n in nodes] == ["SoftTargetCrossEntropyLoss"] + ([kept] if kept else []), report
    assert next(a.s.decode() for a in nodes[0].attribute if a.name == "reduction") == reduction
    expected = loss(x.double(), p.double()).numpy()
    _close(_run(fused, (x, p)), expected)
    _close(_run(fused, (x, p), plain=True), expected)


def test_fuse_leaves_soft_target_lookalikes_alone():
    """Not a cross entropy over the class axis: a log_softmax summed over another axis, over the last axis of a
    rank-3 input, or against targets that broadcast; nor one whose negation comes after a mean over some axes (the
    exporter writes `-(p * log_softmax(y, 1)).sum(1).mean(0)` so)."""

    class Lookalikes(torch.nn.Module):
        def forward(self, x, p, q, y):
            return (-(p * F.log_softmax(x, dim=1)).sum(0), -(p * F.log_softmax(x, dim=-1)).sum(-1),
                    -(q * F.log_softmax(x, dim=1)).sum(1), -(p * F.log_softmax(y, dim=1)).sum(1).mean(0))

    g = torch.Generator().manual_seed(6)
    x, y = torch.randn(3, 4, 5, generator=g), torch.randn(3, 4, 5, generator=g)
    p, q = torch.softmax(torch.randn(3, 4, 5, generator=g), 1), torch.softmax(torch.randn(4, 1, generator=g), 0)
    fused, report = fuse(_exported(Lookalikes(), (x, p, q, y), "dynamo"))
    assert report == [] and not any(n.domain == opset.DOMAIN for n in fused.graph.node)
    feeds = {i.name: a.numpy() for i, a in zip(fused.graph.input, (x, p, q, y), strict=True)}
    got = InferenceSession(fused.SerializeToString()).run(None, feeds)
    for a, b in zip(got, Lookalikes()(x.double(), p.double(), q.double(), y.double()), strict=True):
        _close(a, b.numpy())


def test_fuse_leaves_squared_differences_that_are_not_a_mean_or_sum_loss_alone():
    """An unreduced squared or absolute difference, or one reduced over some axes only, is not fused."""

    class Squares(torch.nn.Module):
        def forward(self, x, y):
            d = x - y
            return d * d, (d * d).mean(dim=1), ((x - y) * (x - y)).sum(dim=0), d.abs(), d.abs().mean(dim=0)

    fused, report = fuse(_exported(Squares(), (torch.randn(6, 5), torch.randn(6, 5)), "dynamo"))
    assert report == [] and not any(n.domain == opset.DOMAIN for n in fused.graph.node)


def test_export_focal_loss_custom_op_and_its_gradient():
    """`torch.ops.lossops.sigmoid_focal_loss` exports as the lossops node, and its autograd is the gradient
    operator's formula: both held to the float64 oracle."""
    from lossops.conformance.oracle import ORACLES
    from lossops.converters import torch_ops  # noqa: F401 (defines torch.ops.lossops.*)

    class Focal(torch.nn.Module):
        def forward(self, x, y, w):
            return torch.ops.lossops.sigmoid_focal_loss(x, y, w, 2, 0.25, 2.0)

    g = torch.Generator().manual_seed(3)
    x, y, w = torch.randn(6, 4, generator=g) * 5, torch.rand(6, 4, generator=g), torch.rand(4, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = export(Focal(), (x, y, w))
    assert [n.op_type for n in model.graph.node if n.domain == opset.DOMAIN] == ["SigmoidFocalLoss"]
    attrs = {"alpha": 0.25, "gamma": 2.0}
    expected = ORACLES["SigmoidFocalLoss"](x.numpy(), y.numpy(), w.numpy(), reduction="sum", **attrs)
    _close(_run(model, (x, y, w)), expected)
    xg = x.clone().requires_grad_(True)
    torch.ops.lossops.sigmoid_focal_loss(xg, y, w, 2, 0.25, 2.0).backward()
    grad = ORACLES["SigmoidFocalLossGrad"](np.array(1.0), x.numpy(), y.numpy(), w.numpy(), reduction="sum", **attrs)
    _close(xg.grad.numpy(), grad)


def test_fuse_leaves_other_graphs_alone():
    node = onnx.helper.make_node("Sigmoid", ["x"], ["y"])
    graph = onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info("x", 1, [3])],
                                   [onnx.helper.make_tensor_value_info("y", 1, [3])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)], ir_version=10)
    fused, report = fuse(model)
    assert report == [] and [n.op_type for n in fused.graph.node] == ["Sigmoid"]


def test_lower_round_trip():
    from lossops.demo import demo_inputs, demo_model

    model = demo_model(onnx.TensorProto.FLOAT)
    lowered, report = lower(model)
    assert len(report) == 3
    assert opset.DOMAIN not in {n.domain for n in lowered.graph.node}
    assert opset.DOMAIN not in {o.domain for o in lowered.opset_import} and not lowered.functions
    onnx.checker.check_model(lowered, full_check=True)
    feeds = {k: v.astype(np.float32) for k, v in demo_inputs(2000).items()}
    plain = onnxruntime.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
    kernels = InferenceSession(model.SerializeToString())
    for a, b in zip(plain.run(None, feeds), kernels.run(None, feeds), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("op_name", ["CtcLoss", "CtcLossBackward"])
def test_lower_writes_ctc_steps_out_where_the_frames_are_static(op_name):
    """The portable form of CTC over a static T is its steps one by one, with no Shape (TVM's importer has no
    Scan and does no arithmetic on a Shape's output); over a symbolic T it keeps the Scans. Both follow PyTorch
    float64 (its ctc_loss, and autograd for the gradient)."""
    from lossops.conformance.cases import node_model

    r = np.random.default_rng(5)
    log_probs = np.log(r.dirichlet(np.ones(4), (6, 3)))
    targets, lengths, target_lengths = np.array([[1, 2, 2], [3, 1, 0], [2, 0, 0]]), np.array([6, 5, 3]), \
        np.array([3, 2, 1])
    inputs = [np.ones(3), log_probs, targets, lengths, target_lengths][op_name == "CtcLoss":]
    lp = torch.tensor(log_probs, requires_grad=True)
    loss = F.ctc_loss(lp, torch.tensor(targets), torch.tensor(lengths), torch.tensor(target_lengths),
                      reduction="none")
    loss.sum().backward()
    expected = (loss if op_name == "CtcLoss" else lp.grad).detach().numpy()
    for symbolic, ops in ((False, {"Gather"}), (True, {"Scan"})):
        model, _ = node_model(op_name, inputs, "float64", {"reduction": "none"})
        if symbolic:  # log_probs' frames
            model.graph.input[len(inputs) - 4].type.tensor_type.shape.dim[0].dim_param = "T"
        lowered, _ = lower(model)
        kinds = {n.op_type for n in lowered.graph.node}
        assert ops <= kinds and ("Scan" in kinds) == symbolic and ("Shape" in kinds) == symbolic, sorted(kinds)
        session = onnxruntime.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
        got = session.run(None, dict(zip([i.name for i in model.graph.input], inputs, strict=True)))[0]
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("node", [
    opset.make_node("BinaryCrossEntropyWithLogits", ["x", "y", "", "pw"], ["out"], reduction="sum"),
    opset.make_node("BinaryCrossEntropyBackward", ["g", "x", "y", "w"], ["out"], reduction="none"),
    opset.make_node("KlDivBackward", ["g", "x", "t"], ["out"], reduction="batchmean", log_target=1),
    opset.make_node("CrossEntropyLoss", ["x", "t", "w"], ["out"], reduction="none", ignore_index=3,
                    label_smoothing=0.25),
    opset.make_node("NLLLoss", ["x", "t"], ["out"], reduction="sum", ignore_index=-1),
    opset.make_node("MultilabelMarginLoss", ["x", "t"], ["out"], reduction="none"),
    opset.make_node("CtcLoss", ["lp", "t", "il", "tl"], ["out"], blank=2, reduction="none", zero_infinity=1),
])
def test_aclnn_round_trip(node):
    call = aclnn.to_call(node)
    assert aclnn.to_node(call) == node


def test_aclnn_arguments():
    call = aclnn.AclnnCall("aclnnBinaryCrossEntropyWithLogits", {"self": "x", "target": "y", "weightOptional": None,
                                                                 "posWeightOptional": "pw"}, reduction=1)
    node = aclnn.to_node(call)
    assert list(node.input) == ["x", "y", "", "pw"] and aclnn.reduced_output_shape(node) == [1]
    kl = aclnn.to_node(aclnn.AclnnCall("aclnnKlDivBackward", {"gradOutput": "g", "self": "x", "target": "t"},
                                       reduction=3, log_target=True))
    assert opset.node_attributes(kl) == {"reduction": "batchmean", "log_target": 1}
    with pytest.raises(ValueError, match="BinaryCrossEntropyBackward: reduction code 3 has no meaning here"):
        aclnn.to_node(aclnn.AclnnCall("aclnnBinaryCrossEntropyBackward", {"gradOutput": "g", "self": "x",
                                                                          "target": "y"}, reduction=3))
    with pytest.raises(ValueError, match="unknown aclnn API"):
        aclnn.to_node(aclnn.AclnnCall("aclnnSoftmax", {}))
    ce = aclnn.to_node(aclnn.AclnnCall("aclnnCrossEntropyLoss", {"input": "x", "target": "t", "weightOptional": None},
                                       reduction="mean", scalars={"ignoreIndex": 0, "labelSmoothing": 0.1}))
    assert list(ce.input) == ["x", "t"] and aclnn.reduced_output_shape(ce) == [1]
    assert opset.node_attributes(ce) == {"reduction": "mean", "ignore_index": 0,
                                         "label_smoothing": pytest.approx(0.1)}
    with pytest.raises(ValueError, match="aclnnNLLLoss has no scalar argument 'labelSmoothing'; expected one of "
                                         r"\['ignoreIndex'\]"):
        aclnn.to_node(aclnn.AclnnCall("aclnnNLLLoss", {"self": "x", "target": "t"}, scalars={"labelSmoothing": 0.1}))
    assert opset.get("CrossEntropyLoss").aclnn.extra_outputs[0] == "logProbOut"
    multilabel = aclnn.to_node(aclnn.AclnnCall("aclnnMultilabelMarginLoss", {"self": "x", "target": "t"}, reduction=2))
    assert opset.node_attributes(multilabel) == {"reduction": "sum"} and list(multilabel.input) == ["x", "t"]
    assert opset.get("MultilabelMarginLoss").aclnn.extra_outputs == ("isTarget",)
    with pytest.raises(ValueError, match="aclnnCrossEntropyLoss: reductionOptional 1 has no meaning here; expected "
                                         "one of 'none', 'mean', 'sum'"):  # a char*, not aten's code
        aclnn.to_node(aclnn.AclnnCall("aclnnCrossEntropyLoss", {"input": "x", "target": "t"}, reduction=1))
    with pytest.raises(ValueError, match="aclnnNLLLoss takes the reduction as an int64 code; got 'sum'"):
        aclnn.to_node(aclnn.AclnnCall("aclnnNLLLoss", {"self": "x", "target": "t"}, reduction="sum"))


def test_aclnn_calls_of_the_gradients_and_of_ctc():
    """A gradient API reads what its forward call wrote (total weight, log-probabilities, log-alpha): to_call leaves
    those arguments to the caller and to_node drops them, except the log-probabilities that stand at the logits'
    place. The CTC APIs take no reduction (they compute `none`)."""
    nll = opset.make_node("NLLLossBackward", ["g", "x", "t", "w"], ["dx"], reduction="mean", ignore_index=2)
    call = aclnn.to_call(nll)
    assert call.tensors == {"gradOutput": "g", "self": "x", "target": "t", "weight": "w", "totalWeight": None}
    assert call.reduction == 1 and call.scalars == {"ignoreIndex": 2}
    call.tensors["totalWeight"] = "total"
    assert aclnn.to_node(call) == nll
    ce = aclnn.to_call(opset.make_node("CrossEntropyLossGrad", ["g", "x", "t"], ["dx"], reduction="sum"))
    assert ce.reduction == "sum" and ce.tensors == {"gradLoss": "g", "logProb": None, "target": "t",
                                                    "weightOptional": None}
    ce.tensors["logProb"] = "log_probs"
    assert list(aclnn.to_node(ce).input) == ["g", "log_probs", "t"]
    ctc = opset.make_node("CtcLossBackward", ["g", "lp", "t", "il", "tl"], ["dlp"], blank=0, reduction="none",
                          zero_infinity=0)
    call = aclnn.to_call(ctc)
    assert call.reduction is None and call.scalars == {"blank": 0, "zeroInfinity": 0}
    assert call.tensors["negLogLikelihood"] is None and call.tensors["logAlpha"] is None
    assert aclnn.to_node(call) == ctc
    assert opset.get("CtcLoss").aclnn.host_arrays == ("inputLengths", "targetLengths")
    with pytest.raises(ValueError, match="CtcLoss node 'loss': aclnnCtcLoss computes reduction 'none' only; the "
                                         "node's 'mean' is that call"):
        aclnn.to_call(opset.make_node("CtcLoss", ["lp", "t", "il", "tl"], ["loss"]))
    with pytest.raises(ValueError, match="aclnnCtcLoss takes no reduction"):
        aclnn.to_node(aclnn.AclnnCall("aclnnCtcLoss", {"logProbs": "lp"}, reduction=1))


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-15), (np.float32, 4e-7)])
def test_cross_entropy_gradient_of_log_probabilities_is_that_of_the_logits(dtype, tolerance):
    """What makes aclnnCrossEntropyLossGrad's logProb a CrossEntropyLossGrad input: the gradient from the
    log-probabilities is the logits' (held to PyTorch float64 autograd), within the float type's rounding of the
    log-softmax (of max |gradient|)."""
    from lossops.ort_ext.arrays import run

    r = np.random.default_rng(3)
    x, t, w = r.normal(0, 4, (64, 10)), r.integers(0, 10, 64), r.uniform(0.5, 2, 10)
    xt = torch.tensor(x, requires_grad=True)
    F.cross_entropy(xt, torch.tensor(t), weight=torch.tensor(w), label_smoothing=0.125).backward()
    log_probs = torch.log_softmax(torch.tensor(x), 1).numpy()
    for logits in (x, log_probs):
        got = run("CrossEntropyLossGrad", [dtype(1), logits.astype(dtype), t, w.astype(dtype)], reduction="mean",
                  label_smoothing=0.125)  # a float32 attribute: 0.125 is exact
        expected = xt.grad.numpy()
        assert np.abs(got - expected).max() <= tolerance * np.abs(expected).max()


@pytest.mark.parametrize("portable", [True, False])
def test_log1p_forms_are_accurate_across_their_branches(portable):
    """float32 log1p(u) as lowering writes it (the portable form's series, switching to Log at |u / (2 + u)| = 1/3,
    i.e. u = -1/2 and u = 1) and as function bodies write it, on onnxruntime, against numpy's float64 log1p, from
    u = -1 to 1e30, tiny u and both switch points included: within 2 float32 ulps of the result (measured 1.7) for
    the series, 4 for Log(v) * u / (v - 1) (measured 3.5; the suite allows 8)."""
    from lossops.opset.builder import Builder, Static
    from lossops.opset.log1p import log1p

    op = opset.get("BinaryCrossEntropyWithLogits")
    b = Builder(op, op.resolve({}), onnx.TensorProto.FLOAT, "t_", Static(portable=portable))
    out = log1p(b, "u")
    graph = onnx.helper.make_graph(b.nodes, "g", [onnx.helper.make_tensor_value_info("u", 1, ["n"])],
                                   [onnx.helper.make_tensor_value_info(out, 1, ["n"])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=8)
    switches = np.float32([-0.5, 1.0])
    near = np.concatenate([np.nextafter(switches, -np.inf), switches, np.nextafter(switches, np.inf)])
    r = np.random.default_rng(0)
    u = np.concatenate([near, np.float32([-1.0, 0.0, 1e-30, 1e-10, -1e-10, 1e30]),
                        np.geomspace(1e-38, 1.0, 20001, dtype=np.float32),
                        -np.geomspace(1e-38, 0.9999, 20001, dtype=np.float32),
                        r.uniform(-1, 1, 20001).astype(np.float32), np.geomspace(1.0, 1e30, 2001, dtype=np.float32)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"u": u})[0]
    with np.errstate(divide="ignore"):
        want = np.log1p(u.astype(np.float64))
    assert got[u == -1.0][0] == -np.inf
    finite = u > -1.0
    ulps = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= (2.0 if portable else 4.0), (u[finite][ulps.argmax()], ulps.max())


def test_the_portable_form_avoids_what_other_consumers_reject():
    """Over every case of the conformance suite, lowering writes no Size (onnx2torch has none), no Atanh (TVM's is
    0 for small arguments), no Constant node (onnx2tf turns an Expand whose shape comes from one into that
    shape: the constants are initializers), no ReduceSum over a tensor whose static shape is empty unless the
    sum is empty too (TVM returns uninitialised memory), and no Div by a constant 0 (TVM's constant folder fails
    on one)."""
    from lossops.conformance import golden

    for case in golden.load_all():
        lowered = onnx.shape_inference.infer_shapes(lower(case.model)[0])
        shapes = {v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
                  for v in [*lowered.graph.value_info, *lowered.graph.input, *lowered.graph.output]}
        constants = {t.name: onnx.numpy_helper.to_array(t) for t in lowered.graph.initializer}
        for node in lowered.graph.node:
            assert node.op_type not in ("Size", "Atanh", "Constant"), (case.name, node.op_type)
            if node.op_type == "ReduceSum":
                into, out = shapes.get(node.input[0]), shapes.get(node.output[0])
                assert not (into and 0 in into and out is not None and None not in out and 0 not in out), case.name
            if node.op_type == "Div" and node.input[1] in constants:
                assert not np.all(constants[node.input[1]] == 0), case.name


TORCH_NAMES = [(op.name, name) for op in opset.OPS.values() for name in op.torch]


def _class_tensor(formal: opset.spec.Input, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """A class loss's input of `formal`'s rule, for an `input` of `shape`: class indices (one row ignored where
    ignore_index is 0), label lists ((4, 3) only), a weight per class, or values (of input's shape or of its
    rows')."""
    rows = (shape[0], *shape[2:])
    if formal.shape == opset.spec.LOSS:  # the test's reduction is sum
        return torch.rand((), generator=g, dtype=torch.float64)
    if formal.domain == opset.spec.LABEL_LIST:  # each row's labels, then -1
        return torch.tensor([[2, 0, -1], [1, -1, 2], [-1, 0, 0], [0, 1, 2]])
    if formal.indices:
        return torch.randint(0, shape[1], rows, generator=g)
    if formal.shape == opset.spec.PER_CLASS:
        return torch.rand(shape[1], generator=g, dtype=torch.float64) + 0.5
    return torch.rand(shape if formal.shape in (opset.spec.CLASSES, opset.spec.EXACT) else rows, generator=g,
                      dtype=torch.float64)


def _sequence_tensor(formal: opset.spec.Input, g: torch.Generator) -> torch.Tensor:
    """A sequence loss's input of `formal`'s rule: 6 frames of 3 sequences over 4 classes, log-probabilities,
    targets of classes 2 and 3 (the blank may be 0 or 1), lengths, or a reduced loss's gradient."""
    given = {"log_probs": torch.randn(6, 3, 4, generator=g, dtype=torch.float64).log_softmax(2),
             "targets": torch.tensor([[2, 3], [3, 3], [2, 0]]), "input_lengths": torch.tensor([6, 5, 2]),
             "target_lengths": torch.tensor([2, 2, 1]), "grad_output": torch.rand((), generator=g, dtype=torch.float64)}
    return given[formal.name]


@pytest.mark.parametrize(("op", "name"), TORCH_NAMES)
def test_every_pytorch_op_of_the_records_exports_as_its_node(op, name):
    """The translations are made from the records and PyTorch's schemas: each PyTorch op an operator names
    exports as that operator's node, every tensor in its place and every other argument (given values other
    than its default) as the attribute of its name, and the model computes what the PyTorch op computes."""
    record = opset.OPS[op]
    namespace, short = name.split("::")
    overload = getattr(getattr(torch.ops, namespace), short).default
    g = torch.Generator().manual_seed(len(name))
    args, kwargs, attrs = [], {}, {}
    inputs = iter(record.inputs)
    for arg in overload._schema.arguments:
        if "Tensor" in str(arg.type):  # every tensor given, each different: a swapped weight/pos_weight shows
            value = torch.rand(4, 3, generator=g, dtype=torch.float64) * 0.9 + 0.05
            if arg.name == "grad_output":
                value = value[0, 0]  # a reduced loss's gradient
            if record.classes:  # (N, C) or, for a 2d op, (N, C, H, W); C = 3, targets on the class axis
                value = _class_tensor(next(inputs), (2, 3, 2, 2) if short.endswith("2d") else (4, 3), g)
            elif record.sequences:
                value = _sequence_tensor(next(inputs), g)
        elif arg.name == "reduction":
            value, attrs["reduction"] = 2, "sum"
        else:
            attribute = record.attribute(arg.name)
            other = next(v for v in attribute.values if v != attribute.default)
            value = bool(other) if str(arg.type) == "bool" else other
            attrs[arg.name] = other
        (kwargs.__setitem__(arg.name, value) if arg.kwarg_only else args.append(value))
    tensors = [a for a in args if isinstance(a, torch.Tensor)]

    class Module(torch.nn.Module):
        def forward(self, *inputs):
            it = iter(inputs)
            return overload(*(next(it) if isinstance(a, torch.Tensor) else a for a in args), **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = export(Module(), tuple(tensors))
    nodes = [n for n in model.graph.node if n.domain == opset.DOMAIN]
    assert [n.op_type for n in nodes] == [op]
    got = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
    assert {k: v.decode() if isinstance(v, bytes) else v for k, v in got.items()} == pytest.approx(attrs)
    assert len(nodes[0].input) == len(record.inputs)
    np.testing.assert_allclose(_run(model, tensors), Module()(*tensors).numpy(), rtol=1e-12, atol=1e-14)


def test_simplify_cleans_an_exported_graph_as_the_exporter_does():
    """converters.torch.simplify (what a training export runs instead of the exporter's optimize, whose
    slices-to-Split rule is quadratic in the graph): the same values, and the graph the exporter's optimize makes
    of it: constant arithmetic folded, two reshapes one, adding 0 gone."""
    import onnx_ir as ir

    from lossops.converters.torch import simplify

    class Halves(torch.nn.Module):
        def forward(self, x):
            a, b = x[:, :4], x[:, 4:]
            scale = torch.ones(8).sum() / 4  # constant arithmetic: folded
            return (a * b).reshape(-1).reshape(2, -1) * scale + 0.0

    x = torch.randn(3, 8)
    program = torch.onnx.export(Halves(), (x,), dynamo=True, optimize=False, verbose=False)
    before = program.model_proto
    model = ir.serde.deserialize_model(before)
    simplify(model)
    after = ir.serde.serialize_model(model)
    onnx.checker.check_model(after, full_check=True)
    ops = [n.op_type for n in after.graph.node]
    assert len(ops) < len(before.graph.node), ops
    optimized = torch.onnx.export(Halves(), (x,), dynamo=True, optimize=True, verbose=False).model_proto
    assert ops == [n.op_type for n in optimized.graph.node] == ["Slice", "Slice", "Mul", "Reshape", "Mul"], ops
    want = (Halves()(x)).numpy()
    for proto in (before, after):
        got = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {proto.graph.input[0].name: x.numpy()})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6)
