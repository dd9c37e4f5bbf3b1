"""The kernels inside real processes: forked children, threads sharing a session, Ctrl-C in the middle of a
run, the session's thread setting, and interpreter exit with a run still in flight. Each scenario that could
hang or crash runs in a subprocess with a timeout, so that a failure is a failed test, not a stuck suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import onnxruntime
import pytest

from lossops.conformance.cases import node_model
from lossops.conformance.oracle import ORACLES
from lossops.ort_ext import InferenceSession
from lossops.ort_ext.kernels import targets
from lossops.ort_ext.machine_code import loader

LARGE = 3 * 10**5  # above the size at which the kernels split work over the session's threads


def _bcewl(n: int, seed: int = 0):
    r = np.random.default_rng(seed)
    x, t = (r.normal(size=n) * 3).astype(np.float32), r.uniform(size=n).astype(np.float32)
    return node_model("BinaryCrossEntropyWithLogits", [x, t, None, None], "float32", {"reduction": "mean"},
                      symbolic=True)


def _python(script: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=timeout)


def test_forked_child_runs_after_a_large_parent_run():
    """A child forked after the parent ran a large input (work split over threads) runs a large input too:
    the kernels keep no pool of their own that a fork would leave without its threads (the pre-compiled
    kernels had one, and such a child waited forever)."""
    done = _python("""
        import multiprocessing as mp, numpy as np
        from lossops.conformance.cases import node_model
        from lossops.ort_ext import InferenceSession
        r = np.random.default_rng(0)
        for op, inputs, attrs in [
            ("BinaryCrossEntropyWithLogits", [r.normal(size=300000).astype(np.float32),
                                              r.uniform(size=300000).astype(np.float32), None, None],
             {"reduction": "mean"}),
            ("BinaryCrossEntropyBackward", [r.normal(size=300000).astype(np.float32),
                                            r.uniform(0.1, 0.9, 300000).astype(np.float32),
                                            r.uniform(size=300000).astype(np.float32), None], {"reduction": "none"})]:
            model, feeds = node_model(op, inputs, "float32", attrs, symbolic=True)
            session = InferenceSession(model.SerializeToString())
            expected = session.run(None, feeds)[0]
            def child(queue):
                queue.put(session.run(None, feeds)[0])
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            p = ctx.Process(target=child, args=(queue,))
            p.start()
            got = queue.get(timeout=120)
            p.join(timeout=60)
            assert p.exitcode == 0, p.exitcode
            assert np.array_equal(got, expected), op
        print("forked children done")
    """)
    assert done.returncode == 0 and "forked children done" in done.stdout, done.stderr[-3000:]


def test_eight_threads_share_a_session():
    """Eight threads run one session at once, on large inputs of their own: each gets what the session gives
    when called alone, which is PyTorch's value."""
    model, _ = _bcewl(LARGE)
    session = InferenceSession(model.SerializeToString())
    inputs = []
    for k in range(8):
        r = np.random.default_rng(100 + k)
        inputs.append({"input": (r.normal(size=LARGE) * 3).astype(np.float32),
                       "target": r.uniform(size=LARGE).astype(np.float32)})
    alone = [session.run(None, f)[0] for f in inputs]
    for f, value in zip(inputs, alone, strict=True):
        reference = ORACLES["BinaryCrossEntropyWithLogits"](f["input"].astype(np.float64),
                                                            f["target"].astype(np.float64), reduction="mean")
        np.testing.assert_allclose(value, reference, rtol=2.0**-20)
    results: dict[int, list] = {k: [] for k in range(8)}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(10):
                results[k].append(session.run(None, inputs[k])[0])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for k in range(8):
        assert all(np.array_equal(r, alone[k]) for r in results[k])


def test_results_do_not_depend_on_the_thread_count():
    """The session's intra-op thread setting decides how many threads run the tasks (none of lossops' own);
    sums are combined in a fixed order, so 1, 2 and 4 threads give the same bits."""
    model, feeds = _bcewl(10**6)
    values = []
    for threads in (1, 2, 4):
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = threads
        values.append(InferenceSession(model.SerializeToString(), so).run(None, feeds)[0])
    assert values[0].tobytes() == values[1].tobytes() == values[2].tobytes()


def test_interrupted_runs_leave_later_runs_correct():
    """SIGINT lands while large runs are computing; Python raises KeyboardInterrupt when run() returns, and
    every later run still gives the right answer (with the earlier pool, 17 of 22 trials did not)."""
    done = _python("""
        import os, signal, threading, time, numpy as np
        from lossops.conformance.cases import node_model
        from lossops.ort_ext import InferenceSession
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal, however the runner was started
        r = np.random.default_rng(1)
        x, t = (r.normal(size=4000000) * 3).astype(np.float32), r.uniform(size=4000000).astype(np.float32)
        model, feeds = node_model("BinaryCrossEntropyWithLogits", [x, t, None, None], "float32",
                                  {"reduction": "none"}, symbolic=True)
        session = InferenceSession(model.SerializeToString())
        expected = session.run(None, feeds)[0]
        interrupted = 0
        for trial in range(20):  # one SIGINT per trial, wherever it lands
            timer = threading.Timer(0.001 * (trial % 10), os.kill, (os.getpid(), signal.SIGINT))
            try:
                timer.start()
                for _ in range(3):
                    session.run(None, feeds)
                timer.join()
            except KeyboardInterrupt:
                interrupted += 1
            while timer.is_alive():
                try:
                    timer.join()
                except KeyboardInterrupt:
                    pass
            assert np.array_equal(session.run(None, feeds)[0], expected), trial
        print("interrupted", interrupted, "of 20; later runs all correct")
    """)
    assert done.returncode == 0 and "later runs all correct" in done.stdout, done.stdout + done.stderr[-3000:]
    assert int(done.stdout.split("interrupted ")[1].split()[0]) >= 10  # the signal did land during runs


def test_main_thread_ends_while_a_worker_runs():
    """The main thread finishes while a (non-daemon) worker thread still runs large inputs: Python waits for
    it, and its runs, made while the interpreter begins to shut down, complete correctly (with the earlier
    pool they failed: "cannot schedule new futures after interpreter shutdown"). A daemon thread inside run()
    at exit is another matter: onnxruntime itself aborts then, with or without lossops (docs/design.md)."""
    done = _python("""
        import threading, numpy as np
        from lossops.conformance.cases import node_model
        from lossops.ort_ext import InferenceSession
        r = np.random.default_rng(2)
        x, t = (r.normal(size=2000000) * 3).astype(np.float32), r.uniform(size=2000000).astype(np.float32)
        model, feeds = node_model("BinaryCrossEntropyWithLogits", [x, t, None, None], "float32",
                                  {"reduction": "mean"}, symbolic=True)
        session = InferenceSession(model.SerializeToString())
        expected = session.run(None, feeds)[0]
        def work():
            values = [session.run(None, feeds)[0] for _ in range(20)]
            print("worker done", all(np.array_equal(v, expected) for v in values), flush=True)
        threading.Thread(target=work).start()
        print("main thread done", flush=True)
    """, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["main thread done", "worker done True"], done.stdout + done.stderr


@pytest.mark.parametrize("mode", ["kernels", "decomposition"])
def test_rank_beyond_numpy(mode):
    """ONNX has no rank limit; numpy's is 64, and so is the kernels': a rank-65 tensor (made by onnxruntime,
    numpy cannot) is refused with an error that names the operator and the input."""
    from lossops.conformance.cases import node_model as make

    model, _ = make("KlDivBackward", [np.ones((), np.float32), np.ones((1,) * 3, np.float32),
                                      np.ones((1,) * 3, np.float32)], "float32", {"reduction": "sum"}, symbolic=True)
    for v in (*model.graph.input[1:], model.graph.output[0]):  # any rank
        v.type.tensor_type.ClearField("shape")
    session = InferenceSession(model.SerializeToString(), mode=mode)
    big = onnxruntime.OrtValue.ortvalue_from_shape_and_type([1] * 65, np.float32)
    scalar = onnxruntime.OrtValue.ortvalue_from_numpy(np.ones((), np.float32))
    feeds = {"grad_output": scalar, "input": big, "target": big}
    if mode == "kernels":
        with pytest.raises(Exception, match="KlDivBackward: input 'input' has rank 65; the lossops kernels take at "
                                            "most 64 dimensions"):
            session.run_with_ort_values(None, feeds)
    else:  # onnxruntime itself takes it
        assert session.run_with_ort_values(None, feeds)[0].shape() == [1] * 65


def _read_only_run(script: str, kernels: str | None = None) -> subprocess.CompletedProcess:
    """`script` in a process that sees the lossops package and every home directory read-only, with HOME and
    NUMBA_CACHE_DIR unset (a container image built as root and run as another user): a private mount namespace
    with read-only bind mounts. Skipped, saying so, where this process may not make one (not root)."""
    import os
    import pwd
    import shutil
    from pathlib import Path

    import lossops

    package = str(Path(lossops.__file__).resolve().parent)
    homes = sorted({pwd.getpwuid(os.getuid()).pw_dir, os.path.expanduser("~")} - {"/"})
    binds = " && ".join(f"mount --bind -o ro {p} {p}" for p in [package, *homes] if os.path.isdir(p))
    probe = ["unshare", "-m", "sh", "-c", "mount --bind -o ro /tmp /tmp"]
    if shutil.which("unshare") is None or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip("making the package read-only needs `unshare -m` with CAP_SYS_ADMIN (root), absent here")
    env = {k: v for k, v in os.environ.items()
           if k not in ("HOME", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "LOSSOPS_KERNELS")}
    if kernels is not None:
        env["LOSSOPS_KERNELS"] = kernels
    command = f'{binds} && exec "$0" -c "$1"'
    return subprocess.run(["unshare", "-m", "sh", "-c", command, sys.executable, textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=600, env=env)


_KL_SUM = """
    import numpy as np
    from lossops.conformance.cases import node_model
    from lossops.ort_ext import InferenceSession
    from lossops.ort_ext.kernels import targets
    from lossops.ort_ext.machine_code import loader
    x, t = np.zeros((1, 4), np.float32), np.ones((3, 4), np.float32)
    model, feeds = node_model("KlDivBackward", [np.array(2.0, np.float32), x, t], "float32", {"reduction": "sum"})
    print(InferenceSession(model.SerializeToString()).run(None, feeds)[0].tolist(), loader.code().source)
"""


def _jit_notes(stderr: str) -> list[str]:
    """lossops' lines on stderr, less the JIT's 'compiling ...'/'compiled ...' progress lines."""
    return [line for line in stderr.splitlines() if line.startswith("lossops:")
            and not line.startswith(("lossops: compiling the kernels", "lossops: compiled "))]


@pytest.mark.skipif(not (loader.manifest() or {}).get("levels"),
                    reason="no prebuilt kernels in ort_ext/machine_code/prebuilt/ (CI copies the built wheel's there)")
def test_read_only_package_and_no_home_prebuilt():
    """With the wheel's machine code: nothing to compile, nothing to write, nothing to say (onnxruntime itself
    warns that it cannot persist its telemetry identifier under a read-only HOME)."""
    done = _read_only_run(_KL_SUM)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == f"[[-6.0, -6.0, -6.0, -6.0]] prebuilt {targets.cpu_levels()[-1]}\n", done.stdout
    assert "lossops" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_read_only_package_and_no_home():
    """The JIT with nothing writable but the temporary directory: import, session and run work, and the process
    says in one line that it compiles without a cache."""
    done = _read_only_run(_KL_SUM, kernels="jit")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[[-6.0, -6.0, -6.0, -6.0]] numba JIT"  # -t * g summed over the 3 rows
    notes = _jit_notes(done.stderr)
    assert len(notes) == 1 and "no writable cache directory" in notes[0], done.stderr[-3000:]


def test_damaged_compile_cache_entries_are_compiled_again(tmp_path):
    """A truncated, a garbage and a foreign data file (another entry's, with its checksum) and a truncated index
    in the compile cache: the next process warns once, compiles those entries again and computes the same
    results; the one after it loads everything silently. (Before: an unpickling error at every session
    creation, or a crash on foreign machine code.)"""
    import os
    import shutil

    cache = tmp_path / "cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "LOSSOPS_KERNELS": "jit"}
    script = textwrap.dedent("""
        import numpy as np
        from lossops.conformance.cases import node_model
        from lossops.ort_ext import InferenceSession
        from lossops.ort_ext.arrays import run
        g, x, t = np.array(2.0, np.float32), np.zeros((1, 4), np.float32), np.ones((3, 4), np.float32)
        model, feeds = node_model("KlDivBackward", [g, x, t], "float32", {"reduction": "sum"})
        print(InferenceSession(model.SerializeToString()).run(None, feeds)[0].tolist(),
              run("KlDivBackward", [g, x, t], reduction="sum").tolist())
    """)

    def python() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)

    first = python()
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.split() == ["[[-6.0,"] + ["-6.0,"] * 2 + ["-6.0]]", "[[-6.0,"] + ["-6.0,"] * 2 + ["-6.0]]"]
    data = sorted(cache.rglob("*.nbc"), key=lambda p: p.stat().st_size)
    index = sorted(cache.rglob("*.nbi"))
    assert len(data) >= 4 and len(index) >= 4 and all(p.with_name(p.name + ".sha256").exists() for p in data)
    data[-1].write_bytes(data[-1].read_bytes()[: data[-1].stat().st_size // 2])  # truncated
    data[-2].write_bytes(os.urandom(4096))  # garbage
    shutil.copyfile(data[-4], data[-3])  # another entry's machine code, with its checksum, in this one's place
    shutil.copyfile(data[-4].with_name(data[-4].name + ".sha256"), data[-3].with_name(data[-3].name + ".sha256"))
    index[0].write_bytes(index[0].read_bytes()[:20])  # a truncated index
    second = python()
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout == first.stdout
    notes = _jit_notes(second.stderr)
    assert len(notes) == 1 and "ignored a damaged compile-cache entry" in notes[0], second.stderr[-3000:]
    third = python()
    assert third.returncode == 0 and third.stdout == first.stdout
    assert "lossops:" not in third.stderr, third.stderr[-3000:]


def test_entries_compiled_by_different_processes_load_together(tmp_path):
    """Two processes each compile one operator into a fresh compile cache; a third loads both entries and must
    compute what each process computed. (Before: numba names its functions per process, so the two operators'
    task closures could carry one name, and the third process ran the first one's body for the second: NaN.)"""
    import os

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "LOSSOPS_KERNELS": "jit"}
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from lossops.ort_ext.arrays import run
        r = np.random.default_rng(0)
        x, t = r.normal(size=3000), r.uniform(size=3000)
        inputs = {"KlDivBackward": [x, np.log(r.uniform(0.1, 1, 3000)), t], "MseLoss": [x, t]}
        for op in sys.argv[1:]:  # one element type: each compiles once per operator and type (a minute of CI each)
            for reduction in ("none", "mean"):
                out = run(op, inputs[op], reduction=reduction)
                print(op, reduction, out.tobytes().hex()[:64], np.isfinite(out).all())
    """)

    def python(*ops: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", script, *ops], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)

    alone = [python("KlDivBackward"), python("MseLoss")]  # at once, into one cache
    outputs = [p.communicate(timeout=600) for p in alone]
    assert all(p.returncode == 0 for p in alone), [err[-3000:] for _, err in outputs]
    together = python("KlDivBackward", "MseLoss")
    out, err = together.communicate(timeout=600)
    assert together.returncode == 0, err[-3000:]
    assert "compiling" not in err, err[-3000:]  # both entries loaded from the cache
    assert out.splitlines() == outputs[0][0].splitlines() + outputs[1][0].splitlines()
    assert all(line.endswith("True") for line in out.splitlines()), out
