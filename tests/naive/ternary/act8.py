"""Plain-numpy twin of acl26.kernels.ternary.act8: the activations quantized in float32 as the module
docstring says, the integer sums exact (int64), then float32 products in the kernel's order; the kernel
must match it bit for bit."""

from __future__ import annotations

import numpy as np


def quantize(x) -> tuple[np.ndarray, np.float32]:
    """``(xq int64, sx)``: ``sx = max|x| / 127`` in float32, ``xq = round_half_even(x * (1 / sx))``; a vector with
    ``max|x| < 2**-100`` is zero (``sx = 1``)."""
    x = np.asarray(x, np.float32)
    m = np.float32(np.abs(x).max()) if x.size else np.float32(0)
    if m < np.float32(2.0 ** -100):
        return np.zeros(x.shape, np.int64), np.float32(1.0)
    sx = np.float32(m / np.float32(127.0))
    inv = np.float32(np.float32(1.0) / sx)
    xq = np.clip(np.round((x * inv).astype(np.float32)), -127, 127).astype(np.int64)
    return xq, sx


def gemv_act8(fmt: str, T: np.ndarray, scale, x) -> np.ndarray:
    """``float32(T @ xq) * sx * scale`` (rows,), float32 products in that order."""
    T = np.asarray(T, np.int64)
    xq, sx = quantize(x)
    acc = (T @ xq).astype(np.float32)
    s = np.broadcast_to(np.asarray(scale, np.float32).reshape(-1) if np.ndim(scale) else np.float32(scale), (T.shape[0],))
    return ((acc * sx).astype(np.float32) * s).astype(np.float32)
