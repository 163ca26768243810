"""The SIMD heart of the lookup-table kernels: one Numba intrinsic, :func:`lut_tile`, that sums signed
table lookups for blocks of 16 rows (AVX-512 / AVX2 / portable LLVM IR, picked at run time), the
table fill :func:`lut_fill`, and :func:`simd_level`, the level a call runs at (the LLVM building blocks
and what the host allows are :mod:`.intrinsics`')."""

from __future__ import annotations

import os

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from acl26.kernels.ternary.intrinsics import F32, HOST_SIMD_LEVEL, I8, I16, I32, I64, V8F, V8I, V16F, V16I, load, splat

#: public functions of this module that are not kernels (no jitted core, so no numpy twin)
NOT_KERNELS = ("simd_level",)

SIMD_LEVELS = {"portable": 0, "avx2": 1, "avx512": 2}


def _lookup16(builder, level, table, idx):
    """``table[idx[lane]]`` for 16 lanes: ``table`` points at 16 floats, ``idx`` is <16 x i32> in 0..15."""
    if level == 2:
        perm = cgutils.get_or_insert_function(builder.module, ir.FunctionType(V16F, [V16F, V16I]),
                                              "llvm.x86.avx512.permvar.sf.512")
        return builder.call(perm, [load(builder, table, V16F), idx])
    if level == 1:
        perm = cgutils.get_or_insert_function(builder.module, ir.FunctionType(V8F, [V8F, V8I]),
                                              "llvm.x86.avx2.permps")
        lo = load(builder, table, V8F)
        hi = load(builder, builder.gep(table, [ir.Constant(I64, 8)], source_etype=F32), V8F)
        halves = []
        for h in range(2):
            ih = builder.shuffle_vector(idx, idx, ir.Constant(V8I, list(range(8 * h, 8 * h + 8))))
            upper = builder.icmp_unsigned("!=", builder.and_(ih, splat(V8I, 8)), splat(V8I, 0))
            halves.append(builder.select(upper, builder.call(perm, [hi, ih]), builder.call(perm, [lo, ih])))
        return builder.shuffle_vector(halves[0], halves[1], ir.Constant(V16I, list(range(16))))
    out = ir.Constant(V16F, None)
    for lane in range(16):
        k = builder.zext(builder.extract_element(idx, ir.Constant(I32, lane)), I64)
        v = builder.load(builder.gep(table, [k], source_etype=F32), align=4, typ=F32)
        out = builder.insert_element(out, v, ir.Constant(I32, lane))
    return out


@intrinsic(prefer_literal=True)
def lut_tile(typingctx, codes, signs, lut, out, b, p0, npairs, c0, level, signed, nblk, ncols):
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
            return ir.Constant(I64, v)

        def at(base, etype, *terms):  # &base[sum of (a * b) terms]
            off = i64(0)
            for a, k in terms:
                off = builder.add(off, builder.mul(a, k if isinstance(k, ir.Value) else i64(k)))
            return builder.gep(base, [off], source_etype=etype)

        accs = [cgutils.alloca_once(builder, V16F) for _ in range(nb * nc)]
        for acc in accs:
            builder.store(splat(V16F, 0.0), acc)
        blocks = [builder.add(b_, i64(q)) for q in range(nb)]

        def loop(level, has_sign):
            with cgutils.for_range(builder, npairs_) as it:
                m = builder.add(p0_, it.index)
                for q, blk in enumerate(blocks):
                    c32 = builder.zext(load(builder, at(cptr, I8, (blk, cw), (m, 16)), ir.VectorType(I8, 16)), V16I)
                    nibbles = (builder.and_(c32, splat(V16I, 15)), builder.lshr(c32, splat(V16I, 4)))
                    for h, idx in enumerate(nibbles):
                        j = builder.add(builder.mul(m, i64(2)), i64(h))
                        if has_sign:
                            word = load(builder, at(sptr, I8, (blk, sw), (j, 2)), I16)
                            neg = builder.bitcast(word, ir.VectorType(ir.IntType(1), 16))
                        for c in range(nc):
                            col = builder.add(c0_, i64(c))
                            v = _lookup16(builder, level, at(lptr, F32, (col, lw), (j, 16)), idx)
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
            dst = builder.gep(optr, [i64(16 * k)], source_etype=F32)
            builder.store(builder.load(acc), builder.bitcast(dst, V16F.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


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


@intrinsic(prefer_literal=True)
def lut_fill(typingctx, x, PT, lut, groups, G):
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
        rows = [load(builder, builder.gep(pptr, [ir.Constant(I64, 16 * t)], source_etype=F32), V16F)
                for t in range(g)]
        with cgutils.for_range(builder, n) as it:
            acc = splat(V16F, 0.0)
            for t in range(g):
                k = builder.add(builder.mul(it.index, ir.Constant(I64, g)), ir.Constant(I64, t))
                a = builder.load(builder.gep(xptr, [k], source_etype=F32))
                a16 = builder.shuffle_vector(builder.insert_element(ir.Constant(V16F, None), a, ir.Constant(I32, 0)),
                                             ir.Constant(V16F, None), ir.Constant(V16I, [0] * 16))
                acc = builder.fadd(acc, builder.fmul(rows[t], a16))
            dst = builder.gep(lptr, [builder.mul(it.index, ir.Constant(I64, 16))], source_etype=F32)
            builder.store(acc, builder.bitcast(dst, V16F.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen
