"""Plain-numpy twins of acl26.kernels.ternary (stumpy-style): slow, obvious, and the oracle.

They follow the module docstring's definitions directly (group codes from the weights themselves,
not from the kernel's tables) and add float32 numbers in the order it specifies, so the kernels
must match them bit for bit.
"""

from __future__ import annotations

import numpy as np

GROUP = {"sherry": 4, "tl2": 3, "i2": 2}


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


def absmean_ternarize(W: np.ndarray):
    W = np.asarray(W)
    g = max(float(np.mean(np.abs(W.astype(np.float64)))), 1e-5)
    q = np.round(W.astype(np.float64) / g)  # half to even
    return np.minimum(np.maximum(q, -1), 1).astype(np.int8), np.float32(g)


def _groups(fmt: str, T: np.ndarray) -> np.ndarray:
    """(rows, groups, G) int: T cut into groups, zero-padded to whole groups."""
    G = GROUP[fmt]
    rows, cols = T.shape
    ng = -(-cols // G)
    padded = np.zeros((rows, ng * G), np.int64)
    padded[:, :cols] = T
    return padded.reshape(rows, ng, G)


def _first_nonzero_sign(g: np.ndarray) -> np.ndarray:
    """-1 where a group's first nonzero weight is negative, else +1 (also for all-zero groups)."""
    first = np.take_along_axis(g, np.argmax(g != 0, axis=2)[..., None], axis=2)[..., 0]
    return np.where(first < 0, -1, 1)


def group_codes(fmt: str, T: np.ndarray):
    """(index, sign) of every group, from the module docstring's definitions."""
    g = _groups(fmt, T)
    if fmt == "i2":
        return (g[..., 0] + 1) | ((g[..., 1] + 1) << 2), np.zeros(g.shape[:2], np.int64)
    s = _first_nonzero_sign(g)
    canon = g * s[..., None]
    if fmt == "tl2":
        return 9 * canon[..., 0] + 3 * canon[..., 1] + canon[..., 2], (s < 0).astype(np.int64)
    zero = np.argmax(canon == 0, axis=2)
    kept = np.sort(np.where(canon == 0, 99, np.arange(4)), axis=2)[..., :3]  # positions of the nonzeros
    w = np.take_along_axis(canon, kept, axis=2)
    idx = zero | ((w[..., 1] < 0) << 2) | ((w[..., 2] < 0) << 3)
    return idx, (s < 0).astype(np.int64)


def pack(fmt: str, T: np.ndarray):
    """(codes, signs) laid out as in the module docstring."""
    idx, sign = group_codes(fmt, np.asarray(T))
    rows, ng = idx.shape
    blocks, pairs = -(-rows // 16), -(-ng // 2)
    full = np.zeros((blocks * 16, 2 * pairs), np.int64)
    full[:rows, :ng] = idx
    nib = full.reshape(blocks, 16, pairs, 2)
    codes = (nib[..., 0] | (nib[..., 1] << 4)).transpose(0, 2, 1).reshape(blocks, 16 * pairs).astype(np.uint8)
    if fmt == "i2":
        return codes, np.zeros((blocks, 0), np.uint8)
    bits = np.zeros((blocks * 16, 2 * pairs), np.uint8)
    bits[:rows, :ng] = sign
    bits = bits.reshape(blocks, 2, 8, 2 * pairs)  # block, half, bit, group
    weights = (1 << np.arange(8)).reshape(1, 1, 8, 1)
    signs = (bits * weights).sum(axis=2).transpose(0, 2, 1).reshape(blocks, 4 * pairs).astype(np.uint8)
    return codes, signs


def decode_index(fmt: str, idx: int) -> list[int]:
    """The canonical weights of a 4-bit index."""
    if fmt == "i2":
        return [(c - 1) if c < 3 else 0 for c in (idx & 3, idx >> 2)]
    if fmt == "tl2":
        if idx > 13:
            return [0, 0, 0]
        digits, v = [], idx
        for _ in range(3):
            d = (v + 1) % 3 - 1
            digits.append(d)
            v = (v - d) // 3
        return digits[::-1]
    w = [1, 1, 1, 1]
    w[idx & 3] = 0
    kept = [k for k in range(4) if k != idx & 3]
    w[kept[1]] = -1 if idx >> 2 & 1 else 1
    w[kept[2]] = -1 if idx >> 3 & 1 else 1
    return w


def unpack(fmt: str, codes: np.ndarray, signs: np.ndarray, shape) -> np.ndarray:
    rows, cols = shape
    G = GROUP[fmt]
    ng = -(-cols // G)
    T = np.zeros((rows, ng * G), np.int8)
    for r in range(rows):
        b, i = divmod(r, 16)
        for j in range(ng):
            idx = (int(codes[b, 16 * (j // 2) + i]) >> (4 * (j % 2))) & 15
            s = (int(signs[b, 2 * j + i // 8]) >> (i % 8)) & 1 if fmt != "i2" else 0
            T[r, G * j:G * j + G] = np.array(decode_index(fmt, idx)) * (-1 if s else 1)
    return T[:, :cols]


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


# the kernel module's per-format entry points, by the same names (twins take the plain matrix)
def pack_sherry(T):
    return pack("sherry", T)


def pack_tl2(T):
    return pack("tl2", T)


def pack_i2(T):
    return pack("i2", T)


def unpack_sherry(codes, signs, shape):
    return unpack("sherry", codes, signs, shape)


def unpack_tl2(codes, signs, shape):
    return unpack("tl2", codes, signs, shape)


def unpack_i2(codes, signs, shape):
    return unpack("i2", codes, signs, shape)
