"""Sherry chapter (ACL 2026, arXiv 2601.07892): ``acl26 bench sherry``, the kernel micro-benchmarks, the
decode-speed goals and our GEMV against llama.cpp's ternary types."""

from __future__ import annotations

import numpy as np

from acl26.papers.sherry import kernel_bench
from acl26.papers.sherry.decoder import model_bytes
from acl26.papers.sherry.paper import ratio_or_none
from acl26.papers.sherry.speed import FUSED_KV, SpeedFormat, decode_profile, speed_table
from acl26.papers.sherry.spec import GEMV_SHAPES


def benchmarks(quick: bool = False) -> dict:
    """``acl26 bench sherry``: the kernel micro-benchmarks and the decode-speed goals."""
    kern = kernel_bench.time_kernels(quick=quick)
    dec = decode_benchmarks(quick=quick)
    peer = _peer_benchmarks(quick)
    step_rows, step_goal = step_kernel_benchmark(quick=quick)
    return {"title": "Sherry: ternary kernels and decode speed",
            "rows": kern["rows"] + peer["rows"] + dec["rows"] + step_rows,
            "goals": kern["goals"] + peer["goals"] + dec["goals"] + [step_goal],
            "note": f"{kern.get('note', '')} {peer['note']} {dec.get('note', '')}".strip()}


#: the products of one decode step compared per kernel (issue 41, point 2): the paper's 0.7B shape
STEP_SHAPE = "bitnet-0.7b"


def step_kernel_benchmark(*, quick: bool = False, rounds: int = 5) -> tuple[list[dict], dict]:
    """Issue 41's per-kernel goal, like for like on 8-bit activations and threads: Sherry's 8-bit-activation products
    summed over one decode step of :data:`STEP_SHAPE` (the ``projections`` part of :func:`.speed.decode_profile` for
    ``sherry-a8``: the fused step's 96 products, q|k|v and gate|up each one matrix, every input's quantization and
    byte tables included, the weights streamed from memory) against llama.cpp's TQ2_0 summed over the same step's
    168 products (:func:`.peers.model_gemv`: ``test-backend-ops perf``, each product's Q8_K input quantization
    included, each shape's one matrix timed again and again, so from the caches where it fits). Both on
    :data:`.llamacpp.PERF_THREADS` threads, the count test-backend-ops takes. Met when Sherry's slowest round is at
    most TQ2_0's fastest. ik_llama.cpp cannot be timed per kernel: the ``ik-llama-cpp-python`` sdist vendors no
    ``test-backend-ops``. Not judged when ``quick`` or when llama.cpp is not built. Returns bench rows (Sherry's,
    TQ2_0's and TQ1_0's per-token sums) and the goal line."""
    from acl26 import machine
    from acl26.papers.sherry import llamacpp, peers, speed, tables

    goal = dict(goal=f"per kernel, 8-bit activations on both sides: Sherry's GEMV summed over one {STEP_SHAPE} "
                     "decode step ≤ the fastest peer's (llama.cpp TQ2_0; ik_llama.cpp IQ2_BN has no per-kernel "
                     "timer: its sdist vendors no test-backend-ops), on the same threads",
                target="Sherry's slowest round ≤ the peer's fastest")
    if quick or not llamacpp.available():
        why = "quick run" if quick else "llama.cpp not built here (acl26 prepare sherry)"
        return [], dict(goal, measured=f"not judged ({why})", met=None)
    threads = llamacpp.PERF_THREADS
    ours = next(p for p in speed.decode_profile(STEP_SHAPE, ["sherry-a8"], tokens=16, context=64, repeats=rounds,
                                                 n_threads=threads, progress=False)
                if p["engine"] == "fused" and p["part"] == "projections")
    # llama.cpp's per-token sums, median and range over rounds (the rows also time our float32 kernels: unused here)
    peer = {r["format"]: r for r in tables.model_gemv_summary(peers.model_gemv(STEP_SHAPE, rounds=rounds))
            if r["source"] == "llama.cpp"}
    rows = [dict(benchmark=f"GEMV sherry-a8 summed over one decode step (ours, fused step, {ours['regions']} "
                           f"parallel regions, {threads} thread(s))", shape=STEP_SHAPE, median_s=ours["ms"] / 1e3,
                 min_s=ours["ms_min"] / 1e3, max_s=ours["ms_max"] / 1e3)]
    rows += [dict(benchmark=f"GEMV {fmt} summed over one decode step (llama.cpp, {r['products']} products, "
                            f"{r['threads']} thread(s))", shape=STEP_SHAPE, median_s=r["median_ms"] / 1e3,
                  min_s=r["min_ms"] / 1e3, max_s=r["max_ms"] / 1e3) for fmt in ("TQ2_0", "TQ1_0") for r in [peer[fmt]]]
    cpu = machine.cpu_model()
    tq2 = peer["TQ2_0"]
    measured = (f"Sherry {ours['ms']:.2f} ms [{ours['ms_min']:.2f}, {ours['ms_max']:.2f}] per token (fused step) vs "
                f"TQ2_0 {tq2['median_ms']:.2f} ms [{tq2['min_ms']:.2f}, {tq2['max_ms']:.2f}] "
                f"({tq2['products']} products), {threads} thread(s) each; TQ2_0's time over Sherry's at the "
                f"medians {tq2['median_ms'] / ours['ms']:.2f}×" + (f" ({cpu})" if cpu else ""))
    return rows, dict(goal, measured=measured, met=bool(ours["ms_max"] <= tq2["min_ms"]))


def _peer_benchmarks(quick: bool) -> dict:
    """Our GEMV against llama.cpp's TQ1_0 / TQ2_0 at :data:`GEMV_SHAPES` (skipped, saying so, where it is not built)."""
    from acl26.papers.sherry import llamacpp, peers, tables

    shapes = [(1024, 1024)] if quick else list(GEMV_SHAPES)
    goals = [dict(goal=f"Sherry GEMV faster than llama.cpp's TQ1_0 and TQ2_0 ({m} x {k}, same threads)",
                  target="t(sherry) < t(TQ2_0) and < t(TQ1_0)") for m, k in shapes]
    if not llamacpp.available():
        return {"rows": [], "goals": [dict(g, measured="llama.cpp not built here (acl26 prepare sherry)", met=None)
                                      for g in goals],
                "note": "llama.cpp was not built, so its kernels were not timed."}
    rows, done = [], []
    for (m, k), goal in zip(shapes, goals):
        summary = tables.gemv_summary(peers.gemv_vs_llamacpp((m, k), rounds=1 if quick else 5))
        t = {r["format"]: r for r in summary}
        rows += [dict(benchmark=f"GEMV {r['format']} ({r['source']}, {r['threads']} thread(s))", shape=r["shape"],
                      median_s=r["median_us"] / 1e6, min_s=r["min_us"] / 1e6, max_s=r["max_us"] / 1e6,
                      ratio=t["sherry"]["median_us"] / r["median_us"]) for r in summary]
        met = t["sherry"]["max_us"] < min(t["TQ2_0"]["min_us"], t["TQ1_0"]["min_us"])
        done.append(dict(goal, measured=" / ".join(f"{f} {t[f]['median_us']:.0f} µs" for f in ("sherry", "TQ2_0", "TQ1_0")),
                         met=None if quick else bool(met)))
    return {"rows": rows, "goals": done,
            "note": ("llama.cpp's rows: test-backend-ops perf (its own mean per run), on the threads it uses (half the "
                     "cores); ours at the same shape and threads; rounds alternate which runs first; ratio = Sherry's "
                     "median time / the row's; 'met' needs Sherry's slowest round to beat both peers' fastest.")}


#: the decode goals of issue 28, fixed before any run: Sherry over llama.cpp's TQ2_0 with the same head
#: precision at the 0.7B shape, with 8-bit heads on both sides at the LLaMA-3.2-1B shape, and the share
#: of the read bandwidth Sherry's blocks (the head excluded) reach
GOAL_VS_TQ2_07B = 1.5
GOAL_VS_TQ2_1B_Q8 = 1.1
GOAL_BLOCKS_SHARE = 0.5


def _round_ratios(a: dict | None, b: dict | None) -> list[float]:
    """Per-round tok/s ratios a / b of two rows of one speed table (the rounds ran both)."""
    if not a or not b or not a.get("decode_runs") or not b.get("decode_runs"):
        return []
    return [x / y for x, y in zip(a["decode_runs"], b["decode_runs"])]


def decode_benchmarks(quick: bool = False) -> dict:
    """The decode goals (:data:`GOAL_VS_TQ2_07B`, :data:`GOAL_VS_TQ2_1B_Q8`, :data:`GOAL_BLOCKS_SHARE`) on
    one speed table of the 0.7B and LLaMA-3.2-1B shapes (``quick``: the tiny shape, goals not judged),
    every fused format, Sherry with an 8-bit head, and llama.cpp's TQ2_0 / TQ1_0 (f16 head) and TQ2_0
    with a q8_0 head in the same rotated rounds; and the before/after profile of a decode step
    (:func:`decode_profile`, Sherry and BF16 at the first shape); ik_llama.cpp's BitNet types
    (:data:`IK_PEERS`) in the same rounds, the fastest peer row named per head precision, and Sherry against
    it (:func:`_peer_goals`); attention over a float16 KV cache against a float32 one (:func:`kv_cache_benchmark`).

    Part of :func:`benchmarks` (``acl26 bench sherry``): rows and goals (target,
    measured, met). A ratio goal is met when the slowest round's ratio clears it (``min ratio``); a
    format that was skipped (memory, llama.cpp not built) leaves its goals unjudged, saying why.
    """
    from acl26 import machine

    shapes = ["tiny"] if quick else ["bitnet-0.7b", "llama-3.2-1b"]
    tokens, repeats, context = (8, 2, 16) if quick else (16, 3, 64)
    formats = ["bf16", "i2", "tl2", "sherry", "sherry-q8head", "i2-a8", "tl2-a8", "sherry-a8", "sherry-a8-q8head"]
    # llama.cpp's TQ types and ik_llama.cpp's BitNet types in the same rotated rounds as ours (issue 41, point 1)
    peers = ["ggml-tq2_0", "ggml-tq1_0", "ggml-tq2_0-q8head", *IK_PEERS]
    table = speed_table(shapes, formats, tokens=tokens, repeats=repeats, context=context, progress=False,
                        peers=peers)
    t = {(r["shape"], r["format"]): r for r in table}
    cpu = machine.cpu_model()
    rows = []
    for r in table:
        row = dict(benchmark=f"decode {r['label']} ({r['engine']})", shape=r["shape"],
                   median_s=1 / r["decode_tok_s"] if r["decode_tok_s"] else None,
                   min_s=1 / max(r["decode_runs"]) if r["decode_runs"] else None,
                   max_s=1 / min(r["decode_runs"]) if r["decode_runs"] else None, tok_s=r["decode_tok_s"],
                   ratio=ratio_or_none(r["decode_tok_s"], t[(r["shape"], "bf16")]["decode_tok_s"]),
                   bytes_per_token=r["bytes_per_token"], limit_share=r["limit_share"], head_ms=r["head_ms"],
                   blocks_ms=r["blocks_ms"])
        if r["status"] != "ok":
            row["note"] = f"skipped: {r['reason']}"
        rows.append(row)
    prof = decode_profile(shapes[0], ["sherry", "sherry-a8", "bf16"], tokens=tokens, context=context,
                          repeats=repeats, progress=False)
    for p in prof:
        rows.append(dict(benchmark=f"profile {p['format']} {p['engine']}: {p['part']}", shape=p["shape"],
                         median_s=p["ms"] / 1e3, min_s=p["ms_min"] / 1e3, max_s=p["ms_max"] / 1e3, gb_s=p["gb_s"],
                         regions_per_token=p["regions"]))

    def ratio_goal(goal, target, shape, a, b, need):
        rr = _round_ratios(t.get((shape, a)), t.get((shape, b)))
        if not rr:
            why = "; ".join(f"{k}: {t[(shape, k)]['reason']}" for k in (a, b)
                            if (shape, k) in t and t[(shape, k)]["status"] != "ok") or "not timed"
            return dict(goal=goal, target=target, measured=f"not judged ({why})", met=None)
        med = float(np.median(rr))
        return dict(goal=goal, target=target,
                    measured=(f"{t[(shape, a)]['decode_tok_s']:.1f} vs {t[(shape, b)]['decode_tok_s']:.1f} tok/s; "
                              f"per-round ratio {med:.2f}× [{min(rr):.2f}, {max(rr):.2f}]"
                              + (f" ({cpu})" if cpu else "")),
                    met=None if quick else bool(min(rr) >= need))

    s0 = shapes[0]
    lin = model_bytes(s0, "sherry")
    block_bytes = lin["linear"] + lin["norms"]

    def share_goal(fmt: SpeedFormat):
        sh = t.get((s0, fmt.name))
        bw = sh["bandwidth_gb_s"] if sh else None
        share = (block_bytes / (sh["blocks_ms"] / 1e3) / (bw * 1e9)) if sh and sh["blocks_ms"] else None
        return dict(goal=f"{fmt.label}: blocks (head excluded) read at ≥ {GOAL_BLOCKS_SHARE:.0%} of the measured "
                         f"bandwidth ({s0})", target=f"≥ {GOAL_BLOCKS_SHARE:.0%}",
                    measured=(f"{block_bytes / 2**20:.1f} MiB in {sh['blocks_ms']:.2f} ms per token = "
                              f"{block_bytes / (sh['blocks_ms'] / 1e3) / 1e9:.1f} GB/s of {bw:.1f} GB/s ({share:.0%}; "
                              f"attention over the {FUSED_KV} KV cache, norms and call overheads included)"
                              + (f" ({cpu})" if cpu else ""))
                    if share is not None else "not timed",
                    met=None if quick or share is None else bool(share >= GOAL_BLOCKS_SHARE))

    goals = []
    for act8 in (False, True):  # float32 activations, then 8-bit ones (as llama.cpp's TQ types multiply)
        ours, ours_q8 = SpeedFormat.of("sherry", act8=act8), SpeedFormat.of("sherry", act8=act8, q8_head=True)
        goals += [
            ratio_goal(f"{ours.label} ≥ {GOAL_VS_TQ2_07B}× llama.cpp TQ2_0 at the 0.7B shape, same head "
                       "precision (bf16 / f16)", f"slowest round ≥ {GOAL_VS_TQ2_07B}×", s0, ours.name,
                       "ggml-tq2_0", GOAL_VS_TQ2_07B),
            ratio_goal(f"{ours.label} ≥ {GOAL_VS_TQ2_1B_Q8}× llama.cpp TQ2_0 at the LLaMA-3.2-1B shape, "
                       "8-bit heads on both sides", f"slowest round ≥ {GOAL_VS_TQ2_1B_Q8}×", shapes[-1],
                       ours_q8.name, "ggml-tq2_0-q8head", GOAL_VS_TQ2_1B_Q8),
            share_goal(ours),
        ]
    goals += _peer_goals(s0, t, quick=quick, cpu=cpu) + [_limit_goal(s0, t, quick=quick, cpu=cpu)]
    kv_rows, kv_goal = kv_cache_benchmark(s0, (16, 64) if quick else KV_CONTEXTS, rounds=repeats + 2, quick=quick,
                                          cpu=cpu)
    rows += kv_rows
    goals.append(kv_goal)
    return {"title": "Sherry: decode speed at model shapes", "shape": ", ".join(shapes), "rows": rows, "goals": goals,
            "note": (f"Greedy decoding of {tokens} tokens after a {context}-token context through random-weight "
                     f"models of the {', '.join(shapes)} shapes, through the fused decode step "
                     "(acl26.kernels.decode); medians of "
                     f"{repeats} rounds, each running every format in turn in an order that rotates every round; "
                     "llama.cpp's and ik_llama.cpp's rows are each fork's own llama-bench on GGUF files of the same "
                     "shape (random ternary weights, quantized by the fork's own llama-quantize: TQ2_0 / TQ1_0; "
                     "IQ2_BN, IQ2_BN_R4, IQ1_BN), one sample per round in the same rotation. Numba and both forks "
                     "on 2 threads. Ratio = tok/s "
                     "over BF16's. Our ternary formats keep the embeddings and the output head in bf16 (the "
                     "-q8head row: an 8-bit head, ggml's Q8_0 layout); llama.cpp's in f16, or q8_0 where the row "
                     "says so. Our packed formats multiply float32 activations, or, in the rows that say "
                     "'8-bit activations', int8 ones with one absmax scale per vector (as BitNet b1.58; "
                     "llama.cpp's TQ types multiply 8-bit activations too). The profile rows time a decode step's parts before (numpy decoder) and after (fused "
                     "step); 'rest' is the step minus the parts timed alone. The fastest-peer lines take every "
                     "peer row of the first shape with that head precision; Sherry against it is judged on the "
                     "per-round ratios (its slowest round)."
                     + (" Quick run: the tiny shape, so the goals are not judged." if quick else ""))}


#: ik_llama.cpp's BitNet rows in ``acl26 bench sherry`` (f16 heads as ours in bf16; q8_0 heads as our 8-bit
#: head), in the speed table's rotation beside llama.cpp's
IK_PEERS = ("ik-iq2_bn", "ik-iq2_bn_r4", "ik-iq1_bn", "ik-iq2_bn-q8head", "ik-iq2_bn_r4-q8head")
#: issue 41's goals against the fastest peer at the 0.7B shape, same head precision: Sherry on 8-bit
#: activations ≥ 1.2×, on float32 activations ≥ 1.0×
GOAL_VS_PEER_A8 = 1.2
GOAL_VS_PEER_F32 = 1.0
#: issue 41's goal for Sherry on 8-bit activations with an 8-bit head at the 0.7B shape: its whole token's bytes
#: (projections, norms, head) x tok/s at >= 75% of the read bandwidth measured in the same call
GOAL_A8_Q8_LIMIT = 0.75


#: cache lengths at which ``acl26 bench sherry`` times attention over a float32 and a float16 KV cache; the goal
#: reads the longest (issue 41, point 2: the float16 cache stays unless a measurement shows no gain)
KV_CONTEXTS = (64, 1024)


def kv_cache_benchmark(shape: str, contexts=KV_CONTEXTS, *, rounds: int = 5, quick: bool = False,
                       cpu: str | None = None) -> tuple[list[dict], dict]:
    """Attention of every block of the fused step (:func:`acl26.kernels.decode.profile_parts`, Sherry on 8-bit
    activations at ``shape``) over ``contexts`` cached positions of random keys and values, in a float32 and a
    float16 cache, ``rounds`` rounds whose order of the two rotates. Returns bench rows (median, range) and the
    goal line: the float16 cache's attention faster than the float32 one's at the longest context, judged on
    the slowest round's ratio (not judged when ``quick``)."""
    from acl26.kernels import decode as kd
    from acl26.papers.sherry.decoder import build_model

    m = build_model(shape, "sherry", seed=0).fuse(act8=True)
    cap = max(contexts)
    rng = np.random.default_rng(0)
    states = {}
    for dt in ("float32", FUSED_KV):
        c = m.new_cache(cap, dt)
        c.k[:] = rng.standard_normal(c.k.shape, dtype=np.float32)
        c.v[:] = rng.standard_normal(c.v.shape, dtype=np.float32)
        states[dt] = kd.new_state(m.fused, c.k, c.v)
    order = list(states)
    rows, ratios = [], {}
    for ctx in contexts:
        ms: dict[str, list[float]] = {dt: [] for dt in order}
        for r in range(rounds):
            for dt in (order if r % 2 == 0 else order[::-1]):
                ms[dt].append(1e3 * kd.profile_parts(m.fused, states[dt], ctx, repeats=3, parts=("attention",))[
                    "attention"])
        for dt, v in ms.items():
            rows.append(dict(benchmark=f"attention over {ctx} positions, {dt} KV cache ({m.shape.name}, every block)",
                             shape=m.shape.name, median_s=float(np.median(v)) / 1e3, min_s=min(v) / 1e3,
                             max_s=max(v) / 1e3))
        ratios[ctx] = [a / b for a, b in zip(ms["float32"], ms[FUSED_KV])]
    rr = ratios[cap]
    goal = dict(goal=f"{FUSED_KV} KV cache: the fused step's attention faster than over a float32 cache ({cap} "
                     f"positions, {m.shape.name})", target="slowest round > 1.0×",
                measured="; ".join(f"{c} positions: float32 / {FUSED_KV} time {np.median(v):.2f}× "
                                   f"[{min(v):.2f}, {max(v):.2f}]" for c, v in ratios.items()) + (f" ({cpu})" if cpu else ""),
                met=None if quick else bool(min(rr) > 1.0))
    return rows, goal


def fastest_peer(rows, shape: str, head: str) -> dict | None:
    """The fastest ``ok`` peer row (llama.cpp's or ik_llama.cpp's) at ``shape`` whose head is ``head``
    ("f16" / "q8_0"), by median decode tok/s; None when none ran."""
    ok = [r for r in rows if r.get("peer") and r["shape"] == shape and r.get("head") == head
          and r["status"] == "ok" and r.get("decode_tok_s")]
    return max(ok, key=lambda r: r["decode_tok_s"], default=None)


def _limit_goal(s0: str, t: dict, *, quick: bool, cpu: str) -> dict:
    """Sherry on 8-bit activations with an 8-bit head at ``s0`` against the memory limit
    (:data:`GOAL_A8_Q8_LIMIT`): the speed table's ``limit_share``, bytes per token x tok/s / bandwidth."""
    f = SpeedFormat.of("sherry", act8=True, q8_head=True)
    r = t.get((s0, f.name))
    goal = f"{f.label}: the whole token read at ≥ {GOAL_A8_Q8_LIMIT:.0%} of the measured read bandwidth ({s0})"
    if not r or r.get("limit_share") is None:
        return dict(goal=goal, target=f"≥ {GOAL_A8_Q8_LIMIT:.0%}", measured="not judged (not timed)", met=None)
    return dict(goal=goal, target=f"≥ {GOAL_A8_Q8_LIMIT:.0%}",
                measured=(f"{r['bytes_per_token'] / 2**20:.1f} MiB per token x {r['decode_tok_s']:.1f} tok/s = "
                          f"{r['bytes_per_token'] * r['decode_tok_s'] / 1e9:.1f} GB/s of {r['bandwidth_gb_s']:.1f} GB/s "
                          f"({r['limit_share']:.0%})" + (f" ({cpu})" if cpu else "")),
                met=None if quick else bool(r["limit_share"] >= GOAL_A8_Q8_LIMIT))


def _peer_goals(s0: str, t: dict, *, quick: bool, cpu: str) -> list[dict]:
    """The fastest peer row at ``s0`` for each head precision (llama.cpp's and ik_llama.cpp's rows of the speed
    table ``t``, timed in the same rotated rounds as ours), named, and Sherry against it like for like
    (:data:`GOAL_VS_PEER_A8` on 8-bit activations, :data:`GOAL_VS_PEER_F32` on float32 ones), met when the
    slowest round's ratio clears the target."""
    goals = []
    for head, ours_head in (("f16", "bf16"), ("q8_0", "8-bit")):
        best = fastest_peer(t.values(), s0, head)
        name = f"{best['label']} ({best['engine']}), {best['decode_tok_s']:.1f} tok/s" if best else "none ran"
        goals.append(dict(goal=f"the fastest peer row at {s0}, {head} head (llama.cpp and ik_llama.cpp)",
                          target="named", measured=name + (f" ({cpu})" if cpu else ""), met=None))
        for act8, need in ((True, GOAL_VS_PEER_A8), (False, GOAL_VS_PEER_F32)):
            f = SpeedFormat.of("sherry", act8=act8, q8_head=head == "q8_0")
            ours = t.get((s0, f.name))
            goal = f"{f.label} ≥ {need}× the fastest peer at {s0}, {ours_head} head against {head}"
            target = f"slowest round ≥ {need}×"
            rr = _round_ratios(ours, best)
            if not rr:
                why = "no peer row ran" if not best else f"{f.name} was not timed"
                goals.append(dict(goal=goal, target=target, measured=f"not judged ({why})", met=None))
                continue
            goals.append(dict(goal=goal, target=target,
                              measured=(f"{ours['decode_tok_s']:.1f} vs {best['decode_tok_s']:.1f} tok/s "
                                        f"({best['label']}); per-round ratio {float(np.median(rr)):.2f}× "
                                        f"[{min(rr):.2f}, {max(rr):.2f}]" + (f" ({cpu})" if cpu else "")),
                              met=None if quick else bool(min(rr) >= need)))
    return goals
