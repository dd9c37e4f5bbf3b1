"""The README's examples run as written, in order, in a fresh process, and print what the README says they print
(each ```python block is followed by a ```text block with its output)."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _examples() -> list[tuple[str, str]]:
    blocks = re.findall(r"```(python|text)\n(.*?)```", README.read_text(), re.S)
    pairs = []
    for (kind, code), (next_kind, output) in itertools.pairwise(blocks):
        if kind == "python":
            assert next_kind == "text", f"a python block without its output:\n{code}"
            pairs.append((code, output))
    return pairs


def test_the_readme_examples_print_what_it_says(tmp_path):
    examples = _examples()
    assert len(examples) >= 3
    marker = "----lossops-readme-example----"
    script = "".join(f"{code}\nprint({marker!r})\n" for code, _ in examples)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout.split(marker + "\n")[:-1]
    assert len(printed) == len(examples)
    for (code, expected), got in zip(examples, printed, strict=True):
        assert got == expected, f"the README's example\n{code}\nprinted\n{got}\nnot\n{expected}"


def test_the_readme_speed_table_is_generated_from_the_stored_run():
    """The table is `lossops bench --summary docs/bench.json`, the run stored beside the docs, not typed."""
    import json

    from lossops.bench import summary

    run = json.loads((README.parent / "docs" / "bench.json").read_text())
    assert summary(run) in README.read_text(), "README's speed table is stale: lossops bench --summary docs/bench.json"


def test_the_benchmark_page_is_generated_from_the_stored_run():
    """docs/bench.md is `lossops bench --markdown docs/bench.json`, every row of the runs the README summarises."""
    import json

    from lossops import opset
    from lossops.bench import report, runs

    run = json.loads((README.parent / "docs" / "bench.json").read_text())
    measured = {r["op"] for stored in runs(run) for r in stored["rows"]}
    assert measured == set(opset.OPS), ("the stored runs must cover every operator: lossops bench --op OP --update "
                                        "docs/bench.json measures a new one")
    page = (README.parent / "docs" / "bench.md").read_text()
    assert page == report(run), "docs/bench.md is stale: lossops bench --markdown docs/bench.json > docs/bench.md"


def test_the_readme_operator_table_is_generated_from_the_records():
    """The README's operator table is `python -m lossops.opset.docs --table`: one row per operator of the set,
    from its record."""
    from lossops import opset
    from lossops.regenerate import operator_table

    table = operator_table()
    assert [line.split("|")[1].strip() for line in table.splitlines()[2:]] == list(opset.OPS)
    assert table in README.read_text(), "README's operator table is stale: python -m lossops.opset.docs --table"


def test_the_readme_verbs_table_is_generated_from_the_command_line():
    """The README's table of verbs is `python -m lossops.cli --verbs-table`: every verb, every option."""
    from lossops.cli import verbs_table

    assert verbs_table() in README.read_text(), "README's verbs table is stale: python -m lossops.cli --verbs-table"


def test_ci_runs_the_quick_start_commands_as_written_and_their_torch_is_the_extras_pin():
    import tomllib

    commands = re.findall(r"^    (python3 -m venv .*)$", README.read_text(), re.M)
    assert len(commands) == 2
    ci = (README.parent / ".ci" / "run").read_text()
    assert all(command in ci.splitlines() for command in commands)
    extras = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = {r for r in extras["test"] if r.startswith("torch")}
    assert f" {pin} " in commands[1]
