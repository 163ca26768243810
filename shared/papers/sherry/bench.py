"""Sherry chapter (ACL 2026, arXiv 2601.07892): ``acl26 bench sherry``, the kernel micro-benchmarks, the
decode-speed goals and our GEMV against llama.cpp's ternary types."""

from __future__ import annotations

from acl26.papers.sherry import kernel_bench, speed
from acl26.papers.sherry.spec import GEMV_SHAPES


def benchmarks(quick: bool = False) -> dict:
    """``acl26 bench sherry``: the kernel micro-benchmarks and the decode-speed goals."""
    kern = kernel_bench.benchmarks(quick=quick)
    dec = speed.benchmarks(quick=quick)
    peer = _peer_benchmarks(quick)
    return {"title": "Sherry: ternary kernels and decode speed", "rows": kern["rows"] + peer["rows"] + dec["rows"],
            "goals": kern["goals"] + peer["goals"] + dec["goals"],
            "note": f"{kern.get('note', '')} {peer['note']} {dec.get('note', '')}".strip()}


def _peer_benchmarks(quick: bool) -> dict:
    """Our GEMV against llama.cpp's TQ1_0 / TQ2_0 at :data:`GEMV_SHAPES` (skipped, saying so, where it is not built)."""
    from acl26.papers.sherry import llamacpp, peers

    shapes = [(1024, 1024)] if quick else list(GEMV_SHAPES)
    goals = [dict(goal=f"Sherry GEMV faster than llama.cpp's TQ1_0 and TQ2_0 ({m} x {k}, same threads)",
                  target="t(sherry) < t(TQ2_0) and < t(TQ1_0)") for m, k in shapes]
    if not llamacpp.available():
        return {"rows": [], "goals": [dict(g, measured="llama.cpp not built here (acl26 prepare sherry)", met=None)
                                      for g in goals],
                "note": "llama.cpp was not built, so its kernels were not timed."}
    rows, done = [], []
    for (m, k), goal in zip(shapes, goals):
        summary = peers.gemv_summary(peers.gemv_vs_llamacpp((m, k), rounds=1 if quick else 5))
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
