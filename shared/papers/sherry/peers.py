"""Sherry (ACL 2026, arXiv 2601.07892): llama.cpp's ternary storage types beside ours.

:func:`gguf_ternary_bits` gives the exact storage of TQ1_0 and TQ2_0 through the ``gguf``
package's reference quantizers, the paper's STQ1_0 block, and our three formats.
"""

from __future__ import annotations

import numpy as np

from acl26.kernels import ternary as tn
from acl26.papers.sherry.decoder import LABELS

# --------------------------------------------------------------------------------------------
# llama.cpp's ternary types, through the gguf package


def gguf_ternary_bits(shape: tuple[int, int] = (4096, 4096), *, seed: int = 0) -> list[dict]:
    """Exact storage of a ``shape`` ternary matrix in llama.cpp's TQ1_0 / TQ2_0, STQ1_0 and our formats.

    One row per format: ``bits_per_weight`` counts everything stored (scales included),
    ``stream_bits_per_weight`` the weight codes alone, ``scales`` says what the scales are.
    TQ1_0 and TQ2_0 are quantized with the ``gguf`` package's reference quantizers
    (``gguf.quants.quantize``) when it has them -- bits from the bytes it returns, and
    ``roundtrip_exact`` says whether dequantizing gives the ternary matrix back -- else computed
    from ``gguf.constants.GGML_QUANT_SIZES`` (weights and bytes per block; ``source`` says which).
    STQ1_0 (the paper's llama.cpp block, llama.cpp PR #22836: 32 index bytes + 8 sign bytes + an fp16 scale
    per 256 weights) is computed. Ours: :func:`acl26.kernels.ternary.bits_per_weight` with
    float32 row scales.
    """
    import gguf
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    from acl26 import checks

    n_out, n_in = (checks.integer("shape", v, 1) for v in shape)
    if n_out <= 0 or n_in <= 0 or n_in % 256:
        raise ValueError(f"shape must be positive with n_in a multiple of 256 (the TQ block), got {shape}")
    rng = np.random.default_rng(checks.seed("seed", seed))
    T = rng.integers(-1, 2, (n_out, n_in), dtype=np.int8).astype(np.float32)
    n = n_out * n_in
    rows = []
    quants = getattr(gguf, "quants", None)
    for name in ("TQ1_0", "TQ2_0"):
        qtype = getattr(GGMLQuantizationType, name, None)
        if qtype is None or qtype not in GGML_QUANT_SIZES:
            continue
        block, block_bytes = GGML_QUANT_SIZES[qtype]
        row = dict(format=name, bits_per_weight=8 * block_bytes / block,
                   stream_bits_per_weight=8 * (block_bytes - 2) / block, scales=f"fp16 per {block} weights",
                   bytes=n // block * block_bytes, block_weights=block, block_bytes=block_bytes,
                   source="gguf.constants.GGML_QUANT_SIZES (no reference quantizer in this gguf)",
                   roundtrip_exact=None)
        if quants is not None and hasattr(quants, name):
            q = quants.quantize(T, qtype)
            row.update(source="gguf.quants.quantize (the reference quantizer)", bytes=int(q.nbytes),
                       bits_per_weight=8 * q.nbytes / n,
                       roundtrip_exact=bool(np.array_equal(quants.dequantize(q, qtype).reshape(T.shape), T)))
        rows.append(row)
    rows.append(dict(format="STQ1_0", bits_per_weight=42 * 8 / 256, stream_bits_per_weight=40 * 8 / 256,
                     scales="fp16 per 256 weights", bytes=n // 256 * 42, block_weights=256, block_bytes=42,
                     source="the paper's llama.cpp block (PR #22836): qs[32] + sign[8] + fp16 scale", roundtrip_exact=None))
    for fmt in ("sherry", "tl2", "i2"):
        b = tn.bits_per_weight(fmt, (n_out, n_in), "row")
        rows.append(dict(format=f"ours: {LABELS[fmt]}", bits_per_weight=b["total"],
                         stream_bits_per_weight=b["streams"], scales="fp32 per row", bytes=b["bits"]["total"] // 8,
                         block_weights=None, block_bytes=None, source="acl26.kernels.ternary.bits_per_weight",
                         roundtrip_exact=None))
    return rows


# --------------------------------------------------------------------------------------------
# llama.cpp's TQ1_0 / TQ2_0 kernels, timed beside ours


def gemv_vs_llamacpp(shape: tuple[int, int] = (4096, 4096), *, rounds: int = 3, calls: int = 20,
                     seed: int = 0) -> list[dict]:
    """One matrix-vector product at ``shape`` (rows x inputs) on llama.cpp's thread count
    (:data:`acl26.papers.sherry.llamacpp.PERF_THREADS`): our Sherry, TL2 and I2 kernels against ggml's
    TQ1_0 and TQ2_0 (``test-backend-ops perf``), ``rounds`` rounds whose order (ours first, or
    llama.cpp first) alternates. Ours are timed as prepared products
    (:func:`acl26.kernels.ternary.prepare_gemv`: the matrix's checks, about 15 us a call at 1536 x 1536, run once
    before the timed calls, as llama.cpp checks its tensors before its timed loop; before, every timed call paid
    them). Returns one row per (format, round): ``format``, ``source``
    ("ours" / "llama.cpp"), ``round``, ``us`` (microseconds per product; ours the median of
    ``calls`` calls in the round, llama.cpp's its own mean over its runs), ``threads``, ``shape``.
    """
    from acl26 import checks, timing
    from acl26.papers.sherry import llamacpp

    llamacpp.require()
    n_out, n_in = (checks.integer("shape", v, 16) for v in shape)
    if n_in % 256:
        raise ValueError(f"shape: the inputs ({n_in}) must be a multiple of 256, the TQ types' block")
    checks.integer("rounds", rounds, 1)
    threads = llamacpp.PERF_THREADS
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n_out, n_in), dtype=np.float32)
    T34, row_scale = tn.sparse_ternarize(W)
    T158, g = tn.absmean_ternarize(W)
    del W
    packed = {"sherry": (tn.pack_sherry(T34), row_scale), "tl2": (tn.pack_tl2(T158), g), "i2": (tn.pack_i2(T158), g)}
    x = rng.standard_normal(n_in, dtype=np.float32)
    # prepared products (tn.prepare_gemv: the matrix and its scale checked once, before the timed calls), as
    # test-backend-ops times a graph whose tensors were checked before its timed loop; each call still checks x
    ours = {f: (lambda p=tn.prepare_gemv(f, *packed[f], parallel=threads > 1): p(x)) for f in packed}
    rows = []
    with timing.threads(threads):
        for r in range(rounds):
            steps = ["ours", "peer"] if r % 2 == 0 else ["peer", "ours"]
            for step in steps:
                if step == "ours":
                    times = timing.interleaved(ours, rounds=1, calls=calls)
                    rows += [dict(format=f, source="ours", round=r, us=1e6 * timing.median(v), threads=threads,
                                  shape=f"{n_out}x{n_in}") for f, v in times.items()]
                else:
                    for p in llamacpp.mul_mat_perf(("tq1_0", "tq2_0"), m=n_out, k=n_in, n=1):
                        rows.append(dict(format=p["type_a"].upper(), source="llama.cpp", round=r, us=p["us_per_run"],
                                         threads=threads, shape=f"{n_out}x{n_in}"))
    return rows


def model_gemv(shape: str = "bitnet-0.7b", *, rounds: int = 3, calls: int = 20, seed: int = 0,
               progress: bool = False) -> list[dict]:
    """The matrix-vector products of one decode step of ``shape`` (every projection of every block), ours
    against ggml's TQ1_0 / TQ2_0: :func:`gemv_vs_llamacpp` at each distinct projection shape, and per
    round and format the sum over the step's products (each shape's time x how many such projections a
    block has x the blocks). Rows: ``format``, ``source``, ``round``, ``us_per_token``, ``products`` (per
    token), ``shapes`` (e.g. "4 x 1536x1536 + 2 x 4096x1536 + 1 x 1536x4096, x 24 blocks"), ``threads``,
    ``shape`` (the model shape's name). ValueError for a shape whose inputs are not whole 256-weight
    TQ blocks."""
    from collections import Counter

    from tqdm import tqdm

    from acl26.papers.sherry.decoder import get_shape

    s = get_shape(shape, "shape")
    counts = Counter(dims for _, dims in s.linears())
    per = {d: gemv_vs_llamacpp(d, rounds=rounds, calls=calls, seed=seed)
           for d in tqdm(list(counts), desc=f"GEMV at {s.name}'s shapes", disable=not progress)}
    what = " + ".join(f"{c} x {a}x{b}" for (a, b), c in counts.items()) + f", x {s.layers} blocks"
    rows = []
    first = next(iter(per.values()))
    for r in range(rounds):
        for fmt, src in dict.fromkeys((x["format"], x["source"]) for x in first):
            us = s.layers * sum(c * next(x["us"] for x in per[d] if x["round"] == r and x["format"] == fmt)
                                for d, c in counts.items())
            rows.append(dict(format=fmt, source=src, round=r, us_per_token=us, products=s.layers * sum(counts.values()),
                             shapes=what, threads=first[0]["threads"], shape=s.name))
    return rows
