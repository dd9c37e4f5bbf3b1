"""The suite in a host written in C (node_test_runner.c): ONNX Runtime's C API and lossops' native custom-op
library, no Python in the process, natively or, for another architecture, under qemu-user.

    python -m lossops.conformance.c_runner                        # this machine, this install's library
    python -m lossops.conformance.c_runner --arch aarch64 --kernels DIR --onnxruntime LIB --cpu kunpeng920

For aarch64 on an x86-64 machine: DIR holds an aarch64 build (`python -m lossops.ort_ext.machine_code.aot DIR --arch
aarch64`, or the aarch64 wheel's lossops/ort_ext/machine_code/prebuilt), LIB is an aarch64 libonnxruntime.so.1 (npm's
onnxruntime-node ships one; found on NODE_PATH where not given), and the program runs under qemu-aarch64 with
Debian's aarch64 C library. ONNX Runtime and lossops read /proc/cpuinfo to choose their code, and qemu-user
shows them the host's: the run mounts a /proc/cpuinfo of the CPU named by `--cpu` over it in a mount namespace
of its own (`unshare -m`, which needs root). Speed means nothing under emulation; results do.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from ..ort_ext.kernels.targets import ARCH, ARCHES
from ..ort_ext.machine_code import capi, library
from ..ort_ext.machine_code.loader import LIBRARIES
from .golden import DATA_DIR, load_all
from .runner import one_type_each
from .tolerance import compare

SOURCE = Path(__file__).with_name("node_test_runner.c")

# /proc/cpuinfo of the CPUs an emulated run can pretend to be (two cores each): the Features lines are what
# Linux reports on a Kunpeng 920 and on an ARMv8.0-A core without extensions (Cortex-A53's, less crc32).
CPUS = {
    "kunpeng920": ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma "
                   "dcpop asimddp asimdfhm", "0x48", "0x1", "0xd01"),
    "armv8": ("fp asimd evtstrm cpuid", "0x41", "0x0", "0xd03"),
}


def cpuinfo(cpu: str) -> str:
    """The /proc/cpuinfo text of one of CPUS."""
    features, implementer, variant, part = CPUS[cpu]
    return "".join(f"processor\t: {k}\nBogoMIPS\t: 200.00\nFeatures\t: {features}\nCPU implementer\t: {implementer}\n"
                   f"CPU architecture: 8\nCPU variant\t: {variant}\nCPU part\t: {part}\nCPU revision\t: 0\n\n"
                   for k in range(2))


def build(arch: str, out: Path) -> Path:
    """node_test_runner.c compiled for `arch` into `out`."""
    program = out / f"node_test_runner-{arch}"
    slots = [f"-DSLOT_{name}={slot}" for name, slot in (capi.SLOTS | capi.HOST_SLOTS).items()]
    subprocess.run([library.compiler(arch), "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-format-truncation", *slots,
                    "-o", str(program), str(SOURCE), "-ldl"], check=True)
    return program


def onnxruntime_library(arch: str) -> Path | None:
    """An ONNX Runtime shared library for `arch`: this machine's onnxruntime wheel's, or npm's onnxruntime-node
    (on NODE_PATH) for another architecture."""
    if arch == ARCH:
        import onnxruntime

        found = sorted((Path(onnxruntime.__file__).parent / "capi").glob("libonnxruntime.so*"))
        return found[-1] if found else None
    npm = {"x86_64": "x64", "aarch64": "arm64"}[arch]
    for root in filter(None, os.environ.get("NODE_PATH", "").split(os.pathsep)):
        found = sorted(Path(root).glob(f"onnxruntime-node/bin/napi-v*/linux/{npm}/libonnxruntime.so.1"))
        if found:
            return found[-1]
    return None


def why_not(arch: str) -> str:
    """Why the suite cannot run for `arch` here ("" where it can), in one line."""
    if arch == ARCH:
        return ""
    needs = []
    if shutil.which(f"qemu-{arch}") is None:
        needs.append(f"qemu-{arch} (Debian: qemu-user)")
    if not Path(f"/usr/{arch}-linux-gnu/lib").is_dir():
        debian = {"aarch64": "arm64", "x86_64": "amd64"}[arch]
        needs.append(f"the {arch} C library in /usr/{arch}-linux-gnu (Debian: libc6-dev-{debian}-cross)")
    if shutil.which("unshare") is None or os.geteuid() != 0:
        needs.append(f"root, for the mount namespace that shows ONNX Runtime an {arch} /proc/cpuinfo")
    return f"running {arch} code here needs {', '.join(needs)}" if needs else ""


def run(arch: str, kernels: Path, onnxruntime_lib: Path, cases: list[str], cpu: str = "kunpeng920",
        root: Path = DATA_DIR) -> tuple[str, dict[str, np.ndarray | str]]:
    """(the runner's first line: ONNX Runtime's version and the kernels lossops chose, {case: output or error})
    of the node-test cases named `cases` in `root`, in one process."""
    with tempfile.TemporaryDirectory(prefix="lossops-c-runner-") as work:
        work = Path(work)
        command = [str(build(arch, work)), str(onnxruntime_lib), str(kernels / library.FILE), str(work)]
        if arch != ARCH:
            (work / "cpuinfo").write_text(cpuinfo(cpu))
            command = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /proc/cpuinfo && exec "$@"',
                       str(work / "cpuinfo"), f"qemu-{arch}", "-L", f"/usr/{arch}-linux-gnu", *command]
        done = subprocess.run(command, input="".join(f"{_loadable(root / name, work)}\n" for name in cases),
                              capture_output=True,
                              text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"the C runner failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
        outputs: dict[str, np.ndarray | str] = {}
        for name in cases:
            error, result = work / f"{name}.error", work / f"{name}.pb"
            if error.is_file():
                outputs[name] = error.read_text()
            elif result.is_file():
                outputs[name] = numpy_helper.to_array(onnx.load_tensor(str(result)))
            else:
                outputs[name] = "no output"
        return done.stdout.splitlines()[0], outputs


def _loadable(case: Path, work: Path) -> Path:
    """The case's directory, or where its model needs the functions of operators without a kernel, a copy of
    it in `work` whose model carries them (what a C host loads: ort_ext.session.for_native_library)."""
    from ..ort_ext.session import for_native_library

    try:
        model = onnx.load(str(case / "model.onnx"))
    except Exception:  # the C host reports what it cannot read, as that case's error
        return case
    native = for_native_library(model)
    if native is model:
        return case
    copy = work / "with-functions" / case.name
    shutil.copytree(case, copy)
    onnx.save(native, str(copy / "model.onnx"))
    return copy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lossops.conformance.c_runner", description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default=ARCH, choices=list(ARCHES))
    parser.add_argument("--kernels", type=Path, default=LIBRARIES,
                        help="the directory of lossops_custom_ops.so and its kernel libraries (default: this "
                        "install's)")
    parser.add_argument("--onnxruntime", type=Path, help="libonnxruntime.so for --arch (default: see above)")
    parser.add_argument("--cpu", default="kunpeng920", choices=list(CPUS), help="the aarch64 CPU an emulated run shows")
    parser.add_argument("-k", dest="pattern", default="", help="only the cases whose names contain this")
    parser.add_argument("--sample", action="store_true", help="each case in one element type, the types in turn")
    args = parser.parse_args(argv)
    problem = why_not(args.arch)
    lib = args.onnxruntime or onnxruntime_library(args.arch)
    if not problem and lib is None:
        problem = f"no libonnxruntime.so for {args.arch} (--onnxruntime, or npm's onnxruntime-node on NODE_PATH)"
    if not problem and not (args.kernels / library.FILE).is_file():
        problem = f"no {library.FILE} in {args.kernels}"
    if problem:
        print(f"lossops: {problem}", file=sys.stderr)
        return 2
    goldens = [g for g in load_all() if args.pattern in g.name]
    goldens = one_type_each(goldens) if args.sample else goldens
    began = time.perf_counter()
    first, outputs = run(args.arch, args.kernels, lib, [g.name for g in goldens], args.cpu)
    failed = []
    for g in goldens:
        got = outputs[g.name]
        ok, _, message = (False, 0, got) if isinstance(got, str) else compare(
            got, g.expected, g.dtype, g.summed, g.slack, g.output_dtype)
        if not ok:
            failed.append(f"  {g.name}: {message}")
    emulated = f" under qemu-{args.arch} as {args.cpu}" if args.arch != ARCH else ""
    print(f"C host, {args.arch}{emulated}: {first}")
    for line in failed[:50]:
        print(line)
    print(f"C host, {args.arch}: {len(goldens) - len(failed)} passed, {len(failed)} failed "
          f"({time.perf_counter() - began:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
