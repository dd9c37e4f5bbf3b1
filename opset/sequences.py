"""What a sequence loss's decomposition shares (CTC: `log_probs` (T, N, C), targets, a length per sequence),
applied from its record around its `decompose`, as rows.py does for a class loss: the shape rules guarded where
shapes are symbolic, every length and every target checked (a Gather from the values allowed, named with the
rule, fails for any other), the targets laid out as (N, S) labels whatever their layout, then the loss's
reduction or the gradient's scale. A sequence loss's `decompose` gets the builder, whose `sequences` it reads,
and `log_probs` in float64; it returns a loss per sequence (N,) or a gradient over (T, N, C) from
`sequences.fed`.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from onnx import TensorProto

from .shapes import NOT_A_LENGTH, NOT_A_TARGET, NOT_CONCATENATED, NOT_LENGTHS, NOT_SEQUENCES, NOT_TARGET_SEQUENCES

if TYPE_CHECKING:
    from .builder import Builder

_BIG = 2**62  # a Slice's end past any dim


class Sequences:
    """A call's frames, sequences and classes, its checked lengths and its labels, computed once where first
    read. `log_probs`, `targets`, `input_lengths`, `target_lengths`: the inputs as the graph names them."""

    def __init__(self, b: Builder, log_probs: str, targets: str, input_lengths: str, target_lengths: str):
        self.b = b
        self.log_probs, self.targets = log_probs, targets
        self.raw_input_lengths, self.raw_target_lengths = input_lengths, target_lengths
        self.grad_output = ""  # a gradient's, set by `decomposition`

    # --- sizes: constants where lowering knows them ---

    @functools.cached_property
    def static_shape(self) -> tuple | None:
        return self.b.static.shapes.get(self.log_probs)

    def _dim(self, axis: int) -> str:
        """Dim `axis` of log_probs as an int64 scalar."""
        if self._static_dim(axis) is not None:
            return self.b.int_scalar(self._static_dim(axis))
        return self.b.op("Gather", self.b.op("Shape", self.log_probs), self.b.int_scalar(axis))

    @functools.cached_property
    def frames(self) -> str:
        return self._dim(0)

    @functools.cached_property
    def batch(self) -> str:
        return self._dim(1)

    @functools.cached_property
    def classes(self) -> str:
        return self._dim(2)

    def _static_dim(self, axis: int) -> int | None:
        shape = self.static_shape
        return shape[axis] if shape is not None and len(shape) == 3 and isinstance(shape[axis], int) else None

    @functools.cached_property
    def static_frames(self) -> int | None:
        return self._static_dim(0)

    @functools.cached_property
    def static_batch(self) -> int | None:
        return self._static_dim(1)

    @functools.cached_property
    def static_classes(self) -> int | None:
        return self._static_dim(2)

    def _vector(self, scalar: str) -> str:
        return self.b.op("Reshape", scalar, self.b.ints([1]))

    def vector(self, static: int | None, scalar: str, *more: int) -> str:
        """int64 (1 + len(more),): `static` (else the int64 scalar `scalar`), then `more`; a constant where static
        (TVM's importer makes a Concat of constants a shape, which most of its ops do not take)."""
        if static is not None:
            return self.b.ints([static, *more])
        return self.b.op("Concat", self._vector(scalar), self.b.ints(list(more)), axis=0) if more else \
            self._vector(scalar)

    # --- the checked values ---

    def _within(self, values: str, most: str, rule: str) -> str:
        """int64 `values`, each checked to be in [0, most] (a Gather from 0, ..., most, named with the rule; a
        negative value first made most + 1: Gather would count it from the end)."""
        b = self.b
        if self.static_batch == 0:  # nothing to check: OpenVINO 2026.4's Gather of an empty index ends the process
            return values
        past = b.op("Add", most, b.int_scalar(1))
        return b.looked_up(b.op("Range", b.int_scalar(0), past, b.int_scalar(1)), values, past, rule)

    @functools.cached_property
    def concatenated(self) -> bool | None:
        """Whether the targets are concatenated (rank 1) rather than padded (rank 2); None where not known."""
        shape = self.b.static.shapes.get(self.targets)
        return None if shape is None else len(shape) == 1

    @functools.cached_property
    def _padded(self) -> str:
        """bool scalar: the targets have rank 2 (padded)."""
        b = self.b
        return b.op("Equal", b.size(b.op("Shape", self.targets)), b.int_scalar(2))

    @functools.cached_property
    def static_width(self) -> int | None:
        """S where the targets are padded and their shape static."""
        shape = self.b.static.shapes.get(self.targets)
        return shape[1] if shape is not None and len(shape) == 2 and isinstance(shape[1], int) else None

    @functools.cached_property
    def width(self) -> str:
        """S, an int64 scalar: the label positions of the (N, S) labels (a padded target's second dim; the longest
        target's length for concatenated ones)."""
        b = self.b
        if self.static_width is not None:
            return b.int_scalar(self.static_width)
        last = b.op("Gather", b.op("Shape", self.targets), b.int_scalar(-1))
        if self.concatenated is False:
            return last
        longest = b.op("ReduceMax", b.op("Concat", self.target_lengths_in_any_layout, b.ints([0]), axis=0),
                       keepdims=0)
        return longest if self.concatenated else b.op("Where", self._padded, last, longest)

    @functools.cached_property
    def target_lengths_in_any_layout(self) -> str:
        """target_lengths, each checked to be in [0, the targets' element count] (what any layout allows)."""
        b = self.b
        rule = f"{b.opdef.name}: " + NOT_A_LENGTH.format(input="target_lengths", most="S") + " (padded), or " \
            "[0, the number of targets] (concatenated)"
        return self._within(self.raw_target_lengths, b.size(self.targets), rule)

    @functools.cached_property
    def input_lengths(self) -> str:
        """int64 (N,): checked to be in [0, T]."""
        b = self.b
        return self._within(self.raw_input_lengths, self.frames,
                            f"{b.opdef.name}: " + NOT_A_LENGTH.format(input="input_lengths", most="T"))

    @functools.cached_property
    def target_lengths(self) -> str:
        """int64 (N,): checked to be in [0, S] for padded targets, to add up to their number for concatenated
        ones."""
        b = self.b
        lengths = self.target_lengths_in_any_layout
        if self.concatenated is not True:  # padded: each at most S
            rule = f"{b.opdef.name}: " + NOT_A_LENGTH.format(input="target_lengths", most="S")
            checked = self._within(lengths, self.width, rule)
            if self.concatenated is False:
                return checked
            lengths = b.op("Where", self._padded, checked, lengths)
        if self.static_batch == 0:
            return lengths
        # concatenated: their sum is the number of targets (a Gather at the difference from a one-element tensor)
        difference = b.op("Abs", b.op("Sub", b.op("ReduceSum", lengths, keepdims=0), b.size(self.targets)))
        if self.concatenated is None:
            difference = b.op("Where", self._padded, b.int_scalar(0), difference)
        rule = f"{b.opdef.name}: " + NOT_CONCATENATED.format(input="targets", shape="(n,)", full="(sum of "
                                                                     "target_lengths,)")
        zero = b.op("Gather", b.ints([0]), difference, name=rule)
        return b.op("Add", lengths, zero)

    @functools.cached_property
    def positions(self) -> str:
        """int64 (1, S): 0, 1, ..., S - 1."""
        b = self.b
        return b.op("Unsqueeze", b.op("Range", b.int_scalar(0), self.width, b.int_scalar(1)), b.ints([0]))

    @functools.cached_property
    def listed(self) -> str:
        """bool (N, S): position j holds one of sequence n's labels (j < its target length)."""
        b = self.b
        return b.op("Less", self.positions, b.op("Unsqueeze", self.target_lengths, b.ints([1])))

    @functools.cached_property
    def labels(self) -> str:
        """int64 (N, S): each sequence's labels, checked to be classes other than blank; 0 past its length."""
        b = self.b
        flat = b.op("Concat", b.op("Reshape", self.targets, self._vector(b.size(self.targets))), b.ints([0]),
                    axis=0)  # a 0 at the end (a Reshape to [-1] fails for no target)
        if self.concatenated is False:
            starts = b.op("Mul", b.op("Range", b.int_scalar(0), self.batch, b.int_scalar(1)), self.width)
        else:
            lengths = self.target_lengths
            starts = b.op("Sub", b.op("CumSum", lengths, b.int_scalar(0)), lengths)
            if self.concatenated is None:
                numbered = b.op("Mul", b.op("Range", b.int_scalar(0), self.batch, b.int_scalar(1)), self.width)
                starts = b.op("Where", self._padded, numbered, starts)
        index = b.op("Add", b.op("Unsqueeze", starts, b.ints([1])), self.positions)
        index = b.op("Where", self.listed, index, b.size(self.targets))  # past a length: the 0 at the end
        labels = b.op("Gather", flat, index)
        if self.static_batch == 0:
            return labels
        # checked: a Gather from 0, ..., C at the label, or at C + 1 (out of range) for a negative one, one of C or
        # more, or the blank; 0 past a length
        c = self.classes
        past = b.op("Add", c, b.int_scalar(1))
        bad = b.op("Or", b.op("Or", b.op("Less", labels, b.int_scalar(0)), b.op("Not", b.op("Less", labels, c))),
                   b.op("Equal", labels, self.blank))
        index = b.op("Where", self.listed, b.op("Where", bad, past, labels), b.int_scalar(0))
        return b.op("Gather", b.op("Range", b.int_scalar(0), past, b.int_scalar(1)), index,
                    name=f"{b.opdef.name}: {NOT_A_TARGET}")

    @functools.cached_property
    def blank(self) -> str:
        """The blank class, an int64 scalar, checked to be in [0, C)."""
        b = self.b
        blank = b.int_param("blank")
        shape = self.static_shape
        if shape is not None and len(shape) == 3 and isinstance(shape[2], int):  # shape inference checked it
            return blank
        rule = f"{b.opdef.name}: attribute 'blank' must be a class in [0, C)"
        return b.op("Gather", b.op("Range", b.int_scalar(0), self.classes, b.int_scalar(1)), blank, name=rule)

    def divisors(self, elem_type: int) -> str:
        """(N,) of `elem_type`: each sequence's target length, at least 1 (PyTorch's mean divides each loss so)."""
        b = self.b
        return b.op("Cast", b.op("Max", self.target_lengths, b.int_scalar(1)), to=elem_type)

    def count(self, elem_type: int) -> str:
        """N as a scalar of `elem_type`."""
        return self.b.op("Cast", self.batch, to=elem_type)

    @functools.cached_property
    def fed(self) -> str:
        """A gradient's grad_output per sequence (N,), in the computation's type, scaled for the reduction: for
        `mean` divided by the sequence's target length (at least 1) and by N."""
        b, wide = self.b, _wide(self.b)
        g = b.op("Cast", self.grad_output, to=wide)
        every = b.op("Expand", g, self._vector(self.batch))
        return b.choose("reduction", {
            "none": lambda s: g, "sum": lambda s: every,
            "mean": lambda s: s.op("Div", every, s.op("Mul", self.divisors(wide), self.count(wide)))})


def _wide(b: Builder) -> int:
    """The type a sequence loss computes in: float64 (its sums over time), for CANN too: its graph mode claims no
    Scan, so the recursion runs on the provider's CPU fallback, which takes float64."""
    return TensorProto.DOUBLE


def decomposition(b: Builder, names: list[str]) -> str:
    """A sequence loss's decomposition of the inputs `names`, in float64, as `Builder.decomposition` for an
    elementwise one."""
    op = b.opdef
    checked = _guarded(b, names)
    given = {i.name: n for i, n in zip(op.inputs, checked, strict=True)}
    b.sequences = seq = Sequences(b, given["log_probs"], given["targets"], given["input_lengths"],
                                  given["target_lengths"])
    if seq.static_batch is not None:  # the losses' static shape: a sum over no sequence is written as a zero
        b._static_full = (seq.static_batch,)
    log_probs = b.op("Cast", seq.log_probs, to=_wide(b))
    if not op.reduces:  # a gradient: its formula reads `sequences.fed`
        seq.grad_output = given["grad_output"]
        return op.decompose(b, log_probs)
    losses = op.decompose(b, log_probs)  # (N,)
    wide = _wide(b)

    def mean(s: Builder) -> str:
        if seq.static_batch == 0:  # no division by a constant 0 (TVM folds it): NaN, as 0 / 0
            return s.op("Mul", s.total(losses), s.const(math.nan, TensorProto.DOUBLE))
        return s.op("Div", s.total(s.op("Div", losses, seq.divisors(wide))), seq.count(TensorProto.DOUBLE))

    return b.choose("reduction", {"none": lambda s: losses, "sum": lambda s: s.total(losses), "mean": mean})


def _guarded(b: Builder, names: list[str]) -> list[str]:
    """The inputs after the sequence rules are guarded where a shape is symbolic (inference checked static ones):
    log_probs of rank 3, a length per sequence, the targets (N, S) or of rank 1, the loss fed back (N,) or ()."""
    op = b.opdef
    if all(b.static.static_shape(n) is not None for n in names if n) or not b.static.guards:
        return list(names)
    out = list(names)
    k = [i.name for i in op.inputs].index("log_probs")
    own = b.op("Shape", names[k])
    check = b._identical(b.op("Shape", own), b.ints([3]), f"{op.name}: " + NOT_SEQUENCES.format(shape="of that rank"))
    out[k] = b._after(names[k], own, check, 0)
    b._guards[k] = (check, 0)
    batch = b.op("Slice", b.op("Shape", out[k]), b.ints([1]), b.ints([2]))  # (N,)
    for k, i in enumerate(op.inputs):
        if i.name in ("input_lengths", "target_lengths", "grad_output"):
            want = b.ints([]) if i.name == "grad_output" and b.attrs["reduction"] != "none" else batch
            words = "the loss's shape" if i.name == "grad_output" else NOT_LENGTHS.format(
                input=i.name, shape="(n,)", full="(N,)")
            own = b.op("Shape", names[k])
            check = b._identical(own, want, f"{op.name}: input '{i.name}' must have {words}")
        elif i.name == "targets":  # rank 1 or 2, and N rows where 2: a Gather at the difference from (1,)
            own = b.op("Shape", names[k])
            rank = b.size(own)
            first = b.op("Gather", b.op("Concat", own, b.ints([0]), axis=0), b.int_scalar(0))
            rows = b.op("Where", b.op("Equal", rank, b.int_scalar(2)),
                        b.op("Abs", b.op("Sub", first, b.op("Gather", batch, b.int_scalar(0)))), b.int_scalar(0))
            bad = b.op("Add", rows, b.op("Where", b.op("Or", b.op("Equal", rank, b.int_scalar(1)),
                                                        b.op("Equal", rank, b.int_scalar(2))),
                                           b.int_scalar(0), b.int_scalar(1)))
            rule = f"{op.name}: " + NOT_TARGET_SEQUENCES.format(input="targets", shape="(...)", full="(N,)")
            # (0,): an empty tensor that exists once the Gather passed
            check = b.op("ConstantOfShape", b.op("Reshape", b.op("Gather", b.ints([0]), bad, name=rule), b.ints([1])))
        else:
            continue
        out[k] = b._after(names[k], own, check, 0)
        b._guards[k] = (check, 0)
    return out
