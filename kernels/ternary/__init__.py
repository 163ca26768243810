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

The code is split along those ideas: :mod:`.formats` (the codes, :class:`Packed`, :func:`layout`,
:func:`bits_per_weight`), :mod:`.quantize`, :mod:`.pack` (pack / unpack), :mod:`.simd` (the lookup
intrinsic and the SIMD level), :mod:`.matmul` (GEMV / GEMM and the read-bandwidth probe), :mod:`.act8`
(GEMV on 8-bit activations, byte tables in another layout of the same streams) and :mod:`.intrinsics`
(the LLVM building blocks and numba intrinsics that :mod:`.simd`, :mod:`.act8` and
:mod:`acl26.kernels.decode` share, and what the host CPU lets them emit). This package re-exports the
kernels and their types, formats and SIMD levels; ``tests/naive/ternary/`` holds the kernels' twins,
split to match.
"""

from acl26.kernels.ternary.act8 import SIMD as ACT8_SIMD, Act8, gemv_act8, to_act8  # noqa: F401
from acl26.kernels.ternary.formats import BLOCK_ROWS, FORMATS, Format, Layout, Packed, bits_per_weight, layout  # noqa: F401
from acl26.kernels.ternary.intrinsics import HOST_FEATURES, HOST_SIMD_LEVEL  # noqa: F401
from acl26.kernels.ternary.matmul import GEMM_TILE, GEMV_BLOCKS, gemm, gemv, prepare_gemv, read_bandwidth  # noqa: F401
from acl26.kernels.ternary.pack import pack_i2, pack_sherry, pack_tl2, unpack_i2, unpack_sherry, unpack_tl2  # noqa: F401
from acl26.kernels.ternary.quantize import absmean_ternarize, sparse_split, sparse_ternarize  # noqa: F401
from acl26.kernels.ternary.simd import SIMD_LEVELS, simd_level  # noqa: F401
