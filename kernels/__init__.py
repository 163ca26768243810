"""acl26.kernels: the Numba kernels behind the book's hot loops.

* :mod:`acl26.kernels.tokmerge` -- LoPT: find the lossless cut between two overlapping chunks.
* :mod:`acl26.kernels.ternary` -- Sherry: 3:4 ternary quantizer, 1.25-bit / 1.67-bit / 2-bit packing,
  lookup-table GEMV and GEMM.
* :mod:`acl26.kernels.decode` -- Sherry: a LLaMA-architecture decode step fused into Numba calls (packed
  ternary or bf16 blocks, a bf16 or 8-bit head fused with the argmax).
* :mod:`acl26.kernels.dp_alloc` -- Alloc-MoE: the exact per-layer expert allocation under a budget
  (dynamic programming).

Each kernel is a public wrapper that validates shapes and dtypes, then calls jitted functions (private
to their module unless another kernel module calls them too; the SIMD intrinsics that several modules
share are :mod:`acl26.kernels.ternary.intrinsics`), compiled with :func:`acl26.kernels._jit.njit`
(``numba.njit`` with a cache that cannot fail a call). numba's on-disk cache goes to ``NUMBA_CACHE_DIR`` when it is set, else to
``$ACL26_CACHE/numba`` (the package folder may be read-only in a regular install). Importing this
package creates no folder: the cache folder is made when a compiled kernel is first saved, a cache
that cannot be written is skipped with a warning, and a damaged entry is recompiled.
"""

if __name__ == "kernels":  # pragma: no cover - exercised in a subprocess by tests/test_registry.py
    # Imported as the top-level ``kernels`` from the checkout's root (the working folder is on sys.path
    # under ``python -m`` / ``python -c`` / a notebook server started there). That name belongs to the
    # Hugging Face ``kernels`` distribution, which transformers imports when it is installed: hand the
    # import over to it. Where it is not installed, stay an empty module with no ``__file__``, the mark
    # of a namespace package that merely shadows the name: transformers (5.24 and older) imports the name
    # to probe for the package, counts such a module as absent, and would fail on an ImportError.
    import importlib.machinery as _machinery
    import importlib.util as _util
    import os as _os
    import sys as _sys

    _root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    _path = [p for p in _sys.path if _os.path.abspath(p or ".") != _root]
    _spec = _machinery.PathFinder.find_spec("kernels", _path)
    if _spec is None:
        __file__ = None  # see above: an absent package, not acl26.kernels
        __doc__ = ("Not a package: this checkout's kernels/ folder (acl26.kernels) imported under the top-level "
                   "name; the Hugging Face kernels package is not installed.")
        del _machinery, _util, _os, _sys, _root, _path, _spec
    else:
        _module = _util.module_from_spec(_spec)
        _sys.modules["kernels"] = _module  # the import statement returns this module
        _spec.loader.exec_module(_module)

