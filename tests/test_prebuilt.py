"""The machine code compiled ahead of time (ort_ext/machine_code/aot.py), as a wheel carries it: each x86-64 level
loads and passes the conformance suite inside onnxruntime; the best level this CPU runs computes bit for bit what
numba's JIT computes for that level; the choice follows the CPU's flags; and without machine code or numba the session
runs the decomposition, said in one line.

The libraries are in ort_ext/machine_code/prebuilt/ of a built wheel; CI copies the ones of the wheel it built into
the checkout (`python -m lossops.ort_ext.machine_code.aot ort_ext/machine_code/prebuilt` makes them here). Without
them the tests that load them are skipped, saying so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from lossops import opset
from lossops.ort_ext.kernels import targets
from lossops.ort_ext.machine_code import loader

_MANIFEST = loader.manifest()
_BUILT = _MANIFEST is not None and _MANIFEST.get("stamp") == loader.source_stamp()
needs_prebuilt = pytest.mark.skipif(
    not _BUILT, reason="no prebuilt kernels for these sources in ort_ext/machine_code/prebuilt/ "
    "(CI copies the built wheel's there; python -m lossops.ort_ext.machine_code.aot ort_ext/machine_code/prebuilt "
    "builds them)")

_OUTPUTS = """
    import sys, numpy as np
    from lossops.conformance import backends, golden
    from lossops.ort_ext.kernels import targets
    from lossops.ort_ext.machine_code import loader
    print(loader.code().source)
    if isinstance(loader.code(), loader.Jit):  # each operator's functions for all four types at once,
        # as the libraries hold them (ort_ext/machine_code/aot.py): the same code, and 8 compilations rather than 32
        per_type = loader.Jit.addresses
        loader.Jit.addresses = lambda self, op, kinds, elem_type=None: per_type(self, op, kinds)
    out = {}
    for g in golden.load_all():
        if set(sys.argv[2:]) >= {n.op_type for n in g.model.graph.node if n.domain == "lossops"}:
            out[g.name] = np.atleast_1d(backends.kernels(g.model, g.inputs)).ravel().view(np.uint8)
    np.savez(sys.argv[1], **out)
"""
# The operators the JIT comparison runs: numba compiling every operator again would take CI minutes, and how a
# library is made is the same for each. Between them these take every path the engine has (reductions, the sum
# back over broadcast axes, float16 and bfloat16 conversions) and call libm (pow).
JIT_COMPARED = ("KlDivBackward", "SigmoidFocalLoss")


def _run(script: str, *args: str, kernels: str | None = None, timeout: int = 900,
         **env_vars: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **env_vars)
    env.pop(loader.ENV, None)
    if kernels is not None:
        env[loader.ENV] = kernels
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _outputs(kernels: str, path, **env_vars: str) -> dict[str, np.ndarray]:
    done = _run(_OUTPUTS, str(path), *JIT_COMPARED, kernels=kernels, **env_vars)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = "numba JIT" if kernels == "jit" else f"prebuilt {kernels}"
    assert done.stdout.splitlines()[0] == expected
    return dict(np.load(path))


@pytest.mark.slow  # numba compiles operators for the comparison: minutes
@needs_prebuilt
def test_each_level_passes_the_suite_and_the_best_matches_the_jit_bit_for_bit(tmp_path):
    """Every level this CPU runs passes the suite's sample (each case form in one element type, the types taking
    turns, since a level differs from another in the instructions its code uses, which every form meets; the
    best level runs every case in tests/test_conformance.py, the checkout's kernels); the best computes
    JIT_COMPARED's cases bit for bit as numba's JIT does, compiling for that level (NUMBA_CPU_NAME/FEATURES): for
    this host's own CPU model numba's JIT rounds 15 float64 sums of the suite 1 ulp apart (LLVM's code for the
    model, not the level), and x86-64-v2 has no FMA (llvm.fmuladd rounds twice): the suite holds those to its
    tolerance."""
    from lossops.conformance import golden

    on_this_cpu = targets.cpu_levels()
    # a wheel carries every level (.ci/wheel.sh checks it); a checkout's tests build the best one (conftest.py)
    assert set(_MANIFEST["levels"]) <= set(targets.LEVELS) and on_this_cpu[-1] in _MANIFEST["levels"]
    best = on_this_cpu[-1]
    for level in _MANIFEST["levels"]:
        if level not in on_this_cpu:
            continue  # said in test_the_levels_this_cpu_runs
        suite = _run("from lossops.cli import main; raise SystemExit(main(['conformance', '--backend', 'kernels', "
                     "'--failures-only', '--sample']))", kernels=level)
        assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr[-2000:]
    jit = _outputs("jit", tmp_path / "jit.npz", NUMBA_CPU_NAME=best,
                   NUMBA_CPU_FEATURES=targets.llvm_features(best), NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    got = _outputs(best, tmp_path / f"{best}.npz")
    compared = {g.name for g in golden.load_all()
                if set(JIT_COMPARED) >= {n.op_type for n in g.model.graph.node if n.domain == opset.DOMAIN}}
    assert set(got) == set(jit) == compared and len(compared) > 200
    differ = sorted(name for name in jit if not np.array_equal(got[name], jit[name]))
    assert differ == [], f"{best} differs from the JIT in {len(differ)} cases: {differ[:5]}"


@needs_prebuilt
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm to list a library's symbols")
def test_a_library_exports_its_entry_points_only():
    """Each operator's five functions, the trampoline, the planner and the stamp; the stubs for numba's and
    CPython's symbols stay hidden, so they never stand in for a process's real ones."""
    expected = {f"lossops_{op}_{kind}" for op in _MANIFEST["ops"] for kind in loader.KINDS}
    expected |= {"lossops_trampoline", "lossops_plan", "lossops_stamp", "lossops_level"}
    for level, entry in _MANIFEST["levels"].items():
        listed = subprocess.run(["nm", "-D", "--defined-only", str(loader.LIBRARIES / entry["file"])],
                                capture_output=True, text=True, check=True).stdout
        assert {line.split()[-1] for line in listed.splitlines()} == expected, level


@needs_prebuilt
@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf to list relocations")
def test_a_library_calls_its_own_planner():
    """Every operator calls the planner by its symbol: bound inside the library when it is linked, so no planner
    of the same name loaded earlier in the process (another level's, another version's) can stand in."""
    for level, entry in _MANIFEST["levels"].items():
        relocations = subprocess.run(["readelf", "-r", "--wide", str(loader.LIBRARIES / entry["file"])],
                                     capture_output=True, text=True, check=True).stdout
        assert "lossops_plan" not in relocations, level


@needs_prebuilt
@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump to list versioned symbols")
def test_a_library_needs_only_the_manylinux_2_17_glibc():
    """The wheel is manylinux_2_17: no symbol from a newer glibc, in a kernel library or the native library (pow
    and memcpy are bound to their GLIBC_2.2.5 versions, fstat is not used: the defaults, GLIBC_2.29, 2.14 and
    2.33, made auditwheel refuse the wheel)."""
    for name in [entry["file"] for entry in _MANIFEST["levels"].values()] + [_MANIFEST["library"]["file"]]:
        listed = subprocess.run(["objdump", "-T", str(loader.LIBRARIES / name)], capture_output=True,
                                text=True, check=True).stdout
        versions = {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_([0-9.]+)\)", listed)}
        assert versions and max(versions) <= (2, 17), (name, sorted(versions))


@needs_prebuilt
@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump to disassemble a library")
def test_float16_is_converted_by_f16c_exactly_where_the_level_has_it():
    """ort_ext/machine_code/aot.py compiles numba's IR once for every level and sets kernels/halves.py's constant for
    each: the levels with F16C convert float16 with its instructions, x86-64-v2 with integer code (no libcall)."""
    for level, entry in _MANIFEST["levels"].items():
        code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(loader.LIBRARIES / entry["file"])],
                              capture_output=True, text=True, check=True).stdout
        f16c = "vcvtph2ps" in code and "vcvtps2ph" in code
        assert f16c == ("+f16c" in targets.llvm_features(level).split(",")), level
        assert "hf2" not in code, level  # compiler-rt's conversion functions: never called


@pytest.mark.skipif(targets.ARCH != "x86_64", reason="x86-64's flags (aarch64's Features: the test below)")
def test_the_levels_this_cpu_runs():
    """The levels come from /proc/cpuinfo's flags, each level needing the ones below it."""
    levels = targets.cpu_levels()
    with open("/proc/cpuinfo") as f:
        flags = set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())
    assert ("x86-64-v3" in levels) == ({"avx2", "fma", "bmi2", "f16c", "movbe"} <= flags and "x86-64-v2" in levels)
    assert ("x86-64-v4" in levels) == ({"avx512f", "avx512bw", "avx512vl"} <= flags and "x86-64-v3" in levels)
    assert ("znver4" in levels) == ("sse4a" in flags and "x86-64-v4" in levels)  # AMD's, with AVX-512: Zen 4+
    assert levels == targets.levels_of()[:len(levels)]


def test_the_build_backend_builds_every_architecture_with_machine_code(monkeypatch):
    """build_backend.py cannot import the package, so it lists the architectures again: the same ones, and an
    architecture named for a cross build that has no machine code is refused in one line."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    import build_backend

    assert build_backend.ARCHES == tuple(targets.ARCHES)
    monkeypatch.setenv("LOSSOPS_WHEEL_ARCH", "aarch64")
    assert build_backend.wheel_arch() == "aarch64"
    monkeypatch.setenv("LOSSOPS_WHEEL_ARCH", "riscv64")
    with pytest.raises(SystemExit, match="LOSSOPS_WHEEL_ARCH='riscv64': lossops compiles its kernels for x86_64, "
                       "aarch64"):
        build_backend.wheel_arch()
    monkeypatch.setenv("LOSSOPS_AOT", "0")
    assert build_backend.wheel_arch() is None


@pytest.mark.parametrize(("cpu", "without", "expected"), [
    ("kunpeng920", "", ["armv8-a", "tsv110"]), ("kunpeng920", "asimddp", ["armv8-a"]), ("armv8", "", ["armv8-a"]),
    ("armv8", "asimd", [])])
def test_the_aarch64_levels_of_a_cpuinfo(cpu, without, expected):
    """aarch64's /proc/cpuinfo lists `Features`: a Kunpeng 920 runs tsv110 code, a core that lacks one of its
    features (dot products here) the ARMv8-A baseline only, and a core without Advanced SIMD none."""
    from lossops.conformance.c_runner import cpuinfo

    text = cpuinfo(cpu).replace(f" {without} ", " ") if without else cpuinfo(cpu)
    assert targets.cpu_levels(text, "aarch64") == expected


@needs_prebuilt
def test_the_best_level_is_chosen_and_nothing_is_compiled_or_imported():
    done = _run("""
        import sys
        import numpy as np
        from lossops.ort_ext.kernels import targets
        from lossops.ort_ext.machine_code import loader
        from lossops.conformance.cases import node_model
        from lossops.ort_ext import InferenceSession
        x = np.linspace(-3, 3, 1000, dtype=np.float32)
        model, feeds = node_model("KlDivBackward", [x, x, x], "float32", {"reduction": "none"})
        InferenceSession(model.SerializeToString()).run(None, feeds)
        print(loader.code().source, "numba" in sys.modules, "torch" in sys.modules,
              "onnxruntime_extensions" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["prebuilt", targets.cpu_levels()[-1], "False", "False", "False"]
    assert done.stderr == ""


def test_without_machine_code_or_numba_the_decomposition_runs_said_once(tmp_path):
    """A platform without prebuilt code and without lossops[jit]: one line naming the extra, and the session
    runs the decomposition (numba hidden from the child)."""
    done = _run("""
        import sys
        sys.modules["numba"] = None  # what an import system without numba answers: not found
        import numpy as np
        from lossops.ort_ext.kernels import targets
        from lossops.ort_ext.machine_code import loader
        loader.LIBRARIES = loader.LIBRARIES.parent / "no-such-directory"
        from lossops.conformance.cases import node_model
        from lossops.ort_ext import InferenceSession, kernels_available
        x = np.linspace(0.1, 0.9, 10, dtype=np.float32)
        model, feeds = node_model("BinaryCrossEntropyBackward", [x, x, x], "float32", {"reduction": "none"})
        for _ in range(2):
            s = InferenceSession(model.SerializeToString())
            y = s.run(None, feeds)[0]
        print(kernels_available(), s.lossops_mode, float(np.abs(y).max()))
    """)
    assert done.returncode == 0, done.stderr
    available, mode, largest = done.stdout.split()
    assert (available, mode) == ("False", "decomposition") and float(largest) == 0.0
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "pip install 'lossops[jit]'" in lines[0] and "decomposition" in lines[0], lines


@needs_prebuilt
def test_a_library_from_other_sources_is_refused(tmp_path):
    """A manifest whose stamp is not the installed sources' (a half-upgraded install) is never loaded."""
    done = _run("""
        import json, shutil, sys
        from pathlib import Path
        from lossops.ort_ext.kernels import targets
        from lossops.ort_ext.machine_code import loader
        copy = Path(sys.argv[1]) / "prebuilt"
        shutil.copytree(loader.LIBRARIES, copy)
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["stamp"] = "0" * 64
        (copy / "manifest.json").write_text(json.dumps(manifest))
        loader.LIBRARIES = copy
        print(loader.code().source)
    """, str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "numba JIT"
    assert "built from other sources" in done.stderr


_DAMAGED = """
    import json, shutil, sys
    from pathlib import Path
    import numpy as np
    from lossops.ort_ext.kernels import targets
    from lossops.ort_ext.machine_code import loader
    copy = Path(sys.argv[1]) / "prebuilt"
    shutil.copytree(loader.LIBRARIES, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    best = targets.cpu_levels()[-1]
    library = copy / manifest["levels"][best]["file"]
    damage = sys.argv[2]
    if damage == "truncated":  # a half-written install: the loader would map past the file's end (SIGBUS)
        library.write_bytes(library.read_bytes()[:len(library.read_bytes()) // 2])
    elif damage == "another level":  # another level's library under this one's name, manifest updated to match
        other = next(level for level in manifest["levels"] if level != best)
        shutil.copy(copy / manifest["levels"][other]["file"], library)
        manifest["levels"][best] |= {k: manifest["levels"][other][k] for k in ("size", "sha256")}
    elif damage == "manifest a list":
        manifest = [manifest]
    elif damage == "manifest without levels":
        del manifest["levels"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    loader.LIBRARIES = copy
    from lossops.conformance.cases import node_model
    from lossops.ort_ext import InferenceSession
    x = np.linspace(0.1, 0.9, 1000, dtype=np.float32)
    model, feeds = node_model("BinaryCrossEntropyBackward", [x, x, x], "float32", {"reduction": "none"})
    print(InferenceSession(model.SerializeToString()).run(None, feeds)[0].shape, loader.code().source)
"""


@needs_prebuilt
@pytest.mark.parametrize(("damage", "said"), [
    ("truncated", "is damaged or replaced"),
    ("another level", "was built for"),
    ("manifest a list", "is not a lossops manifest"),
    ("manifest without levels", "is not a lossops manifest"),
])
def test_a_damaged_install_is_refused_in_one_line_and_the_kernels_still_run(tmp_path, damage, said):
    """What the loader meets in a broken install ends in one line and the fallback, never a signal: a truncated
    library, another level's library under this level's name, a malformed manifest. The fallback is the native
    library's: the next level the CPU runs where the install has one (a wheel), then numba (here, with it), then
    the decomposition."""
    if damage == "another level" and len(_MANIFEST["levels"]) < 2:
        pytest.skip("needs two levels in ort_ext/machine_code/prebuilt/ (a release wheel's four, .ci/run --full; a "
                    "checkout's tests and CI's wheel have one)")
    done = _run(_DAMAGED, str(tmp_path), damage)
    assert done.returncode == 0, done.stderr[-3000:]
    below = [level for level in targets.cpu_levels()[:-1] if level in _MANIFEST["levels"]]
    level_damaged = damage in ("truncated", "another level")
    expected = ["prebuilt", below[-1]] if level_damaged and below else ["numba", "JIT"]
    assert done.stdout.split()[-2:] == expected, done.stdout
    # one line says why; numba's own progress lines may follow where its cache is cold
    lines = [line for line in done.stderr.splitlines()
             if line.startswith("lossops:") and not line.startswith(("lossops: compiling the kernels of",
                                                                     "lossops: compiled "))]
    then = f"; trying {below[-1]}" if level_damaged and below else "; compiling them with numba instead"
    assert len(lines) == 1 and said in lines[0] and lines[0].endswith(then), done.stderr
    assert "Traceback" not in done.stderr


_LEVEL_BEYOND_THE_CPU = next((level for level in targets.levels_of() if level not in targets.cpu_levels()),
                             None)


@needs_prebuilt
@pytest.mark.skipif(_LEVEL_BEYOND_THE_CPU is None, reason="this CPU runs every level")
def test_an_override_naming_a_level_this_cpu_cannot_run_is_refused_in_one_line():
    """LOSSOPS_KERNELS=x86-64-v4 on a CPU without AVX-512 ended the process with SIGILL at the first call."""
    done = _run("""
        import numpy as np
        from lossops.ort_ext.kernels import targets
        from lossops.ort_ext.machine_code import loader
        from lossops.conformance.cases import node_model
        from lossops.ort_ext import InferenceSession
        x = np.linspace(0.1, 0.9, 1000, dtype=np.float32)
        model, feeds = node_model("BinaryCrossEntropyBackward", [x, x, x], "float32", {"reduction": "none"})
        print(InferenceSession(model.SerializeToString()).run(None, feeds)[0].shape, loader.code().source)
    """, kernels=_LEVEL_BEYOND_THE_CPU)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["prebuilt", targets.cpu_levels()[-1]]
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"lossops: LOSSOPS_KERNELS={_LEVEL_BEYOND_THE_CPU} refused: this CPU cannot run"), line


def test_jit_asked_for_without_numba_is_one_line():
    done = _run("""
        import sys
        sys.modules["numba"] = None
        import numpy as np
        from lossops.ort_ext.kernels import targets
        from lossops.ort_ext.machine_code import loader
        from lossops.conformance.cases import node_model
        from lossops.ort_ext import InferenceSession
        x = np.linspace(0.1, 0.9, 10, dtype=np.float32)
        model, feeds = node_model("BinaryCrossEntropyBackward", [x, x, x], "float32", {"reduction": "none"})
        InferenceSession(model.SerializeToString()).run(None, feeds)
        print(loader.code() and loader.code().source)
    """, kernels="jit")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0].startswith("lossops: LOSSOPS_KERNELS=jit, but numba is not installed")
