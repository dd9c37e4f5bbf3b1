"""The CPUs the kernels' machine code is built for: each architecture (its LLVM triple, where /proc/cpuinfo lists
its features, its glibc baseline) and its levels (an LLVM CPU and features, and the CPU flags a level needs), and
which of them this CPU runs. A leaf: the kernels read `ARCH` for their per-machine choices, and the machine code
(ort_ext/machine_code/) builds and loads one library per level."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Level:
    """A build of the kernels for a family of CPUs: `arch` (platform.machine()'s name for it), LLVM's `cpu` name,
    the /proc/cpuinfo flags (x86-64) or Features (aarch64) it needs beyond the level below it, and the LLVM
    features it adds to the CPU name's own."""

    arch: str
    cpu: str
    needs: tuple[str, ...]
    features: str = ""


# The levels of each architecture, lowest first: a CPU runs a level when it has every flag of the level and of
# those below it. x86-64: the micro-architecture levels (the psABI's), then x86-64-v4 scheduled for AMD's Zen 4
# and 5. LLVM's generic x86-64-v4 prefers 256-bit vectors (Skylake-SP's tuning); the v4 libraries use the
# 512-bit registers, as numba's JIT does on an AVX-512 host that does not prefer 256 (Zen 4/5, Sapphire
# Rapids), where the loops with exp and log gain most. On Zen the generic schedule left the log loops of
# BinaryCrossEntropy behind the JIT (docs/speed.md); sse4a, which only AMD's CPUs have, marks a CPU with
# AVX-512 as a Zen 4 or later. aarch64: the ARMv8-A baseline (every 64-bit Arm Linux CPU), then Kunpeng 920
# (the host CPU of Ascend servers; LLVM's tsv110: ARMv8.2-A with half-precision arithmetic, dot products,
# crypto), which needs every feature Kunpeng 920's kernel reports.
LEVELS = {
    "x86-64-v2": Level("x86_64", "x86-64-v2", ("cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"),
                       "+cx16,+sahf,+popcnt,+sse3,+sse4.1,+sse4.2,+ssse3"),
    "x86-64-v3": Level("x86_64", "x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"),
                       "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave"),
    "x86-64-v4": Level("x86_64", "x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
                       "+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl,+evex512,-prefer-256-bit"),
    "znver4": Level("x86_64", "znver4", ("sse4a",)),
    "armv8-a": Level("aarch64", "generic", ("fp", "asimd")),
    "tsv110": Level("aarch64", "tsv110", ("aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp", "asimdhp",
                                          "asimdrdm", "jscvt", "fcma", "dcpop", "asimddp", "asimdfhm")),
}

class Arch(NamedTuple):
    """An architecture with machine code: its LLVM target triple, the line of /proc/cpuinfo that lists its
    features, and the glibc version of the wheel's baseline (manylinux_2_17) for the symbols glibc gave newer
    default versions since (pow, the dlopen family)."""

    triple: str
    cpuinfo_key: str
    glibc_baseline: str


ARCHES = {
    "x86_64": Arch("x86_64-unknown-linux-gnu", "flags", "GLIBC_2.2.5"),
    "aarch64": Arch("aarch64-unknown-linux-gnu", "Features", "GLIBC_2.17"),
}
ARCH = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())


def levels_of(arch: str = ARCH) -> list[str]:
    """The levels of `arch` (this process's by default), lowest first."""
    return [name for name, level in LEVELS.items() if level.arch == arch]


def llvm_features(level: str) -> str:
    """The LLVM feature string of a level: its own features and those of the levels below it."""
    names = levels_of(LEVELS[level].arch)
    return ",".join(LEVELS[n].features for n in names[:names.index(level) + 1] if LEVELS[n].features)


def cpu_levels(cpuinfo: str | None = None, arch: str = ARCH) -> list[str]:
    """The levels this CPU runs, lowest first (none off Linux x86-64 and aarch64). `cpuinfo` and `arch`: the
    text of a /proc/cpuinfo to read instead of this machine's, and its CPU's architecture."""
    if arch not in ARCHES:
        return []
    key = ARCHES[arch].cpuinfo_key
    try:
        if cpuinfo is None:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                  if line.split(":", 1)[0].strip() == key), [])
    have, levels = set(flags), []
    for level in levels_of(arch):
        if not have.issuperset(LEVELS[level].needs):
            break
        levels.append(level)
    return levels
