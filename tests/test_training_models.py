"""What real training loops need from an exported step, held to PyTorch: batches of any size (and named
symbolic axes), tied weights, half precision and autocast, gradient accumulation, hyper-parameters a schedule
changes, reproducible dropout, attention with masks, a distillation teacher that trains too."""

from __future__ import annotations

import copy
import itertools
import logging
import warnings

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from catalogue import Tied
from torch import nn

from lossops import opset
from lossops.opset.spec import REAL
from lossops.ort_ext import InferenceSession
from lossops.training import SGD, Adam, AdamW, TrainingSession, export_training_step, load_into_torch

logging.getLogger("torch").setLevel(logging.ERROR)


def _export(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_training_step(*args, **kwargs)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def _follow(session, reference, optimizer, loss_fn, batches, steps_per_batch=1, **hyper):
    """Step `session` and PyTorch side by side; the largest relative loss difference."""
    worst = 0.0
    for margs, largs in batches:
        optimizer.zero_grad()
        loss = loss_fn(reference(*margs), *largs)
        loss.backward()
        optimizer.step()
        got = session.step([_numpy(a) for a in margs + largs], **hyper)
        worst = max(worst, abs(got - loss.item()) / abs(loss.item()))
    return worst


def _state_difference(session, reference) -> float:
    return max(float(np.abs(session.state_dict()[k].astype(np.float64) - v.double().numpy()).max())
               for k, v in reference.state_dict().items())


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 5))


def test_batches_of_any_size_train_as_pytorch():
    """Exported with a batch of 8, the step trains on 8, 5, 3 and 1 (the last batch of an epoch) as PyTorch does,
    BatchNorm's statistics and the mean included; evaluate and the inference model take any batch too; a
    checkpoint saved after a batch of 5 trains on at 8."""
    cnn = _cnn()
    example = ((torch.randn(8, 1, 6, 6),), (torch.randint(0, 5, (8,)),))
    step = _export(cnn, F.cross_entropy, example, Adam(lr=0.01))
    assert step.dims == {"input_0": {0: "batch"}, "target_0": {0: "batch"}}
    assert step.check.batches == ["the example batch", "the example batch cut to batch=7"]
    session = TrainingSession(step)
    reference = copy.deepcopy(cnn)
    optimizer = Adam(lr=0.01).torch(reference.parameters())
    batches = [((torch.randn(b, 1, 6, 6),), (torch.randint(0, 5, (b,)),)) for b in (8, 5, 3, 1, 8)]
    assert _follow(session, reference, optimizer, F.cross_entropy, batches) < 1e-5
    assert _state_difference(session, reference) < 1e-5
    x = torch.randn(3, 1, 6, 6)
    expected = reference.eval()(x).detach().numpy()
    np.testing.assert_allclose(session.evaluate(x.numpy()), expected, rtol=1e-5, atol=1e-6)
    deployed = InferenceSession(session.inference_model())
    np.testing.assert_allclose(deployed.run(None, {"input_0": x.numpy()})[0], expected, rtol=1e-5, atol=1e-6)


def test_checkpoint_of_one_batch_size_trains_at_another(tmp_path):
    cnn = _cnn()
    step = _export(cnn, F.cross_entropy, ((torch.randn(8, 1, 6, 6),), (torch.randint(0, 5, (8,)),)), SGD(lr=0.1))
    first = TrainingSession(step)
    first.step([np.random.default_rng(0).normal(size=(5, 1, 6, 6)).astype(np.float32), np.arange(5)])
    first.save(str(tmp_path / "ckpt.safetensors"))
    resumed = TrainingSession(step)
    resumed.load(str(tmp_path / "ckpt.safetensors"))
    batch = [np.random.default_rng(1).normal(size=(11, 1, 6, 6)).astype(np.float32), np.arange(11) % 5]
    assert resumed.step(batch) == first.step(batch)


def test_named_sequence_axis():
    """A transformer tagger over (batch, seq): both axes named symbolic, the step trains on other lengths as
    PyTorch."""

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.encode = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
            self.out = nn.Linear(8, 3)

        def forward(self, x):
            return self.out(self.encode(x)).transpose(1, 2)  # (batch, classes, seq)

    torch.manual_seed(0)
    tagger = Tagger()
    spec = (({0: "batch", 1: "seq"},), ({0: "batch", 1: "seq"},))
    step = _export(tagger, F.cross_entropy, ((torch.randn(4, 6, 8),), (torch.randint(0, 3, (4, 6)),)), SGD(lr=0.5),
                   dynamic_shapes=spec)
    assert step.dims == {"input_0": {0: "batch", 1: "seq"}, "target_0": {0: "batch", 1: "seq"}}
    session, reference = TrainingSession(step), copy.deepcopy(tagger)
    batches = [((torch.randn(b, t, 8),), (torch.randint(0, 3, (b, t)),)) for b, t in ((4, 6), (2, 9), (5, 3))]
    assert _follow(session, reference, SGD(lr=0.5).torch(reference.parameters()), F.cross_entropy, batches) < 1e-5
    assert _state_difference(session, reference) < 1e-5


@pytest.mark.slow  # the unrolled export: half a minute
def test_a_recurrent_layer_keeps_its_sequence_axis_fixed():
    """A recurrent layer unrolls over time when traced: its sequence axis stays fixed, with a warning."""
    with pytest.warns(UserWarning, match="axis 1 of input_0 stays 6"):
        export_training_step(nn.LSTM(8, 4, batch_first=True), lambda o, t: F.mse_loss(o[0], t),
                             ((torch.randn(4, 6, 8),), (torch.randn(4, 6, 4),)), SGD(),
                             dynamic_shapes=(({0: "batch", 1: "seq"},), ({0: "batch", 1: "seq"},)))


def test_bags_of_any_length():
    """EmbeddingBag with offsets: the number of indices and of bags changes from batch to batch."""
    torch.manual_seed(0)
    bags = nn.EmbeddingBag(20, 4, mode="mean")

    def batch(seed, n, b):
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, 20, (n,), generator=g)
        starts = torch.randperm(n - 1, generator=g)[:b - 1].sort()[0] + 1
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), starts])
        return (ids, offsets), (torch.randn(b, 4, generator=g),)

    step = _export(bags, F.mse_loss, batch(0, 12, 4), SGD(lr=0.3))
    session, reference = TrainingSession(step), copy.deepcopy(bags)
    batches = [batch(k, n, b) for k, (n, b) in enumerate([(12, 4), (30, 7), (5, 2)], start=1)]
    assert _follow(session, reference, SGD(lr=0.3).torch(reference.parameters()), F.mse_loss, batches) < 1e-5
    assert _state_difference(session, reference) < 1e-6


def test_an_axis_the_module_fixes_stays_fixed_with_a_warning():
    class Fixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 2)

        def forward(self, x):
            return self.linear(x.reshape(6, 4))

    example = ((torch.randn(6, 4),), (torch.randn(6, 2),))
    with pytest.warns(UserWarning, match="axis 0 of input_0 stays 6: the module's code depends on that size"):
        step = export_training_step(Fixed(), F.mse_loss, example, SGD())
    assert step.dims["input_0"] == {}
    assert _export(Fixed(), F.mse_loss, example, SGD(), dynamic_shapes=None).dims == {"input_0": {}, "target_0": {}}
    with pytest.raises(ValueError, match="dynamic_shapes names axes \\[3\\] of input_0, which has 2"):
        _export(Fixed(), F.mse_loss, example, SGD(), dynamic_shapes=(({3: "x"},), (None,)))


def test_tied_weights_stay_one_parameter(tmp_path):
    """One state entry, one update, PyTorch's trajectory over 30 Adam steps; the checkpoint loads into PyTorch
    with the tie kept."""
    torch.manual_seed(0)
    model = Tied()
    ids = torch.randint(0, 10, (4, 5))

    def next_token(logits, ids):
        return F.cross_entropy(logits.transpose(1, 2), ids)

    step = _export(model, next_token, ((ids,), (ids.roll(1, 1),)), Adam(lr=0.02))
    assert step.parameters == ["embed.weight"] and step.aliases == {"decode.weight": "embed.weight"}
    session, reference = TrainingSession(step), copy.deepcopy(model)
    batches = [((ids,), (ids.roll(1, 1),))] * 30
    assert _follow(session, reference, Adam(lr=0.02).torch(reference.parameters()), next_token, batches) < 1e-5
    state = session.state_dict()
    assert state["decode.weight"] is state["embed.weight"]
    assert _state_difference(session, reference) < 1e-5
    session.save(str(tmp_path / "tied.safetensors"))
    loaded = Tied()
    load_into_torch(str(tmp_path / "tied.safetensors"), loaded)
    assert loaded.decode.weight is loaded.embed.weight
    np.testing.assert_array_equal(loaded.embed.weight.detach().numpy(), state["embed.weight"])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_modules_train_as_pytorch(dtype, tmp_path):
    """A float16 or bfloat16 module: each op rounds to the module's type as PyTorch's CPU ops do (bfloat16 ops
    that onnxruntime lacks run in float32 between Casts); the optimizer's state is in the parameter's type, as
    torch.optim keeps it. The losses agree to the type's rounding over 10 steps; a bfloat16 checkpoint round-trips."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10)).to(dtype)
    x, y = torch.randn(8, 16, dtype=dtype), torch.randint(0, 10, (8,))
    step = _export(net, F.cross_entropy, ((x,), (y,)), Adam(lr=0.01))
    assert step.check.worst <= {torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]
    session, reference = TrainingSession(step), copy.deepcopy(net)
    worst = _follow(session, reference, Adam(lr=0.01).torch(reference.parameters()), F.cross_entropy,
                    [((x,), (y,))] * 10)
    assert worst <= {torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    session.save(str(tmp_path / "half.safetensors"))
    again = TrainingSession(step)
    again.load(str(tmp_path / "half.safetensors"))
    assert all(np.array_equal(again.state_dict()[k].view(np.uint16), v.view(np.uint16))
               for k, v in session.state_dict().items())


def test_autocast_region_trains_as_pytorch():
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 10)

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return self.b(torch.relu(self.a(x))).float()

    torch.manual_seed(0)
    mixed = Mixed()
    x, y = torch.randn(8, 16), torch.randint(0, 10, (8,))
    session = TrainingSession(_export(mixed, F.cross_entropy, ((x,), (y,)), AdamW(lr=0.01)))
    reference = copy.deepcopy(mixed)
    assert _follow(session, reference, AdamW(lr=0.01).torch(reference.parameters()), F.cross_entropy,
                   [((x,), (y,))] * 10) < 1e-5
    assert _state_difference(session, reference) < 1e-5


@pytest.mark.parametrize("optimizer", [SGD(lr=0.1, momentum=0.9, weight_decay=0.01), Adam(lr=0.01)], ids=repr)
def test_gradient_accumulation_follows_pytorch(optimizer):
    """Three micro-batches, one optimizer step on their mean gradient (PyTorch: (loss / 3).backward() each), with
    BatchNorm's statistics updated by every micro-batch and gradients clipped after accumulating."""
    cnn = _cnn()
    micro = [((torch.randn(4, 1, 6, 6),), (torch.randint(0, 5, (4,)),)) for _ in range(3)]
    step = _export(cnn, F.cross_entropy, micro[0], optimizer, max_grad_norm=0.5)
    session, reference = TrainingSession(step), copy.deepcopy(cnn)
    torch_optimizer = optimizer.torch(reference.parameters())
    for _ in range(4):
        torch_optimizer.zero_grad()
        losses = []
        for (x,), (y,) in micro:
            loss = F.cross_entropy(reference(x), y)
            (loss / len(micro)).backward()
            losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        torch_optimizer.step()
        got = session.step_accumulated([[x.numpy(), y.numpy()] for (x,), (y,) in micro])
        assert abs(got - np.mean(losses)) < 1e-5 * abs(np.mean(losses))
    assert session.steps == 4
    assert _state_difference(session, reference) < 1e-5


def test_hyper_parameters_follow_a_schedule():
    """OneCycleLR cycles the learning rate and SGD's momentum; both are run-time inputs of the step."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    step = _export(net, F.cross_entropy, ((x,), (y,)), SGD(lr=0.1, momentum=0.9, weight_decay=1e-3))
    assert step.hyper == {"momentum": 0.9, "dampening": 0.0, "weight_decay": 1e-3}
    session, reference = TrainingSession(step), copy.deepcopy(net)
    optimizer = SGD(lr=0.1, momentum=0.9, weight_decay=1e-3).torch(reference.parameters())
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, total_steps=20)
    for _ in range(20):
        group = optimizer.param_groups[0]
        lr, momentum = group["lr"], group["momentum"]
        optimizer.zero_grad()
        loss = F.cross_entropy(reference(x), y)
        loss.backward()
        optimizer.step()
        schedule.step()
        assert abs(session.step([x.numpy(), y.numpy()], lr, momentum=momentum) - loss.item()) < 1e-5
    assert _state_difference(session, reference) < 1e-5
    with pytest.raises(ValueError, match=r"\['beta1'\] are not hyper-parameters of this step's SGD"):
        session.step([x.numpy(), y.numpy()], beta1=0.5)


def test_dropout_with_a_seed_is_reproducible():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 32), nn.Dropout(0.5), nn.Linear(32, 3))
    x, y = torch.randn(16, 6), torch.randn(16, 3)
    step = _export(net, F.mse_loss, ((x,), (y,)), SGD(lr=0.1))
    runs = []
    for seed in (7, 7, 8):
        session = TrainingSession(step, seed=seed)
        runs.append([session.step([x.numpy(), y.numpy()]) for _ in range(5)])
    assert runs[0] == runs[1] and runs[0] != runs[2]


@pytest.mark.parametrize("mask", ["bool", "float", "causal"])
def test_attention_with_masks_trains_and_evaluates_as_pytorch(mask):
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)

        def forward(self, x, m):
            q, k, v = self.qkv(x).unflatten(-1, (3, 2, 4)).permute(2, 0, 3, 1, 4)  # (3, batch, heads, seq, 4)
            if mask == "causal":
                return F.scaled_dot_product_attention(q, k, v, is_causal=True).flatten(1, 2)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m).flatten(1, 2)

    torch.manual_seed(0)
    attention = Attention()
    keep = torch.rand(5, 5) > 0.3
    keep.fill_diagonal_(True)
    m = keep if mask == "bool" else torch.where(keep, 0.0, -1e4) * torch.rand(5, 5)
    x, y = torch.randn(3, 5, 8), torch.randn(3, 10, 4)
    step = _export(attention, F.mse_loss, ((x, m), (y,)), Adam(lr=0.01))
    session, reference = TrainingSession(step), copy.deepcopy(attention)
    assert _follow(session, reference, Adam(lr=0.01).torch(reference.parameters()), F.mse_loss,
                   [((x, m), (y,))] * 5) < 1e-5
    np.testing.assert_allclose(session.evaluate(x.numpy(), _numpy(m)), reference(x, m).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


class _TeacherAndStudent(nn.Module):
    """Two heads over the same features, both trained: the student's logits and the teacher's."""

    def __init__(self):
        super().__init__()
        self.student, self.teacher = nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x):
        return self.student(x), self.teacher(x)


# the forward operators of any `input` and `target` whose record names a PyTorch op: F's function of that name
LOSSES = {name: op.torch[0].split("::")[1] for name, op in opset.OPS.items()
          if op.gradient is not None and op.torch and hasattr(F, op.torch[0].split("::")[1])
          and [(i.name, i.domain) for i in op.inputs] == [("input", REAL), ("target", REAL)]}


@pytest.mark.parametrize("op", list(LOSSES))
def test_a_pytorch_loss_trains_as_its_lossops_nodes(op):
    """A step exported from a module trained with the PyTorch loss an operator's record names (aten's, or the
    lossops custom op F's call is routed to while tracing) holds that operator and its backward as lossops nodes,
    and follows PyTorch (each reduction, over a few steps)."""
    assert {"MseLoss", "SmoothL1Loss", "SoftMarginLoss", "L1Loss"} <= set(LOSSES)
    loss = getattr(F, LOSSES[op])
    for reduction in ("mean", "sum", "none"):
        def loss_fn(out, y, reduction=reduction):
            value = loss(out, y, reduction=reduction)
            return value if reduction != "none" else value.mean()

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 3))
        batches = [((torch.randn(6, 4),), (torch.where(torch.rand(6, 3) < 0.5, 1.0, -1.0),)) for _ in range(3)]
        step = _export(model, loss_fn, batches[0], SGD(lr=0.05))
        assert {n.op_type for n in step.model.graph.node if n.domain == opset.DOMAIN} == {
            op, opset.get(op).gradient.backward}, reduction
        session, reference = TrainingSession(step), copy.deepcopy(model)
        assert _follow(session, reference, SGD(lr=0.05).torch(reference.parameters()), loss_fn, batches) < 1e-5
        assert _state_difference(session, reference) < 1e-5


# losses whose target comes from trained parameters: PyTorch gives those a gradient through it (it refuses one
# for BCE's weight and pos_weight). KL and BCE with logits train it through their target-backward nodes.
TARGET_NODES = {"kl_div": {"KlDiv", "KlDivBackward", "KlDivTargetBackward"},
                "bce_with_logits": {"BinaryCrossEntropyWithLogits", "BinaryCrossEntropyWithLogitsBackward",
                                    "BinaryCrossEntropyWithLogitsTargetBackward"}}
TRAINED_TARGETS = {
    "kl_div batchmean, teacher's probabilities": lambda out, y: F.kl_div(
        F.log_softmax(out[0], -1), F.softmax(out[1], -1), reduction="batchmean"),
    "kl_div sum, teacher's log-probabilities": lambda out, y: F.kl_div(
        F.log_softmax(out[0], -1), F.log_softmax(out[1], -1), reduction="sum", log_target=True),
    "bce_with_logits mean, teacher's probabilities, pos_weight": lambda out, y: F.binary_cross_entropy_with_logits(
        out[0], torch.sigmoid(out[1]), pos_weight=y[0] + 0.5),
    "binary_cross_entropy mean, teacher's probabilities, weight": lambda out, y: F.binary_cross_entropy(
        torch.sigmoid(out[0]), torch.sigmoid(out[1]), weight=y + 0.5),
    "mse_loss mean, teacher's outputs": lambda out, y: F.mse_loss(out[0], out[1]),
    "l1_loss mean, teacher's outputs": lambda out, y: F.l1_loss(out[0], out[1]),
    "smooth_l1_loss sum, teacher's outputs": lambda out, y: F.smooth_l1_loss(out[0], out[1], reduction="sum",
                                                                             beta=0.5),
}


@pytest.mark.parametrize("loss_fn", list(TRAINED_TARGETS.values()), ids=list(TRAINED_TARGETS))
def test_a_trained_target_gets_its_gradient(loss_fn):
    """Distillation with a teacher that trains too: every parameter PyTorch trains is trained by the step, as
    PyTorch trains it; KL's and BCE-with-logits' target gradient is their lossops target-backward node."""
    torch.manual_seed(0)
    model = _TeacherAndStudent()
    batches = [((torch.randn(6, 4),), ((torch.rand(6, 3) < 0.5).float(),)) for _ in range(3)]
    step = _export(model, loss_fn, batches[0], SGD(lr=0.5))
    loss = next(n for n, f in TRAINED_TARGETS.items() if f is loss_fn).split()[0]
    if loss in TARGET_NODES:
        assert {n.op_type for n in step.model.graph.node if n.domain == opset.DOMAIN} == TARGET_NODES[loss]
    probe = copy.deepcopy(model)
    loss_fn(probe(*batches[0][0]), *batches[0][1]).backward()
    assert sorted(step.trained) == sorted(n for n, p in probe.named_parameters() if p.grad is not None)
    assert {"teacher.weight", "teacher.bias"} <= set(step.trained)
    session, reference = TrainingSession(step), copy.deepcopy(model)
    assert _follow(session, reference, SGD(lr=0.5).torch(reference.parameters()), loss_fn, batches) < 1e-5
    assert _state_difference(session, reference) < 1e-5


def test_a_step_that_leaves_a_parameter_untrained_is_refused(monkeypatch):
    """The check against PyTorch compares the parameters the step trains, and refuses a step that computes no
    gradient for one PyTorch trains (as the export did for a teacher's target before the losses that need
    one stayed PyTorch's own): made here by routing L1 to the lossops op and its input-only backward."""
    from lossops.converters import torch_ops
    from lossops.training import StepCheckError

    monkeypatch.setattr(torch_ops, "_other_gradient", lambda bound, computed: False)
    monkeypatch.setattr(torch_ops, "_computed_gradients_only", lambda ctx, op, names: None)
    torch.manual_seed(0)
    loss_fn = TRAINED_TARGETS["l1_loss mean, teacher's outputs"]
    with pytest.raises(StepCheckError, match=r"gives teacher\.weight, teacher\.bias a gradient .* computes none"):
        _export(_TeacherAndStudent(), loss_fn, ((torch.randn(6, 4),), (torch.zeros(6, 3),)), SGD(lr=0.5))


def test_the_lossops_ops_refuse_a_gradient_they_do_not_compute():
    """Called directly, a lossops custom op whose target (or weight) needs a gradient it does not compute says
    so when the backward runs, naming the op and the input, instead of leaving that gradient out; KL's and
    BCE-with-logits' target gradient is autograd's."""
    from lossops.converters import torch_ops  # noqa: F401 - defines torch.ops.lossops.*

    x, t = torch.randn(4, 3, requires_grad=True), torch.rand(4, 3, requires_grad=True)
    w = torch.rand(3, requires_grad=True)
    for reduction, log_target in itertools.product(range(4), (False, True)):
        mode = opset.spec.REDUCTIONS[reduction]
        with warnings.catch_warnings():  # torch warns that 'mean' is not 'batchmean'; both are tested on purpose
            warnings.simplefilter("ignore", UserWarning)
            got = torch.autograd.grad(torch.ops.lossops.kl_div(x, t, reduction, log_target).sum(), (x, t))
            expected = torch.autograd.grad(F.kl_div(x, t, reduction=mode, log_target=log_target).sum(), (x, t))
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
    for pos_weight in (None, w.detach() + 0.5):
        got = torch.autograd.grad(torch.ops.lossops.binary_cross_entropy_with_logits(x, t, None, pos_weight, 1), t)
        expected = torch.autograd.grad(F.binary_cross_entropy_with_logits(x, t, pos_weight=pos_weight), t)
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
    loss = torch.ops.lossops.binary_cross_entropy_with_logits(x, t, w, None, 1)
    with pytest.raises(NotImplementedError, match=r"binary_cross_entropy_with_logits: .* of `weight` is needed"):
        loss.backward()
    loss = torch.ops.lossops.l1_loss(x, t, 1)
    with pytest.raises(NotImplementedError, match=r"lossops::l1_loss: .* gradient of `target` is needed"):
        loss.backward()


class _DecidesOnData(nn.Module):
    """A forward that branches on a value of its input, as transformers' mask shortcuts do outside export."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x, mask):
        if (mask.sum() == mask.numel()).item():  # the decision the message must point at
            return self.linear(x)
        return self.linear(x * mask)


@pytest.mark.parametrize("dynamic_shapes", ["batch", None])
def test_a_decision_on_the_data_is_one_paragraph_naming_where_it_is(dynamic_shapes):
    """Whatever dynamic_shapes is (with "batch", the retry with fixed shapes fails too), the user gets lossops'
    paragraph: what stopped the trace, the file and line of the decision, advice that works for a library model."""
    import inspect

    from lossops.training import StepExportError

    line = next(k for k, text in enumerate(inspect.getsource(_DecidesOnData).splitlines())
                if "the decision the message" in text) + inspect.getsourcelines(_DecidesOnData)[1]
    with pytest.raises(StepExportError) as caught:
        _export(_DecidesOnData(), lambda o, t: ((o - t) ** 2).mean(),
                ((torch.randn(3, 4), torch.ones(3, 4)), (torch.randn(3, 2),)), dynamic_shapes=dynamic_shapes)
    message = str(caught.value)
    assert message.startswith("export_training_step: PyTorch cannot trace the step into a graph: the code takes a "
                              "Python decision on a value computed from the data at ") and "\n" not in message
    assert f"{__file__}:{line} in forward" in message
    assert 'attn_implementation="eager"' in message and "torch.where" in message


def _classifier():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 7))
    weight = torch.rand(7) + 0.5
    x, y = torch.randn(16, 12), torch.randint(0, 7, (16,))
    y[3] = y[9] = 2  # ignore_index below
    return net, (lambda out, t: F.cross_entropy(out, t, weight, ignore_index=2, label_smoothing=0.1)), x, y


def _language_model_head():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Embedding(512, 32), nn.Linear(32, 512))
    ids = torch.randint(0, 512, (4, 16))
    targets = ids.roll(-1, 1)
    targets[:, -3:] = -100  # padding
    return net, (lambda logits, t: F.cross_entropy(logits.transpose(1, 2), t)), ids, targets


def _distillation():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 5, 1))
    weight = torch.rand(5) + 0.5
    x = torch.randn(4, 3, 6, 6)
    teacher = torch.softmax(2 * torch.randn(4, 5, 6, 6), 1)  # per-pixel soft labels, (N, C, H, W)
    return net, (lambda out, t: F.cross_entropy(out, t, weight, label_smoothing=0.1)), x, teacher


def test_multilabel_margin_loss_trains_as_one_lossops_node():
    """A multi-label tagger (up to three labels per sample of 10 classes, listed then -1): the exported step holds
    one MultilabelMarginLoss and one MultilabelMarginLossBackward, held to PyTorch autograd when exported, and 20
    SGD steps follow PyTorch's."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 10))
    x = torch.randn(16, 12)
    labels = torch.full((16, 10), -1)
    for n in range(16):
        k = n % 4
        labels[n, :k] = torch.randperm(10)[:k]
    step = _export(net, F.multilabel_margin_loss, ((x,), (labels,)), SGD(lr=0.1))
    lossops_nodes = sorted(n.op_type for n in step.model.graph.node if n.domain == opset.DOMAIN)
    assert lossops_nodes == ["MultilabelMarginLoss", "MultilabelMarginLossBackward"]
    assert step.check.worst < 1e-5
    session, reference = TrainingSession(step), copy.deepcopy(net)
    worst = _follow(session, reference, SGD(lr=0.1).torch(reference.parameters()), F.multilabel_margin_loss,
                    [((x,), (labels,))] * 20)
    assert worst < 1e-5


@pytest.mark.parametrize(("make", "op"), [(_classifier, "CrossEntropyLoss"), (_language_model_head, "CrossEntropyLoss"),
                                          (_distillation, "SoftTargetCrossEntropyLoss")],
                         ids=["classifier", "language_model_head", "distillation"])
def test_cross_entropy_trains_as_one_lossops_node(make, op):
    """A classifier's cross entropy (class weights, ignore_index, label smoothing), a language-model head's
    ((N, V, T) logits over a 512-token vocabulary, padding ignored) and a segmentation student's against a
    teacher's per-pixel probabilities: the exported step computes the loss as one lossops node (CrossEntropyLoss,
    or SoftTargetCrossEntropyLoss for probabilities) and its gradient as one node, both held to PyTorch autograd
    when the step is exported, and 20 Adam steps follow PyTorch's."""
    net, loss_fn, x, y = make()
    step = _export(net, loss_fn, ((x,), (y,)), Adam(lr=0.01))
    lossops_nodes = sorted(n.op_type for n in step.model.graph.node if n.domain == opset.DOMAIN)
    assert lossops_nodes == [op, f"{op}Grad"]
    assert not {"LogSoftmax", "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"} & {
        n.op_type for n in step.model.graph.node}
    assert step.check.worst < 1e-5
    session, reference = TrainingSession(step), copy.deepcopy(net)
    worst = _follow(session, reference, Adam(lr=0.01).torch(reference.parameters()), loss_fn, [((x,), (y,))] * 20)
    assert worst < 1e-5
