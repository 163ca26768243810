"""The packed formats multiplied by 8-bit activations: byte lookup tables, 64 lookups per instruction.

:func:`acl26.kernels.ternary.gemv` multiplies float32 activations through float32 tables, 16 lookups
per ``vpermps``; that kernel is bound by its vector ports (about 13 GB/s of streams per core). Here the
activations are quantized to int8 first, one scale per vector (``sx = max|x| / 127``, ``xq =
round_half_even(x * (1 / sx))`` in float32: the per-token absmax 8-bit activations of BitNet b1.58, the
models Sherry
quantizes, and what llama.cpp's TQ1_0/TQ2_0 multiply; a vector with ``max|x| < 2**-100`` counts as zero),
so a group's table holds integers: the 32 signed
sums ``T[c] = sum_t P[c, t] * xq[G*j + t]`` of its 5-bit codes ``c = index | sign << 4`` (the weights
of :data:`~acl26.kernels.ternary.formats.DECODE`). ``|T| <= 4 * 127`` needs 16 bits, so each table is
kept as two byte planes (low byte, unsigned; high byte, signed). On a CPU with AVX512-VBMI and
AVX512-VNNI (:data:`SIMD`) the kernel looks up the tables of four groups for 16 rows (64 codes) with
two ``vpermi2b`` (a 128-byte table each, one per plane) and sums them into the 16 rows' int32
accumulators with two ``vpdpbusd``; elsewhere the same integer sums are taken one by one. The sums are
exact integers on every path, so the result ``y[r] = float32(acc[r]) * sx * scale[r]`` (float32, in
that order) is the same on all of them, and the same as ``scale * (T @ xq) * sx`` computed exactly.

The layout (:class:`Act8`, made from a :class:`~acl26.kernels.ternary.formats.Packed` matrix by
:func:`to_act8`; the same bytes as the packed streams, up to padding, in another order). Rows are
taken in blocks of 16 and blocks in *tiles* of :data:`TILE` (the last tile padded with zero bytes);
groups in *quads* of 4 (the last quad padded with code 0, whose activations are zero). A tile is one
contiguous stream, so the hardware prefetcher (and the kernel's own prefetch into L2, 8 KiB ahead) sees
one sequential read per task: ``streams[t, (quad * TILE + q) * stride ...]`` for block ``q`` of tile ``t``
holds

* 32 bytes of indices: byte ``k``, bits 3-0 = index of row ``k // 4``, group ``4 * quad + k % 4``;
  bits 7-4 = the same for row ``8 + k // 4``;
* (Sherry and TL2, ``stride = 40``) 8 bytes of sign bits: bit ``b`` of the little-endian 64-bit word
  = sign bit of row ``b // 4``, group ``4 * quad + b % 4``. I2 has no signs (``stride = 32``).

So the 64 index bytes one ``vpermi2b`` needs come from one 32-byte load (low nibbles for rows 0-7,
high nibbles for rows 8-15), and byte ``4 * i + g`` of it is row ``i``'s group ``g``: the four lookups
``vpdpbusd`` adds into lane ``i`` are row ``i``'s.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from acl26.kernels._jit import njit
from acl26.kernels.ternary.formats import BLOCK_ROWS, DECODE, FORMATS, Packed, check_format, check_shape, layout
from acl26.kernels.ternary.intrinsics import (HOST_FEATURES, HOST_SIMD_LEVEL, I8, I16, I32, I64, PREFETCH_AHEAD, ROUND,
                                               V16I, load, prefetch)
from acl26.kernels.ternary.pack import check_packed
from acl26.kernels.ternary.simd import simd_level

#: public functions of this module that are not kernels (no jitted core, so no numpy twin)
NOT_KERNELS = ("to_act8", "quads", "stride", "relayout")

#: blocks of 16 rows per tile (one task, one contiguous stream). Measured in the fused step at the 0.7B
#: shape, 2 threads, blocks' ms per token (median of 7 x 16 tokens): 7.14 / 6.59-6.61 / 6.94 / 7.79 with
#: 2 / 4 / 8 / 16
TILE = 4
QUAD = 4  # groups per quad: one 32-bit lane of vpdpbusd sums a row's four lookups
#: bytes ahead of the tile's stream the SIMD kernel prefetches, into L2 (:func:`~.intrinsics.prefetch`; the
#: figures are there). It was 2 KiB into L1 until the AMD EPYC measurement: on one 671 MB matrix of 4096-wide
#: rows (Intel Xeon, 2 threads) 20.0 GB/s without, 22.8 / 24.1 / 21.7 GB/s at 1 / 2 / 4 KiB into L1
PREFETCH = PREFETCH_AHEAD
#: whether the SIMD kernel runs here (the CPU has AVX512-BW, -VBMI and -VNNI); else the portable one
SIMD = HOST_SIMD_LEVEL == 2 and {"+avx512bw", "+avx512vbmi", "+avx512vnni"} <= HOST_FEATURES


class Act8(NamedTuple):
    """A packed matrix in the 8-bit-activation layout (see the module docstring; built by :func:`to_act8`)."""

    fmt: str
    shape: tuple[int, int]
    streams: np.ndarray  # uint8 (tiles, quads * TILE * stride)

    @property
    def nbytes(self) -> int:
        return self.streams.nbytes


STRIDE, SIGNED_STRIDE = 32, 40  # bytes per block and quad: 32 of indices, and 8 more of signs when signed


def stride(fmt: str) -> int:
    """Bytes per block and quad: 32 of indices, and 8 of signs for the signed formats."""
    return SIGNED_STRIDE if FORMATS[fmt].signed else STRIDE


def quads(fmt: str, cols: int) -> int:
    """Quads of groups in a row of ``cols`` inputs."""
    return -(-layout(fmt, (1, cols)).groups // QUAD)


def to_act8(packed: Packed) -> Act8:
    """``packed`` (a :class:`~acl26.kernels.ternary.formats.Packed` matrix) in the layout of the module
    docstring; the streams are copied, ``packed`` is unchanged."""
    if not isinstance(packed, Packed):
        raise ValueError(f"packed must be a ternary Packed matrix, got {type(packed).__name__}")
    fmt = packed.fmt
    lay = check_packed(fmt, packed)
    return Act8(fmt, lay[:2], relayout(fmt, packed.codes, packed.signs, lay.groups))


def relayout(fmt: str, codes: np.ndarray, signs: np.ndarray, groups: int) -> np.ndarray:
    """The packed streams ``codes`` (blocks, 16 * pairs) and ``signs`` (blocks, 4 * pairs) of a matrix with
    ``groups`` groups per row as :class:`Act8` streams (tiles, quads * TILE * stride)."""
    nb = codes.shape[0]
    nq = -(-groups // QUAD)
    S = stride(fmt)
    g = np.arange(QUAD * nq)
    real = g < groups
    gc = np.minimum(g, max(groups - 1, 0))
    rows16 = np.arange(BLOCK_ROWS)
    idx = np.zeros((nb, BLOCK_ROWS, QUAD * nq), np.uint8)  # (block, row, group)
    if groups:
        idx[:] = (codes[:, 16 * (gc[None, :] // 2) + rows16[:, None]] >> (4 * (gc[None, :] % 2)).astype(np.uint8)) & 15
    idx[:, :, ~real] = 0
    idx = idx.reshape(nb, BLOCK_ROWS, nq, QUAD).transpose(0, 2, 1, 3)  # (block, quad, row, g)
    tiles = -(-nb // TILE)
    out = np.zeros((tiles * TILE, nq, S), np.uint8)
    out[:nb, :, :32] = (idx[:, :, :8, :] | (idx[:, :, 8:, :] << 4)).reshape(nb, nq, 32)
    if S == SIGNED_STRIDE and groups:
        word = signs[:, 0::2].astype(np.uint16) | (signs[:, 1::2].astype(np.uint16) << 8)  # (block, group)
        bit = (word[:, gc][:, None, :] >> rows16[None, :, None].astype(np.uint16)) & 1  # (block, row, group)
        bit[:, :, ~real] = 0
        bit = bit.astype(np.uint8).reshape(nb, BLOCK_ROWS, nq, QUAD).transpose(0, 2, 1, 3).reshape(nb, nq, 64)
        out[:nb, :, 32:] = np.packbits(bit, axis=2, bitorder="little")
    return np.ascontiguousarray(out.reshape(tiles, TILE, nq, S).transpose(0, 2, 1, 3).reshape(tiles, nq * TILE * S))


def gemv_act8(a: Act8, scale, x: np.ndarray, *, parallel: bool = True, simd: str | None = None) -> np.ndarray:
    """``y = scale * (T @ xq) * sx`` (float32 ``(n_out,)``) for a matrix ``T`` in the :class:`Act8` layout and
    ``x`` (``(n_in,)``, finite) quantized to int8 as the module docstring says. ``scale``: ``()`` or
    ``(n_out,)``, finite. ``a.shape`` must fit the streams' tiles and quads (a shape claiming more rows
    within the last tile cannot be told from the streams: such rows read as zero-padded codes). ``parallel=False`` runs on one thread; ``simd="portable"`` (or any level below
    AVX-512, or a CPU without :data:`SIMD`) takes the portable path, with the same result."""
    if not isinstance(a, Act8):
        raise ValueError(f"a must be an Act8 matrix (to_act8), got {type(a).__name__}")
    fmt = a.fmt
    f = check_format(fmt)
    rows, cols = check_shape(a.shape)
    if fmt == "sherry" and cols % 4:
        raise ValueError(f"a.shape[1] (cols) must be a multiple of 4 for sherry, got {cols}")
    nq, S = quads(fmt, cols), stride(fmt)
    want = (-(-rows // (BLOCK_ROWS * TILE)), nq * TILE * S)
    if not (isinstance(a.streams, np.ndarray) and a.streams.dtype == np.uint8 and a.streams.shape == want):
        raise ValueError(f"a.streams must be uint8 {want} for {fmt} {a.shape}, got "
                         f"{getattr(a.streams, 'dtype', '')} {getattr(a.streams, 'shape', '')}")
    x = np.asarray(x)
    if x.shape != (cols,) or x.dtype.kind != "f":
        raise ValueError(f"x must be float ({cols},), got {x.dtype} {x.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = np.ascontiguousarray(x, np.float32)
    if not np.isfinite(x32).all():
        raise ValueError("x must be finite in float32 (no NaN or inf)")
    s = np.asarray(scale)
    if s.dtype.kind != "f" or s.shape not in ((), (1,), (rows,)):
        raise ValueError(f"scale must be float with shape () or ({rows},), got {s.dtype} {s.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        s32 = np.ascontiguousarray(np.broadcast_to(s.reshape(-1) if s.ndim else s, (rows,)), np.float32)
    if not np.isfinite(s32).all():
        raise ValueError("scale must be finite in float32 (no NaN or inf)")
    level = simd_level(simd)
    xq = np.zeros(QUAD * f.group * nq, np.int8)
    tab = np.zeros(256 * nq, np.uint8)
    y = np.empty(rows, np.float32)
    acc = np.empty((want[0], BLOCK_ROWS * TILE), np.int32)
    sx = np.float32(quantize_int8(x32, xq))  # numba hands a float32 back as a Python float
    fill_tables(xq, DEC16[fmt], tab, nq)
    streams = np.ascontiguousarray(a.streams)
    if parallel:
        gemv_par(streams, s32, tab, sx, y, acc, f.signed, nq, level)
    else:
        _gemv_ser(streams, s32, tab, sx, y, acc, f.signed, nq, level)
    return y


#: per format, the weights of the 32 codes by position in the group: (G, 32) int16
DEC16 = {name: np.ascontiguousarray(d.T.astype(np.int16)) for name, d in DECODE.items()}


_TINY = 2.0 ** -100  # max|x| below this quantizes to zero (1 / (max|x| / 127) must stay finite)
_TINY_BITS = np.uint32(np.float32(_TINY).view(np.uint32))


@njit(cache=True)
def quantize_int8(x, xq):
    """``xq[:n] = round_half_even(x * (1 / sx))`` int8 with ``sx = max|x| / 127`` (float32), ``xq[n:] = 0``;
    returns ``sx``. A vector with ``max|x| < 2**-100`` counts as zero (``sx = 1``, ``xq = 0``: below that
    ``1 / sx`` can overflow float32); a vector with inf or NaN gives ``sx = NaN`` and ``xq = 0``. The
    maximum is taken on the bits (``|x|``'s order is its bits' order) and the rounding by adding and
    subtracting 1.5 * 2**23, so both loops vectorize."""
    bits = x.view(np.uint32)
    mb = np.uint32(0)
    for j in range(x.shape[0]):
        mb = max(mb, bits[j] & np.uint32(0x7FFFFFFF))
    for j in range(x.shape[0], xq.shape[0]):
        xq[j] = 0
    if mb >= np.uint32(0x7F800000):  # inf or NaN
        for j in range(x.shape[0]):
            xq[j] = 0
        return np.float32(np.nan)
    m = np.empty(1, np.uint32)
    m[0] = mb
    if mb < _TINY_BITS:
        for j in range(x.shape[0]):
            xq[j] = 0
        return np.float32(1.0)
    sx = m.view(np.float32)[0] / np.float32(127.0)
    inv = np.float32(1.0) / sx
    for j in range(x.shape[0]):  # |x * inv| <= 127 (+ rounding): no clamp needed, the int8 cast is exact
        xq[j] = np.int8((x[j] * inv + ROUND) - ROUND)
    return sx


@intrinsic
def _fill_quads(typingctx, xq, D, tab, nq):
    """The byte planes of every quad's tables (see :func:`fill_tables`); ``D`` is the format's (G, 32) int16
    code weights. Plain vector IR (32 int16 lanes per group), for any CPU."""
    if not all(isinstance(a, types.Array) and a.layout == "C" for a in (xq, D, tab)):
        return None
    sig = types.void(xq, D, tab, nq)

    def codegen(context, builder, signature, args):
        tys = signature.args
        xa, da, ta = (context.make_array(tys[k])(context, builder, args[k]) for k in range(3))
        G = builder.extract_value(da.shape, 0)
        n = context.cast(builder, args[3], tys[3], types.int64)
        v32w, v32b = ir.VectorType(I16, 32), ir.VectorType(I8, 32)
        i64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        gq = builder.mul(n, i64(QUAD))
        with cgutils.for_range(builder, gq) as it:  # group j of the row
            j = it.index
            acc = cgutils.alloca_once_value(builder, ir.Constant(v32w, [0] * 32))
            with cgutils.for_range(builder, G) as tt:
                t = tt.index
                w = load(builder, builder.gep(da.data, [builder.mul(t, i64(32))], source_etype=I16), v32w)
                a = builder.load(builder.gep(xa.data, [builder.add(builder.mul(j, G), t)], source_etype=I8))
                a32 = builder.shuffle_vector(builder.insert_element(ir.Constant(v32w, None), builder.sext(a, I16),
                                                                    ir.Constant(I32, 0)),
                                             ir.Constant(v32w, None), ir.Constant(ir.VectorType(I32, 32), [0] * 32))
                builder.store(builder.add(builder.load(acc), builder.mul(w, a32)), acc)
            v = builder.load(acc)
            q, g = builder.udiv(j, i64(QUAD)), builder.urem(j, i64(QUAD))
            base = builder.add(builder.mul(q, i64(256)), builder.mul(g, i64(32)))
            lo = builder.trunc(v, v32b)
            hi = builder.trunc(builder.ashr(v, ir.Constant(v32w, [8] * 32)), v32b)
            for plane, val in ((0, lo), (128, hi)):
                dst = builder.gep(ta.data, [builder.add(base, i64(plane))], source_etype=I8)
                builder.store(val, builder.bitcast(dst, v32b.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True)
def fill_tables(xq, D, tab, nq):
    """``tab[256*q + 32*g + c]`` / ``tab[256*q + 128 + 32*g + c]`` = low / high byte of
    ``sum_t D[t, c] * xq[G*(4*q + g) + t]`` for every quad ``q < nq``, group ``g`` and code ``c``."""
    _fill_quads(xq, D, tab, nq)


@intrinsic(prefer_literal=True)
def _tile_simd(typingctx, st, tab, acc, t, nq, signed, nblk):
    """``acc[16*q + i]`` (int32) = row ``i`` of block ``q`` of tile ``t``: the sum over ``nq`` quads of its
    four groups' table entries (both planes), for ``nblk`` (a literal) blocks. AVX512-VBMI/VNNI code; it
    emits nothing where :data:`SIMD` is False (the callers take the portable path there)."""
    if not isinstance(nblk, types.IntegerLiteral):
        return None
    if not all(isinstance(a, types.Array) and a.layout == "C" for a in (st, tab, acc)):
        return None
    nb = nblk.literal_value
    sig = types.void(st, tab, acc, t, nq, signed, nblk)

    def codegen(context, builder, signature, args):
        if not SIMD:
            return context.get_dummy_value()
        tys = signature.args
        arys = [context.make_array(tys[k])(context, builder, args[k]) for k in range(3)]
        sptr, tptr, optr = (a.data for a in arys)
        width = builder.extract_value(arys[0].shape, 1)
        t_, nq_ = (context.cast(builder, args[k], tys[k], types.int64) for k in (3, 4))
        signed_ = context.cast(builder, args[5], tys[5], types.boolean)
        i64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        v64b, v32b, v32w = ir.VectorType(I8, 64), ir.VectorType(I8, 32), ir.VectorType(I16, 32)
        mod = builder.module
        perm = cgutils.get_or_insert_function(mod, ir.FunctionType(v64b, [v64b] * 3), "llvm.x86.avx512.vpermi2var.qi.512")
        dp = cgutils.get_or_insert_function(mod, ir.FunctionType(V16I, [V16I, v64b, v64b]), "llvm.x86.avx512.vpdpbusd.512")
        ones = ir.Constant(v64b, [1] * 64)
        group_off = ir.Constant(v64b, [(k % QUAD) << 5 for k in range(64)])  # table of group k % 4 in the 128 bytes
        shifts = ir.Constant(v32w, [0] * 16 + [4] * 16)  # low nibbles to bytes 0-31, high ones to 32-63
        accs = [cgutils.alloca_once_value(builder, ir.Constant(V16I, [0] * 16)) for _ in range(2 * nb)]
        base = builder.gep(sptr, [builder.mul(t_, width)], source_etype=I8)

        def loop(S):
            with cgutils.for_range(builder, nq_) as it:
                tb = builder.gep(tptr, [builder.mul(it.index, i64(256))], source_etype=I8)
                planes = [load(builder, builder.gep(tb, [i64(64 * u)], source_etype=I8), v64b) for u in range(4)]
                qb = builder.gep(base, [builder.mul(it.index, i64(nb * S))], source_etype=I8)
                for line in range(0, nb * S, 64):
                    prefetch(builder, qb, PREFETCH + line)
                for q in range(nb):
                    p = builder.gep(qb, [i64(q * S)], source_etype=I8)
                    c = load(builder, p, v32b)
                    c = builder.shuffle_vector(c, c, ir.Constant(ir.VectorType(I32, 64), list(range(32)) * 2))
                    c = builder.bitcast(builder.lshr(builder.bitcast(c, v32w), shifts), v64b)
                    idx = builder.or_(builder.and_(c, ir.Constant(v64b, [15] * 64)), group_off)
                    if S == SIGNED_STRIDE:
                        m = builder.bitcast(load(builder, builder.gep(p, [i64(32)], source_etype=I8), I64),
                                            ir.VectorType(ir.IntType(1), 64))
                        idx = builder.select(m, builder.or_(idx, ir.Constant(v64b, [16] * 64)), idx)
                    lo = builder.call(perm, [planes[0], idx, planes[1]])
                    hi = builder.call(perm, [planes[2], idx, planes[3]])
                    builder.store(builder.call(dp, [builder.load(accs[2 * q]), lo, ones]), accs[2 * q])
                    builder.store(builder.call(dp, [builder.load(accs[2 * q + 1]), ones, hi]), accs[2 * q + 1])

        with builder.if_else(signed_) as (then, other):
            with then:
                loop(SIGNED_STRIDE)
            with other:
                loop(STRIDE)
        for q in range(nb):
            v = builder.add(builder.load(accs[2 * q]), builder.shl(builder.load(accs[2 * q + 1]), ir.Constant(V16I, [8] * 16)))
            dst = builder.gep(optr, [i64(16 * q)], source_etype=I32)
            builder.store(v, builder.bitcast(dst, V16I.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True)
def _tile_portable(st, tab, acc, t, nq, signed):
    """:func:`_tile_simd`'s sums one lookup at a time (any CPU); the same integers."""
    S = SIGNED_STRIDE if signed else STRIDE
    for k in range(BLOCK_ROWS * TILE):
        acc[k] = 0
    for qd in range(nq):
        for q in range(TILE):
            off = (qd * TILE + q) * S
            for k in range(64):
                byte = np.int32(st[t, off + (k & 31)])
                c = (byte >> (4 * (k >> 5))) & 15
                if signed and (st[t, off + 32 + (k >> 3)] >> (k & 7)) & 1:
                    c |= 16
                e = 256 * qd + 32 * (k & 3) + c
                hi = np.int32(tab[e + 128])
                acc[BLOCK_ROWS * q + (k >> 2)] += np.int32(tab[e]) + 256 * (hi - 256 if hi >= 128 else hi)


@njit(cache=True)
def _tile(st, scale, tab, sx, y, acc, t, signed, nq, level):
    """Rows ``16 * TILE * t ..`` of ``y``: the tile's integer sums, times ``sx``, times the row's scale."""
    if SIMD and level >= 2:
        _tile_simd(st, tab, acc, t, nq, signed, TILE)
    else:
        _tile_portable(st, tab, acc, t, nq, signed)
    r0 = BLOCK_ROWS * TILE * t
    for i in range(min(BLOCK_ROWS * TILE, y.shape[0] - r0)):
        y[r0 + i] = np.float32(acc[i]) * np.float32(sx) * scale[r0 + i]


@njit(cache=True, parallel=True)
def gemv_par(st, scale, tab, sx, y, acc, signed, nq, level):
    for t in prange(st.shape[0]):
        _tile(st, scale, tab, sx, y, acc[t], t, signed, nq, level)


@njit(cache=True)
def _gemv_ser(st, scale, tab, sx, y, acc, signed, nq, level):
    for t in range(st.shape[0]):
        _tile(st, scale, tab, sx, y, acc[t], t, signed, nq, level)
