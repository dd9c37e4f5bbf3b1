#!/usr/bin/env bash
# The real onnxruntime-cann wheel, in an environment of its own: it installs the same `onnxruntime` import
# package as plain onnxruntime, and its module is built against numpy 1.x (hence onnx 1.19, the oldest onnx
# whose Python schemas take shape-inference functions). lossops goes in without dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-cann
.venv-cann/bin/pip install -q "numpy<2" "onnx==1.19.1" "onnxruntime-cann==1.24.4" "numba>=0.68,<0.69"
.venv-cann/bin/pip install -q --no-deps -e .
timeout 900 .venv-cann/bin/python .ci/cann_check.py  # a hang must fail CI, not stall it
