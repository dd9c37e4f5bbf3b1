"""Translations, for torch.onnx.export(dynamo=True), of the aten ops that torch.onnx lacks or translates wrongly
and that real training steps (and attention at inference) meet; `translation_table` (converters/aten.py) adds
them to every export. Each docstring says what torch.onnx does instead. Needs torch and onnxscript.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
from onnx import TensorProto

from ..extras import require
from ..opset.spec import REDUCTIONS

require("torch", "exporting from PyTorch")
import onnx_ir as ir  # noqa: E402 - onnxscript's IR: the exporter's tensors carry its types
from onnxscript.onnx_opset import opset18 as onnx_op  # noqa: E402 - the exporter's own default-domain opset

# "namespace::name" -> the function the exporter calls for that op's default overload
WRITTEN: dict[str, Callable] = {}


def translates(*names: str) -> Callable[[Callable], Callable]:
    """Register the decorated function as the translation of each PyTorch op in `names`."""

    def register(function: Callable) -> Callable:
        for name in names:
            WRITTEN[name] = function
        return function

    return register


@translates("aten::convolution_backward")
def convolution_backward(grad_output, input, weight, bias_sizes: Sequence[int], stride: Sequence[int],
                         padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                         output_padding: Sequence[int], groups: int, output_mask: Sequence[bool]):
    """The gradients of a convolution, grouped or transposed. torch.onnx has no translation of its own.

    A convolution's grad_input is the transposed convolution of grad_output by the same weight, and a transposed
    convolution's is the convolution; grad_weight correlates the convolution's input with its output gradient
    over the batch (`_correlate`; for a transposed convolution the two swap roles); grad_bias sums grad_output
    over batch and space. All three are computed whatever output_mask says: the exporter needs a value for each,
    and its optimizer removes the ones nothing reads."""
    kernel = [int(k) for k in weight.shape[2:]]
    if any(not isinstance(d, int) for d in [*input.shape[2:], *grad_output.shape[2:]]):
        raise ValueError("convolution_backward: training-step export needs static spatial sizes")
    spatial = len(stride)
    pads = [*padding, *padding]
    if transposed:
        grad_input = onnx_op.Conv(grad_output, weight, strides=stride, pads=pads, dilations=dilation, group=groups)
        grad_weight = _correlate(grad_output, input, kernel, stride, pads, dilation, groups)
    else:
        # what the transposed convolution's size formula leaves out of the input's size is output_padding
        extra = [int(n) - ((int(o) - 1) * s - 2 * p + d * (k - 1) + 1) for n, o, s, p, d, k in
                 zip(input.shape[2:], grad_output.shape[2:], stride, padding, dilation, kernel, strict=True)]
        grad_input = onnx_op.ConvTranspose(grad_output, weight, strides=stride, pads=pads, dilations=dilation,
                                           output_padding=extra, group=groups)
        grad_weight = _correlate(input, grad_output, kernel, stride, pads, dilation, groups)
    grad_bias = onnx_op.ReduceSum(grad_output, onnx_op.Constant(value_ints=[0, *range(2, 2 + spatial)]), keepdims=0)
    return grad_input, grad_weight, grad_bias


def _correlate(x, y, kernel: list[int], stride, pads, dilation, groups: int):
    """d/dw of conv(x, w) · y for w of shape (C_y, C_x / groups, *kernel), as a matrix product per kernel position
    (and group): y over batch and space against the strided slice of the padded x that position reads. x is
    made channels-last once, so that each slice is a (batch * space, channels) matrix as it stands."""
    spatial = len(kernel)
    cx, cy = int(x.shape[1]), int(y.shape[1])
    outs = [int(d) for d in y.shape[2:]]
    last = [0, *range(2, 2 + spatial), 1]  # channels last
    padded = onnx_op.Transpose(onnx_op.Pad(x, onnx_op.Constant(value_ints=[0, 0, *pads[:spatial], 0, 0,
                                                                           *pads[spatial:]])), perm=last)
    axes = onnx_op.Constant(value_ints=list(range(1, 1 + spatial)))
    steps = onnx_op.Constant(value_ints=list(stride))
    # y: (N, C_y, *outs) -> (g, C_y/g, N * P), P the output positions
    ys = onnx_op.Reshape(onnx_op.Transpose(y, perm=[1, 0, *range(2, 2 + spatial)]),
                         onnx_op.Constant(value_ints=[groups, cy // groups, -1]))
    per_position = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offset, dilation, strict=True)]
        ends = [a + (n - 1) * s + 1 for a, n, s in zip(starts, outs, stride, strict=True)]
        window = onnx_op.Slice(padded, onnx_op.Constant(value_ints=starts), onnx_op.Constant(value_ints=ends), axes,
                               steps)  # (N, *outs, C_x)
        if groups == 1:
            window = onnx_op.Reshape(window, onnx_op.Constant(value_ints=[1, -1, cx]))
        else:  # (N * P, g, C_x/g) -> (g, N * P, C_x/g)
            window = onnx_op.Transpose(onnx_op.Reshape(window, onnx_op.Constant(value_ints=[-1, groups, cx // groups])),
                                       perm=[1, 0, 2])
        per_position.append(onnx_op.Unsqueeze(onnx_op.MatMul(ys, window), [-1]))  # (g, C_y/g, C_x/g, 1)
    grad = onnx_op.Concat(*per_position, axis=-1) if len(per_position) > 1 else per_position[0]
    return onnx_op.Reshape(grad, onnx_op.Constant(value_ints=[cy, cx // groups, *kernel]))


@translates("aten::avg_pool2d_backward", "aten::avg_pool3d_backward")
def avg_pool_backward(grad_output, self, kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                      ceil_mode: bool, count_include_pad: bool, divisor_override: int | None):
    """Each output cell's gradient, over the divisor PyTorch used for it, spread over its window: a transposed
    depthwise convolution with a kernel of ones, cut or padded back to the input's size. torch.onnx has no
    translation."""
    spatial = len(kernel_size)
    stride = list(stride) or list(kernel_size)
    padding = list(padding) * (spatial // len(padding))
    sizes, out_sizes = [int(d) for d in self.shape[-spatial:]], [int(d) for d in grad_output.shape[-spatial:]]
    divisors = np.ones(out_sizes)
    for cell in np.ndindex(*out_sizes):
        starts = [o * s - p for o, s, p in zip(cell, stride, padding, strict=True)]
        ends = [min(a + k, n + p) for a, k, n, p in zip(starts, kernel_size, sizes, padding, strict=True)]
        padded = math.prod(e - a for a, e in zip(starts, ends, strict=True))
        inside = math.prod(min(e, n) - max(a, 0) for a, e, n in zip(starts, ends, sizes, strict=True))
        divisors[cell] = divisor_override or (padded if count_include_pad else inside)
    channels = int(self.shape[-spatial - 1])
    scaled = onnx_op.Mul(grad_output, onnx_op.CastLike(ir.tensor((1 / divisors).astype(np.float32)), grad_output))
    ones = onnx_op.CastLike(ir.tensor(np.ones([channels, 1, *kernel_size], np.float32)), grad_output)
    full = [(o - 1) * s + k - p for o, s, k, p in zip(out_sizes, stride, kernel_size, padding, strict=True)]
    spread = onnx_op.ConvTranspose(scaled, ones, strides=stride, pads=[*padding, *[0] * spatial], group=channels)
    axes = list(range(len(self.shape) - spatial, len(self.shape)))
    spread = onnx_op.Slice(spread, onnx_op.Constant(value_ints=[0] * spatial), onnx_op.Constant(value_ints=sizes),
                           onnx_op.Constant(value_ints=axes))
    short = [max(n - f, 0) for n, f in zip(sizes, full, strict=True)]
    if any(short):  # the last windows stop before the input's end: the rows past them get no gradient
        pads = [0] * len(self.shape) + [0] * (len(self.shape) - spatial) + short
        spread = onnx_op.Pad(spread, onnx_op.Constant(value_ints=pads))
    return spread


def _adaptive_avg_pool_backward(spatial: int) -> Callable:
    def translate(grad_output, self):
        """Each output cell's gradient over its window's size, spread over the window: a matrix per spatial axis
        (PyTorch's windows are products of per-axis ranges). torch.onnx has no translation."""
        rank = len(self.shape)
        result = grad_output
        for axis in range(rank - spatial, rank):
            n, o = int(self.shape[axis]), int(grad_output.shape[axis])
            spread = np.zeros((o, n), np.float32)  # output cell -> input positions, over the window's size
            for j in range(o):
                start, end = (j * n) // o, -(-(j + 1) * n // o)
                spread[j, start:end] = 1.0 / (end - start)
            perm = [*(a for a in range(rank) if a != axis), axis]
            moved = onnx_op.MatMul(onnx_op.Transpose(result, perm=perm), onnx_op.CastLike(ir.tensor(spread), result))
            result = onnx_op.Transpose(moved, perm=[perm.index(a) for a in range(rank)])
        return result

    return translate


WRITTEN["aten::_adaptive_avg_pool2d_backward"] = _adaptive_avg_pool_backward(2)
WRITTEN["aten::_adaptive_avg_pool3d_backward"] = _adaptive_avg_pool_backward(3)


def _adaptive_max_pool_backward(spatial: int) -> Callable:
    def translate(grad_output, self, indices):
        """Each output cell's gradient added at its maximum's position (`indices`: flat over the spatial axes).
        torch.onnx has no translation."""
        lead = len(self.shape) - spatial
        flat = onnx_op.Constant(value_ints=[0] * lead + [-1])
        zeros = onnx_op.Reshape(onnx_op.Expand(onnx_op.CastLike(0.0, self), onnx_op.Shape(self)), flat)
        spread = onnx_op.ScatterElements(zeros, onnx_op.Reshape(indices, flat), onnx_op.Reshape(grad_output, flat),
                                         axis=lead, reduction="add")
        return onnx_op.Reshape(spread, onnx_op.Shape(self))

    return translate


WRITTEN["aten::adaptive_max_pool2d_backward"] = _adaptive_max_pool_backward(2)
WRITTEN["aten::adaptive_max_pool3d_backward"] = _adaptive_max_pool_backward(3)


@translates("aten::sym_numel")
def sym_numel(self):
    """The element count of a tensor of symbolic shape (PyTorch's decompositions of mean reductions' backward ask
    for it). torch.onnx has no translation: its own decomposition pass traces the graph again, which turns it into
    the product of the sizes, and a step traced with those decompositions skips that pass."""
    return onnx_op.Size(self)


@translates("aten::_native_batch_norm_legit_functional")
def batch_norm_functional(input, weight, bias, running_mean, running_var, training: bool, momentum: float,
                          eps: float):
    """Batch norm as autograd traces it: (output, batch mean, batch 1/std, new running mean, new running var).
    torch.onnx writes BatchNormalization(training_mode=1) for train mode, which onnxruntime's inference
    builds run in eval mode, with the running statistics (measured: a training step's loss is wrong from the
    first step); so train mode is written out here."""
    rank = len(input.shape)
    axes = onnx_op.Constant(value_ints=[0, *range(2, rank)])
    shape = onnx_op.Constant(value_ints=[1, -1] + [1] * (rank - 2))  # channels along axis 1
    flat = onnx_op.Constant(value_ints=[-1])
    if training:
        mean = onnx_op.ReduceMean(input, axes, keepdims=1)
        centered = onnx_op.Sub(input, mean)
        var = onnx_op.ReduceMean(onnx_op.Mul(centered, centered), axes, keepdims=1)
        count = onnx_op.Div(onnx_op.Size(input), onnx_op.Size(mean))
        count = onnx_op.CastLike(count, var)
        unbiased = onnx_op.Div(onnx_op.Mul(var, count), onnx_op.Sub(count, onnx_op.CastLike(1.0, var)))
        keep = onnx_op.CastLike(1.0 - momentum, var)
        rate = onnx_op.CastLike(momentum, var)
        new_mean = onnx_op.Add(onnx_op.Mul(running_mean, keep), onnx_op.Mul(onnx_op.Reshape(mean, flat), rate))
        new_var = onnx_op.Add(onnx_op.Mul(running_var, keep), onnx_op.Mul(onnx_op.Reshape(unbiased, flat), rate))
    else:
        mean, var = onnx_op.Reshape(running_mean, shape), onnx_op.Reshape(running_var, shape)
        centered = onnx_op.Sub(input, mean)
        new_mean, new_var = running_mean, running_var
    rstd = onnx_op.Reciprocal(onnx_op.Sqrt(onnx_op.Add(var, onnx_op.CastLike(eps, var))))
    output = onnx_op.Mul(centered, rstd)
    if weight is not None:
        output = onnx_op.Mul(output, onnx_op.Reshape(weight, shape))
    if bias is not None:
        output = onnx_op.Add(output, onnx_op.Reshape(bias, shape))
    return output, onnx_op.Reshape(mean, flat), onnx_op.Reshape(rstd, flat), new_mean, new_var


@translates("aten::nll_loss_forward")
def nll_loss_forward(self, target, weight, reduction: int, ignore_index: int):
    """(loss, total_weight) as PyTorch computes them: total_weight is the summed weight of the targets not
    ignored (their count without `weight`), the divisor of `mean`, which nll_loss_backward divides by too.
    torch.onnx's own translation returns the number of elements of the loss instead (1 for `mean`), so the
    gradient of every mean cross entropy and NLL loss came out total_weight times too large."""
    batched = len(self.shape) == 2
    if not batched:  # (C,) with a 0-d target: one sample
        self, target = onnx_op.Unsqueeze(self, [0]), onnx_op.Unsqueeze(target, [0])
    kept = onnx_op.Not(onnx_op.Equal(target, onnx_op.CastLike(ignore_index, target)))
    index = onnx_op.Where(kept, target, onnx_op.CastLike(0, target))
    picked = onnx_op.Squeeze(onnx_op.GatherElements(self, onnx_op.Unsqueeze(index, [1]), axis=1), [1])
    zero = onnx_op.CastLike(0.0, self)
    weights = (onnx_op.CastLike(kept, self) if weight is None
               else onnx_op.Where(kept, onnx_op.Gather(weight, index), zero))
    losses = onnx_op.Neg(onnx_op.Mul(picked, weights))
    total_weight = onnx_op.ReduceSum(weights, keepdims=0)
    if REDUCTIONS[reduction] == "none":
        return (losses if batched else onnx_op.Squeeze(losses, [0])), total_weight
    total = onnx_op.ReduceSum(losses, keepdims=0)
    return (onnx_op.Div(total, total_weight) if REDUCTIONS[reduction] == "mean" else total), total_weight


@translates("aten::scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False):
    """softmax(query @ key^T * scale + mask) @ value over inputs of any rank from 2, as PyTorch's math backend
    computes it (a row that masks everything gives 0, not NaN). torch.onnx's own translation takes 4-D inputs
    only. Dropout has no place in the inference graphs this serves (training steps trace attention written out)."""
    rank = len(query.shape)
    if dropout_p or enable_gqa or len(key.shape) != rank or len(value.shape) != rank:
        raise ValueError("scaled_dot_product_attention: lossops translates it without dropout or grouped-query "
                         f"heads, query, key and value of one rank (got dropout_p={dropout_p}, "
                         f"enable_gqa={enable_gqa}, ranks {rank}, {len(key.shape)}, {len(value.shape)})")
    if scale is None:
        factor = onnx_op.Div(onnx_op.CastLike(1.0, query), onnx_op.Sqrt(onnx_op.CastLike(
            onnx_op.Shape(query, start=-1), query)))
    else:
        factor = onnx_op.CastLike(scale, query)
    perm = [*range(rank - 2), rank - 1, rank - 2]
    scores = onnx_op.Mul(onnx_op.MatMul(query, onnx_op.Transpose(key, perm=perm)), factor)
    minus_inf = onnx_op.CastLike(float("-inf"), query)
    if is_causal:
        size = onnx_op.Concat(onnx_op.Shape(query, start=-2, end=-1), onnx_op.Shape(key, start=-2, end=-1), axis=0)
        ones = onnx_op.Expand(onnx_op.Constant(value_int=1), size)
        scores = onnx_op.Where(onnx_op.Cast(onnx_op.Trilu(ones, upper=0), to=TensorProto.BOOL), scores, minus_inf)
    if attn_mask is not None:
        if attn_mask.dtype == ir.DataType.BOOL:
            scores = onnx_op.Where(attn_mask, scores, minus_inf)
        else:
            scores = onnx_op.Add(scores, attn_mask)
    weights = onnx_op.Softmax(scores, axis=-1)
    masked_row = onnx_op.Equal(onnx_op.ReduceMax(scores, onnx_op.Constant(value_ints=[-1]), keepdims=1), minus_inf)
    weights = onnx_op.Where(masked_row, onnx_op.CastLike(0.0, query), weights)
    return onnx_op.MatMul(weights, value)
