"""F.ctc_loss in a form a training step exports: its forward recursion over time (Graves et al. 2006) as one
PyTorch op, `lossops::ctc_alpha`, whose backward is another, `lossops::ctc_alpha_backward`; each is translated
to an ONNX Scan over the time axis, so the graph holds the recursion once whatever the length, and the time
axis can stay symbolic. What surrounds the recursion (the extended label sequence, the emissions gathered from
the log-probabilities, the sequence ends, zero_infinity, the reduction) is PyTorch ops whose gradients autograd
writes. `aten._ctc_loss` itself cannot be traced: its log-alpha table's shape depends on the lengths' values.

log(0) is a large negative number (`NEVER`) rather than -inf, so that no log-sum-exp of impossible paths puts
NaN into the gradient; a loss that large is infinite. Needs torch.
"""

from __future__ import annotations

import math
from typing import Tuple, TypeVar, Union  # noqa: UP035

import numpy as np

from ..extras import require

torch = require("torch", "training-step export", extra="train")
onnxscript = require("onnxscript", "training-step export", extra="train")
from onnxscript import BOOL, DOUBLE, FLOAT  # noqa: E402
from onnxscript.onnx_opset import opset18 as op  # noqa: E402
from torch import Tensor  # noqa: E402

from ..converters.aten_ops import onnx_op, translates  # noqa: E402

# log(0): a quarter of float32's lowest, so that four of them still add up to a finite number, in float64 too
# (torch.onnx writes a Python float as a float32 constant before it casts it: float64's lowest would be -inf)
NEVER = float(np.finfo(np.float32).min) / 4


def _paths(alpha: Tensor, skip: Tensor) -> Tensor:
    """(3, N, W): the log-probabilities of the paths into each state from the step before: from the state itself,
    from the one before it, and from two before it, made impossible (NEVER added) where the label may not skip
    its blank."""
    one = torch.nn.functional.pad(alpha, (1, 0), value=NEVER)[:, :-1]
    two = torch.nn.functional.pad(alpha, (2, 0), value=NEVER)[:, :-2] + torch.where(skip, 0.0, NEVER)
    return torch.stack([alpha, one, two])


def _floored(alpha: Tensor) -> Tensor:
    """alpha, NEVER where it is below (and its gradient 0 there): impossible states stay at NEVER rather than
    falling by NEVER with every log(0) emission until they overflow to -inf (and NaN)."""
    return torch.where(alpha > NEVER, alpha, NEVER)


@torch.library.custom_op("lossops::ctc_alpha", mutates_args=())
def ctc_alpha(emit: Tensor, alpha0: Tensor, skip: Tensor, mask: Tensor) -> Tensor:
    """alphas (T, N, W) from alpha0, the state before the first step: alphas[t] = logsumexp(paths(alphas[t - 1]))
    + emit[t], floored at NEVER, where mask[t], alphas[t - 1] elsewhere (a sequence that has ended, a state past
    its labels)."""
    alpha, alphas = alpha0, []
    for t in range(emit.shape[0]):
        alpha = torch.where(mask[t], _floored(torch.logsumexp(_paths(alpha, skip), 0) + emit[t]), alpha)
        alphas.append(alpha)
    return torch.stack(alphas)


@ctc_alpha.register_fake
def _(emit, alpha0, skip, mask):
    return torch.empty_like(emit)


@torch.library.custom_op("lossops::ctc_alpha_backward", mutates_args=())
def ctc_alpha_backward(grad: Tensor, alphas: Tensor, alpha0: Tensor, skip: Tensor,
                       mask: Tensor) -> tuple[Tensor, Tensor]:
    """(grad of emit, grad of alpha0) from the gradient of every alphas[t]: the recursion's adjoint, backwards in
    time. Where mask[t], alphas[t]'s gradient is emit[t]'s (0 where it was floored at NEVER), and it reaches the
    paths into the state in proportion to their probability (the log-sum-exp's softmax, recomputed from the state
    before); elsewhere it reaches the state before's same state."""
    later = torch.zeros_like(alpha0)
    grad_emit = torch.zeros_like(alphas)
    for t in range(alphas.shape[0] - 1, -1, -1):
        g = later + grad[t]
        kept = torch.where(mask[t] & (alphas[t] > NEVER), g, 0.0)
        grad_emit[t] = kept
        share = kept * torch.softmax(_paths(alphas[t - 1] if t else alpha0, skip), 0)
        later = (torch.where(mask[t], 0.0, g) + share[0] + torch.nn.functional.pad(share[1], (0, 1))[:, 1:]
                 + torch.nn.functional.pad(share[2], (0, 2))[:, 2:])
    return grad_emit, later


@ctc_alpha_backward.register_fake
def _(grad, alphas, alpha0, skip, mask):
    return torch.empty_like(alphas), torch.empty_like(alpha0)


def _setup(ctx, inputs, output):
    _, alpha0, skip, mask = inputs
    ctx.save_for_backward(output, alpha0, skip, mask)


def _backward(ctx, grad):
    alphas, alpha0, skip, mask = ctx.saved_tensors
    grad_emit, grad_alpha0 = torch.ops.lossops.ctc_alpha_backward(grad, alphas, alpha0, skip, mask)
    return grad_emit, grad_alpha0, None, None


ctc_alpha.register_autograd(_backward, setup_context=_setup)


# --- ONNX: each recursion a Scan over time, its body one step ----------------------------------------------
# onnxscript functions (a Scan's outputs outnumber what a traced translation can take from one call); `never` is
# an input, so that one function serves float32 and float64. Both bodies write the paths out: a function called
# from a Scan body is not inlined by the exporter, and the model then fails ONNX's shape inference. What does
# not change over time (the skip penalty) is computed before the Scan.

_ctc = onnxscript.values.Opset("lossops.ctc", 1)
# the exporter reads a function's inputs and outputs from its annotations, in typing's forms
Real = TypeVar("Real", bound=Union[FLOAT, DOUBLE])  # noqa: UP007


@onnxscript.script(_ctc, default_opset=op)
def CtcAlpha(emit: Real, alpha0: Real, skip: BOOL, mask: BOOL, never: Real) -> Real:
    """alphas of `ctc_alpha`: a Scan over emit and mask, alpha carried from alpha0."""
    penalty = op.Where(skip, op.CastLike(0.0, never), never)

    @onnxscript.graph()
    def step(alpha, emit_t, mask_t):
        padded = op.Pad(alpha, op.Constant(value_ints=[0, 2, 0, 0]), never)
        one = op.Slice(padded, op.Constant(value_ints=[1]), op.Constant(value_ints=[-1]), op.Constant(value_ints=[1]))
        two = op.Add(op.Slice(padded, op.Constant(value_ints=[0]), op.Constant(value_ints=[-2]),
                              op.Constant(value_ints=[1])), penalty)
        top = op.Max(alpha, one, two)
        total = op.Sum(op.Exp(op.Sub(alpha, top)), op.Exp(op.Sub(one, top)), op.Exp(op.Sub(two, top)))
        new = op.Where(mask_t, op.Max(op.Add(op.Add(top, op.Log(total)), emit_t), never), alpha)
        scanned = op.Identity(new)
        return new, scanned

    _, alphas = op.Scan(alpha0, emit, mask, body=step, num_scan_inputs=2)
    return alphas


@onnxscript.script(_ctc, default_opset=op)
def CtcAlphaBackward(grad: Real, alphas: Real, alpha0: Real, skip: BOOL, mask: BOOL,
                     never: Real) -> Tuple[Real, Real]:  # noqa: UP006
    """(grad of emit, grad of alpha0) of `ctc_alpha_backward`: a Scan backwards in time over grad, the states
    before and after each step and mask, the gradient that later steps send back carried."""
    nothing = op.CastLike(0.0, never)
    penalty = op.Where(skip, nothing, never)
    width = op.Shape(alpha0, start=1, end=2)
    one_end = op.Add(width, op.Constant(value_ints=[1]))  # the shares sent one state back end there, in `sent`
    two_start = op.Add(width, op.Constant(value_ints=[2]))  # and those sent two back start here

    @onnxscript.graph()
    def step(later, grad_t, alpha, after, mask_t):
        padded = op.Pad(alpha, op.Constant(value_ints=[0, 2, 0, 0]), never)
        one = op.Slice(padded, op.Constant(value_ints=[1]), op.Constant(value_ints=[-1]), op.Constant(value_ints=[1]))
        two = op.Add(op.Slice(padded, op.Constant(value_ints=[0]), op.Constant(value_ints=[-2]),
                              op.Constant(value_ints=[1])), penalty)
        top = op.Max(alpha, one, two)
        e0 = op.Exp(op.Sub(alpha, top))
        e1 = op.Exp(op.Sub(one, top))
        e2 = op.Exp(op.Sub(two, top))
        g = op.Add(later, grad_t)
        kept = op.Where(op.And(mask_t, op.Greater(after, never)), g, nothing)
        rate = op.Div(kept, op.Sum(e0, e1, e2))
        # the shares of the paths from one and two states back, returned to those states
        sent = op.Pad(op.Concat(op.Mul(rate, e1), op.Mul(rate, e2), axis=1), op.Constant(value_ints=[0, 0, 0, 2]))
        from_one = op.Slice(sent, op.Constant(value_ints=[1]), one_end, op.Constant(value_ints=[1]))
        from_two = op.Slice(sent, two_start, op.Constant(value_ints=[9223372036854775807]),
                            op.Constant(value_ints=[1]))
        earlier = op.Sum(op.Where(mask_t, nothing, g), op.Mul(rate, e0), from_one, from_two)
        emit_grad = op.Identity(kept)
        return earlier, emit_grad

    axis = op.Constant(value_ints=[0])
    before = op.Concat(op.Unsqueeze(alpha0, axis), op.Slice(alphas, axis, op.Constant(value_ints=[-1]), axis), axis=0)
    grad_alpha0, grad_emit = op.Scan(op.Mul(alpha0, nothing), grad, before, alphas, mask, body=step,
                                     num_scan_inputs=4, scan_input_directions=[1, 1, 1, 1],
                                     scan_output_directions=[1])
    return grad_emit, grad_alpha0


@translates("lossops::ctc_alpha")
def ctc_alpha_onnx(emit, alpha0, skip, mask):
    return CtcAlpha(emit, alpha0, skip, mask, onnx_op.CastLike(NEVER, emit))  # exact: NEVER is a float32


@translates("lossops::ctc_alpha_backward")
def ctc_alpha_backward_onnx(grad, alphas, alpha0, skip, mask):
    return CtcAlphaBackward(grad, alphas, alpha0, skip, mask, onnx_op.CastLike(NEVER, alphas))


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor | None:
    """F.ctc_loss's value and gradient (module docstring); None where PyTorch refuses the call (it then says why)
    or where the log-probabilities are narrower than float32 (a narrower type's stand-in for log(0) would be
    within reach of a long sequence's log-likelihood)."""
    lengths = [torch.as_tensor(v) for v in (input_lengths, target_lengths)]
    if any(v.dtype.is_floating_point or v.dim() > 1 for v in lengths) or log_probs.dim() not in (2, 3):
        return None
    if log_probs.dtype not in (torch.float32, torch.float64):
        return None
    single = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if single else log_probs  # (T, N, C)
    steps, batch = lp.shape[0], lp.shape[1]
    input_lengths, target_lengths = (v.reshape(batch).to(lp.device) for v in lengths)
    if targets.dim() == 2 or (single and targets.dim() == 1):  # padded, one row per sequence
        labels = targets.reshape(batch, -1)
    else:  # concatenated: each sequence's labels from its offset, padded to the longest possible
        offsets = torch.cumsum(target_lengths, 0) - target_lengths
        labels = targets[(offsets.unsqueeze(1) + torch.arange(targets.shape[0])).clamp(max=targets.shape[0] - 1)]
    width = 2 * labels.shape[1] + 1  # blank, label, blank, ..., label, blank
    extended = torch.full((batch, width), blank, dtype=torch.int64)
    extended[:, 1::2] = labels.to(torch.int64)
    position = torch.arange(width)
    valid = position < (2 * target_lengths + 1).unsqueeze(1)
    skip = (position % 2 == 1) & (position >= 2)  # a label may follow the label before its blank if they differ
    skip = skip & (extended != extended.roll(2, 1))
    emit = lp.gather(2, extended.unsqueeze(0).expand(steps, batch, width)).clamp(min=NEVER)  # (T, N, width)
    started = (input_lengths > 0).unsqueeze(1)  # a sequence of no frames has no first state
    alpha0 = torch.where(valid & (position < 2) & started, emit[0], NEVER)
    time = torch.arange(steps).reshape(-1, 1, 1)
    mask = valid & (time > 0) & (time < input_lengths.reshape(1, -1, 1))  # alphas[0] is alpha0
    alpha = torch.ops.lossops.ctc_alpha(emit, alpha0, skip, mask)[-1]
    last = (2 * target_lengths).unsqueeze(1)
    ends = torch.cat([alpha.gather(1, last), torch.where(last > 0, alpha.gather(1, (last - 1).clamp(min=0)), NEVER)], 1)
    top = ends.amax(1)
    loss = -(top + torch.log(torch.exp(ends - top.unsqueeze(1)).sum(1)))
    loss = torch.where((input_lengths == 0) & (target_lengths == 0), 0.0, loss)  # no frames, no labels: certain
    impossible = loss > -NEVER / 2
    loss = torch.where(impossible, 0.0 if zero_infinity else math.inf, loss)
    if single:
        loss = loss.squeeze(0)
    if reduction == "mean":
        return (loss / target_lengths.clamp(min=1).to(loss.dtype)).mean()
    return loss.sum() if reduction == "sum" else loss
