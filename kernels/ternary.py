"""Sherry ternary kernels: 3:4-sparse quantizer, packed formats, lookup-table GEMV and GEMM.

Sherry (ACL 2026, arXiv 2601.07892) keeps, in every group of 4 consecutive weights along the input
dimension, three weights at +-1 and one at 0. The 32 patterns of such a group (4 places for the zero
x 2^3 signs) are 16 patterns up to a global sign flip, so a group packs into a 4-bit index plus one
sign bit: 5 bits per 4 weights = 1.25 bits per weight. This module quantizes, packs and multiplies
in that format and in the two it is compared with: a 2-bit one (I2_S-like, 4 weights per byte) and
a 1.67-bit one (TL2-like, 3 weights in 5 bits).

Quantizers
----------
* :func:`sparse_ternarize` (Sparse-AbsMean): in each group of 4 the weight with the smallest |w| is
  zeroed -- on a tie the first of the tied weights (lowest input index) -- and each other weight
  becomes -1 if w < 0 else +1 (so a kept +-0 becomes +1). The scale is the mean |w| of the kept
  weights, per output row or per ``group_size`` inputs, summed in float64 in input order.
* :func:`absmean_ternarize` (BitNet b1.58): ``clip(round_half_even(W / g), -1, 1)`` with one scale
  ``g = max(mean|W|, 1e-5)`` for the whole tensor.

Packed formats
--------------
All three share one layout, :class:`Packed`. A row of ``n_in`` weights is cut into *groups* of
``G`` weights (Sherry 4, TL2 3, I2 2), each coded as a 4-bit index and, for Sherry and TL2, a sign
bit. Rows are taken 16 at a time (a *block*; the last block is padded with zero codes) and groups
two at a time (a *pair*; an odd last group is padded with code 0, and TL2 pads ``n_in`` with zero
weights to a multiple of 3). For block ``b`` (rows ``16b .. 16b+15``):

* ``codes[b, 16*m + i]`` (uint8), row ``16b+i``: bits 3-0 = index of group ``2m``, bits 7-4 =
  index of group ``2m+1``. One pair of groups of 16 rows is 16 consecutive bytes.
* ``signs[b, 2*j + h]`` (uint8, Sherry and TL2 only), bit ``t`` = sign bit of group ``j`` in row
  ``16b + 8h + t``: the 16 rows' sign bits of one group are one little-endian 16-bit word.

The sign bit is 1 when the group's first nonzero weight is -1; the index then codes the group
multiplied by -1 (its *canonical* form, first nonzero +1). Per format, index bits within a nibble:

* **Sherry** (``G = 4``): bits 1-0 = position of the zero (0-3); bit 2 = the 2nd nonzero weight has
  the opposite sign of the 1st; bit 3 = the same for the 3rd. E.g. ``(0, -1, +1, -1)`` has its zero
  at 0, 1st nonzero -1 (sign bit 1), canonical ``(0, +1, -1, +1)``: index ``0 | 1<<2 | 0<<3 = 4``.
  Streams: 4 + 1 bits per 4 weights = exactly 1.25 bits per weight when blocks and pairs are full.
* **TL2** (``G = 3``): index = ``9*w0 + 3*w1 + w2`` of the canonical group (0-13, balanced ternary;
  the all-zero group is index 0, sign 0); indices 14 and 15 are never written and read as zeros.
  5 bits per 3 weights = 1.67 bits per weight.
* **I2** (``G = 2``, no sign stream): index = ``(w0 + 1) | (w1 + 1) << 2``, so each byte holds 4
  weights of one row, 2 bits each, code ``w + 1`` in bits ``2k+1 .. 2k`` for weight ``4m + k``
  (bitnet.cpp's I2_S codes, in another order); code 3 is never written and reads as 0. 2 bits per
  weight.

Scales are float32, stored apart from the streams: shape ``()`` (per tensor), ``(n_out,)`` (per
row) or ``(n_out, n_in // group_size)`` (per group; a scale group must cover whole pairs).

GEMV and GEMM
-------------
``y = scale * (T @ x)`` with a lookup table (T-MAC / bitnet.cpp TL style): for each group ``j`` of
activations the 16 sums ``L[j, k] = sum_t P[k, t] * x[G*j + t]`` over the canonical patterns ``P``
are tabulated once per activation vector (in pattern order, t = 0, 1, ...); a row then adds
``+-L[j, index]`` for each of its groups, in group order, one float32 accumulator per row and per
scale group, and multiplies by the scale at the end. On x86 with AVX-512 (or AVX2) a 16-entry table
is one (two) registers and the lookup for 16 rows is one permute instruction (``vpermps``), emitted
through a Numba intrinsic; elsewhere the same sums are looked up one by one. Every path adds the same
float32 numbers in the same order, so all are bit-identical to each other and to the numpy twins.
One entry point per operation, :func:`gemv` and :func:`gemm`, takes the format by name.
``simd="avx2"`` / ``"portable"`` (or ``$ACL26_TERNARY_SIMD``, read at import) picks a lower path;
``parallel=False`` runs on one thread.
"""

from __future__ import annotations

import functools
import os
import platform
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from acl26 import checks
from acl26.kernels._jit import njit

#: public functions of this module that are not kernels (no jitted core, so no numpy twin)
NOT_KERNELS = ("layout", "bits_per_weight", "simd_level", "read_bandwidth")  # read_bandwidth: a timing probe

BLOCK_ROWS = 16  # rows per block: 16 float32 lanes of one AVX-512 register
GEMM_TILE = 4  # activation columns sharing one pass over the codes in GEMM
GEMV_BLOCKS = 2  # blocks sharing one pass over the tables in GEMV (independent accumulators)
SIMD_LEVELS = {"portable": 0, "avx2": 1, "avx512": 2}


# --------------------------------------------------------------------------------------------
# formats


class Format(NamedTuple):
    """A 4-bit-index (+ sign bit) code for groups of ``group`` weights."""

    name: str
    group: int  # weights per index (G)
    signed: bool  # has a sign stream
    patterns: np.ndarray  # (16, G) int8: weights of each index, sign bit 0
    used: tuple[int, ...]  # the indices pack can write


def _sherry_patterns() -> np.ndarray:
    pat = np.zeros((16, 4), np.int8)
    for idx in range(16):
        zero, flip2, flip3 = idx & 3, (idx >> 2) & 1, (idx >> 3) & 1
        kept = [k for k in range(4) if k != zero]
        pat[idx, kept] = (1, 1 - 2 * flip2, 1 - 2 * flip3)
    return pat


def _tl2_patterns() -> np.ndarray:
    pat = np.zeros((16, 3), np.int8)
    for idx in range(14):  # balanced ternary digits of idx = 9*w0 + 3*w1 + w2
        v = idx
        for k in (2, 1, 0):
            pat[idx, k] = (v + 1) % 3 - 1
            v = (v - pat[idx, k]) // 3
    return pat


def _i2_patterns() -> np.ndarray:
    pat = np.zeros((16, 2), np.int8)
    for idx in range(16):
        c0, c1 = idx & 3, idx >> 2
        pat[idx] = (c0 - 1 if c0 < 3 else 0, c1 - 1 if c1 < 3 else 0)
    return pat


FORMATS: dict[str, Format] = {
    "sherry": Format("sherry", 4, True, _sherry_patterns(), tuple(range(16))),
    "tl2": Format("tl2", 3, True, _tl2_patterns(), tuple(range(14))),
    "i2": Format("i2", 2, False, _i2_patterns(), tuple(c0 | c1 << 2 for c1 in range(3) for c0 in range(3))),
}


def _decode_table(fmt: Format) -> np.ndarray:
    """(32, G) int8: weights of the 5-bit code ``index | sign << 4``."""
    return np.concatenate([fmt.patterns, -fmt.patterns]).astype(np.int8)


def _encode_table(fmt: Format) -> np.ndarray:
    """(3**G,) int16: 5-bit code of each group, keyed by ``sum_k (w_k + 1) * 3**k``; -1 = not codable."""
    enc = np.full(3 ** fmt.group, -1, np.int16)
    powers = 3 ** np.arange(fmt.group)
    dec = _decode_table(fmt)
    for code in [i for i in fmt.used] + ([i | 16 for i in fmt.used] if fmt.signed else []):
        key = int(((dec[code] + 1) * powers).sum())
        if enc[key] < 0:  # the zero group (TL2) keeps sign 0
            enc[key] = code
    return enc


_DECODE = {name: _decode_table(f) for name, f in FORMATS.items()}
_ENCODE = {name: _encode_table(f) for name, f in FORMATS.items()}
_PATTERNS_T = {name: np.ascontiguousarray(f.patterns.T.astype(np.float32)) for name, f in FORMATS.items()}


class Layout(NamedTuple):
    rows: int
    cols: int
    blocks: int  # ceil(rows / 16)
    groups: int  # ceil(cols / G)
    pairs: int  # ceil(groups / 2)
    code_bytes: int  # per block
    sign_bytes: int  # per block


def layout(fmt: str, shape: tuple[int, int]) -> Layout:
    """Stream sizes of a ``(rows, cols)`` matrix in format ``fmt`` (see the module docstring)."""
    rows, cols = _shape(shape)
    return _layout(fmt, rows, cols)


def _shape(shape) -> tuple[int, int]:
    """``shape`` as two ints >= 0 (ints or numpy integers; a float is refused, never truncated)."""
    try:
        rows, cols = shape
    except (TypeError, ValueError):
        raise ValueError(f"shape must be (rows, cols), got {shape!r}") from None
    return checks.integer("shape[0] (rows)", rows, 0), checks.integer("shape[1] (cols)", cols, 0)


@functools.lru_cache(maxsize=256)
def _layout(fmt: str, rows: int, cols: int) -> Layout:
    f = _format(fmt)
    groups = -(-cols // f.group)
    pairs = -(-groups // 2)
    return Layout(rows, cols, -(-rows // BLOCK_ROWS), groups, pairs, BLOCK_ROWS * pairs,
                  4 * pairs if f.signed else 0)


class _PackedFields(NamedTuple):
    fmt: str
    shape: tuple[int, int]
    codes: np.ndarray  # uint8 (blocks, 16 * pairs)
    signs: np.ndarray  # uint8 (blocks, 4 * pairs); (blocks, 0) for i2


class Packed(_PackedFields):
    """A packed ternary matrix: the streams of the module docstring and the shape they hold.

    Built (and ``_replace``-d) only when ``shape`` fits the streams, else one-line ValueError: a known
    ``fmt``; ``shape`` two integers >= 0 (``cols`` a multiple of 4 for Sherry); ``codes`` and
    ``signs`` uint8 arrays of exactly :func:`layout`'s ``(blocks, code_bytes)`` and ``(blocks,
    sign_bytes)``; and the padding past ``shape`` as :func:`pack_sherry` and co. write it (zero codes
    and sign bits in the rows of the last block past ``shape[0]``, in an odd last group, and zero
    weights in a partial last TL2/I2 group), so a shape that claims fewer rows or columns than were
    packed is refused, and so is one that claims more blocks or pairs. Limit: a shape claiming more
    rows *within* the last block of 16 (or more columns within its last group) cannot be told from the
    streams, because the zero padding codes are valid codes (Sherry uses all 32); such rows read as
    the pattern of code 0.
    """

    __slots__ = ()

    def __new__(cls, fmt: str, shape: tuple[int, int], codes: np.ndarray, signs: np.ndarray):
        return super().__new__(cls, fmt, _check_streams(fmt, shape, codes, signs), codes, signs)

    @classmethod
    def _make(cls, iterable):  # namedtuple's _make (and so _replace) would skip __new__'s checks
        return cls(*iterable)

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.signs.nbytes


def _check_streams(fmt: str, shape, codes, signs) -> tuple[int, int]:
    """``shape`` as two ints if the streams fit it (see :class:`Packed`), else ValueError."""
    f = _format(fmt)
    rows, cols = _shape(shape)
    if fmt == "sherry" and cols % 4:
        raise ValueError(f"Packed: shape[1] (cols) must be a multiple of 4 for sherry, got {cols}")
    lay = _layout(fmt, rows, cols)
    for name, arr, width in (("codes", codes, lay.code_bytes), ("signs", signs, lay.sign_bytes)):
        if not (isinstance(arr, np.ndarray) and arr.dtype == np.uint8 and arr.shape == (lay.blocks, width)):
            raise ValueError(f"packed.{name} must be uint8 of shape {(lay.blocks, width)} for {fmt} shape "
                             f"{(rows, cols)}, got {getattr(arr, 'dtype', type(arr).__name__)} "
                             f"{getattr(arr, 'shape', '')}")
    if not lay.blocks or not lay.pairs:
        return rows, cols
    last = rows - BLOCK_ROWS * (lay.blocks - 1)  # rows of the last block
    if last < BLOCK_ROWS:
        lo = np.uint8(0xFF & ~((1 << min(8, last)) - 1))
        hi = np.uint8(0xFF & ~((1 << max(0, last - 8)) - 1))
        if codes[-1].reshape(lay.pairs, BLOCK_ROWS)[:, last:].any() or \
                (signs[-1].reshape(-1, 2) & np.array([lo, hi], np.uint8)).any():
            raise ValueError(f"Packed: the streams hold rows past shape[0] = {rows} (in its last block of "
                             f"{BLOCK_ROWS}): the shape claims fewer rows than were packed")
    j = lay.groups - 1  # the last group of a row
    if (lay.groups % 2 and (codes[:, BLOCK_ROWS * (lay.pairs - 1):] >> 4).any()) or signs[:, 2 * lay.groups:].any():
        raise ValueError(f"Packed: the streams hold a group past shape[1] = {cols}: the shape claims fewer "
                         f"columns than were packed")
    used = cols - f.group * j  # weights of the last group inside the row
    if used < f.group:
        nib = (codes[:, BLOCK_ROWS * (j >> 1):BLOCK_ROWS * (j >> 1) + BLOCK_ROWS] >> (4 * (j & 1))) & 15
        if f.signed:
            nib = nib | np.unpackbits(signs[:, 2 * j:2 * j + 2], axis=1, bitorder="little") << 4
        if _DECODE[fmt][nib.reshape(-1)[:rows]][:, used:].any():
            raise ValueError(f"Packed: the streams hold nonzero weights past shape[1] = {cols} (in the last "
                             f"group of {f.group}): the shape claims fewer columns than were packed")
    return rows, cols


def _format(fmt: str) -> Format:
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {sorted(FORMATS)}, got {fmt!r}")
    return FORMATS[fmt]


def bits_per_weight(fmt: str, shape: tuple[int, int], scales: str | int = "row") -> dict:
    """Exact storage of a ``shape`` matrix in ``fmt``: bits of each stream and of the scales, and per weight.

    ``scales`` is ``"tensor"``, ``"row"`` or a group size (float32 scales either way). Padding
    (partial blocks of 16 rows, an odd group, TL2's last group) is counted.
    """
    lay = layout(fmt, shape)
    n = lay.rows * lay.cols
    if n == 0:
        raise ValueError(f"shape must have rows and columns, got {tuple(shape)}")
    if scales == "tensor":
        n_scales = 1
    elif scales == "row":
        n_scales = lay.rows
    elif checks.is_number(scales):
        n_scales = lay.rows * -(-lay.cols // checks.integer("scales", scales, 1))
    else:
        raise ValueError(f"scales must be 'tensor', 'row' or a positive group size, got {scales!r}")
    bits = dict(index=8 * lay.blocks * lay.code_bytes, sign=8 * lay.blocks * lay.sign_bytes, scales=32 * n_scales)
    bits["streams"] = bits["index"] + bits["sign"]
    bits["total"] = bits["streams"] + bits["scales"]
    return {"weights": n, "bits": bits, **{k: v / n for k, v in bits.items()}}


# --------------------------------------------------------------------------------------------
# quantizers


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


@njit(cache=True, parallel=True)
def _sparse_ternarize(W, T, sums, gs):
    for r in prange(W.shape[0]):
        for j in range(W.shape[1] // 4):
            c = 4 * j
            zero = 0
            low = abs(W[r, c])
            for k in range(1, 4):
                if abs(W[r, c + k]) < low:
                    low = abs(W[r, c + k])
                    zero = k
            for k in range(4):
                w = W[r, c + k]
                if k == zero:
                    T[r, c + k] = 0
                else:
                    T[r, c + k] = -1 if w < 0 else 1
                    sums[r, c // gs] += np.float64(abs(w))


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


# --------------------------------------------------------------------------------------------
# pack / unpack


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
    _pack_kernel(T, _ENCODE[fmt], f.group, lay.groups, codes, signs, bad)
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


def _check_packed(fmt: str, packed: Packed) -> Layout:
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
    lay = _check_packed(fmt, packed)
    if shape is not None and _shape(shape) != (lay.rows, lay.cols):
        raise ValueError(f"shape {tuple(shape)} does not match the packed shape {packed.shape}")
    T = np.empty((lay.rows, lay.cols), np.int8)
    codes, signs = np.ascontiguousarray(packed.codes), np.ascontiguousarray(packed.signs)
    if fmt == "sherry":  # 4 weights = one uint32 store
        _unpack_u32(codes, signs, _DECODE[fmt].view(np.uint32).ravel(), T.view(np.uint32))
    else:
        _unpack_kernel(codes, signs, _DECODE[fmt], lay.groups, T)
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


# --------------------------------------------------------------------------------------------
# the lookup-table block kernel: one Numba intrinsic, AVX-512 / AVX2 / portable LLVM IR


def _host_simd_level() -> int:
    """Best SIMD level the code numba generates here may use (0 when not x86 or CPU pinned to generic)."""
    from numba.core import config

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return 0
    if config.CPU_FEATURES or config.CPU_NAME not in (None, "host"):
        feats = set((config.CPU_FEATURES or "").split(","))  # pinned (e.g. generic, for a portable cache)
    else:
        import llvmlite.binding as llvm

        feats = {f"+{k}" for k, v in llvm.get_host_cpu_features().items() if v}
    return 2 if "+avx512f" in feats else 1 if "+avx2" in feats else 0


HOST_SIMD_LEVEL = _host_simd_level()

_F32, _I8, _I16, _I32, _I64 = ir.FloatType(), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_V16F, _V16I = ir.VectorType(_F32, 16), ir.VectorType(_I32, 16)
_V8F, _V8I = ir.VectorType(_F32, 8), ir.VectorType(_I32, 8)


def _splat(ty, value):
    return ir.Constant(ty, [value] * ty.count)


def _load(builder, ptr, ty):
    """An unaligned load of a ``ty`` from ``ptr`` (any pointer type)."""
    return builder.load(builder.bitcast(ptr, ty.as_pointer()), align=1)


def _lookup16(builder, level, table, idx):
    """``table[idx[lane]]`` for 16 lanes: ``table`` points at 16 floats, ``idx`` is <16 x i32> in 0..15."""
    if level == 2:
        perm = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V16F, [_V16F, _V16I]),
                                              "llvm.x86.avx512.permvar.sf.512")
        return builder.call(perm, [_load(builder, table, _V16F), idx])
    if level == 1:
        perm = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V8F, [_V8F, _V8I]),
                                              "llvm.x86.avx2.permps")
        lo = _load(builder, table, _V8F)
        hi = _load(builder, builder.gep(table, [ir.Constant(_I64, 8)], source_etype=_F32), _V8F)
        halves = []
        for h in range(2):
            ih = builder.shuffle_vector(idx, idx, ir.Constant(_V8I, list(range(8 * h, 8 * h + 8))))
            upper = builder.icmp_unsigned("!=", builder.and_(ih, _splat(_V8I, 8)), _splat(_V8I, 0))
            halves.append(builder.select(upper, builder.call(perm, [hi, ih]), builder.call(perm, [lo, ih])))
        return builder.shuffle_vector(halves[0], halves[1], ir.Constant(_V16I, list(range(16))))
    out = ir.Constant(_V16F, None)
    for lane in range(16):
        k = builder.zext(builder.extract_element(idx, ir.Constant(_I32, lane)), _I64)
        v = builder.load(builder.gep(table, [k], source_etype=_F32), align=4, typ=_F32)
        out = builder.insert_element(out, v, ir.Constant(_I32, lane))
    return out


@intrinsic(prefer_literal=True)
def _lut_tile(typingctx, codes, signs, lut, out, b, p0, npairs, c0, level, signed, nblk, ncols):
    """Sums of ``+-lut`` lookups for ``nblk`` blocks x ``ncols`` activation columns.

    Blocks ``b .. b+nblk-1`` of ``codes`` / ``signs`` (2-D, one block per row), pairs
    ``p0 .. p0+npairs-1``; column ``c0 + c`` has its tables in ``lut[c0 + c]`` (16 floats per
    group). Writes row ``i`` of block ``b+q``, column ``c0+c`` to ``out[16*(q*ncols + c) + i]``.
    ``level`` picks AVX-512 (2), AVX2 (1) or portable (0) code at run time (levels above the host
    are not built); ``signed`` says whether there is a sign stream; ``nblk`` and ``ncols`` must be
    literals. Each (row, column) has its own accumulator, added to in group order.
    """
    if not (isinstance(nblk, types.IntegerLiteral) and isinstance(ncols, types.IntegerLiteral)):
        return None
    arrays = (codes, signs, lut, out)
    if not all(isinstance(a, types.Array) and a.layout == "C" for a in arrays):
        return None
    nb, nc = nblk.literal_value, ncols.literal_value
    sig = types.void(codes, signs, lut, out, b, p0, npairs, c0, level, signed, nblk, ncols)

    def codegen(context, builder, signature, args):
        tys = signature.args
        arys = [context.make_array(tys[k])(context, builder, args[k]) for k in range(4)]
        cptr, sptr, lptr, optr = (a.data for a in arys)
        cw, sw, lw = (builder.extract_value(arys[k].shape, 1) for k in range(3))
        b_, p0_, npairs_, c0_, level_ = (context.cast(builder, args[k], tys[k], types.int64) for k in range(4, 9))
        signed_ = context.cast(builder, args[9], tys[9], types.boolean)

        def i64(v):
            return ir.Constant(_I64, v)

        def at(base, etype, *terms):  # &base[sum of (a * b) terms]
            off = i64(0)
            for a, k in terms:
                off = builder.add(off, builder.mul(a, k if isinstance(k, ir.Value) else i64(k)))
            return builder.gep(base, [off], source_etype=etype)

        accs = [cgutils.alloca_once(builder, _V16F) for _ in range(nb * nc)]
        for acc in accs:
            builder.store(_splat(_V16F, 0.0), acc)
        blocks = [builder.add(b_, i64(q)) for q in range(nb)]

        def loop(level, has_sign):
            with cgutils.for_range(builder, npairs_) as it:
                m = builder.add(p0_, it.index)
                for q, blk in enumerate(blocks):
                    c32 = builder.zext(_load(builder, at(cptr, _I8, (blk, cw), (m, 16)), ir.VectorType(_I8, 16)), _V16I)
                    nibbles = (builder.and_(c32, _splat(_V16I, 15)), builder.lshr(c32, _splat(_V16I, 4)))
                    for h, idx in enumerate(nibbles):
                        j = builder.add(builder.mul(m, i64(2)), i64(h))
                        if has_sign:
                            word = _load(builder, at(sptr, _I8, (blk, sw), (j, 2)), _I16)
                            neg = builder.bitcast(word, ir.VectorType(ir.IntType(1), 16))
                        for c in range(nc):
                            col = builder.add(c0_, i64(c))
                            v = _lookup16(builder, level, at(lptr, _F32, (col, lw), (j, 16)), idx)
                            if has_sign:
                                v = builder.select(neg, builder.fneg(v), v)
                            acc = accs[q * nc + c]
                            builder.store(builder.fadd(builder.load(acc), v), acc)

        def dispatch(levels, has_sign):
            if not levels:
                loop(0, has_sign)
                return
            with builder.if_else(builder.icmp_signed(">=", level_, i64(levels[0]))) as (then, other):
                with then:
                    loop(levels[0], has_sign)
                with other:
                    dispatch(levels[1:], has_sign)

        levels = [lv for lv in (2, 1) if lv <= HOST_SIMD_LEVEL]
        with builder.if_else(signed_) as (then, other):
            with then:
                dispatch(levels, True)
            with other:
                dispatch(levels, False)
        for k, acc in enumerate(accs):
            dst = builder.gep(optr, [i64(16 * k)], source_etype=_F32)
            builder.store(builder.load(acc), builder.bitcast(dst, _V16F.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


# --------------------------------------------------------------------------------------------
# GEMV / GEMM


def gemv(fmt: str, packed: Packed, scale: np.ndarray, x: np.ndarray, *, parallel: bool = True,
         simd: str | None = None) -> np.ndarray:
    """``y = scale * (T @ x)`` for a matrix ``T`` packed in ``fmt`` ("sherry", "tl2" or "i2") and
    float32 activations ``x`` of shape ``(n_in,)``; ``y`` is float32 ``(n_out,)``. NaN or inf in
    ``scale`` or ``x`` (after the cast to float32) raises.

    ``scale`` has shape ``()``, ``(n_out,)`` or ``(n_out, n_groups)`` (see the module docstring).
    ``parallel=False`` runs on one thread; ``simd`` picks a lower SIMD path.
    """
    return _matmul(fmt, packed, scale, x, parallel, simd, vector=True)


def gemm(fmt: str, packed: Packed, scale: np.ndarray, X: np.ndarray, *, parallel: bool = True,
         simd: str | None = None) -> np.ndarray:
    """``Y = (scale * T) @ X.T`` of shape ``(batch, n_out)`` for activations ``X`` of shape
    ``(batch, n_in)`` and a matrix ``T`` packed in ``fmt``; as :func:`gemv` otherwise."""
    return _matmul(fmt, packed, scale, X, parallel, simd, vector=False)


_ENV_SIMD = os.environ.get("ACL26_TERNARY_SIMD")  # read once, at import


def simd_level(simd: str | None = None) -> int:
    """The level the kernels run at: ``simd`` if given, else ``$ACL26_TERNARY_SIMD``, else the best here."""
    name = simd if simd is not None else _ENV_SIMD
    if name is None:
        return HOST_SIMD_LEVEL
    if name not in SIMD_LEVELS:
        raise ValueError(f"simd must be one of {sorted(SIMD_LEVELS)}, got {name!r}")
    if SIMD_LEVELS[name] > HOST_SIMD_LEVEL:
        raise ValueError(f"simd={name!r} is not available on this CPU (best: "
                         f"{[k for k, v in SIMD_LEVELS.items() if v == HOST_SIMD_LEVEL][0]!r})")
    return SIMD_LEVELS[name]


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
    _format(fmt)
    lay = _check_packed(fmt, packed)
    f = FORMATS[fmt]
    level = simd_level(simd)
    name = "x" if vector else "X"
    X = np.asarray(X)
    if X.ndim != (1 if vector else 2) or X.shape[-1] != lay.cols:
        want = f"({lay.cols},)" if vector else f"(batch, {lay.cols})"
        raise ValueError(f"{name} must have shape {want}, got {X.shape}")
    if X.dtype.kind != "f":
        raise ValueError(f"{name} must be float (float32 activations), got dtype {X.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):  # a value beyond float32 becomes inf: refused just below
        X2 = np.ascontiguousarray(X[None] if vector else X, dtype=np.float32)
    if not np.isfinite(X2).all():
        raise ValueError(f"{name} must be finite in float32 (no NaN or inf)")
    s = _scale_rows(scale, lay, f.group)
    Y = np.empty((X2.shape[0], lay.rows), np.float32)
    codes, signs = np.ascontiguousarray(packed.codes), np.ascontiguousarray(packed.signs)
    args = (X2, _PATTERNS_T[fmt], codes, signs, s, Y, lay.pairs // s.shape[1], level, f.signed)
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
            _lut_fill(xp, PT, lut[c], groups, 4)
        elif G == 3:
            _lut_fill(xp, PT, lut[c], groups, 3)
        else:
            _lut_fill(xp, PT, lut[c], groups, 2)
    return lut


@intrinsic(prefer_literal=True)
def _lut_fill(typingctx, x, PT, lut, groups, G):
    """``lut[16*j:16*j+16] = 0 + PT[0]*x[G*j] + PT[1]*x[G*j+1] + ...``, one vector per group (G literal).

    Plain vector IR: numba leaves this loop scalar (it cannot prove ``lut`` and ``PT`` apart).
    """
    if not isinstance(G, types.IntegerLiteral):
        return None
    if not all(isinstance(a, types.Array) and a.layout == "C" for a in (x, PT, lut)):
        return None
    g = G.literal_value
    sig = types.void(x, PT, lut, groups, G)

    def codegen(context, builder, signature, args):
        tys = signature.args
        xptr, pptr, lptr = (context.make_array(tys[k])(context, builder, args[k]).data for k in range(3))
        n = context.cast(builder, args[3], tys[3], types.int64)
        rows = [_load(builder, builder.gep(pptr, [ir.Constant(_I64, 16 * t)], source_etype=_F32), _V16F)
                for t in range(g)]
        with cgutils.for_range(builder, n) as it:
            acc = _splat(_V16F, 0.0)
            for t in range(g):
                k = builder.add(builder.mul(it.index, ir.Constant(_I64, g)), ir.Constant(_I64, t))
                a = builder.load(builder.gep(xptr, [k], source_etype=_F32))
                a16 = builder.shuffle_vector(builder.insert_element(ir.Constant(_V16F, None), a, ir.Constant(_I32, 0)),
                                             ir.Constant(_V16F, None), ir.Constant(_V16I, [0] * 16))
                acc = builder.fadd(acc, builder.fmul(rows[t], a16))
            dst = builder.gep(lptr, [builder.mul(it.index, ir.Constant(_I64, 16))], source_etype=_F32)
            builder.store(acc, builder.bitcast(dst, _V16F.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


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
            _lut_tile(codes, signs, lut, out, b, p0, seg_pairs, c0, level, signed, GEMV_BLOCKS, 1)
        elif nb == 1 and nc == GEMM_TILE:
            _lut_tile(codes, signs, lut, out, b, p0, seg_pairs, c0, level, signed, 1, GEMM_TILE)
        else:
            _lut_tile(codes, signs, lut, out, b, p0, seg_pairs, c0, level, signed, 1, 1)
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
