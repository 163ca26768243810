"""Plain-numpy twins of acl26.kernels.ternary.matmul: float32 sums in the order the docstring specifies,
so the kernels must match them bit for bit."""

from __future__ import annotations

import numpy as np

from naive.ternary.pack import GROUP, _first_nonzero_sign, _groups


def gemm(fmt: str, T: np.ndarray, scale, X: np.ndarray) -> np.ndarray:
    """(batch, rows): per group, +-(sum of the canonical weights times x, in order), summed in group order."""
    T = np.asarray(T)
    X = np.atleast_2d(np.asarray(X, np.float32))
    rows, cols = T.shape
    G = GROUP[fmt]
    g = _groups(fmt, T)
    s = np.ones(g.shape[:2], np.int64) if fmt == "i2" else _first_nonzero_sign(g)
    canon = (g * s[..., None]).astype(np.float32)
    ng = g.shape[1]
    sc = np.asarray(scale, np.float32)
    sc = np.broadcast_to(sc.reshape(-1, 1) if sc.ndim < 2 else sc, (rows, 1 if sc.ndim < 2 else sc.shape[1]))
    per_seg = ng // sc.shape[1]
    Y = np.zeros((X.shape[0], rows), np.float32)
    for c, x in enumerate(X):
        xp = np.zeros(ng * G, np.float32)
        xp[:cols] = x
        y = None
        for seg in range(sc.shape[1]):
            acc = np.zeros(rows, np.float32)
            for j in range(seg * per_seg, (seg + 1) * per_seg):
                v = np.zeros(rows, np.float32)
                for t in range(G):
                    v = v + canon[:, j, t] * xp[G * j + t]
                acc = acc + np.where(s[:, j] < 0, -v, v)
            y = acc * sc[:, seg] if y is None else y + acc * sc[:, seg]
        Y[c] = y
    return Y


def gemv(fmt: str, T: np.ndarray, scale, x: np.ndarray) -> np.ndarray:
    """(rows,): :func:`gemm` of one activation vector."""
    return gemm(fmt, T, scale, np.asarray(x, np.float32)[None])[0]
