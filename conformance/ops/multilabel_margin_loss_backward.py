"""MultilabelMarginLossBackward: its oracle (autograd through PyTorch's multilabel_margin_loss), specs and bench
baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, rng
from . import torch_and_functional
from .multilabel_margin_loss import oracle as forward
from .multilabel_margin_loss import specs as forward_specs

OP = "MultilabelMarginLossBackward"


def oracle(grad_output, input, target, *, reduction):
    torch, _ = torch_and_functional()
    x = torch.from_numpy(np.asarray(input, np.float64)).requires_grad_(True)
    loss = forward(x, target, reduction=reduction)
    (g,) = torch.autograd.grad(loss, x, torch.from_numpy(np.asarray(grad_output, np.float64)).expand(loss.shape),
                               allow_unused=True)
    return np.zeros(np.shape(input)) if g is None else g.numpy()


def oracle_error(inputs: list, attrs: dict) -> np.ndarray:
    """PyTorch adds a / C to (or takes it from) an element once per margin above 0 it is in: n additions in
    float64 are off by up to n * n / 2 units of 2**-53 of a / C (n is up to C at a label)."""
    g, x, t = (np.asarray(a) for a in inputs)
    c = x.shape[1]
    xs, ts = np.moveaxis(x.astype(np.float64), 1, -1), np.moveaxis(t, 1, -1)
    counts = np.zeros(xs.shape)
    flat_x, flat_t, flat_n = xs.reshape(-1, c), ts.reshape(-1, c), counts.reshape(-1, c)
    with np.errstate(all="ignore"):
        for xr, tr, nr in zip(flat_x, flat_t, flat_n, strict=True):
            ended = np.flatnonzero(tr < 0)
            labels = tr[:ended[0] if ended.size else c]
            counted = (1.0 - xr[labels][:, None] + xr[None, :] > 0) & ~np.isin(np.arange(c), labels)[None, :]
            nr += counted.sum(0)
            np.add.at(nr, labels, counted.sum(1))
    rows = max(counts.size // max(c, 1), 1)
    unit = np.abs(g.astype(np.float64)) / max(c, 1) / (rows if attrs["reduction"] == "mean" else 1)
    unit = unit[..., None] if attrs["reduction"] == "none" else unit
    return np.moveaxis(counts * counts * unit * 2.0**-53, -1, 1)


def eager(t: dict, reduction: str):
    torch, F = torch_and_functional()
    x = t["input"].detach().requires_grad_(True)
    loss = F.multilabel_margin_loss(x, t["target"], reduction=reduction)
    g = t["grad_output"].expand(loss.shape)
    return lambda: torch.autograd.grad(loss, x, g, retain_graph=True)


def specs() -> list[Spec]:
    r = rng(28)
    return [Spec(s.id.replace("multilabel_margin_loss_", "multilabel_margin_loss_backward_", 1), OP,
                 [grad(s.attrs.get("reduction", "mean"), s.inputs[0].shape[:1] + s.inputs[0].shape[2:], r),
                  *s.inputs], s.attrs) for s in forward_specs()]

