"""CtcLoss: connectionist temporal classification loss of per-frame log-probabilities (aclnnCtcLoss)."""

from __future__ import annotations

import math

from onnx import GraphProto, TensorProto, helper

from ..builder import Builder, Nodes
from ..sequences import Sequences, _wide
from ..spec import (
    ASCEND_PARTS,
    LENGTH,
    LENGTHS,
    LOG_PROBABILITY,
    SEQUENCES,
    TARGET_SEQUENCE,
    TARGET_SEQUENCES,
    Aclnn,
    Attribute,
    Gradient,
    Input,
    OpDef,
)

DOC = """\
Connectionist temporal classification (Graves et al., 2006), as PyTorch's `ctc_loss`: the negative log-likelihood
of each target sequence under the per-frame log-probabilities `log_probs` (T, N, C), summed over every alignment
of the target (its labels in order, each repeated over consecutive frames, with `blank` frames between and around
them, and between repeated labels) with the sequence's first `input_lengths[n]` frames:

    loss[n] = -log sum over alignments a of exp(sum_{t < input_lengths[n]} log_probs[t, n, a_t])

computed by the forward recursion over time in the log domain, in float64. `targets` is (N, S), each row's first
`target_lengths[n]` values its labels (padded), or (target_lengths[0] + ... + target_lengths[N - 1],), the
sequences' labels one after another (concatenated). A label is a class in [0, C) other than `blank`, a length in
[0, T] (an input length) or [0, S] (a padded target's), and the concatenated targets number the lengths' sum; any
other value is an error. A target no alignment fits (longer, with the blanks its repeated labels need, than its
frames) has loss inf, or 0 with `zero_infinity`. `mean` divides each loss by its target length (at least 1)
before the mean over the N sequences (NaN for none), as PyTorch; `sum` adds them. PyTorch also takes an unbatched
(T, C); its gradient with respect to `log_probs` is CtcLossBackward. float16 and bfloat16 compute in float64 too.
"""

LOG_PROBS = Input("log_probs", "Log-probabilities, (T, N, C): T frames of N sequences over C classes.",
                  shape=SEQUENCES, domain=LOG_PROBABILITY)
TARGETS = Input("targets", "Target labels, int64: (N, S), each row's first target_lengths[n] (padded), or "
                "(sum of target_lengths,), one sequence's after another (concatenated).", shape=TARGET_SEQUENCES,
                domain=TARGET_SEQUENCE)
INPUT_LENGTHS = Input("input_lengths", "The frames of each sequence, int64 (N,), each in [0, T].", shape=LENGTHS,
                      domain=LENGTH)
TARGET_LENGTHS = Input("target_lengths", "The labels of each sequence's target, int64 (N,).", shape=LENGTHS,
                       domain=LENGTH)
ATTRIBUTES = (
    Attribute("blank", "The blank class, in [0, C).", 0, low=0, examples=(1,)),
    Attribute("reduction", "Specifies the reduction to apply to the output: 'none' (one loss per sequence), 'mean' "
              "(each loss divided by its target length, at least 1, then their mean) or 'sum'.", "mean",
              allowed=("none", "mean", "sum")),
    Attribute("zero_infinity", "1: an infinite loss (no alignment fits its target) and its gradient are 0.", 0,
              allowed=(0, 1)),
)
# aclnnCtcLoss's and aclnnCtcLossBackward's shared arguments: the lengths as host arrays, the scalars
ARGUMENTS = ("logProbs", "targets", "inputLengths", "targetLengths")
LENGTHS_ARRAYS = ("inputLengths", "targetLengths")
SCALARS = (("blank", "blank"), ("zeroInfinity", "zero_infinity"))
PRODUCTS = dict.fromkeys(ASCEND_PARTS, True)  # both pages list every part


def outputs(b: Nodes, op_type: str, *inputs: str, count: int, **attrs) -> list[str]:
    """A node with `count` outputs, their fresh names."""
    names = [b.fresh(op_type.lower()) for _ in range(count)]
    b.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
    return names


def extended(b: Builder, seq: Sequences) -> str:
    """int64 (N, W), W = 2S + 1: each sequence's labels with a blank before, between and after them (a Gather of
    the labels at each odd state, not an interleaving Reshape: onnxruntime's ReshapeFusion breaks that one for no
    sequence)."""
    states = b.op("Range", b.int_scalar(0), b.op("Add", b.op("Mul", seq.width, b.int_scalar(2)), b.int_scalar(1)),
                  b.int_scalar(1))
    label = b.op("Div", b.op("Max", b.op("Sub", states, b.int_scalar(1)), b.int_scalar(0)), b.int_scalar(2))
    zeros = b.op("ConstantOfShape", seq.vector(seq.static_batch, seq.batch, 1),
                 value=helper.make_tensor("zero", TensorProto.INT64, [1], [0]))
    padded = b.op("Concat", seq.labels, zeros, axis=1)  # a column more: no Gather from nothing for S = 0
    odd = b.op("Equal", b.op("Mod", states, b.int_scalar(2)), b.int_scalar(1))
    return b.op("Where", odd, b.op("Gather", padded, label, axis=1), seq.blank)


def _logsumexp(n: Nodes, wide: int, *values: str) -> str:
    """log(sum(exp(values))), from their maximum (0 where every one is -inf: the sum is -inf then, not NaN)."""
    top = n.op("Max", *values)
    safe = n.op("Where", n.op("Equal", top, n.const(-math.inf, wide)), n.const(0.0, wide), top)
    total = n.op("Sum", *(n.op("Exp", n.op("Sub", v, safe)) for v in values))
    return n.op("Add", safe, n.op("Log", total))


def _shifted(n: Nodes, value: str, by: int, never: str) -> str:
    """`value` (N, W) shifted along axis 1 by `by` states (later for by > 0, earlier for by < 0), `never` (N, 1),
    -inf, coming in (a Concat and a Slice: onnx's version converter has no Pad below opset 18)."""
    if by > 0:
        return n.op("Slice", n.op("Concat", *[never] * by, value, axis=1), n.ints([0]), n.ints([-by]), n.ints([1]))
    return n.op("Slice", n.op("Concat", value, *[never] * -by, axis=1), n.ints([-by]), n.ints([2**62]), n.ints([1]))


def _never(n: Nodes, penalty: str) -> str:
    """(N, 1) of -inf: the first state's skip penalty (no state is two before the first)."""
    return n.op("Slice", penalty, n.ints([0]), n.ints([1]), n.ints([1]))


def _body(b: Builder, hint: str, state: list[tuple[str, int]], build) -> GraphProto:
    """A Scan body over `state`: the states, each (N, W) or (N, 1), then the two scanned inputs (an emission row
    (N, W) and the frame's number, a scalar), each (name hint, element type); `build(nodes, *their names)` returns
    the new states, then what is scanned out (the first state's type). The ranks are declared: onnxruntime's Scan
    needs every output's shape set, which it does not always infer."""
    n = Nodes(b.fresh(hint) + "_")
    names = [n.fresh(name) for name, _ in state]
    kinds = [t for _, t in state]
    states = len(state) - 2
    results = build(n, *names)
    out_kinds = kinds[:states] + [kinds[0]] * (len(results) - states)
    # each output a node of its own, an Add of 0 (exact; -inf and NaN kept) rather than an Identity: onnx's
    # version converter has no Identity adapter below opset 16
    outs = [n.op("Add", o, n.const(0, t)) for o, t in zip(results, out_kinds, strict=True)]
    ranks = [2] * (states + 1) + [0]
    return helper.make_graph(n.nodes, hint, [helper.make_tensor_value_info(x, t, [None] * r) for x, t, r in
                                             zip(names, kinds, ranks, strict=True)],
                             [helper.make_tensor_value_info(x, t, [None, None]) for x, t in
                              zip(outs, out_kinds, strict=True)])


class Recursion:
    """What the forward and backward recursions of one call share: the extended labels, the emissions, the skip
    penalties, the frames' numbers."""

    def __init__(self, b: Builder, log_probs: str):
        self.b, self.seq, self.log_probs = b, b.sequences, log_probs
        self.wide = _wide(b)
        self.ext = extended(b, self.seq)
        n, s = self.seq.static_batch, self.seq.static_width
        # (N, W) of the states: a constant where static (TVM's importer does no arithmetic on a Shape's output)
        self.static_states = None if n is None or s is None else (n, 2 * s + 1)
        self.ext_shape = b.op("Shape", self.ext) if self.static_states is None else b.ints(list(self.static_states))
        # (T, N, W): log_probs at each state's class (the index made (T, N, W) by a Tile: onnxruntime's Expand of
        # (1, N, W) to T = 0 gives T = 1, and 1.24's Add with a (0, 1, 1) too)
        index = b.op("Tile", b.op("Unsqueeze", self.ext, b.ints([0])), self.seq.vector(self.seq.static_frames,
                                                                                      self.seq.frames, 1, 1))
        self.emit = b.op("GatherElements", log_probs, index, axis=2)
        static = self.static_states
        # (W,): the states' count
        self.width = b.op("Slice", self.ext_shape, b.ints([1]), b.ints([2])) if static is None else b.ints([static[1]])
        # (N, W): 0 where a state may be reached from two before it (a label after the blank that follows a
        # different label), -inf elsewhere (a blank state's label is the blank two before: never)
        minus = b.op("ConstantOfShape", self.seq.vector(self.seq.static_batch, self.seq.batch, 2),
                     value=helper.make_tensor("minus", TensorProto.INT64, [1], [-1]))
        before = b.op("Slice", b.op("Concat", minus, self.ext, axis=1), b.ints([0]), self.width, b.ints([1]))
        self.states = b.op("Unsqueeze", b.op("Range", b.int_scalar(0), b.op("Reshape", self.width, b.ints([])),
                                             b.int_scalar(1)), b.ints([0]))  # (1, W)
        never, zero = b.const(-math.inf, self.wide), b.const(0.0, self.wide)
        # -inf at the first two states too (none is two after another), which the Scan bodies read as their -inf
        first = b.op("Less", self.states, b.int_scalar(2))
        self.penalty = b.op("Where", b.op("Or", b.op("Equal", self.ext, before), first), never, zero)
        self.times = b.op("Range", b.int_scalar(0), self.seq.frames, b.int_scalar(1))  # (T,)
        # what the Scans run over: one more frame, numbered past every length, so that a step there changes
        # nothing (onnxruntime's Scan fails on no frame)
        nothing = b.op("ConstantOfShape", b.op("Concat", b.ints([1]), self.ext_shape, axis=0),
                       value=helper.make_tensor("zero", self.wide, [1], [0.0]))
        self.scanned = (b.op("Concat", self.emit, nothing, axis=0),
                        b.op("Concat", self.times, b.ints([2**62]), axis=0))
        self.lengths = b.op("Unsqueeze", self.seq.input_lengths, b.ints([1]))  # (N, 1)
        self.ends = b.op("Unsqueeze", b.op("Mul", self.seq.target_lengths, b.int_scalar(2)), b.ints([1]))  # 2L
        self.static_frames = self.seq.static_frames if b.static.portable else None  # T: the steps written out

    def _scan(self, hint: str, state: list[tuple[str, int]], initial: list[str], build, count: int,
              backwards: bool = False) -> list[str]:
        """`build` stepped over the frames and the one past them, forwards or backwards in time: the last states,
        then what each step scans out, (T + 1, ...) in time's order. A Scan; or in the portable form where T is
        static, the steps written out one by one (TVM's importer has no Scan, tract none of data-dependent shape).
        Backwards, the frames are reversed by a Slice, in and out (onnx.reference's Scan runs forwards only)."""
        b, carried = self.b, len(initial)
        if self.static_frames is None:
            scanned = [self._reversed(v) for v in self.scanned] if backwards else list(self.scanned)
            out = outputs(b, "Scan", *initial, *scanned, count=count, body=_body(b, hint, state, build),
                          num_scan_inputs=2)
            return out[:carried] + [self._reversed(v) if backwards else v for v in out[carried:]]
        last, rows = list(initial), []
        frames = range(self.static_frames + 1)
        for t in reversed(frames) if backwards else frames:
            emit = b.op("Gather", self.scanned[0], b.int_scalar(t), axis=0)
            results = build(b, *last, emit, b.int_scalar(t if t < self.static_frames else 2**62))
            last = results[:carried]
            rows.append(results[carried:])
        rows = rows[::-1] if backwards else rows
        return last + [b.op("Concat", *(b.op("Unsqueeze", r[k], b.ints([0])) for r in rows), axis=0)
                       for k in range(count - carried)]

    def alphas(self, every: bool) -> tuple[str, str | None]:
        """(alpha after each sequence's last frame (N, W), and with `every`, alpha after each frame and after the
        step past the last (T + 1, N, W)):
        alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s - 1), alpha_{t-1}(s - 2) + penalty(s)) + emit_t(s)
        from the state before the first frame, 0 at s = 0 (the first frame then starts at the blank or the
        first label) and -inf elsewhere; held past the sequence's frames."""
        b, wide = self.b, self.wide
        start = b.op("Expand", b.op("Where", b.op("Equal", self.states, b.int_scalar(0)), b.const(0.0, wide),
                                    b.const(-math.inf, wide)), self.ext_shape)

        def step(n: Nodes, alpha: str, penalty: str, lengths: str, emit: str, t: str) -> list[str]:
            never = _never(n, penalty)
            one = _shifted(n, alpha, 1, never)
            two = n.op("Add", _shifted(n, alpha, 2, never), penalty)
            new = n.op("Add", _logsumexp(n, wide, alpha, one, two), emit)
            alpha = n.op("Where", n.op("Less", t, lengths), new, alpha)
            return [alpha, penalty, lengths, alpha] if every else [alpha, penalty, lengths]

        state = [("alpha", wide), ("penalty", wide), ("lengths", TensorProto.INT64), ("emit", wide),
                 ("t", TensorProto.INT64)]
        out = self._scan("alpha_step", state, [start, self.penalty, self.lengths], step, count=4 if every else 3)
        return out[0], (out[3] if every else None)

    def frames(self, scanned: str) -> str:
        """(T, ...): a Scan's output (T + 1, ...) without the step past the last frame."""
        b = self.b
        seq = self.seq
        return b.op("Slice", scanned, b.ints([0]), seq.vector(seq.static_frames, seq.frames), b.ints([0]))

    def betas(self) -> str:
        """beta after each frame, and after the step past the last (T + 1, N, W), backwards in time: at a
        sequence's last frame emit_t at its last two states (2L and 2L - 1), then beta_t(s) = logsumexp(
        beta_{t+1}(s), beta_{t+1}(s + 1), beta_{t+1}(s + 2) + penalty(s + 2)) + emit_t(s); -inf past its frames."""
        b, wide = self.b, self.wide
        never = b.const(-math.inf, wide)
        last = b.op("Or", b.op("Equal", self.states, self.ends),
                    b.op("Equal", self.states, b.op("Sub", self.ends, b.int_scalar(1))))
        final = b.op("Where", last, b.const(0.0, wide), never)  # (N, W)
        start = b.op("Expand", never, self.ext_shape)

        def step(n: Nodes, beta: str, penalty: str, final: str, lengths: str, emit: str, t: str) -> list[str]:
            never = _never(n, penalty)
            one = _shifted(n, beta, -1, never)
            two = _shifted(n, n.op("Add", beta, penalty), -2, never)
            new = n.op("Add", _logsumexp(n, wide, beta, one, two), emit)
            last_frame = n.op("Sub", lengths, n.const(1, TensorProto.INT64))
            beta = n.op("Where", n.op("Less", t, last_frame), new,
                        n.op("Where", n.op("Equal", t, last_frame), n.op("Add", emit, final), beta))
            return [beta, penalty, final, lengths, beta]

        state = [("beta", wide), ("penalty", wide), ("final", wide), ("lengths", TensorProto.INT64), ("emit", wide),
                 ("t", TensorProto.INT64)]
        return self._scan("beta_step", state, [start, self.penalty, final, self.lengths], step, count=5,
                          backwards=True)[4]

    def _reversed(self, value: str) -> str:
        b = self.b
        return b.op("Slice", value, b.ints([-1]), b.ints([-2**62]), b.ints([0]), b.ints([-1]))

    def losses(self, alpha: str) -> str:
        """-log likelihood per sequence (N,) from alpha after its last frame: of its last two states (2L and
        2L - 1, the latter where L > 0); inf where none is reachable."""
        b, wide = self.b, self.wide
        at_end = b.op("GatherElements", alpha, self.ends, axis=1)
        before_end = b.op("Where", b.op("Greater", self.ends, b.int_scalar(0)),
                          b.op("GatherElements", alpha, b.op("Max", b.op("Sub", self.ends, b.int_scalar(1)),
                                                             b.int_scalar(0)), axis=1),
                          b.const(-math.inf, wide))
        likelihood = _logsumexp(b, wide, at_end, before_end)
        return b.op("Neg", b.op("Squeeze", likelihood, b.ints([1])))


def unless_infinite(b: Builder, losses: str, value: str) -> str:
    """`value`, 0 where the loss is inf with zero_infinity (as it is without)."""
    return b.choose("zero_infinity", {
        0: lambda s: value,
        1: lambda s: s.op("Where", s.op("Equal", losses, s.const(math.inf, _wide(s))), s.const(0.0, _wide(s)), value)})


def decompose(b: Builder, log_probs: str) -> str:
    recursion = Recursion(b, log_probs)
    alpha, _ = recursion.alphas(every=False)
    losses = recursion.losses(alpha)
    return unless_infinite(b, losses, losses)


DEFINITION = OpDef(
    name="CtcLoss",
    summary="Connectionist temporal classification loss of per-frame log-probabilities against target sequences.",
    doc=DOC,
    inputs=(LOG_PROBS, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS),
    output=Input("output", "The loss of each sequence (N,) for `none`; a scalar otherwise."),
    attributes=ATTRIBUTES,
    decompose=decompose,
    reduces=True,
    torch=("lossops::ctc_loss",),
    gradient=Gradient("CtcLossBackward", ("grad_output", "log_probs", "targets", "input_lengths", "target_lengths")),
    aclnn=Aclnn("aclnnCtcLoss", ARGUMENTS, PRODUCTS,
                scalars=SCALARS, extra_outputs=("logAlphaOut",), reduction="", host_arrays=LENGTHS_ARRAYS),
)
