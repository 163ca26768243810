"""Model-interpolation chapter (ACL 2026, arXiv 2510.10977): the verdicts, decided from
:func:`acl26.papers.model_interpolation.study.run`'s results on intervals over problems."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from acl26 import claims as C
from acl26 import stats
from acl26.papers.model_interpolation.spec import CLAIMS, MATCH_MARGIN, ROBUST_TOL
from acl26.papers.model_interpolation.study import (NEVER, UNION_LAYERS, UNION_MODULES, band_width, mean_interval,
                                                   per_problem, summary)


def _boot_problems(fn: Callable[[np.ndarray], float], n: int, n_resamples: int, seed: int = 0) -> stats.Interval:
    """Percentile bootstrap of ``fn(indices)`` over resampled problems (for statistics BCa cannot take)."""
    rng = np.random.default_rng(seed)
    est = fn(np.arange(n))
    draws = np.array([fn(rng.integers(0, n, n)) for _ in range(n_resamples)])
    # order statistics, not interpolated ones: a statistic may be inf (e.g. a curve that never gets there)
    lo, hi = np.quantile(draws, [0.025, 0.975], method="inverted_cdf")
    lo, hi = min(float(lo), est), max(float(hi), est)
    return stats.Interval(float(est), lo, hi, 0.95, "percentile bootstrap over problems", n)


def _gap_over_half_width(ledger: C.Ledger, cid: str, gap: stats.Interval, match: stats.Interval, what: str) -> None:
    """Record control ``cid``: the gap ``gap`` (Thinking − Instruct) in units of ``match``'s half-width."""
    h = (match.hi - match.lo) / 2
    shown = (f"Thinking − Instruct {what} {gap.estimate:+.3f} [{gap.lo:+.3f}, {gap.hi:+.3f}] against the "
             f"half-width ±{h:.3f}")
    value, scaled = stats.over_half_width(gap, h)
    ledger.record(cid, value, interval=scaled, shown=(f"{value:.2f}×: " if scaled is not None else "") + shown)


def _best_vs_thinking(ledger: C.Ledger, suffix: str, recs: dict, best: float, diff, nr: int, unit: str) -> None:
    """Record ``matches_thinking{suffix}`` (Mean@k at ``best`` − Thinking's) and ``fewer_tokens{suffix}`` (their
    mean tokens' ratio) from ``recs`` ({λ: record}), both paired over the ``unit`` (problems, questions)."""
    pb, pt = per_problem(recs[best]), per_problem(recs[1.0])
    sb, st = summary(recs[best]), summary(recs[1.0])
    iv = diff(pb["mean@k"], pt["mean@k"])
    ledger.record(f"matches_thinking{suffix}", iv.estimate, interval=iv,
                  shown=f"{iv.estimate:+.3f} (Mean@k {sb['mean@k']:.3f} at λ {best:g} vs {st['mean@k']:.3f})",
                  note=f"paired over {'GSM8K ' if unit == 'questions' else ''}{unit}", needs=MATCH_MARGIN)
    iv = stats.paired_bootstrap(pb["tokens"], pt["tokens"], "ratio_of_means", n_resamples=nr, unit=unit)
    ledger.record(f"fewer_tokens{suffix}", iv.estimate, interval=iv,
                  shown=f"{iv.estimate:.3f}× ({sb['tokens']:.1f} vs {st['tokens']:.1f})",
                  note=f"mean tokens per {unit[:-1]}, paired")


def _cut_off(ledger: C.Ledger, cid: str, recs: dict, nr: int, note: str, seed: int = 0) -> None:
    """Record control ``cid``: the share of responses cut off at the token cap, at the worst of ``recs``
    ({λ or variant name: record}), with a percentile bootstrap that resamples each record's problems."""
    if not recs:
        ledger.untested(cid, "no configuration was run")
        return
    names = [f"λ {x:g}" if isinstance(x, float) else str(x) for x in recs]
    cuts = [per_problem(rec)["cut"] for rec in recs.values()]
    share = [float(c.mean()) for c in cuts]
    worst = names[int(np.argmax(share))]
    rng = np.random.default_rng(seed)
    draws = np.array([max(float(c[rng.integers(0, len(c), len(c))].mean()) for c in cuts) for _ in range(nr)])
    lo, hi = np.quantile(draws, [0.025, 0.975], method="inverted_cdf")
    est = max(share)
    iv = stats.Interval(est, min(float(lo), est), max(float(hi), est), 0.95,
                        "percentile bootstrap over problems (each λ's resampled)", min(len(c) for c in cuts))
    ledger.record(cid, est, interval=iv,
                  shown=f"{est:.1%} at {worst} (the worst); " + ", ".join(f"{x}: {c:.0%}" for x, c in zip(names, share)),
                  note=note)


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every claim from :func:`run`'s results; every interval resamples problems.

    ``results``: ``sweep`` {λ: record} (the curve, on the sweep's problems), ``decisive`` {λ: record} (λ = 0,
    the band's ends, ``best_lambda`` and 1 on the power problems), ``band`` (lo, hi) or None, ``band_lambda``,
    ``ablation_lambda`` (None: no ablation past the band), ``variants`` {name: record} (TA, TIES, the
    ablations, the decoding grid), ``grid`` (the grid's names), ``grid_control`` (its control's name),
    ``gsm8k`` {λ: record}, ``best_lambda``, ``sigma``, ``endpoint_error``, ``n_resamples``.
    """
    sw, var, dec = results["sweep"], results["variants"], results["decisive"]
    nr = int(results.get("n_resamples", 1999))
    lams = list(sw)
    pp = {lam: per_problem(rec) for lam, rec in sw.items()}
    pd_ = {lam: per_problem(rec) for lam, rec in dec.items()}
    n = len(next(iter(pp.values()))["think"])
    think_m = np.stack([pp[x]["think"] for x in lams], axis=1)
    best = results["best_lambda"]

    def diff(a, b):
        return stats.paired_bootstrap(a, b, "mean_diff", n_resamples=nr, unit="problems")

    # the controls first
    # every run on the chain sums: a response cut off before </think> reads as "not thinking", so the variants count too
    _cut_off(ledger, "few_cut_off", {**sw, **dec, **var}, nr,
             "responses that reached max_new_tokens before their end, per run: the sweep, the decisive λ, TA, TIES, "
             "the ablations and the decoding grid")
    if 0.0 in pd_ and 1.0 in pd_ and best in pd_:
        _gap_over_half_width(ledger, "thinking_better", diff(pd_[1.0]["mean@k"], pd_[0.0]["mean@k"]),
                             diff(pd_[best]["mean@k"], pd_[1.0]["mean@k"]), "Mean@k")
    else:
        ledger.untested("thinking_better", "λ = 0, λ = 1 or best_lambda was not run on the power problems")
    gsm = results.get("gsm8k") or {}
    pg = {lam: per_problem(rec) for lam, rec in gsm.items()}
    if gsm:
        _cut_off(ledger, "few_cut_off_gsm8k", gsm, nr, "GSM8K responses that reached gsm8k_max_new_tokens, per λ")
    else:
        ledger.untested("few_cut_off_gsm8k", "GSM8K was not run (gsm8k_split = 'none')")
    if 0.0 in pg and 1.0 in pg and best in pg:
        _gap_over_half_width(ledger, "thinking_better_gsm8k", diff(pg[1.0]["mean@k"], pg[0.0]["mean@k"]),
                             diff(pg[best]["mean@k"], pg[1.0]["mean@k"]), "GSM8K Mean@k")
    else:
        ledger.untested("thinking_better_gsm8k", "GSM8K was not run at λ = 0, best_lambda and 1")
    grid, ctl = results.get("grid") or [], results.get("grid_control")
    mid = results.get("band_lambda")
    if ctl in var and mid in pd_:
        iv = diff(pd_[mid]["mean@k"], per_problem(var[ctl])["mean@k"])
        if iv.estimate < 0:  # "moves": decided on the side the estimate falls (|Δ|), the interval mirrored with it
            iv = stats.Interval(-iv.estimate, -iv.hi, -iv.lo, iv.level, iv.method + ", mirrored (|Δ|)", iv.n)
        ledger.record("decoding_matters", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (Mean@k {summary(dec[mid])['mean@k']:.3f} at λ {mid:g}'s decoding, "
                            f"{summary(var[ctl])['mean@k']:.3f} at {ctl.split(', ', 1)[1]})",
                      note="paired over problems")
    else:
        ledger.untested("decoding_matters", "no band: the decoding grid and its control did not run")
    for cid, name in (("modules_can_think", UNION_MODULES), ("layers_can_think", UNION_LAYERS)):
        if results.get("ablation_lambda") is not None and name in var:
            iv = mean_interval(per_problem(var[name])["think"], nr)
            ledger.record(cid, iv.estimate, interval=iv, shown=f"{iv.estimate:.3f} at λ {results['ablation_lambda']:g}")
        else:
            ledger.untested(cid, "no ablation past the band ran")

    # stage 2: the band (the curve, on the sweep's problems)
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
    elif b[0] not in pd_ or b[1] not in pd_:
        for cid in ("mean_jumps", "length_grows"):
            ledger.untested(cid, "the band's ends were not run on the power problems")
    else:
        lo, hi = b
        d = (pd_[hi]["mean@k"] - pd_[lo]["mean@k"]) - (pd_[hi]["pass@k"] - pd_[lo]["pass@k"])
        iv = mean_interval(d, nr)
        sl, sh = summary(dec[lo]), summary(dec[hi])
        ledger.record("mean_jumps", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (Mean@k {sl['mean@k']:.3f} → {sh['mean@k']:.3f}, Pass@k "
                            f"{sl['pass@k']:.3f} → {sh['pass@k']:.3f}, λ {lo:g} → {hi:g})",
                      note="per problem, paired over the band's two ends")
        if hi < 1.0 and 1.0 in pd_:
            iv = stats.paired_bootstrap(pd_[1.0]["tokens"], pd_[hi]["tokens"], "ratio_of_means", n_resamples=nr,
                                        unit="problems")
            ledger.record("length_grows", iv.estimate, interval=iv,
                          shown=f"{iv.estimate:.3f}× ({summary(dec[1.0])['tokens']:.1f} vs {sh['tokens']:.1f} tokens "
                                f"at λ {hi:g})", note="mean tokens per problem, paired")
        else:
            ledger.untested("length_grows", "the band ends at λ = 1: nothing lies past it")
    # the best λ against Thinking and the baselines (power problems)
    if best in pd_ and 1.0 in pd_:
        _best_vs_thinking(ledger, "", dec, best, diff, nr, "problems")
        if "TA" in var and "TIES" in var:
            ivs = {m: diff(pd_[best]["mean@k"], per_problem(var[m])["mean@k"]) for m in ("TA", "TIES")}
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
            ledger.untested(cid, f"best_lambda {best:g} or λ = 1 was not run on the power problems")
    # GSM8K, the second benchmark
    if best in pg and 1.0 in pg:
        _best_vs_thinking(ledger, "_gsm8k", gsm, best, diff, nr, "questions")
    else:
        for cid in ("matches_thinking_gsm8k", "fewer_tokens_gsm8k"):
            ledger.untested(cid, "GSM8K was not run at best_lambda and λ = 1 (gsm8k_split = 'none')")
    # ablations, past the band by the paper's offset
    at = results.get("ablation_lambda")
    where = (f"at λ {at:g}, the band's end {b[1]:g} + {results.get('ablation_offset', 0.0):g}" if at is not None and b
             else "")
    no_room = ("no band: the ablations' λ (the band's end + ablation_offset) is undefined" if b is None else
               f"the band ends at λ {b[1]:g}: its end + ablation_offset lies past λ = 1")
    if at is not None and "mlp only" in var and "attn only" in var:
        iv = diff(per_problem(var["mlp only"])["think"], per_problem(var["attn only"])["think"])
        ledger.record("mlp_drives", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (MLP only {summary(var['mlp only'])['think']:.2f}, attention only "
                            f"{summary(var['attn only'])['think']:.2f})", note=f"{where}; paired over problems")
    else:
        ledger.untested("mlp_drives", no_room if at is None else "the module ablation did not run")
    first, late = "layers: first third", "layers: last two thirds"
    if at is not None and first in var and late in var:
        iv = diff(per_problem(var[late])["think"], per_problem(var[first])["think"])
        ledger.record("late_layers", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (last two thirds {summary(var[late])['think']:.2f}, first third "
                            f"{summary(var[first])['think']:.2f})", note=f"{where}; paired over problems")
    else:
        ledger.untested("late_layers", no_room if at is None else "the layer ablation did not run")
    grid = [g for g in grid if g in var]
    if len(grid) >= 2:
        accs = np.stack([per_problem(var[g])["mean@k"] for g in grid], axis=1)
        iv = _boot_problems(lambda idx: float(np.ptp(accs[idx].mean(axis=0))), len(accs), nr)
        ledger.record("decoding_robust", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:.3f} (" + ", ".join(f"{g.split(', ', 1)[1]}: {summary(var[g])['mean@k']:.3f}"
                                                            for g in grid) + ")",
                      note=f"at {grid[0].split(',')[0]}", needs=ROBUST_TOL)
    else:
        ledger.untested("decoding_robust", "no band (or a grid of one setting): the decoding grid did not run")
    # checks
    if 1.0 in pd_:
        iv = mean_interval(pd_[1.0]["think"], nr)
        ledger.record("thinking_thinks", iv.estimate, interval=iv, shown=f"{iv.estimate:.3f}")
    else:
        ledger.untested("thinking_thinks", "λ = 1 was not run on the power problems")
    ledger.record("endpoints_exact", float(results["endpoint_error"]), shown=f"{results['endpoint_error']:g}")
    ledger.record("pair_close", float(results["sigma"]), shown=f"{results['sigma']:.4f} (pooled "
                                                              f"{results.get('sigma_pooled', float('nan')):.4f})")
