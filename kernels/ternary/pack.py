"""Pack and unpack ternary matrices in the three formats of :mod:`acl26.kernels.ternary.formats`."""

from __future__ import annotations

import numpy as np
from numba import prange

from acl26.kernels._jit import njit
from acl26.kernels.ternary.formats import BLOCK_ROWS, DECODE, ENCODE, FORMATS, Layout, Packed, check_shape, layout

#: public functions of this module that are not kernels (no jitted core, so no numpy twin)
NOT_KERNELS = ("check_packed",)


def pack_sherry(T: np.ndarray) -> Packed:
    """Pack a 3:4 ternary matrix (exactly one zero in each group of 4 along a row) at 1.25 bits per weight.

    ``codes[b, 16*m + i]``: row ``16b+i``, groups ``2m`` (bits 3-0) and ``2m+1`` (bits 7-4); a
    group's nibble is ``zero position | flip2 << 2 | flip3 << 3``. ``signs[b, 2*j + h]`` bit ``t``:
    group ``j`` of row ``16b+8h+t`` starts with -1. Raises ValueError naming the first bad group.
    """
    return _pack("sherry", T)


def pack_tl2(T: np.ndarray) -> Packed:
    """Pack any ternary matrix at 5 bits per 3 weights (1.67 bits per weight).

    Bytes as in :func:`pack_sherry`, groups of 3 (the last zero-padded): nibble = ``|9*w0 + 3*w1 + w2|``
    (0-13), sign bit = that sum < 0.
    """
    return _pack("tl2", T)


def pack_i2(T: np.ndarray) -> Packed:
    """Pack any ternary matrix at 2 bits per weight, no sign stream.

    ``codes[b, 16*m + i]``: row ``16b+i``, weights ``4m .. 4m+3`` in bits 1-0, 3-2, 5-4, 7-6, each
    as ``w + 1``. Past the end of a row: code 1 (weight 0) in a half-filled nibble, 0 in an unused one.
    """
    return _pack("i2", T)


def unpack_sherry(packed: Packed, shape: tuple[int, int] | None = None) -> np.ndarray:
    """The int8 matrix of a :func:`pack_sherry` result (``shape``, if given, must be the packed one)."""
    return _unpack("sherry", packed, shape)


def unpack_tl2(packed: Packed, shape: tuple[int, int] | None = None) -> np.ndarray:
    """The int8 matrix of a :func:`pack_tl2` result."""
    return _unpack("tl2", packed, shape)


def unpack_i2(packed: Packed, shape: tuple[int, int] | None = None) -> np.ndarray:
    """The int8 matrix of a :func:`pack_i2` result."""
    return _unpack("i2", packed, shape)


def _pack(fmt: str, T: np.ndarray) -> Packed:
    f = FORMATS[fmt]
    T = np.asarray(T)
    if T.ndim != 2 or T.dtype.kind not in "iub":
        raise ValueError(f"T must be a 2-D integer array, got shape {T.shape} dtype {T.dtype}")
    if fmt == "sherry" and T.shape[1] % 4:
        raise ValueError(f"T: the input dimension (last axis) must be a multiple of 4 for sherry, got {T.shape[1]}")
    if T.dtype != np.int8:
        if T.size and (T.min() < -1 or T.max() > 1):
            raise ValueError(f"T must hold only -1, 0, 1; found {T.min()} .. {T.max()}")
        T = T.astype(np.int8)
    T = np.ascontiguousarray(T)
    lay = layout(fmt, T.shape)
    codes = np.zeros((lay.blocks, lay.code_bytes), np.uint8)
    signs = np.zeros((lay.blocks, lay.sign_bytes), np.uint8)
    bad = np.empty(lay.blocks, np.int64)
    _pack_kernel(T, ENCODE[fmt], f.group, lay.groups, codes, signs, bad)
    if (bad >= 0).any():
        _raise_bad_group(fmt, T, int(bad[bad >= 0].min()), lay.groups)
    return Packed(fmt, (lay.rows, lay.cols), codes, signs)


def _raise_bad_group(fmt: str, T: np.ndarray, where: int, groups: int) -> None:
    G = FORMATS[fmt].group
    r, j = divmod(where, groups)
    w = T[r, G * j:G * j + G]
    if np.any((w < -1) | (w > 1)):
        raise ValueError(f"T must hold only -1, 0, 1; row {r}, columns {G * j}..{G * j + len(w) - 1} hold {w.tolist()}")
    raise ValueError(f"T is not 3:4 ternary: row {r}, columns {G * j}..{G * j + G - 1} hold {w.tolist()} "
                     f"({int((w == 0).sum())} zeros; each group of 4 needs exactly one)")


@njit(cache=True, parallel=True)
def _pack_kernel(T, enc, G, groups, codes, signs, bad):
    rows, cols = T.shape
    signed = signs.shape[1] > 0
    for b in prange(codes.shape[0]):
        bad[b] = -1
        for i in range(min(BLOCK_ROWS, rows - BLOCK_ROWS * b)):
            r = BLOCK_ROWS * b + i
            for j in range(groups):
                key = 0
                p = 1
                ok = True
                for k in range(G):
                    c = G * j + k
                    w = np.int64(T[r, c]) if c < cols else 0
                    ok &= -1 <= w <= 1
                    key += (w + 1) * p
                    p *= 3
                code = enc[key] if ok else -1
                if code < 0:
                    if bad[b] < 0:
                        bad[b] = r * groups + j
                    continue
                codes[b, BLOCK_ROWS * (j >> 1) + i] |= (code & 15) << (4 * (j & 1))
                if signed:
                    signs[b, 2 * j + (i >> 3)] |= (code >> 4) << (i & 7)


def check_packed(fmt: str, packed: Packed) -> Layout:
    """``packed``'s :class:`Layout` if it is a :class:`Packed` of format ``fmt`` whose streams fit its shape, else
    ValueError."""
    if not isinstance(packed, Packed):
        raise ValueError(f"packed must be a Packed (from pack_{fmt}), got {type(packed).__name__}")
    if packed.fmt != fmt:
        raise ValueError(f"packed holds format {packed.fmt!r}, not {fmt!r}")
    lay = layout(fmt, packed.shape)
    for name, arr, width in (("codes", packed.codes, lay.code_bytes), ("signs", packed.signs, lay.sign_bytes)):
        if not (isinstance(arr, np.ndarray) and arr.dtype == np.uint8 and arr.shape == (lay.blocks, width)):
            raise ValueError(f"packed.{name} must be uint8 of shape {(lay.blocks, width)} for shape {packed.shape}, "
                             f"got {getattr(arr, 'dtype', None)} {getattr(arr, 'shape', None)}")
    return lay


def _unpack(fmt: str, packed: Packed, shape) -> np.ndarray:
    lay = check_packed(fmt, packed)
    if shape is not None and check_shape(shape) != (lay.rows, lay.cols):
        raise ValueError(f"shape {tuple(shape)} does not match the packed shape {packed.shape}")
    T = np.empty((lay.rows, lay.cols), np.int8)
    codes, signs = np.ascontiguousarray(packed.codes), np.ascontiguousarray(packed.signs)
    if fmt == "sherry":  # 4 weights = one uint32 store
        _unpack_u32(codes, signs, DECODE[fmt].view(np.uint32).ravel(), T.view(np.uint32))
    else:
        _unpack_kernel(codes, signs, DECODE[fmt], lay.groups, T)
    return T


@njit(cache=True, nogil=True)
def _code(codes, signs, b, i, j):
    """5-bit code (index | sign << 4) of group j in row i of block b."""
    q = (np.int64(codes[b, BLOCK_ROWS * (j >> 1) + i]) >> (4 * (j & 1))) & 15
    if signs.shape[1] > 0:
        q |= ((np.int64(signs[b, 2 * j + (i >> 3)]) >> (i & 7)) & 1) << 4
    return q


@njit(cache=True, parallel=True)
def _unpack_kernel(codes, signs, dec, groups, T):
    rows, cols = T.shape
    G = dec.shape[1]
    for b in prange(codes.shape[0]):
        for i in range(min(BLOCK_ROWS, rows - BLOCK_ROWS * b)):
            r = BLOCK_ROWS * b + i
            for j in range(groups):
                q = _code(codes, signs, b, i, j)
                for k in range(min(G, cols - G * j)):
                    T[r, G * j + k] = dec[q, k]


@njit(cache=True, parallel=True)
def _unpack_u32(codes, signs, dec32, T32):
    rows, groups = T32.shape
    for b in prange(codes.shape[0]):
        for i in range(min(BLOCK_ROWS, rows - BLOCK_ROWS * b)):
            r = BLOCK_ROWS * b + i
            for j in range(groups):
                T32[r, j] = dec32[_code(codes, signs, b, i, j)]
