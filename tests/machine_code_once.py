"""Machine code compiled once per checkout for the tests (tests/conftest.py): without it, every pytest worker
would have numba compile every operator for every element type it meets, each on its own. Where this CPU has an
x86-64 level, a C compiler and numba, the kernels of that level are compiled ahead of time into
ort_ext/machine_code/prebuilt/ (as a wheel carries them), where every worker loads them; later runs reuse them until a
source changes."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from lossops.ort_ext.kernels import targets
from lossops.ort_ext.machine_code import loader


def prepare(say) -> None:
    """Build the best level this CPU runs into ort_ext/machine_code/prebuilt/ unless it is there for these sources;
    `say` prints a line (at least every 30 seconds while the build runs)."""
    if os.environ.get(loader.ENV) or not targets.cpu_levels():
        return  # the tests run what was asked for, or the JIT where no level applies
    level = targets.cpu_levels()[-1]
    if not isinstance(loader.load_prebuilt(level), str):
        return
    if shutil.which(os.environ.get("CC", "cc")) is None or importlib.util.find_spec("numba") is None:
        say("lossops tests: no C compiler or no numba here, so no kernels compiled ahead of time: each worker "
            "compiles the ones it needs (where numba is installed)")
        return
    jobs = max(2, min(os.cpu_count() or 1, 4))
    say(f"lossops tests: compiling the kernels for {level} ahead of time, once for this checkout, {jobs} processes "
        "(minutes; later runs load them)")
    began = time.perf_counter()
    target = loader.LIBRARIES
    staging = Path(tempfile.mkdtemp(prefix="prebuilt-", dir=target.parent))
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(30):
            say(f"lossops tests: still compiling the kernels for {level} ({time.perf_counter() - began:.0f} s)")

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        subprocess.run([sys.executable, "-m", "lossops.ort_ext.machine_code.aot", str(staging), "--levels", level,
                        "--jobs", str(jobs)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        shutil.rmtree(target, ignore_errors=True)  # libraries of other sources or levels
        staging.rename(target)
    except subprocess.CalledProcessError as e:
        say(f"lossops tests: the ahead-of-time build failed, so the workers compile with numba: {e.stderr[-2000:]}")
    finally:
        done.set()
        shutil.rmtree(staging, ignore_errors=True)
    say(f"lossops tests: kernels for {level} ready in {time.perf_counter() - began:.0f} s")
