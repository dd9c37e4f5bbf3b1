"""Every file lossops generates from its own sources, written by one command, `lossops docs --write` (a checkout
only: the wheel has no docs/), and `lossops docs --check`, which names the stale ones (tests/test_generated.py
runs it):

- the conformance suite's goldens (conformance/node-tests/) from the cases and the PyTorch oracles (needs torch;
  a stored case is rewritten only where its definition changed: conformance/golden.py);
- docs/operators.md from the operator records and the goldens (a worked example per operator);
- docs/bench.md from the stored benchmark runs, docs/bench.json;
- the tables of docs/guide.md between their markers: the operators (from the records) and the verbs (from the
  command line's parser).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .opset import OPS
from .opset.spec import INDEX_TYPE, TENSOR_TYPES, Attribute
from .opset.versions import DOMAIN, VERSION


def operator_reference() -> str:
    from .conformance.examples import worked_example  # the suite's stored cases: read only to write the docs
    from .conformance.golden import load_all

    goldens = load_all()

    types = ", ".join(f"`{t}`" for t in TENSOR_TYPES.values())
    lines = [
        f"# The `{DOMAIN}` operator set, version {VERSION}",
        "",
        "Generated from the operator records in `opset/ops/` and the conformance suite's cases by "
        "`lossops docs --write`; do not edit.",
        "",
        f"Every tensor input and the output have type `T` in {types}; all tensors of one node share one `T`. "
        f"The class indices of a class loss's `target` have type `I`, `{INDEX_TYPE}`.",
        "",
    ]
    for op in OPS.values():
        lines += [f"## {op.name}", "", op.summary, "", op.doc.rstrip(), "", "| name | kind | description |",
                  "|---|---|---|"]
        for i in op.inputs:
            lines.append(f"| `{i.name}` | {'optional input' if i.optional else 'input'}, {'I' if i.indices else 'T'} "
                         f"| {i.doc} |")
        lines.append(f"| `{op.output.name}` | output, T | {op.output.doc} |")
        for a in op.attributes:
            allowed = ", ".join(f"`{v!r}`" for v in a.allowed) if a.enum else a.expectation().removeprefix("a ")
            lines.append(f"| `{a.name}` | attribute, {a.kind.__name__}, default `{a.default!r}` | {a.doc} "
                         f"Allowed: {allowed}. |")
        lines.append("")
        lines += worked_example(op.name, goldens)
    return "\n".join(lines)


def operator_table() -> str:
    """The guide's table of the operators: one row per operator, from its record."""
    def values(a: Attribute) -> str:
        if a.enum:
            return ", ".join(f"**{v}**" if v == a.default else str(v) for v in a.allowed)
        return f"{a.kind.__name__}, **{a.default}**"

    lines = ["| operator | inputs | attributes | output | Ascend aclnn API |", "|---|---|---|---|---|"]
    for op in OPS.values():
        inputs = ", ".join(i.name + ("?" if i.optional else "") for i in op.inputs)
        attributes = ", ".join(f"{a.name} ({values(a)})" for a in op.attributes)
        shape = "(N,)" if op.sequences else "broadcast shape" if not (op.classes and op.reduces) else (
            "target's shape" if op.input("target").indices else "input's rows")
        output = (shape if op.output_shape == "full" else f"{op.output_shape}'s shape") + (
            ", or a scalar" if op.reduces else "")
        lines.append(f"| {op.name} | {inputs} | {attributes} | {output} | {op.aclnn.api if op.aclnn else '-'} |")
    return "\n".join(lines) + "\n"


ROOT = Path(__file__).resolve().parent  # the repository root is the package `lossops`
GUIDE = ROOT / "docs" / "guide.md"
README = ROOT / "README.md"
BENCH_RUNS = ROOT / "docs" / "bench.json"
CLASS_BENCH = ROOT / "docs" / "bench_classes.json"  # `lossops bench --classes --large --json`


def _bench_page() -> str:
    from .bench import report

    return report(_stored_runs())


def _bench_summary() -> str:
    from .bench import summary

    return summary(_stored_runs())


def _class_bench() -> str:
    from .bench_classes import table

    return table(json.loads(CLASS_BENCH.read_text()))


def _stored_runs() -> dict:
    return json.loads(BENCH_RUNS.read_text())


WHOLE: dict[Path, Callable[[], str]] = {ROOT / "docs" / "operators.md": operator_reference,
                                        ROOT / "docs" / "bench.md": _bench_page}


def begin(name: str) -> str:
    return f"<!-- generated: {name} (lossops docs --write) -->\n"


def end(name: str) -> str:
    return f"<!-- end of generated: {name} -->\n"


def _with_sections(path: Path, sections: dict[str, str]) -> str:
    text = path.read_text()
    for name, made in sections.items():
        first, last = text.find(begin(name)), text.find(end(name))
        if first < 0 or last < first:
            raise ValueError(f"{path} has no generated section '{name}' (expected the lines {begin(name).strip()} "
                             f"and {end(name).strip()})")
        text = text[:first + len(begin(name))] + made + text[last:]
    return text


def expected(verbs_table: str) -> dict[Path, str]:
    """Every generated document as it should read now. `verbs_table`: the command line's (cli.verbs_table, which
    the `docs` verb hands over: the CLI imports this module, not the other way round)."""
    found = {path: make() for path, make in WHOLE.items()}
    found[GUIDE] = _with_sections(GUIDE, {"operators": operator_table(), "verbs": verbs_table})
    found[README] = _with_sections(README, {"speed": _bench_summary(), "class-losses": _class_bench()})
    return found


def stale(verbs_table: str) -> list[Path]:
    """The generated documents that do not read as their sources make them."""
    return [path for path, text in expected(verbs_table).items() if not path.is_file() or path.read_text() != text]


def main(write: bool, goldens: bool, verbs_table: str) -> int:
    """`lossops docs`: write (or check) every generated file; the goldens too where asked (needs torch)."""
    if not GUIDE.parent.is_dir():
        raise ValueError(f"no docs/ beside the package ({ROOT}): lossops docs works in a checkout of lossops")
    if goldens:
        from .conformance import golden
        from .extras import require

        require("torch", "regenerating the conformance goldens", extra="test")
        if write:
            print(f"goldens: {golden.generate()} cases in {golden.DATA_DIR}")
        else:
            drifted = golden.drift()
            print(f"goldens: {len(drifted)} drifted" + "".join(f"\n  {d}" for d in drifted))
            if drifted:
                return 1
    found = stale(verbs_table)
    if not write:
        for path in found:
            print(f"stale: {path}")
        print("every generated document is current" if not found else
              f"{len(found)} stale: lossops docs --write regenerates them")
        return 1 if found else 0
    for path, text in expected(verbs_table).items():
        if path in found:
            path.write_text(text)
            print(f"wrote {path}")
    return 0
