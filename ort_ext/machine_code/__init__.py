"""The kernels' machine code: how it is compiled (`compiled.py`, the entry points ONNX Runtime calls; `aot.py`,
the libraries a wheel carries; `cache.py`, numba's on-disk cache for the JIT), stamped (`stamp.py`), loaded
(`loader.py`: prebuilt, JIT or none, decided once per process), and the native custom-op library every ONNX
Runtime host registers (`library.py`, `custom_ops.c`), with the C interface it speaks (`capi.py`)."""
