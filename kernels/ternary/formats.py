"""Sherry's packed ternary formats: the group codes of Sherry (1.25-bit), TL2 (1.67-bit) and I2 (2-bit),
the streams' layout (:class:`Packed`, :func:`layout`) and their exact storage (:func:`bits_per_weight`).
The formats are specified in :mod:`acl26.kernels.ternary`'s docstring."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from acl26 import checks

#: public functions of this module that are not kernels (no jitted core, so no numpy twin)
NOT_KERNELS = ("layout", "bits_per_weight", "check_shape", "check_format")

BLOCK_ROWS = 16  # rows per block: 16 float32 lanes of one AVX-512 register


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


#: per format, the weights of each 5-bit code ``index | sign << 4``: (32, G) int8
DECODE = {name: _decode_table(f) for name, f in FORMATS.items()}
#: per format, the 5-bit code of each group of weights (see :func:`_encode_table`): (3**G,) int16
ENCODE = {name: _encode_table(f) for name, f in FORMATS.items()}
#: per format, the canonical patterns by position in the group: (G, 16) float32 (the lookup tables' weights)
PATTERNS_T = {name: np.ascontiguousarray(f.patterns.T.astype(np.float32)) for name, f in FORMATS.items()}


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
    rows, cols = check_shape(shape)
    return _layout(fmt, rows, cols)


def check_shape(shape) -> tuple[int, int]:
    """``shape`` as two ints >= 0 (ints or numpy integers; a float is refused, never truncated)."""
    try:
        rows, cols = shape
    except (TypeError, ValueError):
        raise ValueError(f"shape must be (rows, cols), got {shape!r}") from None
    return checks.integer("shape[0] (rows)", rows, 0), checks.integer("shape[1] (cols)", cols, 0)


@functools.lru_cache(maxsize=256)
def _layout(fmt: str, rows: int, cols: int) -> Layout:
    f = check_format(fmt)
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
    f = check_format(fmt)
    rows, cols = check_shape(shape)
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
        if DECODE[fmt][nib.reshape(-1)[:rows]][:, used:].any():
            raise ValueError(f"Packed: the streams hold nonzero weights past shape[1] = {cols} (in the last "
                             f"group of {f.group}): the shape claims fewer columns than were packed")
    return rows, cols


def check_format(fmt: str) -> Format:
    """The :class:`Format` named ``fmt``, else ValueError."""
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
