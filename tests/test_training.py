"""Training: the gradient table, gradients of the forward operators against PyTorch autograd and finite
differences, exported training steps (optimizers, buffers, checkpoints, eval forward) following PyTorch,
and the onnxruntime-training adapter."""

from __future__ import annotations

import copy
import itertools
import logging
import math
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

from lossops import opset
from lossops.conformance.backends import BACKENDS
from lossops.conformance.cases import node_model
from lossops.conformance.oracle import ORACLES
from lossops.conformance.specs import draw
from lossops.extras import MissingExtra
from lossops.opset.spec import FITS, LABEL_LIST, LOG_PROBABILITY, POSITIVE, PROBABILITY
from lossops.ort_ext import InferenceSession
from lossops.training import (
    SGD,
    Adam,
    AdamW,
    StepExportError,
    TrainingSession,
    export_training_step,
    load_into_torch,
    ort_training,
)
from lossops.training.demo import problems, run

logging.getLogger("torch").setLevel(logging.ERROR)

FORWARDS = [name for name, op in opset.OPS.items() if op.gradient is not None]


def attribute_settings(op_name: str) -> list[dict]:
    """Every combination of the enum attributes (reduction, log_target), then each number attribute's other
    values one at a time."""
    op = opset.get(op_name)
    enums = [a for a in op.attributes if a.enum]
    settings = [dict(zip([a.name for a in enums], combination, strict=True))
                for combination in itertools.product(*(a.allowed for a in enums))]
    return settings + [{a.name: v} for a in op.params if not a.enum for v in a.examples]


def forward_inputs(op_name: str, r: np.random.Generator) -> list[np.ndarray]:
    """Every input of a 3x4 loss, optional ones included, drawn from its domain; one that fits the shape (a
    weight) per class."""
    op = opset.get(op_name)
    if op.sequences:  # five frames of three sequences over four classes (class 1 never a label: blank 1 too)
        lp = draw(r, LOG_PROBABILITY, (5, 3, 4))
        return [lp - np.log(np.exp(lp).sum(2, keepdims=True)), np.array([[2, 3], [3, 3], [2, 0]]),
                np.array([5, 4, 2]), np.array([2, 2, 1])]
    if op.classes:  # three rows of four classes, the last ignored where ignore_index is 0 (or probabilities)
        given = {"input": draw(r, LOG_PROBABILITY, (3, 4)), "target": np.array([2, 1, 0]),
                 "weight": draw(r, POSITIVE, 4)}
        if not op.input("target").indices:  # probabilities
            given["target"] = draw(r, PROBABILITY, (3, 4))
        elif op.input("target").domain == LABEL_LIST:
            given["target"] = np.array([[2, 0, -1, 0], [1, -1, 3, 3], [0, 1, 2, 3]])
        return [given[i.name] for i in op.inputs]
    return [draw(r, i.domain, (4,) if i.shape == FITS else (3, 4)) for i in op.inputs]


def gradient_of(op_name: str, wrt: str) -> opset.spec.Gradient:
    """The record's gradient table entry for `wrt` ("input" or "target")."""
    op = opset.get(op_name)
    return op.gradient if wrt == "input" else op.target_gradient


CASES = [(op, attrs, wrt) for op in FORWARDS for attrs in attribute_settings(op) for wrt in ("input", "target")
         if gradient_of(op, wrt)]


def gradient_node(forward: onnx.NodeProto, grad_output: str, grad_input: str, wrt: str = "input") -> onnx.NodeProto:
    """The backward node of a forward lossops node for the gradient of `wrt`, wired as its record says."""
    op, gradient = opset.get(forward.op_type), gradient_of(forward.op_type, wrt)
    given = dict(zip([i.name for i in op.inputs], forward.input, strict=False))
    inputs = [grad_output if name == "grad_output" else given.get(name, "") for name in gradient.inputs]
    while inputs and not inputs[-1]:
        inputs.pop()
    return opset.make_node(gradient.backward, inputs, [grad_input], **opset.node_attributes(forward))


def _run_op(op: str, inputs: list[np.ndarray], attrs: dict, backend: str = "kernels") -> np.ndarray:
    model, feeds = node_model(op, inputs, "float64", attrs)
    return BACKENDS[backend](model, list(feeds.values()))


def _gradient(op: str, inputs: list[np.ndarray], attrs: dict, grad_output: np.ndarray, backend: str,
              wrt: str = "input") -> np.ndarray:
    """d loss / d wrt through the gradient table's node."""
    forward = opset.make_node(op, [i.name for i in opset.get(op).inputs][:len(inputs)], ["loss"], **attrs)
    node = gradient_node(forward, "grad_output", "grad_input", wrt)
    backward = node.op_type
    by_name = dict(zip([i.name for i in opset.get(op).inputs], inputs, strict=False)) | {"grad_output": grad_output}
    args = [by_name.get(n) for n in gradient_of(op, wrt).inputs]
    model, feeds = node_model(backward, args, "float64", opset.node_attributes(node))
    return BACKENDS[backend](model, list(feeds.values()))


@pytest.mark.parametrize("backend", ["kernels", "decomposition"])
@pytest.mark.parametrize(("op", "attrs", "wrt"), CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_gradient_against_autograd_and_finite_differences(op, attrs, wrt, backend):
    """d loss / d input (and d loss / d target, where the record has a node for it) through the gradient
    table's node, for every forward operator and attribute setting: against PyTorch autograd of the operator's
    oracle, and against central differences of the operator."""
    inputs = forward_inputs(op, np.random.default_rng(0))
    loss = _run_op(op, inputs, attrs, backend)
    rng = np.random.default_rng(1)
    grad_output = rng.normal(size=loss.shape)
    got = _gradient(op, inputs, attrs, grad_output, backend, wrt)

    k = 0 if wrt == "input" else 1
    args = [torch.tensor(a) if a is not None else None for a in inputs]
    args[k].requires_grad_(True)
    value = ORACLES[op](*args, **opset.get(op).resolve(attrs))
    (expected,) = torch.autograd.grad(value, args[k], torch.tensor(grad_output))
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-12, atol=1e-14)

    # central differences of the lossops forward itself, d <grad_output, loss> / d wrt; a sequence loss's gradient
    # is PyTorch's, the derivative through a log_softmax over the classes (its record): of the logits there
    eps = 1e-6
    numeric = np.zeros_like(inputs[k])
    through = opset.get(op).sequences
    for index in np.ndindex(inputs[k].shape):
        plus, minus = list(inputs), list(inputs)
        plus[k], minus[k] = inputs[k].copy(), inputs[k].copy()
        plus[k][index] += eps
        minus[k][index] -= eps
        if through:
            plus[k], minus[k] = (a - np.log(np.exp(a).sum(-1, keepdims=True)) for a in (plus[k], minus[k]))
        delta = _run_op(op, plus, attrs) - _run_op(op, minus, attrs)
        numeric[index] = np.sum(grad_output * delta) / (2 * eps)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)


PROBLEMS = ["mlp_bce_with_logits_adamw", "cnn_batchnorm_bce_adam", "distillation_kl_div_sgd_nesterov",
            "head_buffer_pos_weight_sgd_clip"]
FORWARD = ["BinaryCrossEntropyWithLogits", "BinaryCrossEntropy", "KlDiv", "BinaryCrossEntropyWithLogits"]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("mode", ["decomposition", "kernels"])
@pytest.mark.parametrize("index", range(4), ids=PROBLEMS)
def test_four_models_follow_pytorch(index, mode):
    """100 steps in onnxruntime follow PyTorch's losses and final state (parameters, BatchNorm statistics)
    to 1e-5, on the same batches; the step graph holds the loss and its backward as lossops nodes and passes
    onnx's full check."""
    result = _quiet(run, problems()[index], 100, mode)
    step = result.session.definition
    assert {n.op_type for n in step.model.graph.node if n.domain == opset.DOMAIN} == {
        FORWARD[index], opset.get(FORWARD[index]).gradient.backward}
    opset.register()
    onnx.checker.check_model(step.model, full_check=True)
    assert result.loss_difference <= 1e-5, result.loss_difference
    assert result.state_difference <= 1e-5, result.state_difference
    assert set(result.ort_state) == set(result.torch_state)  # buffers included (running stats, pos_weight)
    assert np.mean(result.torch_losses[-10:]) < 0.9 * np.mean(result.torch_losses[:10])  # it trains


def test_captured_buffer_and_batchnorm_state():
    """A pos_weight the loss reads from the module is state, not an argument; BatchNorm's buffers are updated
    by the step as PyTorch updates them; the caller's module is not changed by the export."""
    head = problems()[3]
    before = {k: v.clone() for k, v in head.module.state_dict().items()}
    step = _quiet(export_training_step, head.module, head.loss_fn, head.batches[0], head.optimizer)
    assert step.buffers == ["pos_weight"] and step.data == ["input_0", "target_0"]
    assert all(torch.equal(before[k], v) for k, v in head.module.state_dict().items())
    cnn = _quiet(run, problems()[1], 3)
    assert int(cnn.ort_state["1.num_batches_tracked"]) == 3
    assert not np.allclose(cnn.ort_state["1.running_var"], 1.0)


def test_the_joint_graph_reaches_the_exporter_without_a_second_capture(monkeypatch):
    """The traced step goes to torch.onnx.export as an ExportedProgram, already decomposed as the exporter
    decomposes: neither torch.export nor the program's decomposition is called (each would trace the step once
    more), and the program carries what a capture would: symbolic batch (the check
    runs the example and one a row shorter, every gradient held to PyTorch autograd on both), an op with a tuple
    result (BatchNorm), a constant the loss captures and reads twice (class weights, with ignore_index and label
    smoothing), a mean whose decomposed gradient counts the elements of a tensor of symbolic shape (Huber's)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 3))
    weight = torch.tensor([0.5, 2.0, 1.0])

    def loss_fn(out, target):
        return (F.cross_entropy(out, target, weight=weight, ignore_index=1, label_smoothing=0.1)
                + (out * weight).square().mean() + F.huber_loss(out, torch.zeros_like(out), delta=0.7))

    def no_trace(*args, **kwargs):
        raise AssertionError("torch.export.export or ExportedProgram.run_decompositions was called")

    monkeypatch.setattr(torch.export, "export", no_trace)
    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", no_trace)
    target = torch.tensor([0, 1, 2, 2, 1, 0])
    step = _quiet(export_training_step, net, loss_fn, ((torch.randn(6, 5),), (target,)))
    assert step.check.batches == ["the example batch", "the example batch cut to batch=5"]
    assert step.dims["input_0"] == {0: "batch"}


def _small_problem():
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    net[0].bias.requires_grad_(False)  # a frozen parameter: no gradient, never updated
    x, y = torch.randn(16, 6), (torch.rand(16, 3) > 0.5).float()
    return net, (lambda out, t: F.binary_cross_entropy_with_logits(out, t)), ((x,), (y,))


OPTIMIZERS = [SGD(lr=0.1), SGD(lr=0.1, momentum=0.8, dampening=0.3), SGD(lr=0.05, momentum=0.9, nesterov=True,
              weight_decay=0.01), Adam(lr=0.01, weight_decay=0.1, amsgrad=True), Adam(lr=0.02, betas=(0.8, 0.9)),
              AdamW(lr=0.01, amsgrad=True), AdamW(lr=0.01, weight_decay=0.5)]


@pytest.mark.parametrize("optimizer", OPTIMIZERS, ids=repr)
@pytest.mark.parametrize("clip", [None, 0.05])
def test_optimizer_follows_torch_optim(optimizer, clip):
    """Every optimizer setting against torch.optim over 15 steps with a changing learning rate."""
    net, loss_fn, (module_args, loss_args) = _small_problem()
    step = _quiet(export_training_step, net, loss_fn, (module_args, loss_args), optimizer, clip)
    assert step.trained == ["0.weight", "2.weight", "2.bias"]
    session = TrainingSession(step)
    reference = copy.deepcopy(net)
    torch_opt = optimizer.torch([p for p in reference.parameters() if p.requires_grad])
    for k in range(15):
        lr = optimizer.lr * (1 + 0.5 * np.sin(k))
        for group in torch_opt.param_groups:
            group["lr"] = lr
        torch_opt.zero_grad()
        loss = loss_fn(reference(*module_args), *loss_args)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(reference.parameters(), clip)
        torch_opt.step()
        got = session.step([a.numpy() for a in module_args + loss_args], lr)
        np.testing.assert_allclose(got, loss.item(), rtol=1e-6)
    for name, value in reference.state_dict().items():
        np.testing.assert_allclose(session.state_dict()[name], value.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(session.state_dict()["0.bias"], net[0].bias.detach().numpy())


def _ctc_batch(batch: int, seed: int, steps: int = 9) -> tuple[tuple, tuple]:
    """A time-major batch of `steps` steps, concatenated targets; the last sequence is too short for its targets
    (4 repeated labels need 7 steps, it has at most 5): only zero_infinity makes its loss finite."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, batch, 4, generator=g)
    target_lengths = torch.randint(1, 4, (batch,), generator=g)
    target_lengths[-1] = 4
    input_lengths = torch.randint(max(1, steps - 2), steps + 1, (batch,), generator=g)
    input_lengths[-1] = min(5, steps)
    targets = torch.randint(1, 5, (int(target_lengths.sum()),), generator=g)
    targets[-4:] = 3
    return (x,), (targets, input_lengths, target_lengths)


def test_ctc_loss_trains_as_pytorch():
    """F.ctc_loss, which PyTorch's aten._ctc_loss cannot export (its intermediate's shape depends on the
    lengths), exports as one CtcLoss node and its CtcLossBackward: concatenated targets, lengths as inputs,
    zero_infinity with an alignment that cannot exist, the time axis (0), the batch axis (1) and the targets'
    length symbolic; SGD steps on batches of other sizes and lengths (one of a single step, where no alignment
    exists) follow PyTorch's, loss and parameters."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 5)

    def loss_fn(out, targets, input_lengths, target_lengths):
        return F.ctc_loss(F.log_softmax(out, 2), targets, input_lengths, target_lengths, zero_infinity=True)

    batches = [_ctc_batch(3, 0), _ctc_batch(5, 1, 14), _ctc_batch(3, 2, 1), _ctc_batch(2, 3, 6)]
    axes = (({0: "time", 1: "batch"},), ({0: "labels"}, {0: "batch"}, {0: "batch"}))
    step = _quiet(export_training_step, net, loss_fn, batches[0], SGD(lr=0.5), dynamic_shapes=axes)
    assert step.dims["input_0"] == {0: "time", 1: "batch"} and step.dims["target_0"] == {0: "labels"}
    assert step.check.worst <= 1e-5
    lossops_nodes = [n.op_type for n in step.model.graph.node if n.domain == opset.DOMAIN]
    assert lossops_nodes == ["CtcLoss", "CtcLossBackward"], lossops_nodes
    session = TrainingSession(step)
    reference = copy.deepcopy(net)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    for module_args, loss_args in batches:
        optimizer.zero_grad()
        loss = loss_fn(reference(*module_args), *loss_args)
        loss.backward()
        optimizer.step()
        got = session.step([a.numpy() for a in module_args + loss_args])
        np.testing.assert_allclose(got, loss.item(), rtol=1e-5)
    for name, value in reference.state_dict().items():
        np.testing.assert_allclose(session.state_dict()[name], value.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("reduction", "layout", "dtype"), [("none", "padded", torch.float64),
                                                            ("sum", "unbatched", torch.float32),
                                                            ("mean", "padded", torch.float32)])
def test_ctc_loss_in_every_reduction_and_layout_exports_checked(reduction, layout, dtype):
    """Padded targets (one row per sequence, padded with blanks), an unbatched sequence ((T, C) log-probabilities,
    1-D targets), float64, per-sequence losses weighted: the export's check holds the step's gradients to
    PyTorch's."""
    torch.manual_seed(1)
    net = torch.nn.Linear(4, 6).to(dtype)
    g = torch.Generator().manual_seed(7)
    if layout == "unbatched":
        x, targets = torch.randn(10, 4, generator=g, dtype=dtype), torch.tensor([1, 1, 4])
        lengths, target_lengths = torch.tensor(10), torch.tensor(3)
    else:
        x = torch.randn(10, 4, 4, generator=g, dtype=dtype)
        targets = torch.tensor([[1, 2, 2, 5], [3, 3, 0, 0], [5, 4, 1, 0], [2, 0, 0, 0]])
        lengths, target_lengths = torch.tensor([10, 8, 4, 0]), torch.tensor([4, 2, 3, 0])  # no frames, no labels

    def loss_fn(out, targets):
        loss = F.ctc_loss(F.log_softmax(out, -1), targets, lengths, target_lengths, reduction=reduction)
        return loss @ torch.linspace(0.5, 1.5, loss.numel(), dtype=dtype) if reduction == "none" else loss

    step = _quiet(export_training_step, net, loss_fn, ((x,), (targets,)), SGD(lr=0.1), dynamic_shapes=None)
    assert step.check.worst <= (1e-12 if dtype == torch.float64 else 1e-5), step.check.worst


def test_ctc_loss_of_impossible_emissions_stays_finite_in_float32():
    """log(0) at every frame for the blank and the label (the classes masked to -inf), in float32: the loss is
    infinite, and zero_infinity gives 0, as PyTorch, gradients included."""
    torch.manual_seed(2)
    net = torch.nn.Linear(4, 4)
    masked = torch.tensor([True, True, False, False])

    def loss_fn(out, targets):
        log_probs = F.log_softmax(out.masked_fill(masked, -math.inf), -1)
        return F.ctc_loss(log_probs, targets, torch.tensor([8]), torch.tensor([3]), zero_infinity=True)

    x, targets = torch.randn(8, 1, 4), torch.tensor([[1, 1, 1]])  # 7 states: the last ones overflow first
    step = _quiet(export_training_step, net, loss_fn, ((x,), (targets,)), SGD(lr=0.1), dynamic_shapes=None)
    assert step.check.worst == 0
    assert TrainingSession(step).step([x.numpy(), targets.numpy()]) == 0


def test_ctc_loss_outside_its_exportable_form_says_what_to_change():
    """float16 log-probabilities are left to PyTorch's own op, which cannot be traced: the error says which
    inputs the exportable form takes."""
    net = torch.nn.Linear(4, 5)
    lengths, targets = torch.tensor([9, 9, 9]), torch.tensor([[1, 2], [2, 3], [1, 1]])

    def loss_fn(out, targets):
        return F.ctc_loss(F.log_softmax(out, 2).half(), targets, lengths, torch.tensor([2, 2, 2]))

    with pytest.raises(StepExportError, match="cast the log-probabilities to float32"):
        _quiet(export_training_step, net, loss_fn, ((torch.randn(9, 3, 4),), (targets,)),
               dynamic_shapes=(({1: "batch"},), ({0: "batch"},)))


@pytest.mark.parametrize("mode", ["decomposition", "kernels"])
def test_resume_gives_the_same_state_as_not_stopping(tmp_path, mode):
    """60 steps in one go, and 30 + save + load into a new session + 30, end in the same state, bit for bit."""
    problem = problems()[1]  # Adam and BatchNorm: every kind of state
    step = _quiet(export_training_step, problem.module, problem.loss_fn, problem.batches[0], problem.optimizer)
    batches = [[a.numpy() for a in m + t] for m, t in problem.batches]
    straight = TrainingSession(step, mode=mode)
    straight.fit(itertools.cycle(batches), 60, lr=lambda k: 0.003 / (1 + k))
    first = TrainingSession(step, mode=mode)
    first.fit(itertools.cycle(batches), 30, lr=lambda k: 0.003 / (1 + k))
    first.save(str(tmp_path / "ckpt.safetensors"))
    resumed = TrainingSession(step, mode=mode)
    resumed.load(str(tmp_path / "ckpt.safetensors"))
    assert resumed.steps == 30 and resumed.history == first.history
    resumed.fit(itertools.islice(itertools.cycle(batches), 30, None), 30, lr=lambda k: 0.003 / (1 + k))
    assert resumed.history == straight.history
    for name, value in straight.state.items():
        np.testing.assert_array_equal(resumed.state[name].numpy(), value.numpy(), err_msg=name)


def test_checkpoint_reads_back_in_pytorch(tmp_path):
    """A checkpoint loads into a PyTorch module and torch.optim optimizer; training on in PyTorch then
    follows training on in onnxruntime."""
    problem = problems()[1]
    step = _quiet(export_training_step, problem.module, problem.loss_fn, problem.batches[0], problem.optimizer)
    session = TrainingSession(step)
    batches = [[a.numpy() for a in m + t] for m, t in problem.batches]
    session.fit(itertools.cycle(batches), 20)
    session.save(str(tmp_path / "ckpt.safetensors"))
    module = copy.deepcopy(problem.module)
    optimizer = problem.optimizer.torch(module.parameters())
    load_into_torch(str(tmp_path / "ckpt.safetensors"), module, optimizer)
    for k in range(20, 30):
        (x,), (y,) = problem.batches[k % len(problem.batches)]
        optimizer.zero_grad()
        loss = problem.loss_fn(module(x), y)
        loss.backward()
        optimizer.step()
        np.testing.assert_allclose(session.step([x.numpy(), y.numpy()]), loss.item(), rtol=1e-5)
    for name, value in module.state_dict().items():
        np.testing.assert_allclose(session.state_dict()[name], value.numpy(), rtol=1e-5, atol=1e-6)


def test_checkpoint_that_does_not_fit_is_refused(tmp_path):
    net, loss_fn, example = _small_problem()
    sgd = TrainingSession(_quiet(export_training_step, net, loss_fn, example, SGD(lr=0.1, momentum=0.9)))
    sgd.save(str(tmp_path / "sgd.safetensors"))
    adam = TrainingSession(_quiet(export_training_step, net, loss_fn, example, Adam()))
    with pytest.raises(ValueError, match=r"saved with optimizer .*SGD.*; this step uses .*Adam"):
        adam.load(str(tmp_path / "sgd.safetensors"))
    (tmp_path / "other.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(ValueError, match="not a lossops training checkpoint"):
        adam.load(str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="expected 2 arrays \\(input_0, target_0\\), got 1"):
        adam.step([np.zeros((16, 6), np.float32)])


def test_eval_forward_and_inference_model_use_the_trained_state():
    """The eval-mode forward (BatchNorm from its running statistics) on the session's state matches PyTorch's
    eval forward of the module trained alongside; `inference_model` is a self-contained model of it."""
    result = _quiet(run, problems()[1], 10)
    module = copy.deepcopy(result.problem.module)
    module.load_state_dict({k: torch.from_numpy(v) for k, v in result.ort_state.items()})
    x = result.problem.batches[1][0][0]
    expected = module.eval()(x).detach().numpy()
    np.testing.assert_allclose(result.session.evaluate(x.numpy()), expected, rtol=1e-5, atol=1e-6)
    model = result.session.inference_model()
    assert [i.name for i in model.graph.input] == ["input_0"]
    got = InferenceSession(model.SerializeToString()).run(None, {"input_0": x.numpy()})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_fit_progress_bar_and_schedule(capsys):
    net, loss_fn, (module_args, loss_args) = _small_problem()
    step = _quiet(export_training_step, net, loss_fn, (module_args, loss_args), Adam(lr=0.01))
    batch = [a.numpy() for a in module_args + loss_args]
    with_bar = TrainingSession(step)
    losses = with_bar.fit(itertools.repeat(batch), 5, lr=lambda k: 0.01 * 0.5 ** k, progress=True)
    assert "5/5" in capsys.readouterr().err
    by_hand = TrainingSession(step)
    assert losses == [by_hand.step(batch, 0.01 * 0.5 ** k) for k in range(5)] == with_bar.history


def test_missing_checkpoint_library_is_one_line(tmp_path, monkeypatch):
    net, loss_fn, example = _small_problem()
    session = TrainingSession(_quiet(export_training_step, net, loss_fn, example, SGD()))
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(MissingExtra, match=r"^saving training checkpoints needs safetensors, which is not "
                                           r"installed: pip install 'lossops\[train\]'$"):
        session.save(str(tmp_path / "x.safetensors"))


def test_missing_onnxscript_is_one_line():
    """torch installed without onnxscript (torch's exporter and lossops' translations need it): importing the
    training export says which extra to install, in a fresh process where neither is imported yet."""
    code = ("import sys; sys.modules['onnxscript'] = None\n"
            "try:\n    import lossops.training.export\nexcept ImportError as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300).stdout
    assert out.strip() == ("MissingExtra training-step export needs onnxscript, which is not installed: "
                           "pip install 'lossops[train]'")


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


def test_train_demo_command_prints_the_table_and_plots(tmp_path, capsys):
    """`lossops train-demo --plot`: the four models' table and a PNG of both loss curves."""
    from lossops.cli import main

    assert main(["train-demo", "--steps", "6", "--plot", str(tmp_path / "loss.png")]) == 0
    out = capsys.readouterr().out
    assert out.count("| SGD") + out.count("| Adam") == 4  # one row per model
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_session_options_serve_both_the_step_and_the_eval_forward():
    """The user's SessionOptions (one thread here) are used for the step and again for the eval forward,
    in kernels mode, where lossops registers its kernels on them."""
    import onnxruntime

    net, loss_fn, example = _small_problem()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = TrainingSession(_quiet(export_training_step, net, loss_fn, example, Adam()), "kernels", options)
    session.step([a.numpy() for a in example[0] + example[1]])
    module = copy.deepcopy(net)
    module.load_state_dict({k: torch.from_numpy(v) for k, v in session.state_dict().items()})
    x = example[0][0]
    np.testing.assert_allclose(session.evaluate(x.numpy()), module(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["decomposition", "kernels"])
def test_float64_module_follows_pytorch_to_float64_precision(mode):
    """A float64 module trains in float64 end to end (the loss output keeps the module's type): 10 Adam steps
    agree with torch.optim to 1e-12."""
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
    x, y = torch.randn(16, 6, dtype=torch.float64), (torch.rand(16, 3) > 0.5).double()
    loss_fn = lambda out, t: F.binary_cross_entropy_with_logits(out, t)  # noqa: E731
    session = TrainingSession(_quiet(export_training_step, net, loss_fn, ((x,), (y,)), Adam(lr=0.01)), mode)
    reference = copy.deepcopy(net)
    optimizer = Adam(lr=0.01).torch(reference.parameters())
    for _ in range(10):
        optimizer.zero_grad()
        loss = loss_fn(reference(x), y)
        loss.backward()
        optimizer.step()
        np.testing.assert_allclose(session.step([x.numpy(), y.numpy()]), loss.item(), rtol=1e-12)
    for name, value in reference.state_dict().items():
        np.testing.assert_allclose(session.state_dict()[name], value.numpy(), rtol=1e-12, atol=1e-14)
