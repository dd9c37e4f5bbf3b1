"""The one translation table from PyTorch ops to ONNX for torch.onnx.export(dynamo=True), used by inference
export (converters/torch.py) and training-step export (converters/training.py).

Each lossops operator names its PyTorch counterparts in its record (`OpDef.torch`), and its translations are
made from the record and PyTorch's own schema of each op: the op's tensor arguments are the node's inputs in
order, its other arguments the node's attributes, by name. They emit the lossops node itself: the exporter
looks the schema up (registered by `opset.script_opset()`), and an @onnxscript.script function would be
inlined and lose the node. Written out here: aten ops that training graphs need and the exporter cannot
translate (convolution_backward, batch norm in train mode). Needs torch and onnxscript.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

from .. import opset
from ..extras import require
from ..opset.spec import OpDef
from .aclnn import reduction_name

torch = require("torch", "exporting from PyTorch")
from onnxscript.onnx_opset import opset18 as onnx_op  # noqa: E402 - the exporter's own default-domain opset

from . import torch_ops  # noqa: E402, F401 - defines torch.ops.lossops.*, which training export traces

lossops_op = opset.script_opset()

# "namespace::name" -> the function the exporter calls for that op's default overload: the ones written out
WRITTEN: dict[str, Callable] = {}

# what a non-tensor argument of a PyTorch schema is, as the exporter reads a translation's annotations
_ARGUMENT_TYPES = {"int": int, "SymInt": int, "bool": bool, "float": float}


def translates(*names: str) -> Callable[[Callable], Callable]:
    """Register the decorated function as the translation of each PyTorch op in `names`."""

    def register(function: Callable) -> Callable:
        for name in names:
            WRITTEN[name] = function
        return function

    return register


def _overload(name: str):
    namespace, op = name.split("::")
    return getattr(getattr(torch.ops, namespace), op).default


def translation(op: OpDef, name: str) -> Callable:
    """The translation of PyTorch op `name` ("namespace::name") into a node of `op`, with the op's own signature.
    Raises ValueError when PyTorch has no such op or its arguments do not map onto the record."""
    try:
        schema = _overload(name)._schema
    except (AttributeError, RuntimeError):
        raise ValueError(f"{op.name}: PyTorch has no op {name} (a lossops:: op is defined in "
                         "converters/torch_ops.py)") from None
    parameters, annotations, tensors = [], {}, []
    for arg in schema.arguments:
        kind = inspect.Parameter.KEYWORD_ONLY if arg.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = arg.default_value if arg.has_default_value() else inspect.Parameter.empty
        parameters.append(inspect.Parameter(arg.name, kind, default=default))
        if "Tensor" in str(arg.type):
            tensors.append(arg.name)
        else:
            annotations[arg.name] = _ARGUMENT_TYPES.get(str(arg.type))
    attributes = [a for a in op.attributes if a.name in annotations]
    if len(tensors) != len(op.inputs) or len(attributes) != len(annotations) or None in annotations.values():
        raise ValueError(f"{op.name}: the arguments of {schema} do not map onto its inputs "
                         f"{[i.name for i in op.inputs]} and attributes {[a.name for a in op.attributes]}")
    signature = inspect.Signature(parameters)

    def translate(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        attrs = {a.name: reduction_name(values[a.name], op.name) if a.name == "reduction" else a.kind(values[a.name])
                 for a in attributes}
        return getattr(lossops_op, op.name)(*(values[t] for t in tensors), **attrs)

    translate.__signature__ = signature
    translate.__annotations__ = annotations
    translate.__name__ = translate.__qualname__ = name.replace("::", "_")
    return translate


@translates("aten::convolution_backward")
def convolution_backward(grad_output, input, weight, bias_sizes: Sequence[int], stride: Sequence[int],
                         padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                         output_padding: Sequence[int], groups: int, output_mask: Sequence[bool]):
    """The gradients of a convolution (groups 1, not transposed): grad_input is the transposed convolution
    of grad_output; grad_weight is a convolution of the input by grad_output over the batch (stride and
    dilation swap roles), cut to the kernel size; grad_bias sums grad_output over batch and space.
    torch.onnx has no translation of its own, and a CNN's training step needs one."""
    if transposed or groups != 1:
        raise ValueError(f"convolution_backward: only groups=1, non-transposed convolutions are supported in "
                         f"training-step export (got groups={groups}, transposed={transposed})")
    spatial = len(stride)
    kernel = [int(k) for k in weight.shape[2:]]
    if any(not isinstance(d, int) for d in [*input.shape[2:], *grad_output.shape[2:]]):
        raise ValueError("convolution_backward: training-step export needs static spatial sizes")
    pads = [*padding, *padding]
    # All three are computed whatever output_mask says: the exporter needs a value for each, and its
    # optimizer removes the ones nothing reads.
    # grad_input: what the transposed convolution's size formula leaves out of the input's size is output_padding
    extra = [int(n) - ((int(o) - 1) * s - 2 * p + d * (k - 1) + 1) for n, o, s, p, d, k in
             zip(input.shape[2:], grad_output.shape[2:], stride, padding, dilation, kernel, strict=True)]
    grad_input = onnx_op.ConvTranspose(grad_output, weight, strides=stride, pads=pads, dilations=dilation,
                                       output_padding=extra)
    swap = [1, 0, *range(2, 2 + spatial)]
    full = onnx_op.Conv(onnx_op.Transpose(input, perm=swap), onnx_op.Transpose(grad_output, perm=swap),
                        strides=dilation, dilations=stride, pads=pads)
    cut = onnx_op.Slice(full, onnx_op.Constant(value_ints=[0] * spatial), onnx_op.Constant(value_ints=kernel),
                        onnx_op.Constant(value_ints=list(range(2, 2 + spatial))))
    grad_weight = onnx_op.Transpose(cut, perm=swap)
    grad_bias = onnx_op.ReduceSum(grad_output, onnx_op.Constant(value_ints=[0, *range(2, 2 + spatial)]), keepdims=0)
    return grad_input, grad_weight, grad_bias


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


def translation_table() -> dict:
    """{torch OpOverload: translation} for torch.onnx.export's custom_translation_table: every operator's
    PyTorch ops, and the ones written out."""
    table = {_overload(name): translation(op, name) for op in opset.OPS.values() for name in op.torch}
    return table | {_overload(name): function for name, function in WRITTEN.items()}
