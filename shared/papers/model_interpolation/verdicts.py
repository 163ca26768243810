"""Model-interpolation chapter (ACL 2026, arXiv 2510.10977): the verdicts, decided from
:func:`acl26.papers.model_interpolation.study.run_experiments`'s results on intervals over problems."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from acl26 import claims as C
from acl26 import stats
from acl26.papers.model_interpolation.spec import (CLAIMS, MATCH_MARGIN, ONLY_FIRST, ONLY_LATE, ROBUST_TOL, SKIP_ATTN,
                                                  SKIP_MLP, TOKEN_NEEDS)
from acl26.papers.model_interpolation.tables import NEVER, band_width, mean_interval, per_problem, summary

_TEST = {c.id: c.test for c in CLAIMS}


def _boot_problems(fn: Callable[[np.ndarray], float], n: int, n_resamples: int, seed: int = 0) -> stats.Interval:
    """Percentile bootstrap of ``fn(indices)`` over resampled problems (for statistics BCa cannot take)."""
    rng = np.random.default_rng(seed)
    est = fn(np.arange(n))
    draws = np.array([fn(rng.integers(0, n, n)) for _ in range(n_resamples)])
    # order statistics, not interpolated ones: a statistic may be inf (e.g. a curve that never gets there)
    lo, hi = np.quantile(draws, [0.025, 0.975], method="inverted_cdf")
    lo, hi = min(float(lo), est), max(float(hi), est)
    return stats.Interval(float(est), lo, hi, 0.95, "percentile bootstrap over problems", n)


def largest_shift(default: np.ndarray, others: Sequence[np.ndarray], *, n_resamples: int = 1999,
                  level: float = 0.95) -> tuple[stats.Interval, list[stats.Interval]]:
    """The largest |mean(other − default)| over ``others`` (per-problem values, paired with ``default``) on a
    simultaneous interval: each difference gets a paired bootstrap interval at level 1 − (1 − ``level``) / m
    (Bonferroni over the m comparisons), and the box of those intervals bounds max |Δ| from below (the largest
    distance of an interval from 0) and from above (the largest |end|). With every Δ inside its interval
    (probability ≥ ``level``) max |Δ| lies in the returned interval, so it decides "≤ tolerance" (every
    interval inside ±tolerance) and "> tolerance" (some interval wholly outside) with its error controlled;
    unlike the range of the means, its estimate is not what decides. Returns the interval and the m paired ones."""
    others = list(others)
    if not others:
        raise ValueError("largest_shift needs at least one decoding to compare with the default")
    m = len(others)
    each = [stats.paired_bootstrap(o, default, "mean_diff", level=1 - (1 - level) / m, n_resamples=n_resamples,
                                   unit="problems") for o in others]
    est = max(abs(iv.estimate) for iv in each)
    lo = max(0.0 if iv.lo <= 0 <= iv.hi else min(abs(iv.lo), abs(iv.hi)) for iv in each)
    hi = max(max(abs(iv.lo), abs(iv.hi)) for iv in each)
    n = min(iv.n for iv in each)
    return stats.Interval(est, min(lo, est), max(hi, est), level,
                          f"Bonferroni-simultaneous paired bootstrap over problems ({m} comparisons)", n), each


def _gap_over_half_width(ledger: C.Ledger, cid: str, gap: stats.Interval, match: stats.Interval, what: str) -> None:
    """Record control ``cid``: the gap ``gap`` (Thinking − Instruct) in units of ``match``'s half-width."""
    h = (match.hi - match.lo) / 2
    shown = (f"Thinking − Instruct {what} {gap.estimate:+.3f} [{gap.lo:+.3f}, {gap.hi:+.3f}] against the "
             f"half-width ±{h:.3f}")
    value, scaled = stats.over_half_width(gap, h)
    ledger.record(cid, value, interval=scaled, shown=(f"{value:.2f}×: " if scaled is not None else "") + shown)


def _shift(iv: stats.Interval, scale: float, offset: float, what: str) -> stats.Interval:
    """``offset + scale · iv`` (scale ±1), as an interval."""
    a, b = offset + scale * iv.lo, offset + scale * iv.hi
    return stats.Interval(offset + scale * iv.estimate, min(a, b), max(a, b), iv.level, f"{iv.method}; {what}", iv.n)


def _best_vs_thinking(ledger: C.Ledger, cid: str, recs: dict, best: float, diff, nr: int, unit: str) -> None:
    """Record ``cid`` (matches_at_fewer_tokens or its GSM8K twin) from ``recs`` ({λ: record}): Mean@k at
    ``best`` − Thinking's, non-inferior by MATCH_MARGIN, and their mean tokens' ratio below 1, both paired over
    the ``unit`` (problems, questions) and decided together (:func:`acl26.claims.deciding`)."""
    pb, pt = per_problem(recs[best]), per_problem(recs[1.0])
    sb, st = summary(recs[best]), summary(recs[1.0])
    acc = diff(pb["mean@k"], pt["mean@k"])
    ratio = stats.paired_bootstrap(pb["tokens"], pt["tokens"], "ratio_of_means", n_resamples=nr, unit=unit)
    parts = {"accuracy": _shift(acc, 1.0, MATCH_MARGIN, f"+ the margin {MATCH_MARGIN:g}"),
             "tokens": _shift(ratio, -1.0, 1.0, "1 − the ratio")}
    needs = {"accuracy": MATCH_MARGIN, "tokens": TOKEN_NEEDS}
    pick = C.deciding(parts, _TEST[cid], needs)  # an intersection-union test: both parts must hold
    iv = parts[pick]
    ledger.record(cid, iv.estimate, interval=iv, needs=needs[pick],
                  shown=(f"accuracy {acc.estimate:+.3f} [{acc.lo:+.3f}, {acc.hi:+.3f}] (Mean@k {sb['mean@k']:.3f} at "
                         f"λ {best:g} vs {st['mean@k']:.3f}); tokens {ratio.estimate:.3f}× [{ratio.lo:.3f}, "
                         f"{ratio.hi:.3f}] ({sb['tokens']:.1f} vs {st['tokens']:.1f})"),
                  note=(f"decided by the {pick} part ({'accuracy gap + the margin' if pick == 'accuracy' else '1 − the token ratio'}"
                        f"; each part on its own interval, paired over {'GSM8K ' if unit == 'questions' else ''}{unit}: "
                        "it holds only if both hold)"))


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


def _runs(recs: dict, names) -> dict:
    """The records of ``names`` (λ values or variant names) that exist in ``recs``."""
    return {n: recs[n] for n in names if n in recs}


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every claim from :func:`.study.run_experiments`'s results; every interval resamples problems.

    ``results``: ``sweep`` {λ: record} (the curve, on the sweep's problems), ``decisive`` {λ: record} (λ = 0,
    the band's ends, ``best_lambda`` and 1 on the power problems), ``band`` (lo, hi) or None, ``grid_lambda``,
    ``ablation_lambda`` (None: no ablation past the band), ``variants`` {name: record} (TA, TIES, the
    ablations, the decoding grid), ``grid`` (the grid's names), ``grid_default`` (the grid row with the
    paper's decoding), ``grid_control`` (its control's name), ``ties`` (the TIES rows' names), ``gsm8k``
    {λ: record}, ``best_lambda`` (None: no λ < 1 past the band), ``sigma``, ``endpoint_error``, ``n_resamples``.
    """
    sw, var, dec = results["sweep"], results["variants"], results["decisive"]
    nr = int(results.get("n_resamples", 1999))
    lams = list(sw)
    pp = {lam: per_problem(rec) for lam, rec in sw.items()}
    pd_ = {lam: per_problem(rec) for lam, rec in dec.items()}
    n = len(next(iter(pp.values()))["think"])
    think_m = np.stack([pp[x]["think"] for x in lams], axis=1)
    best = results.get("best_lambda")
    b = results["band"]
    at = results.get("ablation_lambda")
    grid = [g for g in results.get("grid") or [] if g in var]
    ties = [t for t in results.get("ties") or [] if t in var]
    gsm = results.get("gsm8k") or {}

    def diff(a, b_):
        return stats.paired_bootstrap(a, b_, "mean_diff", n_resamples=nr, unit="problems")

    # the controls first; each claim's cut-off control reads exactly the runs that claim reads
    cut = "responses that reached the token cap before their end, per run"
    _cut_off(ledger, "cut_off_sweep", sw, nr, f"{cut}: every λ of the sweep")
    _cut_off(ledger, "cut_off_band", _runs(dec, b or ()), nr, f"{cut}: the band's two ends")
    _cut_off(ledger, "cut_off_length", _runs(dec, (b[1], 1.0) if b else ()), nr, f"{cut}: the band's end and λ = 1")
    _cut_off(ledger, "cut_off_best", _runs(dec, (best, 1.0) if best is not None else ()), nr,
             f"{cut}: the compared λ and λ = 1")
    _cut_off(ledger, "cut_off_merging", {**_runs(dec, (best,) if best is not None else ()), **_runs(var, ["TA", *ties])},
             nr, f"{cut}: the compared λ, TA and each TIES")
    _cut_off(ledger, "cut_off_modules", _runs(var, (SKIP_ATTN, SKIP_MLP)), nr, f"{cut}: the two module ablations")
    _cut_off(ledger, "cut_off_layers", _runs(var, (ONLY_FIRST, ONLY_LATE)), nr, f"{cut}: the two layer ablations")
    _cut_off(ledger, "cut_off_grid", _runs(var, grid), nr, f"{cut}: every decoding of the grid")
    _cut_off(ledger, "few_cut_off_gsm8k", _runs(gsm, (best, 1.0) if best is not None else ()), nr,
             "GSM8K responses that reached gsm8k_max_new_tokens: the compared λ and λ = 1")
    if best is not None and 0.0 in pd_ and 1.0 in pd_ and best in pd_:
        _gap_over_half_width(ledger, "thinking_better", diff(pd_[1.0]["mean@k"], pd_[0.0]["mean@k"]),
                             diff(pd_[best]["mean@k"], pd_[1.0]["mean@k"]), "Mean@k")
    else:
        ledger.untested("thinking_better", "no λ < 1 past the band, or λ = 0 or 1 was not run on the power problems")
    pg = {lam: per_problem(rec) for lam, rec in gsm.items()}
    if best is not None and 0.0 in pg and 1.0 in pg and best in pg:
        _gap_over_half_width(ledger, "thinking_better_gsm8k", diff(pg[1.0]["mean@k"], pg[0.0]["mean@k"]),
                             diff(pg[best]["mean@k"], pg[1.0]["mean@k"]), "GSM8K Mean@k")
    else:
        ledger.untested("thinking_better_gsm8k", "GSM8K was not run at λ = 0, 1 and a λ < 1 past the band")
    ctl, default = results.get("grid_control"), results.get("grid_default")
    if ctl in var and default in var:
        iv = diff(per_problem(var[default])["mean@k"], per_problem(var[ctl])["mean@k"])
        if iv.estimate < 0:  # "moves": decided on the side the estimate falls (|Δ|), the interval mirrored with it
            iv = stats.Interval(-iv.estimate, -iv.hi, -iv.lo, iv.level, iv.method + ", mirrored (|Δ|)", iv.n)
        ledger.record("decoding_matters", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (Mean@k {summary(var[default])['mean@k']:.3f} at {default}, "
                            f"{summary(var[ctl])['mean@k']:.3f} at {ctl.split(', ', 1)[1]})",
                      note="paired over problems")
    else:
        ledger.untested("decoding_matters", "no band (no stage-1 λ), or the grid lacks the default decoding: the "
                                            "decoding grid and its control did not run")
    if at is not None and at in pd_:
        iv = mean_interval(pd_[at]["think"], nr)
        ledger.record("full_merge_thinks", iv.estimate, interval=iv, shown=f"{iv.estimate:.3f} at λ {at:g}")
    else:
        ledger.untested("full_merge_thinks", "no λ past the band: the ablations did not run")

    # stage 2: the band (the curve, on the sweep's problems)
    iv = _boot_problems(lambda idx: band_width(lams, think_m[idx]), n, nr)
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
    # the λ past the band against Thinking and the baselines (power problems)
    no_best = ("no band: the compared λ (the band's end + ablation_offset) is undefined" if b is None else
               f"the band ends at λ {b[1]:g}: its end + ablation_offset is not below λ = 1")
    if best is not None and best in pd_ and 1.0 in pd_:
        _best_vs_thinking(ledger, "matches_at_fewer_tokens", dec, best, diff, nr, "problems")
        if "TA" in var and ties:
            ivs = {m: diff(pd_[best]["mean@k"], per_problem(var[m])["mean@k"]) for m in ("TA", *ties)}
            # holds only if it holds against every baseline; does not hold if it fails against any
            pick = C.deciding(ivs, _TEST["beats_merging"])
            ledger.record("beats_merging", ivs[pick].estimate, interval=ivs[pick],
                          shown="; ".join(f"vs {m} {v.estimate:+.3f} [{v.lo:+.3f}, {v.hi:+.3f}]" for m, v in ivs.items()),
                          note=f"at λ {best:g}; decided on the least favourable comparison ({pick}): it must hold "
                               "against every baseline")
        else:
            ledger.untested("beats_merging", "no shared base checkpoint: TA and TIES need one")
    else:
        for cid in ("matches_at_fewer_tokens", "beats_merging"):
            ledger.untested(cid, no_best if best is None else f"λ {best:g} or λ = 1 was not run on the power problems")
    # GSM8K, the second benchmark
    if best is not None and best in pg and 1.0 in pg:
        _best_vs_thinking(ledger, "matches_at_fewer_tokens_gsm8k", gsm, best, diff, nr, "questions")
    else:
        ledger.untested("matches_at_fewer_tokens_gsm8k", "GSM8K was not run at λ = 1 and a λ < 1 past the band "
                                                         "(gsm8k_split = 'none', or no band)")
    # ablations, past the band by the paper's offset: one part at Instruct, everything else interpolated
    where = (f"at λ {at:g}, the band's end {b[1]:g} + {results.get('ablation_offset', 0.0):g}" if at is not None and b
             else "")
    no_room = ("no band: the ablations' λ (the band's end + ablation_offset) is undefined" if b is None else
               f"the band ends at λ {b[1]:g}: its end + ablation_offset lies past λ = 1")
    if at is not None and SKIP_ATTN in var and SKIP_MLP in var:
        iv = diff(per_problem(var[SKIP_ATTN])["think"], per_problem(var[SKIP_MLP])["think"])
        ledger.record("mlp_drives", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (attention at Instruct {summary(var[SKIP_ATTN])['think']:.2f}, MLPs "
                            f"at Instruct {summary(var[SKIP_MLP])['think']:.2f})", note=f"{where}; paired over problems")
    else:
        ledger.untested("mlp_drives", no_room if at is None else "the module ablation did not run")
    if at is not None and ONLY_FIRST in var and ONLY_LATE in var:
        iv = diff(per_problem(var[ONLY_LATE])["think"], per_problem(var[ONLY_FIRST])["think"])
        ledger.record("late_layers", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (last two thirds interpolated {summary(var[ONLY_LATE])['think']:.2f}, "
                            f"first third {summary(var[ONLY_FIRST])['think']:.2f})",
                      note=f"{where}; paired over problems")
    else:
        ledger.untested("late_layers", no_room if at is None else "the layer ablation did not run")
    others = [g for g in grid if g != default]
    if default in var and others:
        base = per_problem(var[default])["mean@k"]
        iv, each = largest_shift(base, [per_problem(var[g])["mean@k"] for g in others], n_resamples=nr)
        worst = others[int(np.argmax([abs(e.estimate) for e in each]))]
        ledger.record("decoding_robust", iv.estimate, interval=iv, needs=ROBUST_TOL,
                      shown=f"{iv.estimate:.3f} (largest at {worst.split(', ', 1)[1]}; default "
                            f"{default.split(', ', 1)[1]} {summary(var[default])['mean@k']:.3f}; "
                            + ", ".join(f"{g.split(', ', 1)[1]}: {summary(var[g])['mean@k']:.3f}" for g in others) + ")",
                      note=f"at {default.split(',')[0]} (the band's lower end), {len(others)} decodings against the "
                           "default, paired over problems")
    else:
        ledger.untested("decoding_robust", "no band (no stage-1 λ), or the grid lacks the default decoding or any "
                                           "other: the decoding grid did not run")
    # checks and facts
    if 1.0 in pd_:
        iv = mean_interval(pd_[1.0]["think"], nr)
        ledger.record("thinking_thinks", iv.estimate, interval=iv, shown=f"{iv.estimate:.3f}")
    else:
        ledger.untested("thinking_thinks", "λ = 1 was not run on the power problems")
    ledger.record("endpoints_exact", float(results["endpoint_error"]), shown=f"{results['endpoint_error']:g}")
    ledger.record("pair_close", float(results["sigma"]), shown=f"{results['sigma']:.4f} (pooled "
                                                              f"{results.get('sigma_pooled', float('nan')):.4f})")
