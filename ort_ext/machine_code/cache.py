"""Where numba caches lossops' compiled code, and when that cache is stale.

numba keys a cached function on a hash of its own source file only. lossops' compiled functions call
functions in other files (a kernel's loop in kernels/<operator>.py, the engine, the math, ORT's calls in
ort_ext/host.py, constants in opset/), so a change to a callee left old machine code in the cache of every
caller whose file did not change: during development that read fields at old offsets and crashed (seen),
and an upgrade of lossops that leaves a caller's file identical would do the same to users, since pip does
not remove numba's cache files. Here every lossops function's stamp is one hash over all the sources its
compiled code can depend on; any change to any of them recompiles everything.

numba's cache is also not safe for processes that write it at once: an index file maps each key (signature,
closure) to a data file named by a counter, with no lock, so two processes adding different keys can leave
one key pointing at the other's machine code (seen with pytest -n 2: a kernel returned another operator's
zeros). So lossops caches only its entry points (each operator's compiled ORT callbacks and its numpy entry
points: one signature each), compiles every helper into them, and gives each closure (an operator) index
files of its own: no index ever holds two keys, and two processes writing one write the same bytes.
Other packages' functions keep numba's own locators.

A cached entry point carries its callees' machine code with it, under their mangled names, which numba makes
unique only within a process (the qualified name plus a counter). Closures share a qualified name (each
operator's `_task_for.<locals>.task`), so two processes that compiled different operators could both name theirs
`task$12`; a third process loading both entries linked the second operator's calls to the first one's body, the
callees being weak symbols (seen: NaN and 1e36 from entries compiled by separate processes, each valid alone).
Each process therefore starts numba's counter at a random point of its own (`_own_names`): names from different
processes do not meet.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import os
import pickle
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

from numba.core import bytecode, caching

from . import stamp

_PACKAGE = stamp.PACKAGE


def source_hash() -> bytes:
    return bytes.fromhex(stamp.source_stamp())


def _ours(py_file: str) -> bool:
    try:
        return Path(py_file).resolve().is_relative_to(_PACKAGE)
    except OSError:
        return False


class _Stamped:
    """A numba locator whose source stamp covers all of lossops' compiled sources, whose files are the
    function's closure's own, for lossops' files only, and whose directory is the stamp's own."""

    def get_source_stamp(self):
        return source_hash()

    def get_cache_path(self):
        # numba writes an entry's index before its data file, and names data files by a counter that restarts
        # when the stamp changes: a process reading between another's two writes took the previous version's
        # machine code under the new stamp (seen under pytest -n 2 after an edit: garbage from the old record
        # layout). A directory per stamp holds no file of any other version.
        return os.path.join(super().get_cache_path(), f"lossops-{source_hash().hex()[:16]}")

    def get_disambiguator(self):
        cells = self._py_func.__closure__ or ()
        try:
            contents = pickle.dumps(tuple(c.cell_contents for c in cells))
        except Exception:  # unpicklable cells: fall back to their text
            contents = repr(tuple(c.cell_contents for c in cells)).encode()
        return f"{self._lineno}-{hashlib.sha256(contents).hexdigest()[:16]}"

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._py_func = py_func

    @classmethod
    def from_function(cls, py_func, py_file):
        return super().from_function(py_func, py_file) if _ours(py_file) else None


class InTree(_Stamped, caching.InTreeCacheLocator):
    """Next to the package, in __pycache__ (where the package directory is writable)."""


class UserWide(_Stamped, caching.UserWideCacheLocator):
    """In the user's cache directory, for installs whose package directory is read-only."""


class UserProvided(_Stamped, caching.UserProvidedCacheLocator):
    """In NUMBA_CACHE_DIR, when it is set (numba's own order: it wins)."""


def _remove_if_mine(path: str, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


class ProcessOnly(_Stamped, caching._CacheLocator):
    """Last resort, where no other locator can write (package read-only, HOME unset or read-only, no
    NUMBA_CACHE_DIR): a directory of this process's own, removed at exit. Nothing outlives the process, so
    every process compiles; it says so once."""

    _path: str | None = None

    def __init__(self, py_func, py_file):
        self._py_func = py_func
        self._lineno = py_func.__code__.co_firstlineno
        self._source_path = py_file

    def get_cache_path(self) -> str:  # a new directory per process: no other version's files in it
        if ProcessOnly._path is None:
            ProcessOnly._path = tempfile.mkdtemp(prefix="lossops-kernels-")
            atexit.register(_remove_if_mine, ProcessOnly._path, os.getpid())  # not a forked child's to remove
            print("lossops: no writable cache directory (the package is read-only and neither NUMBA_CACHE_DIR nor "
                  "a writable HOME is set): the kernels are compiled anew in this process", file=sys.stderr)
        return ProcessOnly._path

    @classmethod
    def from_function(cls, py_func, py_file):
        if not _ours(py_file):
            return None
        locator = cls(py_func, py_file)
        try:
            locator.ensure_cache_path()
        except OSError:
            return None
        return locator


# A damaged entry (truncated, garbage, another entry's file in its place) made every later session creation fail
# with an unpickling error, or crash on foreign machine code. lossops' entries carry a checksum over their data
# file's name and bytes, written after the data: a missing or wrong one is a miss (the entry is compiled and
# written again), never a load; an index that does not unpickle is an empty index.
_SUM = ".sha256"


def _is_ours(cache_file: caching.IndexDataCacheFile) -> bool:
    return os.path.basename(cache_file._cache_path).startswith("lossops-")  # a stamp's directory (_Stamped)


def _checksum(name: str, data: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\0" + data).digest()


def _damaged(what: str, error: Exception) -> None:
    if not _damaged.said:
        _damaged.said = True
        print(f"lossops: ignored a damaged compile-cache entry ({what}: {type(error).__name__}); compiling it again",
              file=sys.stderr)


_damaged.said = False
_numba_load_data = caching.IndexDataCacheFile._load_data
_numba_save_data = caching.IndexDataCacheFile._save_data
_numba_load_index = caching.IndexDataCacheFile._load_index


def _load_data(self, name):
    if not _is_ours(self):
        return _numba_load_data(self, name)
    path = self._data_path(name)
    with open(path, "rb") as f:  # an OSError here or below is a miss to numba's `load`
        data = f.read()
    with open(path + _SUM, "rb") as f:  # not there yet: another process is between its two writes
        expected = f.read()
    if _checksum(name, data) != expected:
        error = OSError(f"{path}: checksum mismatch")
        _damaged(name, error)
        raise error
    return pickle.loads(data)


def _save_data(self, name, data):
    _numba_save_data(self, name, data)
    if _is_ours(self):
        with open(self._data_path(name), "rb") as f:
            written = f.read()
        with self._open_for_write(self._data_path(name) + _SUM) as f:
            f.write(_checksum(name, written))


def _load_index(self):
    try:
        return _numba_load_index(self)
    except Exception as e:  # truncated or garbage: numba raised from pickle
        if not _is_ours(self):
            raise
        _damaged(os.path.basename(self._index_path), e)
        return {}


def _own_names() -> None:
    """Start numba's per-process function counter at a random multiple of 2**24 below 2**62 (a process compiles
    thousands of functions, not 2**24): two processes' names then coincide with probability about 2**-38."""
    bytecode.FunctionIdentity._unique_ids = itertools.count((1 + secrets.randbits(38)) << 24)


def install() -> None:
    """Put lossops' locators first in numba's list (idempotent), and take the source stamp now, as the
    modules are imported: a stamp taken at the first compile read files that may have changed since the
    process imported them (an upgrade under a running server, an edit under a test run), and stored the old
    code under the new stamp, where later processes loaded it (seen: a KL backward returning inf). Must run
    before any cached function of lossops is defined: compiled.py calls it on import."""
    source_hash()
    if not install.done:
        install.done = True
        _own_names()
        os.register_at_fork(after_in_child=_own_names)  # a forked child would count on from its parent's names
    classes = caching.CacheImpl._locator_classes
    for locator in (UserWide, InTree, UserProvided):  # inserted at 0 in reverse: UserProvided ends first
        if locator not in classes:
            classes.insert(0, locator)
    if ProcessOnly not in classes:
        classes.append(ProcessOnly)
    files = caching.IndexDataCacheFile
    files._load_data, files._save_data, files._load_index = _load_data, _save_data, _load_index


install.done = False
