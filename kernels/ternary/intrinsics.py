"""The LLVM building blocks of the kernels' SIMD code, in one place for :mod:`.simd` (the float32 lookup
tables), :mod:`.act8` (the byte tables) and :mod:`acl26.kernels.decode` (the fused step).

* What the code numba generates here may use: :func:`host_features`, :data:`HOST_FEATURES`,
  :data:`HOST_SIMD_LEVEL` (0 portable, 1 AVX2, 2 AVX-512) and :data:`BF16_INPUTS`.
* LLVM IR types (:data:`F32`, :data:`I8` .. :data:`I64`, the vectors :data:`V16F`, :data:`V16I`, :data:`V8F`,
  :data:`V8I`, :class:`BFloat`) and helpers for an intrinsic's code generation (:func:`splat`, :func:`load`,
  :func:`fma16`, :func:`hsum`, :func:`row_ptr`, :func:`vec_ptr`, :func:`prefetch`).
* Numba intrinsics, called from jitted code: the scalar bit casts :func:`f32_of_bf16`, :func:`f32_of_f16`,
  :func:`f32_bits` and :func:`f32_of_bits`; the 16-lane float32 loops :func:`vdot` and :func:`vaxpy` and the
  KV cache's element access :func:`kv_get` / :func:`kv_put` (float32, or float16 bits in uint16); the
  row dot products :func:`dot64_bf16` (bfloat16 weights) and :func:`dot_q8_blocks` (int8 weights, a scale
  per block of :data:`Q8_BLOCK`).
* :data:`ROUND`: ``v + ROUND - ROUND`` rounds a float32 to an integer with two adds, so loops over it
  vectorize.

A kernel module keeps the intrinsics only it uses (the lookup-table tile in :mod:`.simd`, the byte-table
tile in :mod:`.act8`); what two modules share lives here, under public names.
"""

from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: public functions of this module that are not kernels (code-generation helpers: no jitted core, no numpy twin)
NOT_KERNELS = ("host_features", "splat", "load", "fma16", "hsum", "row_ptr", "vec_ptr", "load16f", "prefetch")


def host_features() -> frozenset[str]:
    """The x86 features (``"+avx512f"``, ...) the code numba generates here may use: numba's pinned
    ``CPU_FEATURES`` when the CPU is pinned (e.g. generic, for a portable cache), else the host's; empty
    off x86."""
    from numba.core import config

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    if config.CPU_FEATURES or config.CPU_NAME not in (None, "host"):
        return frozenset((config.CPU_FEATURES or "").split(","))
    import llvmlite.binding as llvm

    return frozenset(f"+{k}" for k, v in llvm.get_host_cpu_features().items() if v)


HOST_FEATURES = host_features()


def _host_simd_level() -> int:
    """Best SIMD level the code numba generates here may use (0 when not x86 or CPU pinned to generic)."""
    return 2 if "+avx512f" in HOST_FEATURES else 1 if "+avx2" in HOST_FEATURES else 0


HOST_SIMD_LEVEL = _host_simd_level()

#: whether the CPU has AVX-512 BW (dot_q8_blocks sums int16 products in pairs with vpmaddwd)
_HOST_AVX512BW = HOST_SIMD_LEVEL == 2 and "+avx512bw" in HOST_FEATURES
#: whether bf16 matrices and the bf16 head multiply bf16-rounded inputs with AVX512-BF16's vdpbf16ps (the
#: CPU has it) rather than widening each weight to float32 and multiplying float32 inputs
BF16_INPUTS = HOST_SIMD_LEVEL == 2 and "+avx512bf16" in HOST_FEATURES


#: ``v + ROUND - ROUND`` rounds a float32 ``|v| < 2**22`` to an integer, half to even
ROUND = np.float32(1.5 * 2 ** 23)
#: int8 weights per scale in :func:`dot_q8_blocks` (ggml's Q8_0 block: the layout of the fused step's 8-bit head)
Q8_BLOCK = 32


F32, I8, I16, I32, I64 = ir.FloatType(), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
V16F, V16I = ir.VectorType(F32, 16), ir.VectorType(I32, 16)
V8F, V8I = ir.VectorType(F32, 8), ir.VectorType(I32, 8)

#: bytes ahead of a weight stream that :func:`prefetch` asks for, and its LLVM locality hint (2: ``prefetcht1``
#: on x86, into L2). Measured on an AMD EPYC (Zen 4 class, 2 threads), in one process, rounds rotated: the
#: 8-bit-activation kernel over the 96 projection matrices of a 0.7B decode step (24 x 4, from DRAM) took
#: 5.63 ms with the earlier 2 KiB into L1 (``prefetcht0``) and 3.95 ms at 8 KiB into L2 (4 KiB: 4.30, 16 KiB:
#: 4.02; 8 KiB with ``prefetcht2``: 3.94); at the 1B shape 9.70 ms against 6.06. The 8-bit head (Q8_0
#: rows of 1536, vocabulary 32,000): 1.51 ms without a prefetch, 1.18 with. The bf16 head reads faster
#: without one (1.72 against 2.39 ms), so :func:`dot64_bf16` has none
PREFETCH_AHEAD = 8192
PREFETCH_LOCALITY = 2


def prefetch(builder, ptr, ahead: int = PREFETCH_AHEAD):
    """A read prefetch (:data:`PREFETCH_LOCALITY`) of the cache line ``ahead`` bytes past ``ptr`` (any pointer
    type). A hint: it never faults, so a line past the end of an array is harmless."""
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ir.PointerType(I8), I32, I32, I32]),
                                        "llvm.prefetch.p0")
    p = builder.gep(builder.bitcast(ptr, ir.PointerType(I8)), [ir.Constant(I64, ahead)], source_etype=I8)
    builder.call(fn, [p, ir.Constant(I32, 0), ir.Constant(I32, PREFETCH_LOCALITY), ir.Constant(I32, 1)])


def splat(ty, value):
    return ir.Constant(ty, [value] * ty.count)


def load(builder, ptr, ty):
    """An unaligned load of a ``ty`` from ``ptr`` (any pointer type)."""
    return builder.load(builder.bitcast(ptr, ty.as_pointer()), align=1)


def fma16(builder):
    """LLVM's <16 x float> fused multiply-add."""
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(V16F, [V16F] * 3), "llvm.fma.v16f32")


def hsum(builder, v):
    """The sum of a <16 x float>'s lanes, as a tree (lanes i and i + width/2)."""
    width = 16
    while width > 1:
        half = width // 2
        hi = builder.shuffle_vector(v, v, ir.Constant(V16I, [half + i if i < half else i for i in range(16)]))
        v = builder.fadd(v, hi)
        width = half
    return builder.extract_element(v, ir.Constant(I32, 0))


def row_ptr(context, builder, ty, val, r, etype):
    """Pointer to row ``r`` (an i64) of a 2-D C array."""
    a = context.make_array(ty)(context, builder, val)
    return builder.gep(a.data, [builder.mul(r, builder.extract_value(a.shape, 1))], source_etype=etype)


def vec_ptr(context, builder, ty, val, off):
    """Pointer to element ``off`` of a 1-D C array (float32, or uint16: float16 bits, see :func:`load16f`)."""
    a = context.make_array(ty)(context, builder, val)
    return builder.gep(a.data, [off], source_etype=I16 if ty.dtype == types.uint16 else F32)


#: the element types :func:`vdot`'s ``b``, :func:`vaxpy`'s ``a``, :func:`kv_get` and :func:`kv_put` take: float32,
#: or uint16 holding float16 bits (the fused step's f16 KV cache)
KV_DTYPES = (types.float32, types.uint16)


def _kv_array(a) -> bool:
    return isinstance(a, types.Array) and a.layout == "C" and a.ndim == 1 and a.dtype in KV_DTYPES


def load16f(builder, ptr, ty, off):
    """16 float32 lanes from element ``off`` of ``ptr`` (from :func:`vec_ptr` of an array of type ``ty``):
    float32 as they are, float16 bits (a uint16 array) widened exactly."""
    if ty.dtype == types.uint16:
        h = load(builder, builder.gep(ptr, [off], source_etype=I16), ir.VectorType(I16, 16))
        return builder.fpext(builder.bitcast(h, ir.VectorType(ir.HalfType(), 16)), V16F)
    return load(builder, builder.gep(ptr, [off], source_etype=F32), V16F)


class BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite has no class for it; its IR is text)."""

    def _to_string(self):
        return "bfloat"


def _bits_to_float32(doc: str, lower):
    """A scalar intrinsic: float32 of the 16-bit pattern ``u`` (an integer), by ``lower(builder, u)``."""

    def typer(typingctx, u):
        if not isinstance(u, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            v = builder.trunc(args[0], ir.IntType(16)) if args[0].type.width > 16 else args[0]
            return lower(builder, v)

        return types.float32(u), codegen

    typer.__doc__ = doc
    return intrinsic(typer)


#: float32 of bfloat16 bits (uint16): ``bits << 16`` reinterpreted, exact
f32_of_bf16 = _bits_to_float32("float32 of bfloat16 bits, exact", lambda b, v: b.bitcast(
    b.shl(b.zext(v, ir.IntType(32)), ir.Constant(ir.IntType(32), 16)), ir.FloatType()))
#: float32 of float16 bits (uint16), exact
f32_of_f16 = _bits_to_float32("float32 of float16 bits, exact", lambda b, v: b.fpext(b.bitcast(v, ir.HalfType()),
                                                                                ir.FloatType()))


@intrinsic
def f32_bits(typingctx, v):
    """The bits of a float32 as uint32."""
    if v != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(v), codegen


@intrinsic
def f32_of_bits(typingctx, u):
    """The float32 whose bits are the low 32 bits of the integer ``u``."""
    if not isinstance(u, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        v = builder.trunc(v, ir.IntType(32)) if v.type.width > 32 else v
        return builder.bitcast(v, ir.FloatType())

    return types.float32(u), codegen


@intrinsic
def kv_get(typingctx, a, i):
    """Element ``i`` of a 1-D C array as float32: a float32 as it is, float16 bits (uint16) widened exactly."""
    if not (_kv_array(a) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        ty = signature.args[0]
        v = builder.load(vec_ptr(context, builder, ty, args[0], context.cast(builder, args[1], signature.args[1],
                                                                             types.int64)))
        return builder.fpext(builder.bitcast(v, ir.HalfType()), F32) if ty.dtype == types.uint16 else v

    return types.float32(a, i), codegen


@intrinsic
def kv_put(typingctx, a, i, v):
    """``a[i] = v`` for a float32 ``v``: as it is into a float32 array, rounded to float16 (to nearest, ties to
    even; past the float16 range, inf) into a uint16 array of float16 bits."""
    if not (_kv_array(a) and isinstance(i, types.Integer) and v == types.float32):
        return None

    def codegen(context, builder, signature, args):
        ty = signature.args[0]
        p = vec_ptr(context, builder, ty, args[0], context.cast(builder, args[1], signature.args[1], types.int64))
        val = args[2]
        if ty.dtype == types.uint16:
            val = builder.bitcast(builder.fptrunc(val, ir.HalfType()), I16)
        builder.store(val, p)
        return context.get_dummy_value()

    return types.void(a, i, v), codegen


@intrinsic
def vdot(typingctx, a, ao, b, bo, n):
    """``sum_{i < n} a[ao + i] * b[bo + i]`` for ``n`` a multiple of 16 (16-lane FMAs, a tree sum); 1-D
    C-contiguous arrays, ``a`` float32, ``b`` float32 or float16 bits (uint16, widened exactly)."""
    if not (_kv_array(a) and a.dtype == types.float32 and _kv_array(b)):
        return None
    sig = types.float32(a, ao, b, bo, n)

    def codegen(context, builder, signature, args):
        tys = signature.args
        ao_, bo_, n_ = (context.cast(builder, args[k], tys[k], types.int64) for k in (1, 3, 4))
        pa, pb = vec_ptr(context, builder, tys[0], args[0], ao_), vec_ptr(context, builder, tys[2], args[2], bo_)
        fma = fma16(builder)
        acc = cgutils.alloca_once(builder, V16F)
        builder.store(splat(V16F, 0.0), acc)
        with cgutils.for_range(builder, builder.udiv(n_, ir.Constant(I64, 16))) as it:
            off = builder.mul(it.index, ir.Constant(I64, 16))
            va = load(builder, builder.gep(pa, [off], source_etype=F32), V16F)
            vb = load16f(builder, pb, tys[2], off)
            builder.store(builder.call(fma, [va, vb, builder.load(acc)]), acc)
        return hsum(builder, builder.load(acc))

    return sig, codegen


@intrinsic
def vaxpy(typingctx, y, yo, a, ao, p, n):
    """``y[yo + i] += p * a[ao + i]`` for ``i < n``, ``n`` a multiple of 16 (1-D C arrays: ``y`` float32, ``a``
    float32 or float16 bits, uint16, widened exactly)."""
    if not (_kv_array(y) and y.dtype == types.float32 and _kv_array(a)):
        return None
    sig = types.void(y, yo, a, ao, p, n)

    def codegen(context, builder, signature, args):
        tys = signature.args
        yo_, ao_, n_ = (context.cast(builder, args[k], tys[k], types.int64) for k in (1, 3, 5))
        py, pa = vec_ptr(context, builder, tys[0], args[0], yo_), vec_ptr(context, builder, tys[2], args[2], ao_)
        pv = context.cast(builder, args[4], tys[4], types.float32)
        pv = builder.shuffle_vector(builder.insert_element(ir.Constant(V16F, None), pv, ir.Constant(I32, 0)),
                                    ir.Constant(V16F, None), ir.Constant(V16I, [0] * 16))
        fma = fma16(builder)
        with cgutils.for_range(builder, builder.udiv(n_, ir.Constant(I64, 16))) as it:
            off = builder.mul(it.index, ir.Constant(I64, 16))
            yp = builder.gep(py, [off], source_etype=F32)
            va = load16f(builder, pa, tys[2], off)
            builder.store(builder.call(fma, [pv, va, load(builder, yp, V16F)]),
                          builder.bitcast(yp, V16F.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def dot64_bf16(typingctx, W, r, x, xb, m):
    """``sum_j<m W[r, j] * x[j]`` for ``m`` a multiple of 64, ``W`` bf16 bits (uint16), four independent
    16-lane accumulators (64 weights per step), summed as a tree at the end. With AVX512-BF16
    (:data:`BF16_INPUTS`): ``vdpbf16ps`` on ``xb``, the inputs rounded to bf16 (as a bf16 matrix product
    in PyTorch rounds them); else each weight widened to float32 (``bits << 16``, exact) and multiplied
    by the float32 ``x`` with FMAs (LLVM splits the vectors on a CPU without 16-lane registers)."""
    if not all(isinstance(a, types.Array) and a.layout == "C" for a in (W, x, xb)):
        return None
    sig = types.float32(W, r, x, xb, m)

    def codegen(context, builder, signature, args):
        tys = signature.args
        xa = context.make_array(tys[2])(context, builder, args[2])
        r_ = context.cast(builder, args[1], tys[1], types.int64)
        m_ = context.cast(builder, args[4], tys[4], types.int64)
        wrow = row_ptr(context, builder, tys[0], args[0], r_, I16)
        fma = fma16(builder)
        v16i16 = ir.VectorType(I16, 16)
        accs = [cgutils.alloca_once(builder, V16F) for _ in range(4)]
        for a in accs:
            builder.store(splat(V16F, 0.0), a)
        steps = builder.udiv(m_, ir.Constant(I64, 64))
        xba = context.make_array(tys[3])(context, builder, args[3])
        v32bf = ir.VectorType(BFloat(), 32)
        dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(V16F, [V16F, v32bf, v32bf]),
                                            "llvm.x86.avx512bf16.dpbf16ps.512") if BF16_INPUTS else None
        with cgutils.for_range(builder, steps) as it:
            base = builder.mul(it.index, ir.Constant(I64, 64))
            if BF16_INPUTS:  # 32 weight pairs per instruction, two accumulators
                for u in range(2):
                    off = builder.add(base, ir.Constant(I64, 32 * u))
                    w = builder.bitcast(load(builder, builder.gep(wrow, [off], source_etype=I16),
                                             ir.VectorType(I16, 32)), v32bf)
                    xv = builder.bitcast(load(builder, builder.gep(xba.data, [off], source_etype=I16),
                                              ir.VectorType(I16, 32)), v32bf)
                    builder.store(builder.call(dp, [builder.load(accs[u]), w, xv]), accs[u])
            else:
                for u, acc in enumerate(accs):
                    off = builder.add(base, ir.Constant(I64, 16 * u))
                    w = load(builder, builder.gep(wrow, [off], source_etype=I16), v16i16)
                    w = builder.bitcast(builder.shl(builder.zext(w, V16I), splat(V16I, 16)), V16F)
                    xv = load(builder, builder.gep(xa.data, [off], source_etype=F32), V16F)
                    builder.store(builder.call(fma, [w, xv, builder.load(acc)]), acc)
        v = builder.fadd(builder.fadd(builder.load(accs[0]), builder.load(accs[1])),
                         builder.fadd(builder.load(accs[2]), builder.load(accs[3])))
        return hsum(builder, v)

    return sig, codegen


@intrinsic
def dot_q8_blocks(typingctx, Q, S, r, xq, nb):
    """``sum_{b < nb} d[r, b] * sum_{j in block b} Q[r, j] * xq[j]`` over whole blocks of 32, ``xq`` the
    int16 activations: per block, 32 int8 x int16 products summed in int32 (exact), converted to float32
    and multiplied by the block's scale into a running 16-lane vector; a tree sum at the end. ``Q`` int8
    and ``S`` (float16 bits) 2-D, ``xq`` int16 1-D, all C-contiguous."""
    if not all(isinstance(a, types.Array) and a.layout == "C" for a in (Q, S, xq)):
        return None
    sig = types.float32(Q, S, r, xq, nb)

    def codegen(context, builder, signature, args):
        tys = signature.args
        xa = context.make_array(tys[3])(context, builder, args[3])
        r_ = context.cast(builder, args[2], tys[2], types.int64)
        nb_ = context.cast(builder, args[4], tys[4], types.int64)
        qrow = row_ptr(context, builder, tys[0], args[0], r_, I8)
        srow = row_ptr(context, builder, tys[1], args[1], r_, I16)
        fma = fma16(builder)
        v32i32, v32i16 = ir.VectorType(I32, 32), ir.VectorType(I16, 32)
        total = cgutils.alloca_once(builder, V16F)
        builder.store(splat(V16F, 0.0), total)
        with cgutils.for_range(builder, nb_) as it:
            off = builder.mul(it.index, ir.Constant(I64, Q8_BLOCK))
            prefetch(builder, builder.gep(qrow, [off], source_etype=I8))  # 2 per 64-byte line: cheaper than a branch
            q = load(builder, builder.gep(qrow, [off], source_etype=I8), ir.VectorType(I8, 32))
            xv = load(builder, builder.gep(xa.data, [off], source_etype=I16), v32i16)
            if _HOST_AVX512BW:  # vpmaddwd: adjacent int16 products summed in pairs, one instruction
                pmadd = cgutils.get_or_insert_function(builder.module, ir.FunctionType(V16I, [v32i16, v32i16]),
                                                       "llvm.x86.avx512.pmaddw.d.512")
                s32 = builder.call(pmadd, [builder.sext(q, v32i16), xv])
            else:  # |q x| <= 127 * 32767: the sum of 32 fits in int32
                p = builder.mul(builder.sext(q, v32i32), builder.sext(xv, v32i32))
                s32 = builder.add(builder.shuffle_vector(p, p, ir.Constant(V16I, list(range(16)))),
                                  builder.shuffle_vector(p, p, ir.Constant(V16I, list(range(16, 32)))))
            acc = builder.sitofp(s32, V16F)
            d16 = builder.load(builder.gep(srow, [it.index], source_etype=I16))
            d = builder.fpext(builder.bitcast(d16, ir.HalfType()), F32)
            dv = builder.shuffle_vector(builder.insert_element(ir.Constant(V16F, None), d, ir.Constant(I32, 0)),
                                        ir.Constant(V16F, None), ir.Constant(V16I, [0] * 16))
            builder.store(builder.call(fma, [acc, dv, builder.load(total)]), total)
        return hsum(builder, builder.load(total))

    return sig, codegen
