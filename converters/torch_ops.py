"""PyTorch custom operators for the losses whose backward has no aten operator (BCE with logits, KL
divergence) or one whose inputs are not the lossops node's (NLL and cross entropy: aten's takes the forward's
total weight), that decompose before export (L1) or which have no aten operator at all (the focal loss), so that
a joint forward/backward graph keeps them as single ops; and a TorchFunctionMode that routes
torch.nn.functional's calls to them while a training step is traced. Their backward gives `input` its gradient,
and `target` its own where lossops has an operator for it (BCE with logits and KL: a trainable teacher's
target); a call that needs the gradient of another tensor stays PyTorch's own function while tracing, and is
refused by the op's backward elsewhere. Needs torch."""

from __future__ import annotations

import math

from ..extras import require
from ..opset import OPS
from ..opset.spec import REDUCTIONS

torch = require("torch", "training-step export")
import torch.nn.functional as F  # noqa: E402
from torch import Tensor  # noqa: E402

# aten's `int reduction` codes: the index in opset.spec.REDUCTIONS
_CODES = {name: code for code, name in enumerate(REDUCTIONS)}
_NONE, _MEAN, _BATCHMEAN = _CODES["none"], _CODES["mean"], _CODES["batchmean"]


@torch.library.custom_op("lossops::binary_cross_entropy_with_logits", mutates_args=())
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None,
                                     pos_weight: Tensor | None, reduction: int) -> Tensor:
    return torch.ops.aten.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


@binary_cross_entropy_with_logits.register_fake
def _(input, target, weight, pos_weight, reduction):
    _same_shape(input, target)
    return input.new_empty(input.shape if reduction == _NONE else ())


# the arguments whose gradient each forward op's backward computes: those its record has a gradient node for
COMPUTED = {name.split("::")[1]: (op.principal_name, "target") if op.target_gradient else (op.principal_name,)
            for op in OPS.values() if op.gradient for name in op.torch if name.startswith("lossops::")}


def _computed_gradients_only(ctx, op: str, names: tuple[str, ...]) -> None:
    """Refuses a backward asked for the gradient of a tensor whose gradient it does not compute (names: the
    op's arguments, in order), rather than giving it none."""
    wanted = [n for n, need in zip(names, ctx.needs_input_grad, strict=False) if need and n not in COMPUTED[op]]
    if wanted:
        raise NotImplementedError(
            f"lossops::{op}: its backward computes the gradient of {' and '.join(f'`{n}`' for n in COMPUTED[op])} "
            f"only, and the gradient of {', '.join(f'`{n}`' for n in wanted)} is needed: call "
            "torch.nn.functional's loss instead")


def _same_shape(input: Tensor, target: Tensor) -> None:
    """`target` has `input`'s shape: said to the tracer, so that symbolic dims of the two are one."""
    torch._check(input.dim() == target.dim() and all(a == b for a, b in zip(input.shape, target.shape, strict=True)),
                 lambda: f"target's shape {list(target.shape)} is not input's {list(input.shape)}")


@torch.library.custom_op("lossops::binary_cross_entropy_with_logits_backward", mutates_args=())
def binary_cross_entropy_with_logits_backward(grad_output: Tensor, input: Tensor, target: Tensor,
                                              weight: Tensor | None, pos_weight: Tensor | None,
                                              reduction: int) -> Tensor:
    p = torch.ones_like(target) if pos_weight is None else pos_weight
    grad = ((p * target + 1 - target) * torch.sigmoid(input) - p * target) * grad_output
    if weight is not None:
        grad = grad * weight
    return grad / input.numel() if reduction == _MEAN else grad.expand(input.shape).clone()


@binary_cross_entropy_with_logits_backward.register_fake
def _(grad_output, input, target, weight, pos_weight, reduction):
    return torch.empty_like(input)


@torch.library.custom_op("lossops::binary_cross_entropy_with_logits_target_backward", mutates_args=())
def binary_cross_entropy_with_logits_target_backward(grad_output: Tensor, input: Tensor, target: Tensor,
                                                     weight: Tensor | None, pos_weight: Tensor | None,
                                                     reduction: int) -> Tensor:
    if pos_weight is None:
        grad = -input * grad_output
    else:  # PyTorch's formula
        grad = (F.logsigmoid(-input) - F.logsigmoid(input) * pos_weight) * grad_output
    if weight is not None:
        grad = grad * weight
    return grad / target.numel() if reduction == _MEAN else grad.expand(target.shape).clone()


@binary_cross_entropy_with_logits_target_backward.register_fake
def _(grad_output, input, target, weight, pos_weight, reduction):
    return torch.empty_like(target)


def _bce_with_logits_setup(ctx, inputs, output):
    ctx.save_for_backward(*[t for t in inputs[:4] if t is not None])
    ctx.present = [t is not None for t in inputs[:4]]
    ctx.reduction = inputs[4]


def _bce_with_logits_backward(ctx, grad):
    _computed_gradients_only(ctx, "binary_cross_entropy_with_logits", ("input", "target", "weight", "pos_weight"))
    saved = iter(ctx.saved_tensors)
    args = (grad, *(next(saved) if p else None for p in ctx.present), ctx.reduction)
    ops = torch.ops.lossops
    return (ops.binary_cross_entropy_with_logits_backward(*args) if ctx.needs_input_grad[0] else None,
            ops.binary_cross_entropy_with_logits_target_backward(*args) if ctx.needs_input_grad[1] else None,
            None, None, None)


binary_cross_entropy_with_logits.register_autograd(_bce_with_logits_backward, setup_context=_bce_with_logits_setup)


@torch.library.custom_op("lossops::kl_div", mutates_args=())
def kl_div(input: Tensor, target: Tensor, reduction: int, log_target: bool) -> Tensor:
    return F.kl_div(input, target, reduction=REDUCTIONS[reduction], log_target=log_target)


@kl_div.register_fake
def _(input, target, reduction, log_target):
    return input.new_empty(torch.broadcast_shapes(input.shape, target.shape) if reduction == _NONE else ())


@torch.library.custom_op("lossops::kl_div_backward", mutates_args=())
def kl_div_backward(grad_output: Tensor, input: Tensor, target: Tensor, reduction: int,
                    log_target: bool) -> Tensor:
    return _kl_gradient(-(torch.exp(target) if log_target else target) * grad_output, input, target, reduction,
                        input)


@kl_div_backward.register_fake
def _(grad_output, input, target, reduction, log_target):
    return torch.empty_like(input)


@torch.library.custom_op("lossops::kl_div_target_backward", mutates_args=())
def kl_div_target_backward(grad_output: Tensor, input: Tensor, target: Tensor, reduction: int,
                           log_target: bool) -> Tensor:
    if log_target:
        d = torch.exp(target) * (target + 1 - input) * grad_output
    else:  # autograd's derivative of xlogy(t, t): log(t) + t / t, NaN at t = 0
        d = (torch.log(target) + target / target - input) * grad_output
    return _kl_gradient(d, input, target, reduction, target)


def _kl_gradient(d: Tensor, input: Tensor, target: Tensor, reduction: int, of: Tensor) -> Tensor:
    """A KL gradient's terms `d` over the broadcast shape, scaled for the reduction and summed back to `of`."""
    d = d.expand(torch.broadcast_shapes(input.shape, target.shape))
    if reduction == _MEAN:
        d = d / d.numel()
    elif reduction == _BATCHMEAN and input.dim():
        d = d / input.shape[0]
    return _summed_to(d, of)


@kl_div_target_backward.register_fake
def _(grad_output, input, target, reduction, log_target):
    return torch.empty_like(target)


def _kl_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.reduction, ctx.log_target = inputs[2], inputs[3]


def _kl_backward(ctx, grad):
    input, target = ctx.saved_tensors
    args = (grad, input, target, ctx.reduction, ctx.log_target)
    return (torch.ops.lossops.kl_div_backward(*args) if ctx.needs_input_grad[0] else None,
            torch.ops.lossops.kl_div_target_backward(*args) if ctx.needs_input_grad[1] else None, None, None)


kl_div.register_autograd(_kl_backward, setup_context=_kl_setup)

@torch.library.custom_op("lossops::l1_loss", mutates_args=())
def l1_loss(input: Tensor, target: Tensor, reduction: int) -> Tensor:
    return F.l1_loss(input, target, reduction=REDUCTIONS[reduction])


@l1_loss.register_fake
def _(input, target, reduction):
    return input.new_empty(torch.broadcast_shapes(input.shape, target.shape) if reduction == _NONE else ())


@torch.library.custom_op("lossops::l1_loss_backward", mutates_args=())
def l1_loss_backward(grad_output: Tensor, input: Tensor, target: Tensor, reduction: int) -> Tensor:
    d = (torch.sgn(input - target) * grad_output).expand(torch.broadcast_shapes(input.shape, target.shape))
    if reduction == _MEAN:
        d = d / d.numel()
    return _summed_to(d, input)


@l1_loss_backward.register_fake
def _(grad_output, input, target, reduction):
    return torch.empty_like(input)


def _l1_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.reduction = inputs[2]


def _l1_backward(ctx, grad):
    _computed_gradients_only(ctx, "l1_loss", ("input", "target"))
    input, target = ctx.saved_tensors
    return torch.ops.lossops.l1_loss_backward(grad, input, target, ctx.reduction), None, None


l1_loss.register_autograd(_l1_backward, setup_context=_l1_setup)


def _summed_to(d: Tensor, input: Tensor) -> Tensor:
    """`d` over the broadcast shape summed over the axes broadcasting added to or stretched in `input`."""
    lead = d.dim() - input.dim()
    axes = list(range(lead)) + [lead + i for i, n in enumerate(input.shape) if n == 1 and d.shape[lead + i] != 1]
    return (d.sum(axes, keepdim=True) if axes else d).reshape(input.shape).clone()


def _focal_terms(input: Tensor, target: Tensor, alpha: float, gamma: float) -> tuple[Tensor, Tensor, Tensor]:
    """(alpha_t * (1 - p_t)**gamma, the cross entropy, 1 - p_t) of the focal loss, in forms that do not cancel."""
    zero = input.new_zeros(())
    ce = (1 - target) * torch.logaddexp(zero, input) + target * torch.logaddexp(zero, -input)
    q = torch.sigmoid(input) * (1 - target) + torch.sigmoid(-input) * target
    balance = 1.0 if alpha < 0 else alpha * target + (1 - alpha) * (1 - target)
    return balance * q**gamma, ce, q


@torch.library.custom_op("lossops::sigmoid_focal_loss", mutates_args=())
def sigmoid_focal_loss(input: Tensor, target: Tensor, weight: Tensor | None, reduction: int, alpha: float,
                       gamma: float) -> Tensor:
    """torchvision.ops.sigmoid_focal_loss (with an optional weight) as one op: the exporters see
    lossops.SigmoidFocalLoss."""
    factor, ce, _ = _focal_terms(input, target, alpha, gamma)
    loss = factor * ce if weight is None else factor * ce * weight
    if reduction == _NONE:
        return loss.clone()
    return loss.mean() if reduction == _MEAN else loss.sum()


@sigmoid_focal_loss.register_fake
def _(input, target, weight, reduction, alpha, gamma):
    _same_shape(input, target)
    return input.new_empty(input.shape if reduction == _NONE else ())


@torch.library.custom_op("lossops::sigmoid_focal_loss_backward", mutates_args=())
def sigmoid_focal_loss_backward(grad_output: Tensor, input: Tensor, target: Tensor, weight: Tensor | None,
                                reduction: int, alpha: float, gamma: float) -> Tensor:
    factor, ce, q = _focal_terms(input, target, alpha, gamma)
    p = torch.sigmoid(input)
    focus = torch.where(q > 0, gamma * ce * p * torch.sigmoid(-input) / q * (1 - 2 * target), 0.0)
    grad = factor * ((p - target) + focus) * grad_output
    if weight is not None:
        grad = grad * weight
    return grad / input.numel() if reduction == _MEAN else grad.expand(input.shape).clone()


@sigmoid_focal_loss_backward.register_fake
def _(grad_output, input, target, weight, reduction, alpha, gamma):
    return torch.empty_like(input)


def _input_gradient_setup(ctx, inputs, output):
    """The context of a loss of (input, target, weight, *arguments): its tensors, then its other arguments
    (reduction, ignore_index, alpha, ...) as given."""
    ctx.save_for_backward(*[t for t in inputs[:3] if t is not None])
    ctx.present = [t is not None for t in inputs[:3]]
    ctx.arguments = inputs[3:]


def _register_input_gradient(op, name: str) -> None:
    """Such a loss `name` (sigmoid_focal_loss, nll_loss, cross_entropy, ...) differentiated by its
    `<name>_backward` op, the gradient of input (the only one computed)."""
    def backward(ctx, grad):
        _computed_gradients_only(ctx, name, ("input", "target", "weight"))
        saved = iter(ctx.saved_tensors)
        input, target, weight = (next(saved) if p else None for p in ctx.present)
        gradient = getattr(torch.ops.lossops, f"{name}_backward")(grad, input, target, weight, *ctx.arguments)
        return gradient, None, None, *(None for _ in ctx.arguments)

    op.register_autograd(backward, setup_context=_input_gradient_setup)


_register_input_gradient(sigmoid_focal_loss, "sigmoid_focal_loss")


@torch.library.custom_op("lossops::nll_loss", mutates_args=())
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int) -> Tensor:
    return F.nll_loss(input, target, weight, reduction=REDUCTIONS[reduction], ignore_index=ignore_index).clone()


@nll_loss.register_fake
def _(input, target, weight, reduction, ignore_index):
    rows = (input.shape[0], *input.shape[2:])
    torch._check(target.dim() == len(rows) and all(a == b for a, b in zip(target.shape, rows, strict=True)),
                 lambda: f"target's shape {list(target.shape)} is not input's without its class axis {list(rows)}")
    return input.new_empty(rows if reduction == _NONE else ())


@torch.library.custom_op("lossops::nll_loss_backward", mutates_args=())
def nll_loss_backward(grad_output: Tensor, input: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                      ignore_index: int) -> Tensor:
    index, row_weight = _rows(input, target, weight, ignore_index)
    fed = _fed(grad_output, row_weight, reduction)
    return torch.zeros_like(input).scatter_(1, index, -fed * row_weight)


def _rows(input: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int) -> tuple[Tensor, Tensor]:
    """(each row's class on axis 1, 0 where ignored; each row's weight on axis 1, 0 where ignored)."""
    kept = (target != ignore_index).unsqueeze(1)
    index = torch.where(kept, target.unsqueeze(1), 0)
    row_weight = torch.ones_like(index, dtype=input.dtype) if weight is None else weight[index]
    return index, torch.where(kept, row_weight, 0)


def _fed(grad_output: Tensor, row_weight: Tensor, reduction: int) -> Tensor:
    """grad_output on the rows' shape (N, 1, d1, ...), divided by the rows' total weight for mean."""
    if reduction == _NONE:
        return grad_output.unsqueeze(1)
    return grad_output / row_weight.sum() if reduction == _MEAN else grad_output


@nll_loss_backward.register_fake
def _(grad_output, input, target, weight, reduction, ignore_index):
    return torch.empty_like(input)


_register_input_gradient(nll_loss, "nll_loss")


@torch.library.custom_op("lossops::cross_entropy", mutates_args=())
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int,
                  label_smoothing: float) -> Tensor:
    return F.cross_entropy(input, target, weight, reduction=REDUCTIONS[reduction], ignore_index=ignore_index,
                           label_smoothing=label_smoothing).clone()


@cross_entropy.register_fake
def _(input, target, weight, reduction, ignore_index, label_smoothing):
    return nll_loss(input, target, weight, reduction, ignore_index)  # the same shapes, checked alike


@torch.library.custom_op("lossops::cross_entropy_backward", mutates_args=())
def cross_entropy_backward(grad_output: Tensor, input: Tensor, target: Tensor, weight: Tensor | None,
                           reduction: int, ignore_index: int, label_smoothing: float) -> Tensor:
    index, row_weight = _rows(input, target, weight, ignore_index)
    fed = torch.where((target != ignore_index).unsqueeze(1), _fed(grad_output, row_weight, reduction), 0)
    p = torch.softmax(input, 1)
    hit = (1 - label_smoothing) * row_weight * (p - torch.zeros_like(p).scatter_(1, index, 1.0))
    shape = (1, -1) + (1,) * (input.dim() - 2)
    w = torch.ones(input.shape[1], dtype=input.dtype) if weight is None else weight
    spread = label_smoothing / input.shape[1] * (p * w.sum() - w.reshape(shape))
    return fed * (hit + spread)


@cross_entropy_backward.register_fake
def _(grad_output, input, target, weight, reduction, ignore_index, label_smoothing):
    return torch.empty_like(input)


_register_input_gradient(cross_entropy, "cross_entropy")


@torch.library.custom_op("lossops::soft_target_cross_entropy", mutates_args=())
def soft_target_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                              label_smoothing: float) -> Tensor:
    return F.cross_entropy(input, target, weight, reduction=REDUCTIONS[reduction],
                           label_smoothing=label_smoothing).clone()


@soft_target_cross_entropy.register_fake
def _(input, target, weight, reduction, label_smoothing):
    _same_shape(input, target)
    return input.new_empty((input.shape[0], *input.shape[2:]) if reduction == _NONE else ())


@torch.library.custom_op("lossops::soft_target_cross_entropy_backward", mutates_args=())
def soft_target_cross_entropy_backward(grad_output: Tensor, input: Tensor, target: Tensor, weight: Tensor | None,
                                       reduction: int, label_smoothing: float) -> Tensor:
    q = target * (1 - label_smoothing) + label_smoothing / input.shape[1]
    if weight is not None:
        q = q * weight.reshape((1, -1) + (1,) * (input.dim() - 2))
    fed = grad_output.unsqueeze(1) if reduction == _NONE else grad_output
    if reduction == _MEAN:
        fed = fed / (input.shape[0] * math.prod(input.shape[2:]))  # the rows' number, whatever the weights
    return fed * (torch.softmax(input, 1) * q.sum(1, keepdim=True) - q)


@soft_target_cross_entropy_backward.register_fake
def _(grad_output, input, target, weight, reduction, label_smoothing):
    return torch.empty_like(input)


_register_input_gradient(soft_target_cross_entropy, "soft_target_cross_entropy")


@torch.library.custom_op("lossops::multilabel_margin_loss", mutates_args=())
def multilabel_margin_loss(input: Tensor, target: Tensor, reduction: int) -> Tensor:
    return F.multilabel_margin_loss(input, target, reduction=REDUCTIONS[reduction]).clone()


@multilabel_margin_loss.register_fake
def _(input, target, reduction):
    _same_shape(input, target)
    return input.new_empty((input.shape[0],) if reduction == _NONE else ())


@torch.library.custom_op("lossops::multilabel_margin_loss_backward", mutates_args=())
def multilabel_margin_loss_backward(grad_output: Tensor, input: Tensor, target: Tensor, reduction: int) -> Tensor:
    c = input.shape[1]
    listed = (target >= 0).cumprod(1).bool()  # (N, K): the labels end at the row's first negative value
    index = target.clamp(min=0)
    hit = F.one_hot(index, c).bool() & listed.unsqueeze(2)  # (N, K, C): label k is class c
    margins = 1 - input.gather(1, index).unsqueeze(2) + input.unsqueeze(1)
    counted = (listed.unsqueeze(2) & ~hit.any(1, keepdim=True) & (margins > 0)).to(input.dtype)
    counts = counted.sum(1) - (hit.to(input.dtype) * counted.sum(2, keepdim=True)).sum(1)
    fed = grad_output.unsqueeze(1) if reduction == _NONE else grad_output
    return counts * (fed / (c * (input.shape[0] if reduction == _MEAN else 1)))


@multilabel_margin_loss_backward.register_fake
def _(grad_output, input, target, reduction):
    return torch.empty_like(input)


def _multilabel_setup(ctx, inputs, output):
    input, target, reduction = inputs
    ctx.save_for_backward(input, target)
    ctx.reduction = reduction


def _multilabel_backward(ctx, grad):
    _computed_gradients_only(ctx, "multilabel_margin_loss", ("input", "target"))
    input, target = ctx.saved_tensors
    return torch.ops.lossops.multilabel_margin_loss_backward(grad, input, target, ctx.reduction), None, None


multilabel_margin_loss.register_autograd(_multilabel_backward, setup_context=_multilabel_setup)


@torch.library.custom_op("lossops::ctc_loss", mutates_args=())
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Tensor, target_lengths: Tensor, blank: int,
             reduction: int, zero_infinity: bool) -> Tensor:
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, REDUCTIONS[reduction],
                      zero_infinity).clone()


@ctc_loss.register_fake
def _(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    return log_probs.new_empty((log_probs.shape[1],) if reduction == _NONE else ())


@torch.library.custom_op("lossops::ctc_loss_backward", mutates_args=())
def ctc_loss_backward(grad_output: Tensor, log_probs: Tensor, targets: Tensor, input_lengths: Tensor,
                      target_lengths: Tensor, blank: int, reduction: int, zero_infinity: bool) -> Tensor:
    # PyTorch's own backward (eager: a trace sees the fake below), fed each sequence's share of grad_output
    nll, alpha = torch.ops.aten._ctc_loss.Tensor(log_probs, targets, input_lengths, target_lengths, blank,
                                                 zero_infinity)
    g = grad_output.expand(nll.shape)
    if reduction == _MEAN:
        g = g / target_lengths.clamp(min=1).to(g.dtype) / nll.shape[0]
    return torch.ops.aten._ctc_loss_backward.Tensor(g, log_probs, targets, input_lengths, target_lengths, nll, alpha,
                                                    blank, zero_infinity)


@ctc_loss_backward.register_fake
def _(grad_output, log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    return torch.empty_like(log_probs)


def _ctc_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:4])
    ctx.attributes = inputs[4:]


def _ctc_backward(ctx, grad):
    _computed_gradients_only(ctx, "ctc_loss", ("log_probs", "targets", "input_lengths", "target_lengths"))
    return (torch.ops.lossops.ctc_loss_backward(grad, *ctx.saved_tensors, *ctx.attributes),
            None, None, None, None, None, None)


ctc_loss.register_autograd(_ctc_backward, setup_context=_ctc_setup)


class LossopsLosses(torch.overrides.TorchFunctionMode):
    """While active, F.binary_cross_entropy_with_logits, F.kl_div, F.l1_loss, F.cross_entropy (of class indices
    or probabilities), F.nll_loss (on (N, C, ...)) and F.multilabel_margin_loss (on (N, C)) run as the lossops
    custom ops, unless a tensor whose
    gradient their backward does not compute needs one, or the call uses the deprecated size_average/reduce
    arguments: those stay PyTorch's own function."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in (F.binary_cross_entropy_with_logits, F.kl_div, F.l1_loss, F.nll_loss, F.cross_entropy,
                        F.multilabel_margin_loss):
            return func(*args, **kwargs)
        bound = _bind(func, args, kwargs)
        if bound.get("size_average") is not None or bound.get("reduce") is not None or _other_gradient(
                bound, COMPUTED[func.__name__]):
            return func(*args, **kwargs)
        reduction = _CODES[bound.get("reduction", "mean")]
        if func in (F.nll_loss, F.cross_entropy):
            return self._nll(func, bound, reduction, args, kwargs)
        if func is F.kl_div:
            return torch.ops.lossops.kl_div(bound["input"], bound["target"], reduction,
                                            bool(bound.get("log_target", False)))
        if func is F.l1_loss:
            return torch.ops.lossops.l1_loss(bound["input"], bound["target"], reduction)
        if func is F.multilabel_margin_loss:  # (N, C): a single sample stays PyTorch's own
            if bound["input"].dim() != 2:
                return func(*args, **kwargs)
            return torch.ops.lossops.multilabel_margin_loss(bound["input"], bound["target"], reduction)
        return torch.ops.lossops.binary_cross_entropy_with_logits(
            bound["input"], bound["target"], bound.get("weight"), bound.get("pos_weight"), reduction)


    @staticmethod
    def _nll(func, bound: dict, reduction: int, args, kwargs):
        input, target = bound["input"], bound["target"]
        ignore_index = int(bound.get("ignore_index", -100))
        if input.dim() < 2 or (target.is_floating_point() and (func is F.nll_loss or ignore_index >= 0)):
            return func(*args, **kwargs)  # a single sample, or what PyTorch refuses: PyTorch's own
        if target.is_floating_point():  # probabilities
            return torch.ops.lossops.soft_target_cross_entropy(input, target, bound.get("weight"), reduction,
                                                               float(bound.get("label_smoothing", 0.0)))
        if func is F.cross_entropy:
            return torch.ops.lossops.cross_entropy(input, target, bound.get("weight"), reduction, ignore_index,
                                                   float(bound.get("label_smoothing", 0.0)))
        return torch.ops.lossops.nll_loss(input, target, bound.get("weight"), reduction, ignore_index)


def _other_gradient(bound: dict, computed: tuple[str, ...]) -> bool:
    """Whether a tensor argument other than the `computed` ones needs a gradient."""
    return any(isinstance(t, Tensor) and t.requires_grad for name, t in bound.items() if name not in computed)


def _bind(func, args, kwargs) -> dict:
    import inspect

    return dict(inspect.signature(func).bind(*args, **kwargs).arguments)
