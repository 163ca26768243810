"""LoPT chapter (ACL 2026, arXiv 2511.04952): the verdicts, decided from the study's results.

:func:`record_claims` turns what :func:`acl26.papers.lopt.study.run` returned into the ledger's
verdicts; the tests feed it synthetic results, a holding and a failing case per claim.
"""

from __future__ import annotations

import numpy as np

from acl26 import claims as C
from acl26.papers.lopt.study import parallel_factors, speed_summary

def _rate(rows: list[dict], key: str = "exact") -> float:
    return float(np.mean([bool(r[key]) for r in rows])) if rows else float("nan")


def _merged(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Rows whose LoPT run really merged chunks, and those that went sequential (short text, fallback)."""
    merged = [r for r in rows if not r.get("sequential", False)]
    return merged, [r for r in rows if r.get("sequential", False)]


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every LoPT claim from the study's results.

    ``results``: ``exactness`` (rows of :func:`exactness`), ``sweep`` (rows of
    :func:`overlap_sweep`), ``speed`` (rows of :func:`speed`).

    * Exactness is decided over the runs that really merged chunks, with their count; runs that
      went sequential (texts shorter than two chunks, fallbacks) are counted apart: their output is
      the sequential encoding by construction.
    * The speed claim is decided on the parallel factor (LoPT with 1 worker over LoPT with the most
      workers: what parallelism adds, with chunking the same on both sides) at the longest length
      timed, on its range over repeats, for every tokenizer timed: it holds when every tokenizer's
      range passes, does not hold when none does, and is inconclusive otherwise. The total
      speed-ups over ``tokenizer.encode`` and over the backend's own ``encode`` are reported beside
      it. Tested only at 10 M characters or more with at least 2 workers.
    """
    from acl26 import stats

    ex, sw, sp = results["exactness"], results["sweep"], results["speed"]
    lopt_rows = ([r for r in ex if r["method"] == "lopt"] + [r for r in sw if r["rule"] == "piece"]
                 + [{"exact": r["same"], "sequential": r.get("sequential_fallback", False)} for r in sp
                    if r["method"] == "lopt"])
    merged, seq = _merged(lopt_rows)
    if merged:
        ledger.record("exact", _rate(merged), shown=f"{_rate(merged):.3f} over {len(merged)} merged runs",
                      note=f"{len(seq)} runs went sequential (short text or fallback) and are counted apart"
                           + (f"; exact in {_rate(seq):.3f} of them" if seq else ""))
    else:
        ledger.untested("exact", "no run merged chunks (every text went sequential)")

    default, default_seq = _merged([r for r in ex if r["method"] == "lopt-paper-rule" and r["setting"] == "default"])
    if default:
        ledger.record("paper_rule_default", _rate(default), shown=f"{_rate(default):.3f} over {len(default)} merged runs",
                      note=f"{len(default_seq)} sequential runs counted apart" if default_seq else "")
    else:
        ledger.untested("paper_rule_default", "this profile skips whole texts at the default settings, or none merged")
    anyset, any_seq = _merged([r for r in ex if r["method"] == "lopt-paper-rule" and r["setting"] != "default"]
                              + [r for r in sw if r["rule"] == "paper"])
    if anyset:
        ledger.record("paper_rule_any", _rate(anyset), shown=f"{_rate(anyset):.3f} over {len(anyset)} merged runs",
                      note="random and adversarial settings with small chunks and overlaps, and the overlap sweep; "
                           f"{len(any_seq)} sequential runs counted apart")
    else:
        ledger.untested("paper_rule_any", "the paper's rule was not run at other settings")

    for cid, method in [("naive_lossy", "naive"), ("ids_lossy", "overlap-ids"), ("delim_lossy", "delimiter")]:
        runs = [r for r in ex if r["method"] == method]
        default = [r for r in runs if r["setting"] == "default"]
        if default:
            miss = 1 - _rate(default)
            pooled = f"; over every setting (with small chunks and hostile strings): {1 - _rate(runs):.1%} of {len(runs)} runs"
            ledger.record(cid, miss, shown=f"mismatch on {miss:.1%} of {len(default)} whole texts at the default settings",
                          note=f"the baseline at the defaults a user meets{pooled}")
        elif runs:
            ledger.untested(cid, "decided on whole real texts at the default chunk and overlap, which this profile "
                                 "does not run (full_texts)", shown=f"mismatch in {1 - _rate(runs):.1%} of {len(runs)} "
                                                                    "runs at other settings")
        else:
            ledger.untested(cid, "method not selected in `methods`")

    if not sp:
        ledger.untested("speedup", "no speed runs")
        ledger.untested("merge_cheap", "no speed runs")
        return
    summary = speed_summary(sp)
    biggest = max(r["n_chars"] for r in summary)
    wmax = max(r["workers"] for r in summary if r["method"] == "lopt")
    factors = parallel_factors(sp)
    first = next(iter(factors))
    at = {(r["method"], r["workers"]): r for r in summary if r["tokenizer"] == first and r["n_chars"] == biggest}
    share = float(at[("lopt", wmax)]["merge share"])

    def show(iv):
        return "—" if iv is None else f"{iv.estimate:.2f}× [{iv.lo:.2f}, {iv.hi:.2f}]"

    parts = [f"{t}: parallel {show(f['parallel'])}, total {show(f['speedup'])} over tokenizer.encode, "
             f"{show(f['speedup_backend'])} over the backend's encode" for t, f in factors.items()]
    ivs = [f["parallel"] for f in factors.values() if f["parallel"] is not None]
    if biggest >= 10_000_000 and wmax >= 2 and ivs:
        combined = stats.Interval(min(iv.estimate for iv in ivs), min(iv.lo for iv in ivs), max(iv.hi for iv in ivs),
                                  1.0, "range over repeats, every tokenizer", sum(iv.n for iv in ivs))
        ledger.record("speedup", combined.estimate, interval=combined,
                      shown=f"{'; '.join(parts)} ({wmax} workers, {biggest:,} chars, median [min, max] over repeats)")
        ledger.record("merge_cheap", share, shown=f"{share:.2%} of wall time ({first})")
    else:
        ledger.untested("speedup", f"this profile times up to {biggest:,} characters only", shown="; ".join(parts))
        ledger.untested("merge_cheap", f"this profile times up to {biggest:,} characters only", shown=f"{share:.2%}")
