"""The shape of an operator definition. Schemas, kernels, the CLI and the docs all read these objects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from onnx import TensorProto

# Type constraint T of every lossops tensor (OPS.md): element type enum -> ONNX type string.
TENSOR_TYPES: dict[int, str] = {
    TensorProto.FLOAT16: "tensor(float16)",
    TensorProto.BFLOAT16: "tensor(bfloat16)",
    TensorProto.FLOAT: "tensor(float)",
    TensorProto.DOUBLE: "tensor(double)",
}


@dataclass(frozen=True)
class Input:
    name: str
    doc: str
    optional: bool = False


@dataclass(frozen=True)
class Attribute:
    name: str
    doc: str
    default: str | int
    allowed: tuple[str | int, ...]

    @property
    def kind(self) -> type:
        return type(self.default)

    def check(self, op: str, value: object) -> None:
        """Raise ValueError naming the operator and the attribute when value is not allowed."""
        if value not in self.allowed:
            allowed = ", ".join(repr(a) for a in self.allowed)
            raise ValueError(f"{op}: attribute '{self.name}' is {value!r}; expected one of {allowed}")


@dataclass(frozen=True)
class OpDef:
    """One lossops operator: its interface (schema) and the hooks that give it meaning.

    `infer(node_shapes, attrs) -> output shape` works on shapes whose dims are int, str (symbolic)
    or None (unknown) and raises ValueError for invalid shapes. `decompose(builder, names, attrs)`
    emits the standard-op formulation into a function builder.
    """

    name: str
    summary: str
    doc: str
    inputs: tuple[Input, ...]
    output: Input
    attributes: tuple[Attribute, ...]
    infer: Callable
    decompose: Callable
    examples: tuple[str, ...] = field(default=())

    def attribute(self, name: str) -> Attribute:
        return next(a for a in self.attributes if a.name == name)

    def defaults(self) -> dict[str, str | int]:
        return {a.name: a.default for a in self.attributes}

    def resolve(self, given: dict[str, object]) -> dict[str, str | int]:
        """Attribute values with defaults filled in, each checked against the schema."""
        unknown = set(given) - {a.name for a in self.attributes}
        if unknown:
            raise ValueError(f"{self.name}: unknown attribute(s) {sorted(unknown)}")
        values = {**self.defaults(), **given}
        for a in self.attributes:
            a.check(self.name, values[a.name])
        return values


REDUCTION_DOC = (
    "Specifies the reduction to apply to the output: 'none' (no reduction), 'mean' (the sum divided by the "
    "number of elements) or 'sum'."
)


def reduction(*extra: str) -> Attribute:
    doc = REDUCTION_DOC
    if "batchmean" in extra:
        doc += " 'batchmean' divides the sum by the size of the first dimension of `input`."
    return Attribute("reduction", doc, "mean", ("none", "mean", "sum", *extra))
