"""The kernels' numba source: one tile loop per operator in `ops/` (`<operator in snake case>.py`, attached to its
record with `@kernel` and found by `registry.py`), and the engine every call runs through (`engine.py`: checks,
layout, tiles, tasks and reductions, on the record of `layout.py`), with the arithmetic it is written in
(`mathf.py`, `halves.py`, `native.py`) and the facts about the CPUs it is built for (`targets.py`).

This source imports only numpy, numba, the operator records (`lossops.opset`) and its own modules; it is compiled
into machine code by `ort_ext/machine_code/`, and it never calls into Python or ONNX Runtime at run time.
"""
