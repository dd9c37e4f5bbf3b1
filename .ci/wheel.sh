#!/usr/bin/env bash
# lossops as users install it: `python -m build` makes the sdist and the wheel from the sdist (numba compiles the
# kernels into it), auditwheel makes it a manylinux wheel, and the wheel goes into a fresh environment with its
# base dependencies only (no numba): every verb runs from another directory, with the package read-only and
# HOME unset, and four processes start at once. The wheel's libraries are copied into the checkout
# (ort_ext/machine_code/prebuilt/) as soon as it is built, where tests/test_prebuilt.py holds each level to the JIT
# and the conformance suite: after the file $WHEEL_COPY_AFTER exists where that is set (CI: after quick start 1, which
# must find no machine code), and then the file $WHEEL_COPIED is made where that is set.
set -euo pipefail
source "$(dirname "$0")/build_wheel.sh"  # sets root, work, tools and wheel
# the machine code, straight from the wheel (the tests wait for it; the install below takes a minute)
while [ -n "${WHEEL_COPY_AFTER:-}" ] && [ ! -e "$WHEEL_COPY_AFTER" ]; do sleep 2; done
rm -rf "$root/ort_ext/machine_code/prebuilt"
"$tools/python" - "$wheel" "$root/ort_ext/machine_code/prebuilt" <<'PY'
import pathlib, sys, zipfile
prefix, target = "lossops/ort_ext/machine_code/prebuilt/", pathlib.Path(sys.argv[2])
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in wheel.namelist():
        if name.startswith(prefix) and not name.endswith("/"):  # files (a zip may list directories too)
            path = target / name.removeprefix(prefix)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(wheel.read(name))
PY
echo "the wheel's machine code copied to ort_ext/machine_code/prebuilt/ for the tests"
if [ -n "${WHEEL_COPIED:-}" ]; then touch "$WHEEL_COPIED"; fi
python3 -m venv "$work/env"
"$work/env/bin/pip" install -q "$wheel"
"$work/env/bin/python" - "$wheel" <<'PY'
import importlib.util, os, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
libraries = sorted(n.removeprefix("lossops/ort_ext/machine_code/prebuilt/") for n in names if n.endswith(".so"))
print(f"wheel: {sys.argv[1].rsplit('/', 1)[-1]}, {len(names)} files; machine code: {', '.join(libraries)}")
from lossops.ort_ext.machine_code.library import FILE
from lossops.ort_ext.kernels.targets import levels_of  # the installed package's, for this machine
from lossops.ort_ext.machine_code.loader import level_file
levels = os.environ.get("LOSSOPS_WHEEL_LEVELS", "").split() or levels_of()  # the ones asked for, else every one
assert libraries == sorted([FILE] + [level_file(level) for level in levels]), libraries
assert "lossops/ort_ext/machine_code/prebuilt/manifest.json" in names
assert importlib.util.find_spec("numba") is None and importlib.util.find_spec("llvmlite") is None, "numba installed"
PY

echo "base install: $(du -sm "$work"/env/lib/python3*/site-packages | cut -f1) MB of site-packages (lossops $(du -sm "$work"/env/lib/python3*/site-packages/lossops | cut -f1) MB)"

cd "$work"  # not the checkout: only the installed package can be imported from here
lossops=("$work/env/bin/lossops")
run() {  # a verb must succeed, and print no traceback
  echo "+ lossops $*"
  "${lossops[@]}" "$@" 2> err.txt || { cat err.txt; exit 1; }
  if grep -q Traceback err.txt; then cat err.txt; exit 1; fi
}
site=$("$work/env/bin/python" -c "import lossops, pathlib; print(pathlib.Path(lossops.__file__).parent)")
read_only() {  # the command with the package directory read-only and HOME unset; nothing may be written there
  touch "$work/marker"
  if unshare -m sh -c "mount --bind -o ro /tmp /tmp" 2> /dev/null; then
    unshare -m sh -c "mount --bind -o ro '$site' '$site' && env -u HOME $*"
  else  # a private mount namespace needs root; the check below still says whether anything was written
    echo "(no unshare -m here: the package stays writable, HOME is unset)"
    env -u HOME "$@"
  fi
  if [ -n "$(find "$site" -newer "$work/marker" -print -quit)" ]; then echo "written under $site"; exit 1; fi
}
start=$(date +%s%N)
read_only "${lossops[@]}" demo --size 20000 --repeat 3 2> err.txt
echo "first lossops demo after install (package read-only, HOME unset): $(( ($(date +%s%N) - start) / 1000000 )) ms"
if grep -q "lossops\|Traceback" err.txt; then echo "it said something on stderr:"; cat err.txt; exit 1; fi
cat > one_node.py <<'PY'
import time
began = time.perf_counter()
import numpy as np
from lossops.conformance.cases import node_model
from lossops.ort_ext import InferenceSession
x = np.linspace(-3, 3, 1000, dtype=np.float32)
model, feeds = node_model("KlDivBackward", [x, x, x], "float32", {"reduction": "none"})
InferenceSession(model.SerializeToString()).run(None, feeds)
print(f"new process -> first result of a one-node model: {time.perf_counter() - began:.2f} s (after imports of python)")
PY
start=$(date +%s%N)
read_only "$work/env/bin/python" one_node.py
echo "the same, the whole process (package read-only, HOME unset): $(( ($(date +%s%N) - start) / 1000000 )) ms"
start=$(date +%s%N)
for i in 1 2 3 4; do (cd "$work" && mkdir -p "p$i" && cd "p$i" && "${lossops[@]}" demo --size 20000 --repeat 3 > out.txt 2>&1) & done
wait
echo "4 cold lossops demo processes started together: $(( ($(date +%s%N) - start) / 1000000 )) ms for all four"
library=$("$work/env/bin/python" -c "from lossops.ort_ext import library_path; print(library_path())")
cat > plain.py <<'PY'
# plain onnxruntime with the wheel's native library, no lossops in the process (any ONNX Runtime host's way)
import ctypes, sys
import numpy as np, onnxruntime as ort
from onnx import TensorProto, helper
node = helper.make_node("MseLoss", ["input", "target"], ["output"], domain="lossops", reduction="sum")
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.DOUBLE, [1000])
                                        for n in ("input", "target")],
                          [helper.make_tensor_value_info("output", TensorProto.DOUBLE, [])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("lossops", 1)],
                          ir_version=8)
options = ort.SessionOptions()
options.register_custom_ops_library(sys.argv[1])
x, y = np.linspace(-3, 3, 1000), np.cos(np.arange(1000.0))
got = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
    None, {"input": x, "target": y})[0]
assert abs(got - ((x - y) ** 2).sum()) <= 1e-12 * ((x - y) ** 2).sum(), got
assert not [m for m in sys.modules if m.startswith("lossops")]
choice = ctypes.CDLL(sys.argv[1]).lossops_library_choice
choice.restype = ctypes.c_char_p
print(f"plain onnxruntime {ort.__version__} with {sys.argv[1].rsplit('/', 1)[-1]} ({choice().decode()} kernels): "
      "MseLoss as numpy computes it")
PY
read_only "$work/env/bin/python" plain.py "$library"
run demo --size 20000 --repeat 3
run doctor
# the wheel's own code, on a sample: the checkout's tests run every case on the same libraries, copied from here
run conformance --failures-only --backend kernels --backend native --sample
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

