#!/usr/bin/env bash
# lossops as users install it: `python -m build` makes the sdist and the wheel (from the sdist), the wheel goes
# into a fresh environment with its base dependencies only, and every verb runs from another directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$root/.venv/bin/python" -m build --outdir "$work/dist" "$root" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
python3 -m venv "$work/env"
"$work/env/bin/pip" install -q "$work"/dist/*.whl
"$work/env/bin/python" - "$work"/dist/*.whl <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
print(f"wheel: {sys.argv[1].rsplit('/', 1)[-1]}, {len(names)} files")
EOF

cd "$work"  # not the checkout: only the installed package can be imported from here
lossops=("$work/env/bin/lossops")
run() {  # a verb must succeed, and print no traceback
  echo "+ lossops $*"
  "${lossops[@]}" "$@" 2> err.txt || { cat err.txt; exit 1; }
  if grep -q Traceback err.txt; then cat err.txt; exit 1; fi
}
run demo --size 20000 --repeat 3
run doctor
run conformance --failures-only
run check lossops_demo.onnx
run lower lossops_demo.onnx -o lowered.onnx
run bench --quick
needs_extra() {  # a verb that needs an optional dependency: one line naming the extra, a failing exit status
  local extra=$1; shift
  echo "+ lossops $* (expected to fail without lossops[$extra])"
  if "${lossops[@]}" "$@" 2> err.txt; then echo "it ran without lossops[$extra]"; exit 1; fi
  cat err.txt
  [ "$(wc -l < err.txt)" -eq 1 ] && grep -q "pip install 'lossops\[$extra\]'" err.txt
}
needs_extra script fuse lossops_demo.onnx -o fused.onnx
needs_extra train train-demo --steps 2
echo "wheel install: every verb ran from $work"
