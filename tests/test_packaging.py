"""What users install: the wheel and sdist that `python -m build` makes hold every file the package needs,
and nothing else. (CI installs that wheel in a fresh environment and runs the verbs from another directory:
.ci/wheel.sh.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # minutes on 2 cores: CI runs it (pytest -m slow)

ROOT = Path(__file__).resolve().parent.parent


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout: the expected file list is what git tracks")
    # tracked, and new files git does not ignore (a build of the working tree takes those too)
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    return listed.stdout.split()


def _package_files() -> set[str]:
    """Tracked files that belong in the package, as paths inside the wheel: every file of every subpackage
    folder (Python or data), and the root package's own modules (the root also holds the project's files)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"lossops": "."}
    folders = {p.removeprefix("lossops.").replace(".", "/") for p in config["packages"] if p != "lossops"}
    top = {f.split("/")[0] for f in folders}
    files = set()
    for path in _tracked():
        if "/" not in path and path.endswith(".py") and path not in ("setup.py", "build_backend.py"):  # the build's
            files.add(f"lossops/{path}")
        elif path.split("/")[0] in top:
            files.add(f"lossops/{path}")
    # a folder of Python files that is not declared a package would be left out of the wheel silently
    undeclared = {str(Path(f).parent.relative_to("lossops")) for f in files if f.endswith(".py")} - folders - {"."}
    assert not undeclared, f"folders with Python files missing from [tool.setuptools] packages: {undeclared}"
    return files


def test_wheel_and_sdist_hold_exactly_the_package(tmp_path):
    """The pure wheel (LOSSOPS_AOT=0): the file lists are the same, without the minutes of compiling the
    machine code; .ci/wheel.sh builds the platform wheel and checks its libraries. `python -m build` makes the
    wheel from the sdist, so the sdist must carry every package file too. One test for both: one build."""
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, LOSSOPS_AOT="0"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "would be ignored" not in done.stdout + done.stderr  # setuptools' warning for data folders
    expected = _package_files()

    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = {n for n in names if not n.startswith("lossops-")}
    assert package - expected == set(), "files in the wheel that git does not track in the package"
    assert expected - package == set(), "package files missing from the wheel: add them to package-data"
    assert any(n.endswith("cann_support.json") for n in package) and len(package) > 1000
    assert wheel.name.endswith("-py3-none-any.whl")

    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        in_sdist = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    missing = {f.removeprefix("lossops/") for f in expected} - in_sdist
    assert not missing, sorted(missing)[:10]
