"""CtcLossBackward: gradient of CtcLoss with respect to its log-probabilities (aclnnCtcLossBackward)."""

from __future__ import annotations

import math

from onnx import helper

from ..builder import Builder
from ..spec import LOSS, Aclnn, Input, OpDef
from .ctc_loss import (
    ARGUMENTS,
    ATTRIBUTES,
    INPUT_LENGTHS,
    LENGTHS_ARRAYS,
    LOG_PROBS,
    PRODUCTS,
    SCALARS,
    TARGET_LENGTHS,
    TARGETS,
    Recursion,
    outputs,
    unless_infinite,
)

DOC = """\
Gradient of `CtcLoss(log_probs, targets, input_lengths, target_lengths)` with respect to `log_probs`, as PyTorch's
`ctc_loss` backward computes it: from the forward recursion's alpha and the backward recursion's beta (both
including frame t's emission),

    grad[t, n, c] = a[n] * (exp(log_probs[t, n, c])
                            - exp(log(sum over states s of class c of exp(alpha_t(s) + beta_t(s)))
                                  + loss[n] - log_probs[t, n, c]))

for t < input_lengths[n], 0 for the frames after, with a[n] = grad_output[n] for `none`, grad_output for `sum`,
and for `mean` grad_output divided by the target length (at least 1) and by N. This is the gradient with respect
to the logits when `log_probs` is their log_softmax (PyTorch's convention: its first term is the softmax's); for
other inputs it is PyTorch's value, not the derivative. A loss of inf gives NaN at its frames (as PyTorch), or
0 with `zero_infinity`.
"""

GRAD = Input("grad_output", "Gradient of the loss: (N,) for `none`, a scalar otherwise.", shape=LOSS)


def decompose(b: Builder, log_probs: str) -> str:
    recursion = Recursion(b, log_probs)
    alpha, alphas = recursion.alphas(every=True)
    losses = recursion.losses(alpha)  # (N,)
    wide, seq, one = recursion.wide, b.sequences, b.ints([1])
    # alpha + beta over (T + 1, N + 1, W): the step past the last frame kept and a sequence of zeros added, both cut
    # at the end: onnxruntime ends the process (SIGFPE) on a TopK or a MatMul over a dim of 0 (1.24 to 1.31,
    # measured)
    both = b.op("Add", alphas, recursion.betas())
    # the shapes of the zeros added: constants where static (TVM's importer takes no Concat of constants as one)
    static, frames, c = recursion.static_states, seq.static_frames, seq.static_classes
    zero = helper.make_tensor("zero", wide, [1], [0.0])
    if static and frames is not None:
        no_sequence_shape = b.ints([frames + 1, 1, static[1]])
    else:
        no_sequence_shape = b.op("Concat", b.op("Add", seq.vector(None, seq.frames), one), one, recursion.width, axis=0)
    no_sequence = b.op("ConstantOfShape", no_sequence_shape, value=zero)
    both = b.op("Concat", both, no_sequence, axis=1)
    # the largest over the states (a TopK: a ReduceMax over given axes is opset 18, which onnx's version converter
    # cannot bring down to 13), 0 where it is -inf
    top = outputs(b, "TopK", both, one, count=2, axis=2)[0]
    top = b.op("Where", b.op("Equal", top, b.const(-math.inf, wide)), b.const(0.0, wide), top)
    classes = b.op("Unsqueeze", b.op("Range", b.int_scalar(0), seq.classes, b.int_scalar(1)), b.ints([0, 1]))
    one_hot = b.op("Cast", b.op("Equal", b.op("Unsqueeze", recursion.ext, b.ints([2])), classes), to=wide)  # (N, W, C)
    no_class_shape = b.ints([1, static[1], c]) if static and c is not None else b.op(
        "Concat", one, recursion.width, seq.vector(None, seq.classes), axis=0)
    no_class = b.op("ConstantOfShape", no_class_shape, value=zero)
    # summed per class: (T + 1, N + 1, 1, W) @ (N + 1, W, C) (no Transpose first: onnxruntime 1.24 fuses one into
    # a FusedMatMul it has no float64 kernel of)
    summed = b.op("MatMul", b.op("Unsqueeze", b.op("Exp", b.op("Sub", both, top)), b.ints([2])),
                  b.op("Concat", one_hot, no_class, axis=0))
    per_class = b.op("Add", b.op("Log", b.op("Squeeze", summed, b.ints([2]))), top)  # (T + 1, N + 1, C)
    per_class = recursion.frames(b.op("Slice", per_class, b.ints([0]), seq.vector(seq.static_batch, seq.batch), one))
    across = b.ints([0, 2])  # (N,) to (1, N, 1): an Unsqueeze (a Reshape to [1, -1, 1] fails for no sequence)
    loss = b.op("Unsqueeze", losses, across)
    grad = b.op("Sub", b.op("Exp", log_probs), b.op("Exp", b.op("Sub", b.op("Add", per_class, loss), log_probs)))
    grad = b.op("Mul", grad, b.op("Unsqueeze", seq.fed, across))
    framed = b.op("Less", b.op("Unsqueeze", recursion.times, b.ints([1, 2])),
                  b.op("Unsqueeze", seq.input_lengths, across))
    grad = b.op("Where", framed, grad, b.const(0.0, wide))
    return unless_infinite(b, loss, grad)


DEFINITION = OpDef(
    name="CtcLossBackward",
    summary="Gradient of the connectionist temporal classification loss with respect to the log-probabilities.",
    doc=DOC,
    inputs=(GRAD, LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS),
    output=Input("grad_log_probs", "Gradient with respect to `log_probs`; its shape."),
    attributes=ATTRIBUTES,
    decompose=decompose,
    output_shape="log_probs",
    torch=("lossops::ctc_loss_backward",),
    aclnn=Aclnn("aclnnCtcLossBackward", ("gradOut", *ARGUMENTS), PRODUCTS,
                scalars=SCALARS, reduction="", forward_outputs=("negLogLikelihood", "logAlpha"),
                host_arrays=LENGTHS_ARRAYS),
)
