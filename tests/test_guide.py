"""Every Python snippet of docs/guide.md runs on its own, as written, in a fresh process and an empty folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)


def test_the_guide_has_its_snippets():
    assert len(SNIPPETS) >= 7


@pytest.mark.parametrize("code", SNIPPETS, ids=[s.strip().splitlines()[-1][:40] for s in SNIPPETS])
def test_a_guide_snippet_runs_on_its_own(code, tmp_path):
    (tmp_path / "snippet.py").write_text(code)  # a file: onnxscript reads a function's source
    done = subprocess.run([sys.executable, "snippet.py"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, f"{code}\n{done.stderr[-3000:]}"
