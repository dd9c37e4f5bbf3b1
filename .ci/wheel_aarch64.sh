#!/usr/bin/env bash
# The aarch64 wheel, cross-built on this x86-64 machine as .ci/wheel.sh builds the x86-64 one (sdist, then the
# wheel from it, LOSSOPS_WHEEL_ARCH=aarch64: llvmlite's AArch64 target and Debian's aarch64-linux-gnu-gcc),
# made manylinux by auditwheel, and checked: its files, its tag, the ELF machine and glibc versions its libraries
# need. For the runs under qemu (.ci/run), in $1: prebuilt/, its machine code unpacked; root/, Debian's CPython
# 3.11 for arm64 (unpacked, not installed); site/, the wheel installed for that Python by pip, which resolves its
# dependencies' aarch64 wheels from the package index.
set -euo pipefail
out=$1
mkdir -p "$out/prebuilt" "$out/root"
LOSSOPS_WHEEL_ARCH=aarch64
export LOSSOPS_WHEEL_ARCH
source "$(dirname "$0")/build_wheel.sh"  # sets root, work, tools and wheel
"$tools/python" - "$wheel" "$out/prebuilt" <<'PY'
import sys, zipfile
from pathlib import Path
wheel, out = sys.argv[1], Path(sys.argv[2])
name = wheel.rsplit("/", 1)[-1]
archive = zipfile.ZipFile(wheel)
prebuilt = [n for n in archive.namelist()
            if n.startswith("lossops/ort_ext/machine_code/prebuilt/") and not n.endswith("/")]
assert sorted(n.rsplit("/", 1)[-1] for n in prebuilt) == ["lossops_custom_ops.so", "lossops_kernels-armv8-a.so",
                                                         "lossops_kernels-tsv110.so", "manifest.json"], prebuilt
for n in prebuilt:
    data = archive.read(n)
    (out / n.rsplit("/", 1)[-1]).write_bytes(data)
    if n.endswith(".so"):
        assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == 183, n  # EM_AARCH64
print(f"aarch64 wheel: {name}, {len(archive.namelist())} files; machine code unpacked into {out}")
PY
for so in "$out"/prebuilt/*.so; do  # nothing newer than the manylinux_2_17 baseline's glibc
    versions=$(aarch64-linux-gnu-objdump -T "$so" | grep -o "GLIBC_[0-9.]*" | sort -u | tr '\n' ' ')
    echo "$(basename "$so"): $versions"
    [ "$versions" = "GLIBC_2.17 " ] || { echo "needs glibc newer than 2.17"; exit 1; }
done
# the machine flags made for aarch64, not for this x86-64 build host: half conversions in ARMv8-A's vector
# instructions, and no non-temporal stores (the engine streams large outputs on x86-64 only)
for so in "$out"/prebuilt/lossops_kernels-*.so; do
    code=$(aarch64-linux-gnu-objdump -d --no-show-raw-insn "$so")
    halves=$(grep -cE "fcvt[ln]2?\s" <<< "$code" || true)
    streamed=$(grep -c "stnp" <<< "$code" || true)
    echo "$(basename "$so"): $halves vector half conversions, $streamed non-temporal stores"
    [ "$halves" -gt 0 ] && [ "$streamed" -eq 0 ] || exit 1
done

# aarch64 CPython and the wheel, installed as a user's pip installs it on such a machine
mkdir "$work/debs" && chmod a+x "$work" && chmod a+rwx "$work/debs"  # apt downloads as its own user
(cd "$work/debs" && apt-get download -q python3.11-minimal:arm64 libpython3.11-minimal:arm64 \
    libpython3.11-stdlib:arm64 libc6:arm64 libexpat1:arm64 zlib1g:arm64 libffi8:arm64 libssl3:arm64 \
    libbz2-1.0:arm64 liblzma5:arm64 libstdc++6:arm64 libgcc-s1:arm64 libuuid1:arm64 libsqlite3-0:arm64 > /dev/null)
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$out/root"; done
"$tools/pip" install -q --target "$out/site" --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64 "$wheel"
echo "aarch64 CPython $(ls "$out"/root/usr/bin/) and the wheel with its dependencies: $(ls "$out/site" | grep -c dist-info) distributions"
