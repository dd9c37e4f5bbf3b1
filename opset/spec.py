"""The operator record: everything lossops knows about one operator, in one object that every layer reads.

An `OpDef` is the ONNX interface (inputs with their shape rule, attributes, docs), the decomposition into
standard ops, and the facts other systems need: the PyTorch operators that mean the same, the Ascend aclnn
API with its argument names and the parts its page lists, and the operator computing its gradient.
Its tile (ort_ext/kernels/<operator>.py, `@kernel`) and its conformance module (conformance/ops/<operator>.py:
oracle, cases, bench baseline) are found by its name; tests/test_registry.py fails when an operator lacks any
of them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

from onnx import TensorProto

# Type constraint T of every lossops tensor (docs/operators.md): element type enum -> ONNX type string.
TENSOR_TYPES: dict[int, str] = {
    TensorProto.FLOAT16: "tensor(float16)",
    TensorProto.BFLOAT16: "tensor(bfloat16)",
    TensorProto.FLOAT: "tensor(float)",
    TensorProto.DOUBLE: "tensor(double)",
}
# The same element types by the names reports, the CLI and the conformance suite use, in their order.
DTYPE_NAMES: dict[str, int] = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
                               "bfloat16": TensorProto.BFLOAT16, "float64": TensorProto.DOUBLE}

# The reductions, at their index in the enum that aten and aclnn share (`int64_t reduction`).
REDUCTIONS = ("none", "mean", "sum", "batchmean")

# How an input's shape relates to the others (the "shape rule" of docs/operators.md). S is the shape of the input
# named `input`; F, the shape the operator computes over, is S broadcast with every BROADCAST input.
PRINCIPAL = "principal"  # the input named `input`: its shape is S
EXACT = "exact"  # exactly S
FITS = "fits"  # broadcastable to F without enlarging it
BROADCAST = "broadcast"  # broadcasts with `input` either way; F is their broadcast shape
# The rules of a class loss (the classes on axis 1 of `input`, as PyTorch's and ONNX's class losses):
CLASSES = "classes"  # the input named `input` of a class loss: (N, C, d1, ...), rank 2 or more
ROWS = "rows"  # input's shape without its class axis: (N, d1, ...), one class index per row
PER_CLASS = "per class"  # (C,)
LOSS = "loss"  # a class loss fed back: ROWS for reduction 'none', a scalar otherwise
LABELS = "labels"  # exactly S, int64: each row's class indices along axis 1, ended by the first negative one
# The rules of a sequence loss (CTC: frames on axis 0, as PyTorch's ctc_loss and aclnn's):
SEQUENCES = "sequences"  # the input named `log_probs`: (T, N, C), T frames of N sequences over C classes
TARGET_SEQUENCES = "target sequences"  # int64: (N, S), padded, or (sum of target_lengths,), concatenated
LENGTHS = "lengths"  # int64: (N,), one length per sequence


# What values an input holds (for sampling in benchmarks, demos and fuzz tests; the operators check none).
REAL, PROBABILITY, LOG_PROBABILITY, POSITIVE = "real", "probability", "log-probability", "positive"
CLASS_INDEX = "class index"  # int64 (type constraint I, not T): a class in [0, C), or the node's ignore_index
LABEL_LIST = "label list"  # int64: a row's classes in [0, C) along axis 1, then -1 to its end (multi-label)
TARGET_SEQUENCE = "target sequence"  # int64: classes in [0, C) other than the blank, up to each target length
LENGTH = "length"  # int64: a sequence's frames in [0, T], or its target's labels


@dataclass(frozen=True)
class Input:
    name: str
    doc: str
    optional: bool = False
    shape: str = FITS
    domain: str = REAL

    @property
    def indices(self) -> bool:
        """Whether it holds int64 values (class indices, lengths) rather than values of the node's float type T."""
        return self.domain in (CLASS_INDEX, LABEL_LIST, TARGET_SEQUENCE, LENGTH)


# inputs and outputs that several operators' records describe alike
PREDICTIONS = Input("input", "Predictions, any rank.", shape=PRINCIPAL)
TARGETS = Input("target", "Targets, broadcastable with `input`.", shape=BROADCAST)
GRAD_OUTPUT = Input("grad_output",
                    "Gradient of the loss; broadcastable to the broadcast shape of `input` and `target`.")
REDUCED_OUTPUT = Input("output", "The broadcast shape of `input` and `target` for `none`; a scalar otherwise.")
GRAD_INPUT = Input("grad_input", "Gradient with respect to `input`; `input`'s shape.")


# The words of a refused attribute, the same on every path: opset/validation.py and `OpDef.resolve` fill them in
# Python, and the native library's tables carry them, filled with each attribute's name and expectation
# (ort_ext/machine_code/library.py), so ONNX Runtime hosts in any language read the same sentences.
UNKNOWN_ATTRIBUTE = "{op}: unknown attribute '{name}'; {op} has {names}"
WRONG_KIND = "{op}: attribute '{name}' is {shown} ({kind}); expected {expected}"
NOT_SINGLE = "{op}: attribute '{name}' is {phrase}; expected {expected}"
NOT_ALLOWED = "{op}: attribute '{name}' is {shown}; expected {expected}"

# What an attribute of an ONNX type that holds no single str, int or float is called (AttributeProto's type
# names). The native library tells FLOATS, INTS and TENSOR apart and calls any other such value "a list of
# strings": ONNX Runtime's C API has a getter for none of the others (and exporters write none of them).
NOT_SINGLE_KINDS = {"FLOATS": "a list of floats", "INTS": "a list of ints", "STRINGS": "a list of strings",
                    "TENSOR": "a tensor", "TENSORS": "a list of tensors", "GRAPH": "a graph",
                    "GRAPHS": "a list of graphs", "SPARSE_TENSOR": "a sparse tensor",
                    "SPARSE_TENSORS": "a list of sparse tensors", "TYPE_PROTO": "a type",
                    "TYPE_PROTOS": "a list of types"}


@dataclass(frozen=True)
class NotSingle:
    """An attribute value that is not a single str, int or float: a list, a tensor, a graph (its ONNX type)."""

    onnx_type: str  # a key of NOT_SINGLE_KINDS

    @property
    def phrase(self) -> str:
        return NOT_SINGLE_KINDS.get(self.onnx_type, f"an attribute of type {self.onnx_type}")


def quoted(data: bytes) -> str:
    """A string attribute's exact bytes as every refusal shows them, the native library's included: quoted as
    Python quotes a str, printable ASCII as it is, and anything else (a NUL, bytes that are not UTF-8 text, any
    byte above 0x7f) as \\xNN, so the sentence is ASCII whatever the attribute holds."""
    quote = '"' if b"'" in data and b'"' not in data else "'"
    special = {ord("\\"): "\\\\", ord(quote): "\\" + quote, ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
    shown = "".join(special.get(b) or (chr(b) if 0x20 <= b < 0x7f else f"\\x{b:02x}") for b in data[:QUOTED_MOST])
    return quote + shown + quote + ("..." if len(data) > QUOTED_MOST else "")


QUOTED_MOST = 200  # bytes of a string a refusal shows (the native library's QUOTED_MOST)


@dataclass(frozen=True)
class Attribute:
    """A node attribute: an enum (`allowed`: its values; the decomposition is specialised to each) or a number
    (`low`/`high`: its closed range, None for unbounded; it reaches the decomposition as an attribute reference
    and the kernel as a parameter). A float attribute is an ONNX FLOAT, so its value is a float32."""

    name: str
    doc: str
    default: str | int | float
    allowed: tuple[str | int, ...] = ()
    low: float | None = None
    high: float | None = None
    examples: tuple[float, ...] = ()  # a number's values besides the default that take other paths (tests)

    @property
    def kind(self) -> type:
        return type(self.default)

    @property
    def enum(self) -> bool:
        return bool(self.allowed)

    @property
    def values(self) -> tuple[str | int | float, ...]:
        """The values tests run: every allowed one of an enum, a number's default and examples."""
        return self.allowed if self.enum else (self.default, *self.examples)

    def expectation(self) -> str:
        """What a value must be, as the end of a sentence."""
        if self.enum:
            return "one of " + ", ".join(repr(a) for a in self.allowed)
        if self.kind is int and self.low is None and self.high is None:
            return "any int"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"a finite {self.kind.__name__} in [{low}, {high}]"

    def type_expectation(self) -> str:
        """What a value of another type is told, as the end of a sentence: "a str, one of 'none', ..."."""
        article = f"{'an' if self.kind is int else 'a'} {self.kind.__name__}"
        return article if self.expectation() == f"any {self.kind.__name__}" else f"{article}, {self.expectation()}"

    def check(self, op: str, value: object) -> None:
        """Raise ValueError naming the operator and the attribute when value is not allowed. `value`: a Python
        value, or as a node holds it: a STRING's exact bytes, an INT, a FLOAT, or `NotSingle`."""
        if isinstance(value, NotSingle):
            raise ValueError(NOT_SINGLE.format(op=op, name=self.name, phrase=value.phrase,
                                               expected=self.type_expectation()))
        if isinstance(value, str):  # its bytes, as ONNX stores it
            value = value.encode("utf-8", "surrogateescape")
        if self.kind is float:  # any real but an integer (numpy's float32 too; an INT attribute is another type)
            right_type = isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
        elif self.kind is str:
            right_type = isinstance(value, bytes)
        else:  # a FLOAT log_target of 1.0 must not read as 0
            right_type = isinstance(value, self.kind) and not isinstance(value, bool)
        shown = quoted(value) if isinstance(value, bytes) else repr(value)
        if not right_type:
            kind = "str" if isinstance(value, bytes) else type(value).__name__
            raise ValueError(WRONG_KIND.format(op=op, name=self.name, shown=shown, kind=kind,
                                               expected=self.type_expectation()))
        if self.kind is str:  # the exact bytes: "sum\0garbage" is not "sum"
            ok = value in {a.encode() for a in self.allowed}
        elif self.enum:
            ok = value in self.allowed
        else:
            ok = math.isfinite(value) and (self.low is None or value >= self.low) and (
                self.high is None or value <= self.high)
        if not ok:
            raise ValueError(NOT_ALLOWED.format(op=op, name=self.name, shown=shown, expected=self.expectation()))


@dataclass(frozen=True)
class Aclnn:
    """The Ascend aclnn API an operator is, as its API page documents it."""

    api: str
    arguments: tuple[str, ...]  # its tensor arguments, in the operator's input order
    # Ascend part -> listed as supported (True), listed as not supported (False), not listed (None: unknown)
    products: dict[str, bool | None] = field(default_factory=dict)
    scalars: tuple[tuple[str, str], ...] = ()  # (its scalar argument, the attribute it is) beyond the reduction
    ranks: tuple[int, ...] = ()  # the ranks of `input` its page allows, where narrower than the operator's
    extra_outputs: tuple[str, ...] = ()  # what it also writes that the node does not (the caller allocates them)
    # How it takes the reduction: "code" (int64_t, aten's codes), "name" (char*: "none", "mean", "sum"), or ""
    # (no argument: it computes `none` only, and a node that reduces is the call and the reduction after it)
    reduction: str = "code"
    # Arguments a gradient API reads from its forward API's outputs (total weight, log-probabilities, log-alpha),
    # which the lossops gradient recomputes from its own inputs; one in `arguments` stands at that input's place
    forward_outputs: tuple[str, ...] = ()
    host_arrays: tuple[str, ...] = ()  # tensor arguments it takes as host integer arrays (aclIntArray)
    only: tuple[tuple[str, float], ...] = ()  # scalar arguments its page supports at one value only


@dataclass(frozen=True)
class Gradient:
    """The node computing the gradient of a forward operator's loss with respect to one of its inputs."""

    backward: str
    inputs: tuple[str, ...]  # the backward's inputs: "grad_output" (the loss's gradient) or forward input names


@dataclass(frozen=True)
class OpDef:
    """One lossops operator.

    `output_shape` is "full" (F) or the name of the input whose gradient the operator is ("input", "target":
    that input's shape, summed back over the axes broadcasting added to or stretched in it);
    with `reduces`, a reduction other than none makes the output a scalar (a loss). `decompose(builder,
    *input names)` emits the standard-op formulation. `torch` names the PyTorch operators whose tensor
    arguments are this operator's inputs in order and whose other arguments are its attributes by name (the
    reduction as aten's code): the export translations are made from them.
    """

    name: str
    summary: str
    doc: str
    inputs: tuple[Input, ...]
    output: Input
    attributes: tuple[Attribute, ...]
    decompose: Callable
    output_shape: str = "full"
    reduces: bool = False
    torch: tuple[str, ...] = ()
    aclnn: Aclnn | None = None
    gradient: Gradient | None = None
    target_gradient: Gradient | None = None  # the node computing d loss / d target, where aclnn has one

    def attribute(self, name: str) -> Attribute:
        return next(a for a in self.attributes if a.name == name)

    def input(self, name: str) -> Input:
        return next(i for i in self.inputs if i.name == name)

    @property
    def principal(self) -> int:
        return next(k for k, i in enumerate(self.inputs) if i.shape in (PRINCIPAL, CLASSES, SEQUENCES))

    @property
    def principal_name(self) -> str:
        """The principal input's name: `input`, or a sequence loss's `log_probs`."""
        return self.inputs[self.principal].name

    @property
    def sequences(self) -> bool:
        """Whether it is a sequence loss (CTC: `log_probs` (T, N, C), target sequences and their lengths)."""
        return self.inputs[self.principal].shape == SEQUENCES

    @property
    def classes(self) -> bool:
        """Whether it is a class loss (its `input` holds the classes on axis 1) rather than an elementwise one."""
        return self.inputs[self.principal].shape == CLASSES

    @property
    def output_input(self) -> int | None:
        """The index of the input whose shape the output has (a gradient's), or None for F."""
        names = [i.name for i in self.inputs]
        return None if self.output_shape == "full" else names.index(self.output_shape)

    @property
    def params(self) -> tuple[Attribute, ...]:
        """The attributes a kernel reads as parameters (every one but `reduction`, which the engine applies), in
        record order: parameter k is the k-th of them."""
        return tuple(a for a in self.attributes if a.name != "reduction")

    def defaults(self) -> dict[str, str | int | float]:
        return {a.name: a.default for a in self.attributes}

    def resolve(self, given: dict[str, object]) -> dict[str, str | int | float]:
        """Attribute values with defaults filled in, each checked against the schema (name, type, value)."""
        unknown = sorted(set(given) - {a.name for a in self.attributes})
        if unknown:
            raise ValueError(UNKNOWN_ATTRIBUTE.format(op=self.name, name=unknown[0], names=self.attribute_names))
        values = {**self.defaults(), **given}
        for a in self.attributes:
            a.check(self.name, values[a.name])
        return {k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()}

    @property
    def attribute_names(self) -> str:
        """Its attributes' names, as the refusals list them."""
        return ", ".join(a.name for a in self.attributes) or "none"


INDEX_TYPE = "tensor(int64)"  # type constraint I: class indices, as PyTorch's and ONNX's class losses take them

REDUCTION_DOC = (
    "Specifies the reduction to apply to the output: 'none' (no reduction), 'mean' (the sum divided by the "
    "number of elements) or 'sum'."
)


def reduction(*extra: str) -> Attribute:
    doc = REDUCTION_DOC
    if "batchmean" in extra:
        doc += " 'batchmean' divides the sum by the size of the first dimension of `input`."
    return Attribute("reduction", doc, "mean", allowed=("none", "mean", "sum", *extra))


def class_reduction() -> Attribute:
    """A class loss's reduction: its mean is weighted, as PyTorch's and ONNX's."""
    return Attribute("reduction", "Specifies the reduction to apply to the output: 'none' (one loss per row), 'mean' "
                     "(the sum divided by the total weight of the rows not ignored, their number where no weight is "
                     "given) or 'sum'.", "mean", allowed=("none", "mean", "sum"))


IGNORE_INDEX = Attribute("ignore_index", "A target value that contributes neither to the loss nor to the mean's "
                         "divisor (its rows' loss and gradient are 0); any int64, in [0, C) too.", -100, examples=(0,))


# The Ascend parts that aclnn pages list (the seed pages' product support tables); bfloat16 only on some of them.
ASCEND_PARTS = ("910", "310P", "A2", "A3", "950")
ASCEND_BFLOAT16 = ("A2", "A3", "950")
ASCEND_MAX_RANK = 8
