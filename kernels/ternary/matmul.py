"""The lookup-table GEMV and GEMM of the packed formats (:func:`gemv`, :func:`gemm`; :func:`prepare_gemv`, a
GEMV whose matrix is checked once), and the machine's streaming read bandwidth (:func:`read_bandwidth`), the bound
a decoder's bytes per token meet."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import prange

from acl26 import checks
from acl26.kernels._jit import njit
from acl26.kernels.ternary.formats import BLOCK_ROWS, FORMATS, PATTERNS_T, Layout, Packed, check_format
from acl26.kernels.ternary.pack import check_packed
from acl26.kernels.ternary.simd import lut_fill, lut_tile, simd_level

#: public functions of this module that are not kernels (no jitted core, so no numpy twin)
#: (read_bandwidth: a timing probe; prepare_gemv: gemv with its matrix fixed, the same jitted core and twin as gemv,
#: compared with gemv bit for bit in tests/test_ternary.py)
NOT_KERNELS = ("read_bandwidth", "prepare_gemv")

GEMM_TILE = 4  # activation columns sharing one pass over the codes in GEMM
GEMV_BLOCKS = 2  # blocks sharing one pass over the tables in GEMV (independent accumulators)


def gemv(fmt: str, packed: Packed, scale: np.ndarray, x: np.ndarray, *, parallel: bool = True,
         simd: str | None = None) -> np.ndarray:
    """``y = scale * (T @ x)`` for a matrix ``T`` packed in ``fmt`` ("sherry", "tl2" or "i2") and
    float32 activations ``x`` of shape ``(n_in,)``; ``y`` is float32 ``(n_out,)``. NaN or inf in
    ``scale`` or ``x`` (after the cast to float32) raises.

    ``scale`` has shape ``()``, ``(n_out,)`` or ``(n_out, n_groups)`` (see the module docstring).
    ``parallel=False`` runs on one thread; ``simd`` picks a lower SIMD path.
    """
    return _matmul(fmt, packed, scale, x, parallel, simd, vector=True)


def prepare_gemv(fmt: str, packed: Packed, scale: np.ndarray, *, parallel: bool = True,
                 simd: str | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`gemv` with its matrix fixed: ``fmt``, ``packed`` and ``scale`` are checked (as :func:`gemv`
    checks them, the same ValueErrors) and copied once, so a later change to the caller's arrays does not
    reach the product. Returns ``f(x)``, which checks ``x`` as :func:`gemv` does and returns
    ``gemv(fmt, packed, scale, x, parallel=parallel, simd=simd)`` as it was at preparation, bit for bit.

    For timing one product the way a peer's prepared graph is timed (llama.cpp's ``test-backend-ops perf``
    checks its tensors before the timed loop): :func:`gemv`'s checks of the matrix and its scale cost about
    15 us per call (AMD EPYC, 1536 x 1536: 38 against 21 us), a quarter to a half of a decode step's product.
    """
    lay, prep = _prepare(fmt, packed, scale, simd, copy=True)

    def product(x: np.ndarray) -> np.ndarray:
        return _run(lay, prep, x, parallel, vector=True)

    return product


def gemm(fmt: str, packed: Packed, scale: np.ndarray, X: np.ndarray, *, parallel: bool = True,
         simd: str | None = None) -> np.ndarray:
    """``Y = (scale * T) @ X.T`` of shape ``(batch, n_out)`` for activations ``X`` of shape
    ``(batch, n_in)`` and a matrix ``T`` packed in ``fmt``; as :func:`gemv` otherwise."""
    return _matmul(fmt, packed, scale, X, parallel, simd, vector=False)


def _scale_rows(scale, lay: Layout, G: int) -> np.ndarray:
    """The scale as float32 ``(rows, n_segments)``; checks that scale groups cover whole pairs and
    that it is finite (in float32)."""
    s = np.asarray(scale)
    if s.dtype.kind != "f":
        raise ValueError(f"scale must be float, got dtype {s.dtype}")
    if s.dtype != np.float32 and not np.isfinite(s).all():  # before the cast, which would warn of an overflow
        raise ValueError("scale must be finite in float32 (no NaN or inf)")
    if s.ndim == 0 or s.shape == (1,):
        out = np.full((lay.rows, 1), s.reshape(()), np.float32)
    elif s.ndim == 1 and s.shape[0] == lay.rows:
        out = np.ascontiguousarray(s.reshape(-1, 1), dtype=np.float32)
    elif s.ndim == 2 and s.shape[0] == lay.rows and s.shape[1] >= 1:
        nseg = s.shape[1]
        if lay.cols % nseg or (nseg > 1 and (lay.cols // nseg) % (2 * G)):
            raise ValueError(f"scale: {nseg} groups per row of {lay.cols} inputs must each cover whole pairs "
                             f"of {G}-weight groups (group_size a multiple of {2 * G})")
        out = np.ascontiguousarray(s, dtype=np.float32)
    else:
        raise ValueError(f"scale must have shape (), ({lay.rows},) or ({lay.rows}, n_groups), got {s.shape}")
    if not np.isfinite(out).all():
        raise ValueError("scale must be finite in float32 (no NaN or inf)")
    return out


def _matmul(fmt, packed, scale, X, parallel, simd, vector):
    lay, prep = _prepare(fmt, packed, scale, simd, copy=False)
    return _run(lay, prep, X, parallel, vector)


def _prepare(fmt, packed, scale, simd, copy):
    """The matrix's checked layout, and the kernel's arguments that do not depend on the activations: the
    pattern table, the code and sign streams, the scale rows, the SIMD level and the format's sign flag
    (``copy``: streams and scale rows copied, never the caller's arrays)."""
    check_format(fmt)
    lay = check_packed(fmt, packed)
    f = FORMATS[fmt]
    level = simd_level(simd)
    s = _scale_rows(scale, lay, f.group)
    own = (lambda a: np.array(a, order="C")) if copy else np.ascontiguousarray
    return lay, (PATTERNS_T[fmt], own(packed.codes), own(packed.signs), own(s), level, f.signed)


def _run(lay, prep, X, parallel, vector):
    """The product of a prepared matrix (:func:`_prepare`) and the activations ``X`` (checked here)."""
    PT, codes, signs, s, level, signed = prep
    name = "x" if vector else "X"
    X = np.asarray(X)
    if X.ndim != (1 if vector else 2) or X.shape[-1] != lay.cols:
        want = f"({lay.cols},)" if vector else f"(batch, {lay.cols})"
        raise ValueError(f"{name} must have shape {want}, got {X.shape}")
    if X.dtype.kind != "f":
        raise ValueError(f"{name} must be float (float32 activations), got dtype {X.dtype}")
    if X.dtype == np.float32 and X.flags.c_contiguous:  # no cast, no copy (and no errstate: a few us a call)
        X2 = X[None] if vector else X
    else:
        with np.errstate(over="ignore", invalid="ignore"):  # a value beyond float32 becomes inf: refused just below
            X2 = np.ascontiguousarray(X[None] if vector else X, dtype=np.float32)
    if not np.isfinite(X2).all():
        raise ValueError(f"{name} must be finite in float32 (no NaN or inf)")
    Y = np.empty((X2.shape[0], lay.rows), np.float32)
    args = (X2, PT, codes, signs, s, Y, lay.pairs // s.shape[1], level, signed)
    (_matmul_par if parallel else _matmul_ser)(*args)
    return Y[0] if vector else Y


@njit(cache=True)
def _build_lut(X, PT, groups):
    """lut[c, 16*j + k] = sum_t P[k, t] * X[c, G*j + t], summed in t order from 0 (zeros past the row)."""
    G = PT.shape[0]
    xp = np.zeros(G * groups, np.float32)
    lut = np.empty((X.shape[0], 16 * groups), np.float32)
    for c in range(X.shape[0]):
        if X.shape[1] < G * groups:  # pad the last group(s) with zeros
            xp[:X.shape[1]] = X[c]
        else:
            xp = X[c]
        if G == 4:
            lut_fill(xp, PT, lut[c], groups, 4)
        elif G == 3:
            lut_fill(xp, PT, lut[c], groups, 3)
        else:
            lut_fill(xp, PT, lut[c], groups, 2)
    return lut


@njit(cache=True)
def _tile_rows(t, codes, signs, lut, scale, Y, seg_pairs, level, signed):
    """Y[:, rows of tile t]; a tile is GEMV_BLOCKS blocks, done in one pass for GEMV."""
    b0 = GEMV_BLOCKS * t
    b1 = min(b0 + GEMV_BLOCKS, codes.shape[0])
    if Y.shape[0] == 1 and b1 - b0 == GEMV_BLOCKS:
        _pass(b0, GEMV_BLOCKS, 0, 1, codes, signs, lut, scale, Y, seg_pairs, level, signed)
        return
    for b in range(b0, b1):
        for c0 in range(0, Y.shape[0], GEMM_TILE):
            if Y.shape[0] - c0 >= GEMM_TILE:
                _pass(b, 1, c0, GEMM_TILE, codes, signs, lut, scale, Y, seg_pairs, level, signed)
            else:
                for c in range(c0, Y.shape[0]):
                    _pass(b, 1, c, 1, codes, signs, lut, scale, Y, seg_pairs, level, signed)


@njit(cache=True)
def _pass(b, nb, c0, nc, codes, signs, lut, scale, Y, seg_pairs, level, signed):
    """Y[c0:c0+nc, rows of blocks b..b+nb-1] = sum over scale groups of scale * (lookup sums)."""
    out = np.empty(16 * nb * nc, np.float32)
    rows = Y.shape[1]
    for s in range(scale.shape[1]):
        p0 = s * seg_pairs
        if nb == GEMV_BLOCKS and nc == 1:
            lut_tile(codes, signs, lut, out, b, p0, seg_pairs, c0, level, signed, GEMV_BLOCKS, 1)
        elif nb == 1 and nc == GEMM_TILE:
            lut_tile(codes, signs, lut, out, b, p0, seg_pairs, c0, level, signed, 1, GEMM_TILE)
        else:
            lut_tile(codes, signs, lut, out, b, p0, seg_pairs, c0, level, signed, 1, 1)
        for q in range(nb):
            for c in range(nc):
                for i in range(min(BLOCK_ROWS, rows - BLOCK_ROWS * (b + q))):
                    r = BLOCK_ROWS * (b + q) + i
                    v = out[16 * (q * nc + c) + i] * scale[r, s]
                    Y[c0 + c, r] = v if s == 0 else Y[c0 + c, r] + v


@njit(cache=True, parallel=True)
def _matmul_par(X, PT, codes, signs, scale, Y, seg_pairs, level, signed):
    lut = _build_lut(X, PT, codes.shape[1] // 8)
    for t in prange(-(-codes.shape[0] // GEMV_BLOCKS)):
        _tile_rows(t, codes, signs, lut, scale, Y, seg_pairs, level, signed)


@njit(cache=True)
def _matmul_ser(X, PT, codes, signs, scale, Y, seg_pairs, level, signed):
    lut = _build_lut(X, PT, codes.shape[1] // 8)
    for t in range(-(-codes.shape[0] // GEMV_BLOCKS)):
        _tile_rows(t, codes, signs, lut, scale, Y, seg_pairs, level, signed)


# --------------------------------------------------------------------------------------------
# the memory limit: the machine's streaming read bandwidth, the bound a decoder's bytes per token meet


@njit(cache=True, parallel=True, fastmath=True)
def _stream_sum(a2, rows_per_task):
    # 64 independent float32 lanes per task: the loads vectorize and the adds never wait on each other
    # (a single running sum measured about 2/3 of the bandwidth torch's own sum reaches)
    n_tasks = (a2.shape[0] + rows_per_task - 1) // rows_per_task
    acc = np.zeros((n_tasks, 64), np.float32)
    for b in prange(n_tasks):
        v = np.zeros(64, np.float32)
        for r in range(b * rows_per_task, min(a2.shape[0], (b + 1) * rows_per_task)):
            for j in range(64):
                v[j] += a2[r, j]
        acc[b] = v
    return acc.sum()


def read_bandwidth(nbytes: int = 512 * 2**20, repeats: int = 7) -> dict:
    """The streaming read bandwidth of this machine on numba's current threads: a parallel sum over a
    float32 array of ``nbytes`` (rounded down to 256 bytes; far larger than the caches), timed
    ``repeats`` times after a warm-up. It reaches what torch's own sum and float32 GEMV read at.
    Returns ``{"gb_s": median, "runs": [GB/s per run], "bytes", "threads"}`` (GB = 1e9 bytes)."""
    import time

    import numba

    nbytes = checks.integer("nbytes", nbytes, 4 * 2**20)
    repeats = checks.integer("repeats", repeats, 1)
    a = np.ones((nbytes // 256, 64), np.float32)
    _stream_sum(a, 1024)  # compile and touch every page
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _stream_sum(a, 1024)
        runs.append(a.nbytes / (time.perf_counter() - t0) / 1e9)
    return {"gb_s": float(np.median(runs)), "runs": runs, "bytes": int(a.nbytes), "threads": numba.get_num_threads()}
