"""``njit`` with an on-disk cache that never stops a kernel from running (all three papers' kernels).

numba's own ``cache=True`` creates its cache folder when the module is *imported* (so importing
``acl26.kernels`` made a folder) and fails the call when the cache cannot be written (a read-only or
full disk) or holds a damaged entry (a truncated index or data file raises from ``pickle`` deep in
numba). :func:`njit` here takes the same arguments and keeps the cache, but:

* the folder (``$NUMBA_CACHE_DIR``, else ``$ACL26_CACHE/numba``) is created only when a compiled
  kernel is first saved;
* a cache that cannot be written is skipped with a warning: the kernel is compiled and runs;
* a damaged entry is dropped with a warning and the kernel recompiled (and saved afresh);
* an entry is stale when any file of ``acl26.kernels`` changed, not only the function's own file
  (numba compiles callees from other modules into their callers).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numba
from numba.core import caching
from numba.core.dispatcher import Dispatcher

log = logging.getLogger(__name__)


def cache_folder() -> Path:
    """Where the kernels' compiled code is cached (not created here)."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from acl26 import paths

    return paths.cache_root() / "numba"


class _Locator(caching.UserProvidedCacheLocator):
    """numba's user-provided-folder locator, made lazy: the folder is created on save, not at import."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = str(cache_folder() / self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        return cls(py_func, py_file)

    def get_source_stamp(self):
        """Every kernel file's name, mtime and size, not only the function's own file: numba compiles a
        callee from another module (and that module's constants) into the caller, so an edit there must
        invalidate the caller's entry too (else a stale entry can run with buffers of another layout)."""
        return _kernels_stamp()


def _kernels_stamp() -> tuple:
    root = Path(__file__).resolve().parent
    out = []
    for f in sorted(root.rglob("*.py")):
        st = f.stat()
        out.append((str(f.relative_to(root)), st.st_mtime_ns, st.st_size))
    return tuple(out)


class _Impl(caching.CompileResultCacheImpl):
    _locator_classes = [_Locator]


class _SafeCache(caching.FunctionCache):
    """A function cache whose faults cost a recompile, never the call."""

    _impl_class = _Impl

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:  # a damaged index or data file: pickle, EOF, OSError, a bad rebuild
            log.warning("numba cache of %s in %s is damaged (%s: %s); recompiling", self._py_func.__name__,
                        self._cache_path, type(exc).__name__, exc)
            self._drop()
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except Exception as exc:  # read-only, full disk, or an index damaged since
            log.warning("cannot save %s's compiled code to the numba cache %s (%s: %s); it runs uncached",
                        self._py_func.__name__, self._cache_path, type(exc).__name__, exc)
            self._drop()

    def _drop(self) -> None:
        """Empty this function's index (its data files are then unreferenced and overwritten on save);
        remove it where it cannot be rewritten."""
        try:
            self._cache_file.flush()
        except Exception:  # noqa: BLE001 - read-only or full: then at least no damaged index stays
            try:
                os.unlink(self._cache_file._index_path)
            except OSError:
                pass


def njit(*args, cache: bool = False, **options):
    """``numba.njit`` with :class:`_SafeCache` when ``cache`` (see the module docstring)."""

    def wrap(func):
        disp = numba.njit(**options)(func)
        if cache and isinstance(disp, Dispatcher):  # NUMBA_DISABLE_JIT=1 gives back the plain function
            disp._cache = _SafeCache(disp.py_func)
        return disp

    if args and callable(args[0]) and len(args) == 1:
        return wrap(args[0])
    if args:
        raise TypeError("acl26.kernels._jit.njit takes keyword options only")
    return wrap
