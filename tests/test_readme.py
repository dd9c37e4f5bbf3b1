"""The README is a front door that holds: its example runs as written in a fresh process and prints what the README
says it prints (each ```python block is followed by a ```text block with its output), its two quick-start
commands are the ones CI runs, and every file it links to exists."""

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
    assert len(examples) >= 1
    marker = "----lossops-readme-example----"
    script = "".join(f"{code}\nprint({marker!r})\n" for code, _ in examples)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout.split(marker + "\n")[:-1]
    assert len(printed) == len(examples)
    for (code, expected), got in zip(examples, printed, strict=True):
        assert got == expected, f"the README's example\n{code}\nprinted\n{got}\nnot\n{expected}"


def test_ci_runs_the_quick_start_commands_as_written_and_their_torch_is_the_extras_pin():
    import tomllib

    commands = re.findall(r"^    (python3 -m venv .*)$", README.read_text(), re.M)
    assert len(commands) == 2
    ci = (README.parent / ".ci" / "run").read_text()
    assert all(command in ci.splitlines() for command in commands)
    extras = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = {r for r in extras["test"] if r.startswith("torch")}
    assert f" {pin} " in commands[1]


def test_the_readme_links_to_files_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert links and all((README.parent / link).exists() for link in links), links
