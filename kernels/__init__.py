"""acl26.kernels: the Numba kernels behind the book's three hot loops.

* :mod:`acl26.kernels.tokmerge` -- LoPT: find the lossless cut between two overlapping chunks.
* :mod:`acl26.kernels.ternary` -- Sherry: 3:4 ternary quantizer, 1.25-bit / 1.67-bit / 2-bit packing,
  lookup-table GEMV and GEMM.
* :mod:`acl26.kernels.dp_alloc` -- Alloc-MoE: the exact per-layer expert allocation under a budget
  (dynamic programming).

Each kernel is a public wrapper that validates shapes and dtypes, then calls a private jitted
function, compiled with :func:`acl26.kernels._jit.njit` (``numba.njit`` with a cache that cannot
fail a call). numba's on-disk cache goes to ``NUMBA_CACHE_DIR`` when it is set, else to
``$ACL26_CACHE/numba`` (the package folder may be read-only in a regular install). Importing this
package creates no folder: the cache folder is made when a compiled kernel is first saved, a cache
that cannot be written is skipped with a warning, and a damaged entry is recompiled.
"""
