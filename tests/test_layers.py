"""The layers of docs/design.md, read from the source: each imports only the layers below it, the kernels' source
imports nothing but numpy, numba, llvmlite and the standard library, no import cycle exists (type-only imports
aside), and the names that moved in the house move still work for one release, saying where they went."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from imports import cycles, edges, modules

# layer -> the layers it may import (besides its own modules and lossops.extras, which names optional packages)
MAY_IMPORT = {
    "opset": set(),
    "ort_ext.kernels": {"opset"},
    "ort_ext.machine_code": {"ort_ext.kernels", "opset"},
    "ort_ext": {"ort_ext.machine_code", "ort_ext.kernels", "converters", "opset"},
    "converters": {"opset"},
    "training": {"ort_ext", "converters", "opset"},
    "conformance": {"ort_ext", "ort_ext.machine_code", "ort_ext.kernels", "converters", "opset"},
}
# the re-exports that keep a moved name working for one release (each says where it went); they go next release
DEPRECATED = {("lossops.ort_ext", "lossops.training"), ("lossops.converters.training", "lossops.training.check"),
              ("lossops.converters.training", "lossops.training.checkpoint"),
              ("lossops.converters.training", "lossops.training.errors"),
              ("lossops.converters.training", "lossops.training.export"),
              ("lossops.converters.training", "lossops.training.optimizers")}


def layer(module: str) -> str:
    """A module's layer: its subpackage (the kernels and the machine code are rooms of their own inside ort_ext),
    or "top" for the package's own modules (the CLI and the verbs that span layers)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "ort_ext" and parts[2] in ("kernels", "machine_code"):
        return f"ort_ext.{parts[2]}"
    return parts[1] if len(parts) > 1 and parts[1] in MAY_IMPORT else "top"


def test_the_layers_are_the_package_s_folders():
    found = {layer(m) for m in modules()}
    assert found == {*MAY_IMPORT, "top"}, found


def test_each_layer_imports_only_the_layers_below_it():
    wrong = sorted((a, b) for a, targets in edges().items() for b in targets
                   if layer(b) not in {layer(a), "top", *MAY_IMPORT.get(layer(a), MAY_IMPORT.keys())}
                   and (a, b) not in DEPRECATED)
    wrong += sorted((a, b) for a, targets in edges().items() for b in targets
                    if layer(a) != "top" and layer(b) == "top" and b != "lossops.extras")
    assert not wrong, "imports against docs/design.md's layers:\n" + "\n".join(f"{a} -> {b}" for a, b in wrong)


def test_the_kernels_source_imports_numpy_numba_and_the_standard_library_only():
    import ast

    allowed = {"numpy", "numba", "llvmlite", "lossops", *sys.stdlib_module_names}
    found = {}
    for name, path in modules().items():
        if layer(name) != "ort_ext.kernels":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            roots = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found.update({root.split(".")[0]: name for root in roots if root.split(".")[0] not in allowed})
    assert not found, f"the kernels' source imports {found}"


def test_no_import_cycles():
    assert cycles(edges()) == []


def test_the_reader_sees_a_cycle_and_a_layer_crossing(tmp_path):
    """The checks above can fail: a two-module cycle and an opset module that imports ort_ext are found."""
    for folder in ("opset", "ort_ext"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "opset" / "a.py").write_text("from . import b\nfrom ..ort_ext import c\n")
    (tmp_path / "opset" / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "ort_ext" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                "    from ..opset import a\n")
    graph = edges(tmp_path)
    assert cycles(graph) == [["lossops.opset.a", "lossops.opset.b"]]
    assert "lossops.ort_ext.c" in graph["lossops.opset.a"] and not graph["lossops.ort_ext.c"]


def test_moved_names_still_work_for_one_release_and_say_where_they_went():
    from lossops import training

    with pytest.warns(DeprecationWarning, match="lossops.training.TrainingSession"):
        from lossops.ort_ext import TrainingSession
    assert TrainingSession is training.TrainingSession
    sys.modules.pop("lossops.converters.training", None)
    with pytest.warns(DeprecationWarning, match="lossops.converters.training is now lossops.training"):
        from lossops.converters.training import export_training_step, load_into_torch
    assert export_training_step is training.export_training_step and load_into_torch is training.load_into_torch
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from lossops.ort_ext import library_path  # not moved: the public way to the native library
    assert callable(library_path)
    done = subprocess.run([sys.executable, "-m", "lossops.ort_ext.aot", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "lossops.ort_ext.machine_code.aot" in done.stdout, done.stderr
    assert "python -m lossops.ort_ext.machine_code.aot" in done.stderr and "DeprecationWarning" in done.stderr
