"""Equivalent forms, in ops that export with their gradients, of the PyTorch functions whose traced training ops
torch.onnx cannot translate or translates wrongly; `ExportForms` routes the calls to them while a step is
traced. PyTorch's own functions stay the reference: the export's check compares the step with them.

- `F.embedding_bag`: `_embedding_bag_backward` has no translation; bags become gathers and index sums.
- `F.gaussian_nll_loss`: it checks that no variance is negative with a Python `if` on tensor values, which a
  graph cannot hold (a negative variance gives NaN in the step, where PyTorch raises).
- `F.multilabel_margin_loss` of a single sample (C,): PyTorch's decomposition of its forward counts the targets
  after the first -1, and torch.onnx uses it (a batch is lossops' MultilabelMarginLoss).
- `F.ctc_loss`: `aten._ctc_loss`'s intermediate (its log-alpha table) has a shape that depends on the lengths'
  values, which a trace cannot hold; it becomes lossops' CtcLoss node (training/ctc.py).
Needs torch.
"""

from __future__ import annotations

import inspect
import math

from ..extras import require

torch = require("torch", "training-step export", extra="train")
import torch.nn.functional as F  # noqa: E402
from torch import Tensor  # noqa: E402

from .ctc import ctc_loss  # noqa: E402


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm=None, norm_type=2.0,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights: Tensor | None = None,
                  include_last_offset=False, padding_idx: int | None = None) -> Tensor | None:
    """F.embedding_bag's value and gradient (None where this form does not cover the call: max_norm renormalises
    the table in place, scale_grad_by_freq changes the gradient only)."""
    if max_norm is not None or scale_grad_by_freq:
        return None
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    rows = F.embedding(input, weight)
    keep = torch.ones_like(input, dtype=torch.bool) if padding_idx is None else input != padding_idx
    scale = keep.to(weight.dtype) if per_sample_weights is None else keep * per_sample_weights
    if input.dim() == 2:  # a batch of equal-length bags
        if mode == "sum":
            return (rows * scale.unsqueeze(-1)).sum(1)
        if mode == "mean":
            return (rows * scale.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True).clamp(min=1).to(weight.dtype)
        best = rows.masked_fill(~keep.unsqueeze(-1), -math.inf).amax(1)
        return torch.where(keep.any(1, keepdim=True), best, torch.zeros_like(best))
    bags = offsets.shape[0] - int(include_last_offset)
    starts = offsets[:bags]
    # the bag of each index: how many bags start at or before it, less one
    bag = (torch.arange(input.shape[0]).unsqueeze(1) >= starts.unsqueeze(0)).sum(1) - 1
    if include_last_offset:  # indices at or past the last offset belong to no bag
        keep = keep & (torch.arange(input.shape[0]) < offsets[-1])
        scale = scale * keep
    out = weight.new_zeros(bags, weight.shape[1])
    if mode in ("sum", "mean"):
        total = out.index_add(0, bag.clamp(min=0), rows * scale.unsqueeze(-1))
        if mode == "sum":
            return total
        count = weight.new_zeros(bags).index_add(0, bag.clamp(min=0), keep.to(weight.dtype))
        return total / count.clamp(min=1).unsqueeze(-1)
    masked = rows.masked_fill(~keep.unsqueeze(-1), -math.inf)
    best = out.fill_(-math.inf).scatter_reduce(0, bag.clamp(min=0).unsqueeze(-1).expand_as(rows), masked, "amax")
    return torch.where(torch.isinf(best), torch.zeros_like(best), best)  # an empty bag gives 0, as PyTorch


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full=False, eps=1e-6,
                      reduction="mean") -> Tensor:
    """F.gaussian_nll_loss without its data-dependent check of `var`'s sign."""
    if not isinstance(var, Tensor):
        var = torch.full_like(input, float(var))
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            return None  # PyTorch raises for this shape: let it
    var = var + (var.clamp(min=eps) - var).detach()  # PyTorch clamps in place without autograd: the gradient passes
    loss = 0.5 * (torch.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction="mean") -> Tensor | None:
    """sum over a sample's targets j (those before the first -1) and its other classes i of
    max(0, 1 - (x[j] - x[i])), over the number of classes; for a single sample (C,) only: a batch (N, C) is
    lossops' MultilabelMarginLoss, which the trace's LossopsLosses routes it to (None here lets it)."""
    if size_average is not None or reduce is not None or input.dim() == 2:
        return None
    single = input.dim() == 1
    x, t = (input.unsqueeze(0), target.unsqueeze(0)) if single else (input, target)
    classes = torch.arange(x.shape[1])
    first = torch.where(t == -1, classes, x.shape[1]).amin(1, keepdim=True)
    valid = classes < first
    index = torch.where(valid, t, 0)
    is_target = ((index.unsqueeze(-1) == classes) & valid.unsqueeze(-1)).any(1)
    margins = (1 - x.gather(1, index).unsqueeze(-1) + x.unsqueeze(1)).clamp(min=0)
    loss = (margins * (valid.unsqueeze(-1) & ~is_target.unsqueeze(1))).sum((1, 2)) / x.shape[1]
    if single:
        loss = loss.squeeze(0)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


FORMS = {F.embedding_bag: embedding_bag, F.gaussian_nll_loss: gaussian_nll_loss,
         F.multilabel_margin_loss: multilabel_margin_loss, F.ctc_loss: ctc_loss}


class ExportForms(torch.overrides.TorchFunctionMode):
    """While active, the functions of FORMS run in their exportable form (module docstring)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        form = FORMS.get(func)
        if form is not None:
            bound = inspect.signature(func).bind(*args, **kwargs)
            value = form(**bound.arguments)
            if value is not None:
                return value
        return func(*args, **kwargs)
