"""The operator reference, generated from the definitions and the conformance suite's cases (docs/operators.md),
and the README's operator table.
Run: python -m lossops.opset.docs (writes the reference), python -m lossops.opset.docs --table (prints the table)"""

from __future__ import annotations

import sys
from pathlib import Path

from .opset import OPS
from .opset.spec import TENSOR_TYPES, Attribute
from .opset.versions import DOMAIN, VERSION


def operator_reference() -> str:
    from .conformance.examples import worked_example  # the suite's stored cases: read only to write the docs
    from .conformance.golden import load_all

    goldens = load_all()

    types = ", ".join(f"`{t}`" for t in TENSOR_TYPES.values())
    lines = [
        f"# The `{DOMAIN}` operator set, version {VERSION}",
        "",
        "Generated from the operator definitions in `opset/` and the conformance suite's cases by "
        "`python -m lossops.opset.docs`; do not edit.",
        "",
        f"Every tensor input and the output have type `T` in {types}; all tensors of one node share one `T`.",
        "",
    ]
    for op in OPS.values():
        lines += [f"## {op.name}", "", op.summary, "", op.doc.rstrip(), "", "| name | kind | description |",
                  "|---|---|---|"]
        for i in op.inputs:
            lines.append(f"| `{i.name}` | {'optional input' if i.optional else 'input'}, T | {i.doc} |")
        lines.append(f"| `{op.output.name}` | output, T | {op.output.doc} |")
        for a in op.attributes:
            allowed = ", ".join(f"`{v!r}`" for v in a.allowed) if a.enum else a.expectation().removeprefix("a ")
            lines.append(f"| `{a.name}` | attribute, {a.kind.__name__}, default `{a.default!r}` | {a.doc} "
                         f"Allowed: {allowed}. |")
        lines.append("")
        lines += worked_example(op.name, goldens)
    return "\n".join(lines)


def operator_table() -> str:
    """The README's table: one row per operator, from its record."""
    def values(a: Attribute) -> str:
        if a.enum:
            return ", ".join(f"**{v}**" if v == a.default else str(v) for v in a.allowed)
        return f"{a.kind.__name__}, **{a.default}**"

    lines = ["| operator | inputs | attributes | output | Ascend aclnn API |", "|---|---|---|---|---|"]
    for op in OPS.values():
        inputs = ", ".join(i.name + ("?" if i.optional else "") for i in op.inputs)
        attributes = ", ".join(f"{a.name} ({values(a)})" for a in op.attributes)
        output = ("broadcast shape" if op.output_shape == "full" else f"{op.output_shape}'s shape") + (
            ", or a scalar" if op.reduces else "")
        lines.append(f"| {op.name} | {inputs} | {attributes} | {output} | {op.aclnn.api if op.aclnn else '-'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--table"]:
        print(operator_table(), end="")
        sys.exit()
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "docs/operators.md"
    target.write_text(operator_reference())
    print(f"wrote {target}")
