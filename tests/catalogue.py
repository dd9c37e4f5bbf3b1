"""The catalogue of training steps held to PyTorch (tests/test_training_catalogue.py): every loss of
torch.nn.functional in each reduction, the forms users write cross entropy in, losses with captured tensors,
and the layers real models train. `python tests/catalogue.py [PATTERN]` prints the table: each case, whether it
exports (or why not), and how far its gradients are from PyTorch's float64 ones.

Each case builds a fresh module (seeded), the loss, and the example batch. A reduction `none` is followed by a
weighted sum, so that the gradient reaching the loss differs per element."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

B, C, D = 6, 4, 5  # batch, classes, features
REDUCTIONS = ("none", "mean", "sum")


@dataclass
class Case:
    name: str
    make: Callable[[], nn.Module]
    loss: Callable
    module_args: tuple
    loss_args: tuple
    cannot: str | None = None  # the op whose export fails, where the case is a declared failure
    layer: bool = False  # a layer case: its eval-mode forward is compared too


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _rand(*shape, seed=0):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


def _seeded(make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build():
        torch.manual_seed(1)
        return make()

    return build


def linear(out: int = C) -> Callable[[], nn.Module]:
    return _seeded(lambda: nn.Linear(D, out))


def reduced(fn: Callable, reduction: str) -> Callable:
    """`fn(..., reduction=reduction)`, made scalar for `none` by a sum with weights that differ per element."""
    if reduction != "none":
        return lambda *args: fn(*args, reduction=reduction)

    def loss(*args):
        value = fn(*args, reduction="none")
        return (value * torch.linspace(0.5, 1.5, value.numel()).reshape(value.shape)).sum()

    return loss


class Pair(nn.Module):
    """Two heads on one input: losses that compare two predictions."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(D, 1), nn.Linear(D, C)

    def forward(self, x):
        return self.a(x).squeeze(1), self.b(x)


class Recurrent(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(D, 4, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


class CausalAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def loss_cases() -> list[Case]:
    x = _randn(B, D)
    classes = torch.randint(0, C, (B,), generator=torch.Generator().manual_seed(1))
    soft = _rand(B, C, seed=2)
    signs = torch.tensor([1.0, -1, 1, -1, 1, 1])
    labels = torch.tensor([[0, 2, -1, 1], [1, -1, 0, 0], [3, 0, -1, 2], [2, -1, 1, 1], [0, 1, 2, 3], [1, 3, -1, 0]])
    sequence = _randn(7, 2, D)
    by_name = {
        "cross_entropy": (F.cross_entropy, linear(), (x,), (classes,)),
        "nll_loss": (lambda o, t, reduction: F.nll_loss(F.log_softmax(o, 1), t, reduction=reduction),
                     linear(), (x,), (classes,)),
        "mse_loss": (F.mse_loss, linear(), (x,), (soft,)),
        "l1_loss": (F.l1_loss, linear(), (x,), (soft,)),
        "smooth_l1_loss": (lambda o, t, reduction: F.smooth_l1_loss(o, t, reduction=reduction, beta=0.5),
                           linear(), (x,), (soft,)),
        "huber_loss": (lambda o, t, reduction: F.huber_loss(o, t, reduction=reduction, delta=0.7),
                       linear(), (x,), (soft,)),
        "soft_margin_loss": (F.soft_margin_loss, linear(), (x,), (torch.where(soft > 0.5, 1.0, -1.0),)),
        "multilabel_soft_margin_loss": (F.multilabel_soft_margin_loss, linear(), (x,), ((soft > 0.5).float(),)),
        "multilabel_margin_loss": (F.multilabel_margin_loss, linear(), (x,), (labels,)),
        "multi_margin_loss": (F.multi_margin_loss, linear(), (x,), (classes,)),
        "poisson_nll_loss": (F.poisson_nll_loss, linear(), (x,), (soft * 3,)),
        "gaussian_nll_loss": (lambda o, t, reduction: F.gaussian_nll_loss(o, t, torch.full_like(o, 0.5),
                                                                          reduction=reduction),
                              linear(), (x,), (soft,)),
        "binary_cross_entropy": (lambda o, t, reduction: F.binary_cross_entropy(torch.sigmoid(o), t,
                                                                                reduction=reduction),
                                 linear(), (x,), (soft,)),
        "binary_cross_entropy_with_logits": (F.binary_cross_entropy_with_logits, linear(), (x,), (soft,)),
        "kl_div": (lambda o, t, reduction: F.kl_div(F.log_softmax(o, 1), t, reduction=reduction),
                   linear(), (x,), (torch.softmax(soft, 1),)),
        "margin_ranking_loss": (lambda o, t, reduction: F.margin_ranking_loss(o[0], o[1][:, 0], t, margin=0.1,
                                                                              reduction=reduction),
                                _seeded(Pair), (x,), (signs,)),
        "hinge_embedding_loss": (F.hinge_embedding_loss, linear(), (x,), (torch.where(soft > 0.5, 1.0, -1.0),)),
        "cosine_embedding_loss": (lambda o, t, reduction: F.cosine_embedding_loss(o[1], o[1].roll(1, 0) * 0.5 + 1, t,
                                                                                  reduction=reduction),
                                  _seeded(Pair), (x,), (signs,)),
        "triplet_margin_loss": (lambda o, t, reduction: F.triplet_margin_loss(o, t, o.roll(1, 0), reduction=reduction),
                                linear(), (x,), (soft,)),
        "ctc_loss": (lambda o, t, reduction: F.ctc_loss(F.log_softmax(o, 2), t, torch.tensor([7, 7]),
                                                        torch.tensor([3, 2]), reduction=reduction),
                     linear(), (sequence,), (torch.tensor([[1, 2, 3], [2, 1, 0]]),)),
    }
    cases = [Case(f"{name} {r}", make, reduced(fn, r), margs, largs)
             for name, (fn, make, margs, largs) in by_name.items() for r in REDUCTIONS]
    cases.append(Case("kl_div batchmean", linear(),
                      lambda o, t: F.kl_div(F.log_softmax(o, 1), t, reduction="batchmean"), (x,),
                      (torch.softmax(soft, 1),)))
    return cases


def cross_entropy_cases() -> list[Case]:
    """Cross entropy and NLL in the forms users write them, and losses whose module or closure holds a tensor."""
    x = _randn(B, D)
    classes = torch.randint(0, C, (B,), generator=torch.Generator().manual_seed(1))
    ignored = classes.clone()
    ignored[:2] = -100
    weight = _rand(C, seed=3) + 0.5
    soft = _rand(B, C, seed=2)
    forms = {
        "cross_entropy weight": (lambda o, t, r: F.cross_entropy(o, t, weight=weight, reduction=r), classes),
        "cross_entropy ignore_index -100": (lambda o, t, r: F.cross_entropy(o, t, reduction=r), ignored),
        "cross_entropy label_smoothing": (lambda o, t, r: F.cross_entropy(o, t, label_smoothing=0.1, reduction=r),
                                          classes),
        "cross_entropy weight, ignore_index, label_smoothing": (
            lambda o, t, r: F.cross_entropy(o, t, weight=weight, ignore_index=1, label_smoothing=0.2, reduction=r),
            classes),
        "cross_entropy probabilities": (lambda o, t, r: F.cross_entropy(o, t, reduction=r),
                                        torch.softmax(soft * 3, 1)),
        "cross_entropy probabilities, label_smoothing": (
            lambda o, t, r: F.cross_entropy(o, t, label_smoothing=0.3, reduction=r), torch.softmax(soft * 3, 1)),
        "nll_loss weight": (lambda o, t, r: F.nll_loss(F.log_softmax(o, 1), t, weight=weight, reduction=r), classes),
    }
    cases = [Case(f"{form} {r}", linear(), reduced(lambda o, t, reduction, fn=fn: fn(o, t, reduction), r),
                  (x,), (target,)) for form, (fn, target) in forms.items() for r in REDUCTIONS]
    images = _randn(2, 3, 4, 4)
    bce, kl = nn.BCELoss(weight=weight), nn.KLDivLoss(reduction="batchmean", log_target=True)
    cases += [
        Case("cross_entropy every target ignored", linear(), lambda o, t: F.cross_entropy(o, t), (x,),
             (torch.full((B,), -100),)),
        Case("cross_entropy one sample (C,)", linear(), lambda o, t: F.cross_entropy(o, t), (x[0],), (classes[0],)),
        Case("cross_entropy (N, C, H, W), weight, ignore_index", _seeded(lambda: nn.Conv2d(3, C, 1)),
             lambda o, t: F.cross_entropy(o, t, weight=weight, ignore_index=2), (images,),
             (torch.randint(0, C, (2, 4, 4), generator=torch.Generator().manual_seed(4)),)),
        Case("cross_entropy (N, C, d1, d2, d3)", _seeded(lambda: nn.Conv3d(3, C, 1)),
             lambda o, t: F.cross_entropy(o, t), (_randn(2, 3, 2, 3, 2),),
             (torch.randint(0, C, (2, 2, 3, 2), generator=torch.Generator().manual_seed(4)),)),
        Case("nn.CrossEntropyLoss(weight=w)", linear(), nn.CrossEntropyLoss(weight=weight), (x,), (classes,)),
        Case("nn.BCEWithLogitsLoss(pos_weight=w)", linear(), nn.BCEWithLogitsLoss(pos_weight=weight), (x,),
             ((soft > 0.5).float(),)),
        Case("nn.BCELoss(weight=w)", linear(), lambda o, t: bce(torch.sigmoid(o), t), (x,), (soft,)),
        Case("nn.KLDivLoss(batchmean, log_target)", linear(), lambda o, t: kl(F.log_softmax(o, 1), t), (x,),
             (F.log_softmax(soft, 1),)),
        Case("closure: cross_entropy(weight=w)", linear(), lambda o, t: F.cross_entropy(o, t, weight=weight), (x,),
             (classes,)),
        Case("weight as a loss argument", linear(), lambda o, t, w: F.cross_entropy(o, t, weight=w), (x,),
             (classes, weight)),
    ]
    return cases


def layer_cases() -> list[Case]:
    def seq(*layers):
        return _seeded(lambda: nn.Sequential(*[make() for make in layers]))

    def mse(out, target):
        return F.mse_loss(out, target)

    x, images = _randn(B, D), _randn(4, 4, 6, 6)
    ids = torch.randint(0, 10, (B, 4), generator=torch.Generator().manual_seed(6))
    layers = [
        ("Linear", seq(lambda: nn.Linear(D, C)), (x,), (B, C)),
        ("Conv1d, groups", seq(lambda: nn.Conv1d(4, 6, 3, groups=2, padding=1), nn.Flatten), (_randn(3, 4, 5),),
         (3, 30)),
        ("Conv2d, depthwise, stride", seq(lambda: nn.Conv2d(4, 4, 3, groups=4, stride=2, padding=1), nn.Flatten),
         (images,), (4, 36)),
        ("Conv2d, dilation", seq(lambda: nn.Conv2d(4, 2, 3, dilation=2), nn.Flatten), (images,), (4, 8)),
        ("ConvTranspose2d, stride", seq(lambda: nn.ConvTranspose2d(4, 2, 3, stride=2), nn.Flatten), (images,),
         (4, 338)),
        ("BatchNorm1d", seq(lambda: nn.Linear(D, C), lambda: nn.BatchNorm1d(C)), (x,), (B, C)),
        ("BatchNorm2d", seq(lambda: nn.Conv2d(4, 3, 3), lambda: nn.BatchNorm2d(3), nn.Flatten), (images,), (4, 48)),
        ("LayerNorm", seq(lambda: nn.Linear(D, 8), lambda: nn.LayerNorm(8)), (x,), (B, 8)),
        ("GroupNorm", seq(lambda: nn.Conv2d(4, 4, 1), lambda: nn.GroupNorm(2, 4), nn.Flatten), (images,), (4, 144)),
        ("Embedding, padding_idx", seq(lambda: nn.Embedding(10, 3, padding_idx=0), nn.Flatten), (ids,), (B, 12)),
        ("EmbeddingBag sum, 2-D input", seq(lambda: nn.EmbeddingBag(10, 3, mode="sum")), (ids,), (B, 3)),
        ("EmbeddingBag mean, offsets", _seeded(lambda: nn.EmbeddingBag(10, 3, mode="mean")),
         (ids.flatten()[:9], torch.tensor([0, 2, 5])), (3, 3)),
        ("EmbeddingBag max, padding_idx", seq(lambda: nn.EmbeddingBag(10, 3, mode="max", padding_idx=2)), (ids,),
         (B, 3)),
        ("EmbeddingBag sum, per_sample_weights", _seeded(lambda: nn.EmbeddingBag(10, 3, mode="sum")),
         (ids.flatten()[:9], torch.tensor([0, 4, 4]), _rand(9, seed=7)), (3, 3)),
        ("LSTM, 2 layers", _seeded(lambda: Recurrent(nn.LSTM)), (_randn(3, 5, D),), (3, 5, 4)),
        ("GRU, 2 layers", _seeded(lambda: Recurrent(nn.GRU)), (_randn(3, 5, D),), (3, 5, 4)),
        ("MultiheadAttention", _seeded(SelfAttention), (_randn(2, 5, 8),), (2, 5, 8)),
        ("scaled_dot_product_attention, causal", _seeded(CausalAttention), (_randn(2, 5, 8),), (2, 5, 8)),
        ("TransformerEncoderLayer", _seeded(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                                               batch_first=True)),
         (_randn(2, 5, 8),), (2, 5, 8)),
        ("MaxPool2d, AvgPool2d", seq(lambda: nn.Conv2d(4, 2, 1), lambda: nn.MaxPool2d(2),
                                     lambda: nn.AvgPool2d(3, padding=1, stride=1), nn.Flatten), (images,), (4, 18)),
        ("AvgPool2d, ceil_mode, count_include_pad=False",
         seq(lambda: nn.Conv2d(4, 2, 1), lambda: nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
             nn.Flatten), (_randn(4, 4, 7, 7),), (4, 32)),
        ("AvgPool1d", seq(lambda: nn.Conv1d(4, 2, 1), lambda: nn.AvgPool1d(2), nn.Flatten), (_randn(4, 4, 7),),
         (4, 6)),
        ("AdaptiveAvgPool2d(1)", seq(lambda: nn.Conv2d(4, 2, 1), lambda: nn.AdaptiveAvgPool2d(1), nn.Flatten),
         (images,), (4, 2)),
        ("AdaptiveAvgPool2d((3, 2)) of 7x5", seq(lambda: nn.Conv2d(4, 2, 1), lambda: nn.AdaptiveAvgPool2d((3, 2)),
                                                 nn.Flatten), (_randn(4, 4, 7, 5),), (4, 12)),
        ("AdaptiveMaxPool2d", seq(lambda: nn.Conv2d(4, 2, 1), lambda: nn.AdaptiveMaxPool2d(2), nn.Flatten),
         (images,), (4, 8)),
        ("Dropout", seq(lambda: nn.Linear(D, 8), lambda: nn.Dropout(0.3), lambda: nn.Linear(8, C)), (x,), (B, C)),
        ("tied weights (encoder and decoder share a matrix)", _seeded(Tied), (ids,), (B, 4, 10)),
        ("a parameter the loss does not reach", _seeded(Unused), (x,), (B, C)),
    ]
    cases = [Case(name, make, mse, margs, (_randn(*target, seed=5),), layer=True)
             for name, make, margs, target in layers]
    cases.append(Case("RReLU (random in training)", seq(lambda: nn.Linear(D, C), nn.RReLU), mse, (x,),
                      (_randn(B, C, seed=5),), cannot="aten.rrelu_with_noise_functional", layer=True))
    return cases


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.decode = nn.Linear(6, 10, bias=False)
        self.decode.weight = self.embed.weight

    def forward(self, ids):
        return self.decode(torch.tanh(self.embed(ids)))


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.used, self.spare = nn.Linear(D, C), nn.Linear(D, C)

    def forward(self, x):
        return self.used(x)


def cases() -> list[Case]:
    return loss_cases() + cross_entropy_cases() + layer_cases()


if __name__ == "__main__":
    import sys
    import warnings

    from test_training_catalogue import measure

    warnings.simplefilter("ignore")
    pattern = sys.argv[1] if len(sys.argv) > 1 else ""
    print("| case | exports | gradient error vs PyTorch float64 (export check) | update vs PyTorch (independent) |")
    print("|---|---|---|---|")
    for case in cases():
        if pattern in case.name:
            print(measure(case), flush=True)
