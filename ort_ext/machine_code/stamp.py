"""The stamp of the kernels' machine code: one hash over every source it is made from. A prebuilt library
(loader.py) or a compile-cache entry (cache.py) whose stamp is not the installed sources' is never used."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]  # the lossops package (the repository root in a checkout)
# everything the machine code is made from: the kernels (engine, tiles, target facts), the operator records, the
# compiled ORT callbacks and the OrtApi slots they call, how a library is built, and the native custom-op library
# with its generator and the loader's words it carries
SOURCES = ("ort_ext/kernels/**/*.py", "opset/**/*.py", *(f"ort_ext/machine_code/{name}" for name in (
    "compiled.py", "capi.py", "aot.py", "custom_ops.c", "library.py", "loader.py")))


@functools.cache
def source_stamp() -> str:
    """A hash over every source the compiled code is made from: a prebuilt library or a cache entry whose
    stamp differs was made from other sources and is never used."""
    digest = hashlib.sha256()
    for pattern in SOURCES:
        for path in sorted(PACKAGE.glob(pattern)):
            digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


source_stamp()  # now, as the modules are imported: an upgrade under a running process must not pair the old
# Python (the record's layout) with the new machine code
