"""Sherry's quantizers: the 3:4 Sparse-AbsMean quantizer and BitNet b1.58's absmean ternary quantizer
(tie-breaks and summation order in :mod:`acl26.kernels.ternary`'s docstring)."""

from __future__ import annotations

import numpy as np
from numba import prange

from acl26 import checks
from acl26.kernels._jit import njit


def sparse_ternarize(W: np.ndarray, group_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sherry's 3:4 quantizer (Sparse-AbsMean): ``(T, scale)`` with ``W ~ scale * T``.

    ``W`` is ``(n_out, n_in)`` float with ``n_in % 4 == 0``. ``T`` is int8 with exactly one zero in
    every group of 4 along the last axis; ``scale`` is float32 ``(n_out,)`` or, with ``group_size``,
    ``(n_out, n_in // group_size)``. Tie-break: see the module docstring. NaN or inf in ``W`` raises.
    """
    W = np.asarray(W)
    if W.ndim != 2 or W.dtype.kind != "f" or W.size == 0:
        raise ValueError(f"W must be a non-empty 2-D float array, got shape {W.shape} dtype {W.dtype}")
    n_out, n_in = W.shape
    if n_in % 4:
        raise ValueError(f"W: the input dimension (last axis) must be a multiple of 4, got {n_in}")
    gs = n_in if group_size is None else checks.integer("group_size", group_size, 1)
    if gs <= 0 or gs % 4 or n_in % gs:
        raise ValueError(f"group_size must be a positive multiple of 4 dividing {n_in}, got {group_size}")
    if not np.isfinite(W).all():
        raise ValueError("W must be finite (no NaN or inf)")
    if W.dtype not in (np.float32, np.float64):
        W = W.astype(np.float32)
    W = np.ascontiguousarray(W)
    T = np.empty(W.shape, np.int8)
    sums = np.zeros((n_out, n_in // gs), np.float64)
    _sparse_ternarize(W, T, sums, gs)
    scale = (sums / (3 * gs // 4)).astype(np.float32)
    return T, (scale[:, 0].copy() if group_size is None else scale)


@njit(cache=True, inline="always")
def _zeroed(W, r, c):
    """The place (0-3) of the weight the 3:4 quantizer zeroes in the group ``W[r, c:c + 4]``: the smallest |w|, the
    first of tied ones."""
    zero = 0
    low = abs(W[r, c])
    for k in range(1, 4):
        if abs(W[r, c + k]) < low:
            low = abs(W[r, c + k])
            zero = k
    return zero


@njit(cache=True, parallel=True)
def _sparse_ternarize(W, T, sums, gs):
    for r in prange(W.shape[0]):
        for j in range(W.shape[1] // 4):
            c = 4 * j
            zero = _zeroed(W, r, c)
            for k in range(4):
                w = W[r, c + k]
                if k == zero:
                    T[r, c + k] = 0
                else:
                    T[r, c + k] = -1 if w < 0 else 1
                    sums[r, c // gs] += np.float64(abs(w))


def sparse_split(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 3:4 quantizer's two arrays before any sum, in one pass: ``(T, kept)``, both float32 ``(n_out, n_in)``.

    ``T`` is :func:`sparse_ternarize`'s ternary matrix as float32 (the same zero on the same tie-break), its
    zeros signed as ``w``'s (-0.0 where the zeroed weight is negative, as ``sign * 0`` gives); ``kept`` is
    ``|w|`` where ``T`` keeps the weight and +0.0 where it zeroes it. A caller sums ``kept`` in its own order
    for the scale (Sherry's QAT, :func:`acl26.papers.sherry.qat.sparse34`, sums it as torch does, so its
    result is bit for bit the one it computed with torch ops alone). ``W`` is a C-contiguous 2-D float32
    array with ``n_in % 4 == 0``; NaN or inf raises."""
    if not isinstance(W, np.ndarray) or W.ndim != 2 or W.dtype != np.float32 or W.size == 0:
        raise ValueError(f"W must be a non-empty 2-D float32 array, got {getattr(W, 'shape', None)} "
                         f"{getattr(W, 'dtype', type(W).__name__)}")
    if W.shape[1] % 4:
        raise ValueError(f"W: the input dimension (last axis) must be a multiple of 4, got {W.shape[1]}")
    W = np.ascontiguousarray(W)
    T = np.empty(W.shape, np.float32)
    kept = np.empty(W.shape, np.float32)
    if not _sparse_split(W, T, kept):
        raise ValueError("W must be finite (no NaN or inf)")
    return T, kept


@njit(cache=True, parallel=True)
def _sparse_split(W, T, kept):
    bad = 0
    for r in prange(W.shape[0]):
        for j in range(W.shape[1] // 4):
            c = 4 * j
            zero = _zeroed(W, r, c)
            for k in range(4):
                w = W[r, c + k]
                if not np.isfinite(w):
                    bad += 1
                if k == zero:
                    T[r, c + k] = np.float32(-0.0) if w < 0 else np.float32(0.0)
                    kept[r, c + k] = np.float32(0.0)
                else:
                    T[r, c + k] = np.float32(-1.0) if w < 0 else np.float32(1.0)
                    kept[r, c + k] = abs(w)
    return bad == 0


def absmean_ternarize(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BitNet b1.58's quantizer: ``T = clip(round(W / g), -1, 1)``, ``g = max(mean|W|, 1e-5)``.

    Returns int8 ``T`` and the per-tensor scale ``g`` as a float32 array of shape ``()``. Rounding
    is half to even (``torch.round``); the mean is taken in float64.
    """
    W = np.asarray(W)
    if W.ndim != 2 or W.dtype.kind != "f" or W.size == 0:
        raise ValueError(f"W must be a non-empty 2-D float array, got shape {W.shape} dtype {W.dtype}")
    if not np.isfinite(W).all():
        raise ValueError("W must be finite (no NaN or inf)")
    g = max(float(np.abs(W, dtype=np.float64).mean()), 1e-5)
    T = np.clip(np.rint(W.astype(np.float64) / g), -1, 1).astype(np.int8)
    return T, np.array(g, np.float32)
