"""Plain-numpy twins of acl26.kernels.ternary.pack: group codes from the weights themselves, by the
definitions of acl26.kernels.ternary's docstring, not from the kernel's tables."""

from __future__ import annotations

import numpy as np

GROUP = {"sherry": 4, "tl2": 3, "i2": 2}


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
