"""The check export_training_step runs against PyTorch autograd: it passes right steps, refuses wrong ones
naming the op, checks dropout steps on a twin, refuses other randomness, and can be skipped; and the steps
users reported wrong: cross entropy with `mean`, and losses that hold a tensor."""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

from lossops.converters import aten_ops, torch_ops
from lossops.ort_ext import InferenceSession
from lossops.training import SGD, StepCheckError, TrainingSession, export_training_step

logging.getLogger("torch").setLevel(logging.ERROR)


def _export(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_training_step(*args, **kwargs)


def _classifier(batch: int = 32):
    torch.manual_seed(0)
    return torch.nn.Linear(16, 10), torch.randn(batch, 16), torch.randint(0, 10, (batch,))


@pytest.mark.parametrize("verify", [True, False])
def test_cross_entropy_mean_updates_as_pytorch(verify):
    """The reported reproducer: one SGD(lr=1) step's update over PyTorch's gradient was 32.0 at B = 32 (the
    exporter's total_weight of nll_loss_forward was 1). The fix is the translation, so it holds unchecked too."""
    net, x, y = _classifier()
    w0 = net.weight.detach().clone()
    reference = copy.deepcopy(net)
    F.cross_entropy(reference(x), y).backward()
    step = _export(net, lambda o, t: F.cross_entropy(o, t), ((x,), (y,)), SGD(lr=1.0), verify=verify)
    session = TrainingSession(step)
    session.step([x.numpy(), y.numpy()])
    ratio = np.linalg.norm(w0.numpy() - session.parameters()["weight"]) / reference.weight.grad.norm().item()
    assert abs(ratio - 1) < 1e-5, ratio
    assert (step.check is None) == (not verify)


def test_the_check_refuses_a_wrong_step_and_names_the_op(monkeypatch):
    """With torch.onnx's own nll_loss_forward translation back (the cause of the 32x), the export refuses the
    step and names the op and its output; verify=False would have let it through."""
    monkeypatch.delitem(aten_ops.WRITTEN, "aten::nll_loss_forward")
    # cross_entropy as PyTorch's own ops, not lossops' CrossEntropyLoss, so that aten's nll_loss_forward is traced
    monkeypatch.setattr(torch_ops.LossopsLosses, "_nll", staticmethod(lambda func, b, r, args, kwargs: func(
        *args, **kwargs)))
    net, x, y = _classifier()
    with pytest.raises(StepCheckError) as caught:
        _export(net, lambda o, t: F.cross_entropy(o, t), ((x,), (y,)), SGD(lr=1.0))
    message = str(caught.value)
    assert "grad " in message and "aten.nll_loss_forward.default, output 1" in message, message
    assert "verify=False" in message
    wrong = TrainingSession(_export(net, lambda o, t: F.cross_entropy(o, t), ((x,), (y,)), SGD(lr=1.0),
                                    verify=False))
    wrong.step([x.numpy(), y.numpy()])
    assert not np.allclose(wrong.parameters()["bias"], net.bias.detach().numpy() - 0.1, atol=1)  # far off: 32x


def test_a_wrong_value_without_a_wrong_op_is_still_refused(monkeypatch):
    """The check compares the exported graph's outputs whatever the cause: here a gradient output rewired
    to twice itself after the trace."""
    from lossops.training import export

    original = export._trace

    def doubled(*args, **kwargs):
        traced, names = original(*args, **kwargs)
        graph = traced.model.graph
        last = graph.output[-1].name
        graph.node.append(onnx.helper.make_node("Add", [last, last], [last + "_2"]))
        graph.output[-1].name = last + "_2"
        return traced, names

    monkeypatch.setattr(export, "_trace", doubled)
    net, x, y = _classifier()
    with pytest.raises(StepCheckError, match=r"grad bias differs by up to"):
        _export(net, lambda o, t: F.cross_entropy(o, t), ((x,), (y,)), SGD(lr=1.0))


WEIGHT = torch.linspace(0.5, 1.5, 10)


@pytest.mark.parametrize("loss", [torch.nn.BCEWithLogitsLoss(pos_weight=WEIGHT),
                                  torch.nn.CrossEntropyLoss(weight=WEIGHT),
                                  lambda o, t: F.cross_entropy(o, t, weight=WEIGHT)],
                         ids=["BCEWithLogitsLoss(pos_weight)", "CrossEntropyLoss(weight)", "closure"])
def test_losses_holding_a_tensor_export_with_it_as_a_constant(loss):
    """They failed in fake-tensor tracing; now the tensor is a constant of the step (not state, not an input)."""
    net, x, y = _classifier(12)
    target = (torch.rand(12, 10) > 0.5).float() if isinstance(loss, torch.nn.BCEWithLogitsLoss) else y
    step = _export(net, loss, ((x,), (target,)), SGD(lr=1.0))
    assert step.data == ["input_0", "target_0"] and set(step.state) == {"weight", "bias"}
    assert step.check.worst <= 1e-5
    reference = copy.deepcopy(net)
    loss(reference(x), target).backward()
    session = TrainingSession(step)
    session.step([x.numpy(), target.numpy()])
    np.testing.assert_allclose(net.weight.detach().numpy() - session.parameters()["weight"],
                               reference.weight.grad.numpy(), rtol=1e-4, atol=1e-7)


def test_dropout_step_is_checked_without_dropout_and_its_mask_follows_pytorch():
    """The check runs on a twin without dropout; the exported step itself draws a mask, and its update is
    PyTorch's gradient for that mask, scaled by 1 / (1 - p)."""
    torch.manual_seed(2)
    p = 0.4
    net = torch.nn.Sequential(torch.nn.Linear(5, 64), torch.nn.Dropout(p), torch.nn.Linear(64, 3))
    x, y = torch.randn(8, 5), torch.randn(8, 3)
    step = _export(net, F.mse_loss, ((x,), (y,)), SGD(lr=1.0))
    assert step.check.twin and step.check.worst <= 1e-5
    (dropout,) = [n for n in step.model.graph.node if n.op_type == "Dropout"]
    model = onnx.ModelProto()
    model.CopyFrom(step.model)
    model.graph.output.append(onnx.helper.make_tensor_value_info(dropout.output[1], onnx.TensorProto.BOOL, None))
    feeds = dict(step.state) | {"lr": np.array(1.0), "step": np.array(0), "input_0": x.numpy(),
                                "target_0": y.numpy()}
    outputs = InferenceSession(model, mode="decomposition").run([*step.outputs, dropout.output[1]], feeds)
    mask = torch.from_numpy(outputs[-1])
    assert 0.45 < mask.float().mean() < 0.75  # about 1 - p of 8 x 64 kept
    after = dict(zip(step.state, outputs[1:], strict=False))
    reference = copy.deepcopy(net)
    F.mse_loss(reference[2](reference[0](x) * mask / (1 - p)), y).backward()
    for name, param in reference.named_parameters():
        np.testing.assert_allclose(step.state[name] - after[name], param.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_the_twin_is_the_exported_graph_with_its_dropout_kept_off(monkeypatch):
    """The check's twin comes from the exported graph, not a second trace: each Dropout's ratio 0 and each
    gradient's 1 / (1 - p) 1, the constants it no longer reads removed. Run in onnxruntime it computes
    PyTorch's loss and gradients without dropout; a graph whose dropout gradient is scaled otherwise has no
    such twin (the check then traces one)."""
    from lossops.training import export as export_module
    from lossops.training.twin import without_dropout

    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(5, 32), torch.nn.Dropout(0.3), torch.nn.Linear(32, 3),
                              torch.nn.Dropout(0.2))
    x, y = torch.randn(6, 5), torch.randn(6, 3)
    traces = []
    trace = export_module._trace
    monkeypatch.setattr(export_module, "_trace", lambda *args: traces.append(args) or trace(*args))
    step = _export(net, F.mse_loss, ((x,), (y,)), SGD())
    assert step.check.twin and step.check.worst <= 1e-5 and len(traces) == 1
    twin = without_dropout(step.gradient_model)
    assert twin is not None
    read = {i for n in twin.graph.node for i in n.input}
    assert [t.name for t in twin.graph.initializer if t.name not in read] == []  # onnxruntime warns of each
    feeds = {n: step.state[n] for n in step.parameters} | {"input_0": x.numpy(), "target_0": y.numpy()}
    got = InferenceSession(twin, mode="decomposition").run(None, feeds)
    reference = copy.deepcopy(net).eval()  # dropout off
    loss = F.mse_loss(reference(x), y)
    loss.backward()
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-6)
    grads = dict(reference.named_parameters())
    for name, value in zip(step.trained, got[1:], strict=True):
        np.testing.assert_allclose(value, grads[name].grad.numpy(), rtol=1e-5, atol=1e-7)
    graph = step.gradient_model.graph
    masks = {n.output[1] for n in graph.node if n.op_type == "Dropout"}
    casts = {n.output[0] for n in graph.node if n.op_type == "Cast" and n.input[0] in masks}
    scales = {i for n in graph.node if n.op_type == "Mul" and set(n.input) & casts for i in n.input} - casts
    assert len(masks) == 2 and scales
    broken = copy.deepcopy(step.gradient_model)
    for tensor in broken.graph.initializer:
        if tensor.name in scales:
            tensor.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor) * 2, tensor.name))
    assert without_dropout(broken) is None


def test_randomness_other_than_dropout_cannot_be_checked():
    class Noisy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.linear(x + 0.1 * torch.randn_like(x))

    torch.manual_seed(0)
    example = ((torch.randn(3, 4),), (torch.randn(3, 2),))
    with pytest.raises(StepCheckError, match=r"draws random numbers with aten\.randn_like\.default.*verify=False"):
        _export(Noisy(), F.mse_loss, example, SGD())
    assert _export(Noisy(), F.mse_loss, example, SGD(), verify=False).check is None


def test_a_module_that_refuses_float64_is_checked_in_its_own_precision():
    class Float32Only(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 2)

        def forward(self, x):
            assert x.dtype == torch.float32, "float32 inputs only"
            return self.linear(x)

    torch.manual_seed(0)
    step = _export(Float32Only(), F.mse_loss, ((torch.randn(3, 4),), (torch.randn(3, 2),)), SGD())
    assert step.check.reference.startswith("the module's precision (it does not run in float64: AssertionError")


def test_the_check_measures_differences_as_stated_where_values_are_not_finite():
    """The check's two measures, against their definitions written element by element: the largest finite
    magnitude, and the largest |got - want| where NaN matches NaN and an infinity the same infinity, and any
    other non-finite pair is infinitely far apart (all finite, NaN, infinities, overflowing differences, empty)."""
    from lossops.training.check import _difference, _largest

    def largest(a):
        return max((abs(v) for v in a.ravel().tolist() if np.isfinite(v)), default=0.0)

    def difference(got, want):
        def one(g, w):
            if g == w or (np.isnan(g) and np.isnan(w)):
                return 0.0
            return abs(g - w) if np.isfinite(g) and np.isfinite(w) else np.inf
        return max((one(g, w) for g, w in zip(got.ravel().tolist(), want.ravel().tolist(), strict=True)),
                   default=0.0)

    rng = np.random.default_rng(0)
    specials = np.array([np.nan, np.inf, -np.inf, 1.7e308, -1.7e308, 0.0, -0.0])
    for trial in range(300):
        size = int(rng.integers(0, 6))
        want = rng.standard_normal(size)
        got = want + rng.standard_normal(size) * 10.0 ** rng.integers(-12, 2)
        for a in (want, got):  # some trials all finite, others with specials in either or both
            if trial % 3:
                hit = rng.random(size) < 0.3
                a[hit] = rng.choice(specials, int(hit.sum()))
        if trial % 5 == 0:
            got[:] = want  # equal, specials included
        assert _largest(want) == largest(want)
        with np.errstate(invalid="ignore", over="ignore"):
            assert _difference(got, want) == difference(got, want), (got, want)
    assert _difference(np.zeros(2), np.zeros(3)) == np.inf
