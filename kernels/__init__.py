"""acl26.kernels: the Numba kernels behind the book's three hot loops.

* :mod:`acl26.kernels.tokmerge` -- LoPT: find the lossless cut between two overlapping chunks.
* :mod:`acl26.kernels.ternary` -- Sherry: 3:4 ternary quantizer, 1.25-bit / 1.67-bit / 2-bit packing,
  lookup-table GEMV and GEMM.
* :mod:`acl26.kernels.dp_alloc` -- Alloc-MoE: the exact per-layer expert allocation under a budget
  (dynamic programming).

Each kernel is a public wrapper that validates shapes and dtypes, then calls a private
``@njit(cache=True)`` function. numba's on-disk cache needs a writable folder: unless
``NUMBA_CACHE_DIR`` is set, it goes to ``$ACL26_CACHE/numba`` (the package folder may be
read-only in a regular install).
"""

import os as _os
import sys as _sys

if "NUMBA_CACHE_DIR" not in _os.environ:
    from acl26 import paths as _paths

    _os.environ["NUMBA_CACHE_DIR"] = str(_paths.cache_dir() / "numba")
    if "numba" in _sys.modules:  # numba read its config already: make it see the new folder
        from numba.core import config as _config

        _config.reload_config()
