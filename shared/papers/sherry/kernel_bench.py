"""Sherry (ACL 2026, arXiv 2601.07892): timings of the ternary kernels in :mod:`acl26.kernels.ternary`.

``time_kernels()`` times, at a 4096 x 4096 layer with float32 activations on (at most) 2 threads, the
lookup-table GEMV of the three packed formats -- Sherry 1.25-bit, TL2-like 1.67-bit, I2_S-like
2-bit -- against numpy's float32 GEMV, interleaved in rounds whose order rotates every round, so that every ratio compares runs made under the same
machine load; then batched GEMM (prefill), packing and unpacking. It returns
the JSON the book's Performance page reads: rows (medians, same-run ratios) and goals (target,
measured, met). Nothing is asserted: a goal that is not met is reported as such.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from acl26 import timing
from acl26.kernels import ternary as tn

FORMATS = ("sherry", "tl2", "i2")


def _interleaved(cands, rounds: int) -> dict[str, float]:
    """Median seconds per call of each candidate over :func:`acl26.timing.interleaved` rounds (order rotated)."""
    return {k: timing.median(v) for k, v in timing.interleaved(cands, rounds).items()}


def _setup(n_out: int, n_in: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n_out, n_in), dtype=np.float32)
    T34, row_scale = tn.sparse_ternarize(W)
    T158, tensor_scale = tn.absmean_ternarize(W)
    packed = {"sherry": tn.pack_sherry(T34), "tl2": tn.pack_tl2(T158), "i2": tn.pack_i2(T158)}
    scale = {"sherry": row_scale, "tl2": tensor_scale, "i2": tensor_scale}
    return rng, W, T34, packed, scale


def time_kernels(quick: bool = False) -> dict:
    """The goals of the Sherry kernel issue, measured (``quick``: a 1024 x 1024 layer, few repeats)."""
    n = 1024 if quick else 4096
    rounds, pack_repeats, batch = (5, 2, 8) if quick else (60, 7, 8)
    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    with timing.threads(threads):  # numba and torch on 2 threads here, the caller's counts restored after
        return _time_kernels(n, rounds, pack_repeats, batch, threads, quick)


def _time_kernels(n: int, rounds: int, pack_repeats: int, batch: int, threads: int, quick: bool) -> dict:
    rng, W, T34, packed, scale = _setup(n, n)
    x = rng.standard_normal(n, dtype=np.float32)
    X = rng.standard_normal((batch, n), dtype=np.float32)
    shape = f"{n}x{n}"

    gemv = {"numpy fp32": lambda: W @ x}
    for fmt in FORMATS:
        gemv[fmt] = (lambda f=fmt: tn.gemv(f, packed[f], scale[f], x))
    gemv["sherry, portable (no SIMD)"] = lambda: tn.gemv("sherry", packed["sherry"], scale["sherry"], x, simd="portable")
    t_gemv = _interleaved(gemv, rounds)
    # 2 threads vs 1, without numpy in the rounds: OpenBLAS's threads spin on after each call and
    # take the second core from numba's, which would charge the BLAS pool to the parallel kernel
    threads_cands = {f"sherry, {threads} threads": gemv["sherry"],
                     "sherry, serial": lambda: tn.gemv("sherry", packed["sherry"], scale["sherry"], x, parallel=False)}
    t_threads = _interleaved(threads_cands, rounds)

    gemm = {"numpy fp32": lambda: X @ W.T, "sherry": lambda: tn.gemm("sherry", packed["sherry"], scale["sherry"], X)}
    t_gemm = _interleaved(gemm, max(3, rounds // 3))

    t_pack, t_unpack = [], []
    for _ in range(pack_repeats):
        t0 = time.perf_counter()
        p = tn.pack_sherry(T34)
        t_pack.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tn.unpack_sherry(p)
        t_unpack.append(time.perf_counter() - t0)
    mw_pack, mw_unpack = n * n / timing.median(t_pack) / 1e6, n * n / timing.median(t_unpack) / 1e6

    base = t_gemv["numpy fp32"]
    level = [k for k, v in tn.SIMD_LEVELS.items() if v == tn.simd_level()][0]
    rows = [dict(benchmark=f"GEMV {k}" + ("" if k.startswith("numpy") or "portable" in k else f" ({level})"),
                 shape=shape, median_s=v, ratio=base / v) for k, v in t_gemv.items()]
    serial = t_threads["sherry, serial"]
    rows += [dict(benchmark=f"GEMV {k} ({level}; rounds without numpy)", shape=shape, median_s=v, ratio=serial / v)
             for k, v in t_threads.items()]
    rows += [dict(benchmark=f"GEMM {k}, batch {batch}", shape=shape, median_s=v, ratio=t_gemm["numpy fp32"] / v)
             for k, v in t_gemm.items()]
    rows += [dict(benchmark="pack_sherry", shape=shape, median_s=timing.median(t_pack), ratio=None, mweights_per_s=mw_pack),
             dict(benchmark="unpack_sherry", shape=shape, median_s=timing.median(t_unpack), ratio=None,
                  mweights_per_s=mw_unpack)]
    return {"title": "Sherry: ternary kernels", "shape": shape, "rounds": rounds, "threads": threads,
            "simd": level, "rows": rows, "goals": _goals(n, t_gemv, t_threads, packed, mw_pack, mw_unpack, quick),
            "note": ("Medians over rounds; in each round every GEMV (numpy's float32 W @ x included) runs in turn, in an order "
                     "rotated by one every round, "
                     "untimed for 3 ms (to wake the thread pools, as in a decode loop) and then 5 times timed, "
                     "so ratios compare runs under the same load. Ratio = numpy time / kernel time, except for "
                     "the two rows timed in rounds of their own (2 threads vs 1, ratio = serial time / time). "
                     f"Numba on {threads} threads, numpy on its BLAS default. Random weights: 3:4 ternary "
                     "(Sparse-AbsMean, per-row scales) for Sherry, absmean ternary (one scale) for TL2 and I2."
                     + (" Quick run: a small layer, so the time goals are not judged." if quick else ""))}


def _goals(n: int, t: dict[str, float], t_threads: dict[str, float], packed: dict, mw_pack: float,
           mw_unpack: float, quick: bool) -> list[dict]:
    def judged(ok: bool):
        return None if quick else bool(ok)

    bits = tn.bits_per_weight("sherry", (n, n))
    sherry, i2, tl2, base = t["sherry"], t["i2"], t["tl2"], t["numpy fp32"]
    byte_ratio = packed["sherry"].nbytes / packed["i2"].nbytes
    par = [v for k, v in t_threads.items() if k != "sherry, serial"][0]
    gain = t_threads["sherry, serial"] / par
    return [
        dict(goal="bits per weight, Sherry index + sign streams", target="1.25",
             measured=f"{bits['streams']:g} ({bits['index']:g} + {bits['sign']:g}); fp32 row scales "
                      f"+{bits['scales']:.4g}", met=bits["streams"] == 1.25),
        dict(goal="bits per weight, TL2 / I2 streams", target="reported",
             measured=" / ".join(f"{tn.bits_per_weight(f, (n, n))['streams']:.4g}" for f in ("tl2", "i2")), met=None),
        dict(goal="gemv_sherry time, and speedup over numpy fp32 GEMV", target="≤ 0.6 ms and ≥ 2×",
             measured=f"{sherry * 1e3:.3f} ms, {base / sherry:.2f}×",
             met=judged(sherry <= 6e-4 and base / sherry >= 2)),
        dict(goal="gemv_sherry, stretch: llama.cpp TQ1_0 C kernel here", target="≤ 0.33 ms",
             measured=f"{sherry * 1e3:.3f} ms", met=judged(sherry <= 3.3e-4)),
        dict(goal="2-bit (I2) GEMV time", target="≤ 0.5 ms", measured=f"{i2 * 1e3:.3f} ms", met=judged(i2 <= 5e-4)),
        dict(goal="pack_sherry throughput", target="≥ 200 Mweights/s", measured=f"{mw_pack:.0f} Mweights/s",
             met=judged(mw_pack >= 200)),
        dict(goal="unpack_sherry throughput", target="≥ 2500 Mweights/s", measured=f"{mw_unpack:.0f} Mweights/s",
             met=judged(mw_unpack >= 2500)),
        dict(goal="parallel gain, gemv_sherry on 2 threads over serial", target="≥ 1.8×",
             measured=f"{gain:.2f}× ({par * 1e3:.3f} vs {t_threads['sherry, serial'] * 1e3:.3f} ms)",
             met=judged(gain >= 1.8)),
        dict(goal="paper's ordering: Sherry GEMV faster than 1.67-bit, at least as fast as 2-bit",
             target="t(sherry) < t(tl2) and ≤ t(i2)",
             measured=f"{sherry * 1e3:.3f} / {tl2 * 1e3:.3f} / {i2 * 1e3:.3f} ms (sherry / tl2 / i2)",
             met=judged(sherry < tl2 and sherry <= i2)),
        dict(goal="Sherry weight bytes relative to 2-bit", target="62.5%", measured=f"{byte_ratio:.1%}",
             met=abs(byte_ratio - 0.625) < 1e-9),
    ]
