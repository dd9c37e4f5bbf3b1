"""Training: the gradient table, gradients of the forward operators against PyTorch autograd and finite
differences, exported training steps following PyTorch, and the onnxruntime-training adapter."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch

from lossops import opset
from lossops.conformance.backends import BACKENDS
from lossops.conformance.cases import node_model
from lossops.converters import ort_training
from lossops.opset.gradients import gradient_node
from lossops.train_demo import problems, run

logging.getLogger("torch").setLevel(logging.ERROR)

FORWARDS = [
    ("BinaryCrossEntropyWithLogits", lambda r: [r.normal(size=(3, 4)) * 3, r.uniform(size=(3, 4)), r.uniform(size=4),
                                                r.uniform(0.5, 2, size=4)]),
    ("BinaryCrossEntropy", lambda r: [r.uniform(0.05, 0.95, size=(3, 4)), r.uniform(size=(3, 4)), r.uniform(size=4)]),
    ("KlDiv", lambda r: [np.log(r.dirichlet(np.ones(4), size=3)), r.dirichlet(np.ones(4), size=3)]),
]
ATTRS = {"BinaryCrossEntropyWithLogits": [{"reduction": r} for r in ("none", "mean", "sum")],
         "BinaryCrossEntropy": [{"reduction": r} for r in ("none", "mean", "sum")],
         "KlDiv": [{"reduction": r, "log_target": t} for r in ("none", "mean", "sum", "batchmean") for t in (0, 1)]}
CASES = [(op, make, attrs) for op, make in FORWARDS for attrs in ATTRS[op]]


def _run_op(op: str, inputs: list[np.ndarray], attrs: dict, backend: str = "kernels") -> np.ndarray:
    model, feeds = node_model(op, inputs, "float64", attrs)
    return BACKENDS[backend](model, list(feeds.values()))


def _gradient(op: str, inputs: list[np.ndarray], attrs: dict, grad_output: np.ndarray, backend: str) -> np.ndarray:
    """d loss / d input through the gradient table's node."""
    forward = opset.make_node(op, [i.name for i in opset.get(op).inputs][:len(inputs)], ["loss"], **attrs)
    node = gradient_node(forward, "grad_output", "grad_input")
    backward = node.op_type
    by_name = dict(zip([i.name for i in opset.get(op).inputs], inputs, strict=False)) | {"grad_output": grad_output}
    args = [by_name.get(n) for n in opset.get(op).gradient.inputs]
    model, feeds = node_model(backward, args, "float64", opset.node_attributes(node))
    return BACKENDS[backend](model, list(feeds.values()))


@pytest.mark.parametrize("backend", ["kernels", "decomposition"])
@pytest.mark.parametrize(("op", "make", "attrs"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_gradient_against_autograd_and_finite_differences(op, make, attrs, backend):
    inputs = make(np.random.default_rng(0))
    loss = _run_op(op, inputs, attrs, backend)
    rng = np.random.default_rng(1)
    grad_output = rng.normal(size=loss.shape)
    got = _gradient(op, inputs, attrs, grad_output, backend)

    # PyTorch autograd of the same forward
    import torch.nn.functional as F

    from lossops.conformance.oracle import ORACLES  # noqa: F401 - the torch forward functions

    x = torch.tensor(inputs[0], requires_grad=True)
    rest = [torch.tensor(a) for a in inputs[1:]]
    reduction = attrs["reduction"]
    if op == "BinaryCrossEntropyWithLogits":
        value = F.binary_cross_entropy_with_logits(x, rest[0], weight=rest[1], pos_weight=rest[2], reduction=reduction)
    elif op == "BinaryCrossEntropy":
        value = F.binary_cross_entropy(x, rest[0], weight=rest[1].expand(x.shape), reduction=reduction)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = F.kl_div(x, rest[0], reduction=reduction, log_target=bool(attrs["log_target"]))
    (expected,) = torch.autograd.grad(value, x, torch.tensor(grad_output))
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-12, atol=1e-14)

    # central differences of the lossops forward itself, d <grad_output, loss> / d input
    eps = 1e-6
    numeric = np.zeros_like(inputs[0])
    for index in np.ndindex(inputs[0].shape):
        plus, minus = inputs[0].copy(), inputs[0].copy()
        plus[index] += eps
        minus[index] -= eps
        delta = _run_op(op, [plus, *inputs[1:]], attrs) - _run_op(op, [minus, *inputs[1:]], attrs)
        numeric[index] = np.sum(grad_output * delta) / (2 * eps)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", ["decomposition", "kernels"])
@pytest.mark.parametrize("index", range(3), ids=["bce_with_logits_pos_weight", "sigmoid_bce", "log_softmax_kl_div"])
def test_training_follows_pytorch(index, mode):
    """20 SGD steps (momentum 0.9) in onnxruntime follow PyTorch's loss curve and final parameters."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_losses, ort_losses, torch_params, ort_params, exported = run(problems()[index], 20, mode=mode)
    lossops_ops = {n.op_type for n in exported.model.graph.node if n.domain == opset.DOMAIN}
    forward = {0: "BinaryCrossEntropyWithLogits", 1: "BinaryCrossEntropy", 2: "KlDiv"}[index]
    assert lossops_ops == {forward, opset.get(forward).gradient.backward}
    np.testing.assert_allclose(ort_losses, torch_losses, rtol=1e-5)
    assert torch_losses[-1] < torch_losses[0] * 0.9  # it trains
    for name, p in torch_params.items():
        np.testing.assert_allclose(ort_params[name], p, rtol=1e-5, atol=1e-5 * np.abs(p).max())


def test_ort_training_gradient_definition():
    definition = ort_training.gradient_definition("KlDiv", reduction="batchmean", log_target=1)
    assert definition == [(("KlDivBackward", "lossops"), ["GO(0)", "I(0)", "I(1)"], ["GI(0)"],
                           {"reduction": {"value": "batchmean", "dtype": "string"},
                            "log_target": {"value": 1, "dtype": "int"}})]
    bcewl = ort_training.gradient_definition("BinaryCrossEntropyWithLogits")
    assert bcewl[0][1] == ["GO(0)", "I(0)", "I(1)", "I(2)", "I(3)"]


def test_ort_training_registration():
    pytest.importorskip("onnxruntime.training", reason="onnxruntime-training 1.19.2 is not installed here (it "
                        "conflicts with onnxruntime and needs an environment of its own)")
    ort_training.register("BinaryCrossEntropy", reduction="mean")
