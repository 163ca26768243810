"""Plain-numpy twins of acl26.kernels.ternary.quantize."""

from __future__ import annotations

import numpy as np


def sparse_ternarize(W: np.ndarray, group_size: int | None = None):
    W = np.asarray(W)
    n_out, n_in = W.shape
    g = W.reshape(n_out, n_in // 4, 4)
    zero = np.argmin(np.abs(g), axis=2)  # first of the smallest |w|
    T = np.where(g < 0, -1, 1).astype(np.int8)
    np.put_along_axis(T, zero[..., None], 0, axis=2)
    T = T.reshape(n_out, n_in)
    gs = n_in if group_size is None else group_size
    kept = np.where(T != 0, np.abs(W).astype(np.float64), 0.0).reshape(n_out, n_in // gs, gs)
    sums = np.cumsum(kept, axis=2)[..., -1]  # left to right, as the kernel adds them
    scale = (sums / (3 * gs // 4)).astype(np.float32)
    return T, (scale[:, 0] if group_size is None else scale)


def sparse_split(W: np.ndarray):
    W = np.asarray(W, np.float32)
    n_out, n_in = W.shape
    g = W.reshape(n_out, n_in // 4, 4)
    keep = np.ones(g.shape, bool)
    np.put_along_axis(keep, np.argmin(np.abs(g), axis=2)[..., None], False, axis=2)  # first of the smallest |w|
    neg = g < 0
    T = np.where(keep, np.where(neg, -1.0, 1.0), np.where(neg, -0.0, 0.0)).astype(np.float32)  # zeroed -w: -0.0
    kept = np.where(keep, np.abs(g), 0.0).astype(np.float32)
    return T.reshape(n_out, n_in), kept.reshape(n_out, n_in)


def absmean_ternarize(W: np.ndarray):
    W = np.asarray(W)
    g = max(float(np.mean(np.abs(W.astype(np.float64)))), 1e-5)
    q = np.round(W.astype(np.float64) / g)  # half to even
    return np.minimum(np.maximum(q, -1), 1).astype(np.int8), np.float32(g)
