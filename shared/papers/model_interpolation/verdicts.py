"""Model-interpolation chapter (ACL 2026, arXiv 2510.10977): the verdicts, decided from
:func:`acl26.papers.model_interpolation.study.run`'s results on intervals over problems."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from acl26 import claims as C
from acl26 import stats
from acl26.papers.model_interpolation.spec import CLAIMS
from acl26.papers.model_interpolation.study import NEVER, band_width, mean_interval, per_problem, summary


def _boot_problems(fn: Callable[[np.ndarray], float], n: int, n_resamples: int, seed: int = 0) -> stats.Interval:
    """Percentile bootstrap of ``fn(indices)`` over resampled problems (for statistics BCa cannot take)."""
    rng = np.random.default_rng(seed)
    est = fn(np.arange(n))
    draws = np.array([fn(rng.integers(0, n, n)) for _ in range(n_resamples)])
    # order statistics, not interpolated ones: a statistic may be inf (e.g. a curve that never gets there)
    lo, hi = np.quantile(draws, [0.025, 0.975], method="inverted_cdf")
    lo, hi = min(float(lo), est), max(float(hi), est)
    return stats.Interval(float(est), lo, hi, 0.95, "percentile bootstrap over problems", n)


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every claim from :func:`run`'s results; every interval resamples problems.

    ``results``: ``sweep`` {λ: record}, ``band`` (lo, hi) or None, ``band_lambda``, ``variants``
    {name: record}, ``best_lambda``, ``sigma``, ``endpoint_error``, ``n_resamples``.
    """
    sw, var = results["sweep"], results["variants"]
    nr = int(results.get("n_resamples", 1999))
    lams = list(sw)
    pp = {lam: per_problem(rec) for lam, rec in sw.items()}
    n = len(next(iter(pp.values()))["think"])
    think_m = np.stack([pp[x]["think"] for x in lams], axis=1)

    def diff(a, b):
        return stats.paired_bootstrap(a, b, "mean_diff", n_resamples=nr, unit="problems")

    # the controls first
    cut = np.stack([pp[x]["cut"] for x in lams], axis=1)  # problems x λ: share of its responses cut off
    worst = lams[int(np.argmax(cut.mean(axis=0)))]
    iv = _boot_problems(lambda idx: float(cut[idx].mean(axis=0).max()), n, nr)
    ledger.record("few_cut_off", iv.estimate, interval=iv,
                  shown=f"{iv.estimate:.1%} at λ {worst:g} (the worst); "
                        + ", ".join(f"{x:g}: {c:.0%}" for x, c in zip(lams, cut.mean(axis=0))),
                  note="responses that reached max_new_tokens before their end, per λ of the sweep")
    best = results["best_lambda"]
    if 0.0 in pp and 1.0 in pp and best in pp:
        gap = diff(pp[1.0]["mean@k"], pp[0.0]["mean@k"])
        match = diff(pp[best]["mean@k"], pp[1.0]["mean@k"])
        h = (match.hi - match.lo) / 2
        shown = (f"Thinking − Instruct Mean@k {gap.estimate:+.3f} [{gap.lo:+.3f}, {gap.hi:+.3f}] against "
                 f"matches_thinking's half-width ±{h:.3f}")
        if h > 0:
            scaled = stats.Interval(gap.estimate / h, gap.lo / h, gap.hi / h, gap.level,
                                    f"{gap.method}, over the half-width", gap.n)
            ledger.record("thinking_better", scaled.estimate, interval=scaled, shown=f"{scaled.estimate:.2f}×: " + shown)
        else:
            ledger.record("thinking_better", float("inf") if gap.lo > 0 else 0.0, shown=shown)
    else:
        ledger.untested("thinking_better", "λ = 0, λ = 1 or best_lambda is not in the sweep")

    # stage 2: the band
    iv = _boot_problems(lambda idx: band_width(lams, think_m[idx]), n, nr)
    b = results["band"]
    width_all = band_width(lams, think_m)
    ledger.record("think_sigmoid", width_all, interval=iv,
                  shown=(f"{width_all:.3f}" if width_all != NEVER else
                         "no rise: Think #R never goes from ≤ 10% to ≥ 90% (width recorded as 2, wider than any λ range)")
                        + (f" (band λ {b[0]:g} → {b[1]:g})" if b else ""),
                  note="Think #R of every λ: " + ", ".join(f"{x:g}: {summary(sw[x])['think']:.2f}" for x in lams))
    if b is None:
        for cid in ("mean_jumps", "length_grows"):
            ledger.untested(cid, "Think #R never goes from ≤ 10% to ≥ 90% along λ: no band to measure across")
    else:
        lo, hi = b
        d = (pp[hi]["mean@k"] - pp[lo]["mean@k"]) - (pp[hi]["pass@k"] - pp[lo]["pass@k"])
        iv = mean_interval(d, nr)
        sl, sh = summary(sw[lo]), summary(sw[hi])
        ledger.record("mean_jumps", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (Mean@k {sl['mean@k']:.3f} → {sh['mean@k']:.3f}, Pass@k "
                            f"{sl['pass@k']:.3f} → {sh['pass@k']:.3f}, λ {lo:g} → {hi:g})",
                      note="per problem, paired over the band's two ends")
        if hi < 1.0:
            iv = stats.paired_bootstrap(pp[1.0]["tokens"], pp[hi]["tokens"], "ratio_of_means", n_resamples=nr,
                                        unit="problems")
            ledger.record("length_grows", iv.estimate, interval=iv,
                          shown=f"{iv.estimate:.3f}× ({summary(sw[1.0])['tokens']:.1f} vs {sh['tokens']:.1f} tokens "
                                f"at λ {hi:g})", note="mean tokens per problem, paired")
        else:
            ledger.untested("length_grows", "the band ends at λ = 1: nothing lies past it")
    # the best λ against Thinking and the baselines
    if best in pp and 1.0 in pp:
        iv = diff(pp[best]["mean@k"], pp[1.0]["mean@k"])
        ledger.record("matches_thinking", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (Mean@k {summary(sw[best])['mean@k']:.3f} at λ {best:g} vs "
                            f"{summary(sw[1.0])['mean@k']:.3f})", note="paired over problems")
        iv = stats.paired_bootstrap(pp[best]["tokens"], pp[1.0]["tokens"], "ratio_of_means", n_resamples=nr,
                                        unit="problems")
        ledger.record("fewer_tokens", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:.3f}× ({summary(sw[best])['tokens']:.1f} vs {summary(sw[1.0])['tokens']:.1f})",
                      note="mean tokens per problem, paired")
        if "TA" in var and "TIES" in var:
            ivs = {m: diff(pp[best]["mean@k"], per_problem(var[m])["mean@k"]) for m in ("TA", "TIES")}
            test = next(c for c in CLAIMS if c.id == "beats_merging").test
            verdicts = {m: test.decide(v) for m, v in ivs.items()}
            # holds only if it holds against both; does not hold if it fails against either
            rank = {C.FAILS: 0, C.INCONCLUSIVE: 1, C.HOLDS: 2}
            pick = min(ivs, key=lambda m: (rank[verdicts[m]], ivs[m].lo))
            ledger.record("beats_merging", ivs[pick].estimate, interval=ivs[pick],
                          shown="; ".join(f"vs {m} {v.estimate:+.3f} [{v.lo:+.3f}, {v.hi:+.3f}]" for m, v in ivs.items()),
                          note=f"decided on the least favourable comparison ({pick}): it must hold against both")
        else:
            ledger.untested("beats_merging", "no shared base checkpoint: TA and TIES need one")
    else:
        for cid in ("matches_thinking", "fewer_tokens", "beats_merging"):
            ledger.untested(cid, f"best_lambda {best:g} or λ = 1 is not in the sweep")
    # ablations
    if "mlp only" in var and "attn only" in var:
        iv = diff(per_problem(var["mlp only"])["think"], per_problem(var["attn only"])["think"])
        ledger.record("mlp_drives", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (MLP only {summary(var['mlp only'])['think']:.2f}, attention only "
                            f"{summary(var['attn only'])['think']:.2f})", note="paired over problems")
    else:
        ledger.untested("mlp_drives", "the module ablation did not run")
    first, late = "layers: first third", "layers: last two thirds"
    if first in var and late in var:
        iv = diff(per_problem(var[late])["think"], per_problem(var[first])["think"])
        ledger.record("late_layers", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (last two thirds {summary(var[late])['think']:.2f}, first third "
                            f"{summary(var[first])['think']:.2f})", note="paired over problems")
    else:
        ledger.untested("late_layers", "the layer ablation did not run")
    grid = [k for k in var if k.startswith("λ ") and ", T " in k]
    if len(grid) >= 2:
        accs = np.stack([per_problem(var[g])["mean@k"] for g in grid], axis=1)
        iv = _boot_problems(lambda idx: float(np.ptp(accs[idx].mean(axis=0))), n, nr)
        ledger.record("decoding_robust", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:.3f} (" + ", ".join(f"{g.split(', ', 1)[1]}: {summary(var[g])['mean@k']:.3f}"
                                                            for g in grid) + ")",
                      note=f"at {grid[0].split(',')[0]}")
    else:
        ledger.untested("decoding_robust", "no band (or a grid of one setting): the decoding grid did not run")
    # checks
    if 1.0 in pp:
        iv = mean_interval(pp[1.0]["think"], nr)
        ledger.record("thinking_thinks", iv.estimate, interval=iv, shown=f"{iv.estimate:.3f}")
    ledger.record("endpoints_exact", float(results["endpoint_error"]), shown=f"{results['endpoint_error']:g}")
    ledger.record("pair_close", float(results["sigma"]), shown=f"{results['sigma']:.4f} (pooled "
                                                              f"{results.get('sigma_pooled', float('nan')):.4f})")
