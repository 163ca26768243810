"""Alloc-MoE chapter (ACL 2026, arXiv 2604.08133): the verdicts, decided from the study's results.

:func:`record_claims` turns what :func:`acl26.papers.alloc_moe.study.run_experiments` returned into the ledger's
verdicts: the controls first (``experts_matter``, ``k_base_matters``, ``calib_matters``), then the
claims that name them, then our checks. The perplexity, the method labels and the bootstrap of the
allocation's shape come from :mod:`.tables`. The tests feed it synthetic results, a holding and a
failing case per claim and control.
"""

from __future__ import annotations

import numpy as np

from acl26 import claims as C
from acl26 import stats
from acl26.papers.alloc_moe.spec import BARELY, REGIME_CONTROL, T_MECHANISM
from acl26.papers.alloc_moe.tables import (LABELS, SEGMENT, allocation_bootstrap, baseline_column, entropy_link, ppl,
                                           profile_spread, profile_spread_bootstrap)

#: the two scopes of the speed study's stacks: the claims are decided on the first
MOE_ONLY, WITH_REST = "MoE layers only", "MoE + attention projections + head"


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every Alloc-MoE claim, control and check from :func:`acl26.papers.alloc_moe.study.run_experiments`'s results.

    ``results``: ``grid`` (``study.run_grid`` on the main model: ``native``, ``nll`` {(k, method):
    per-block NLLs}, ``budget`` {(k, method): measured Σk}, ``alloc``, ``alloc_main``, ``half``,
    ``k_base`` {K_base: NLLs}, ``nll_alt`` / ``alloc_alt`` (Alloc-L profiled on the second text),
    ``nll_rand`` / ``alloc_rand`` (profiled on random token ids), ``full_nll``, ``top1_nll``, and
    ``S_parts`` / ``S_weights``, the profile's calibration segments, for ``shallow_more`` on one model),
    ``seeds`` ({seed: ``study.headline_seed``} of the main subject: one model, key None, read off its
    grid; several where the subject has training seeds), ``second`` ({"seeds": {seed: headline}} of the
    trained MoE, the second subject of ``across_models``; absent: those two rows untested), ``speed``
    (``study.speed_study``, or None with ``speed_reason``), ``n_resamples``.

    The controls are decided first: ``experts_matter`` (every quality claim names it), ``experts_matter_trained``
    (``across_models``), ``profile_comparable`` (the isolated profile ``S``'s rows at K_orig within a factor 2;
    the claims that read Alloc-L's allocation and ``across_models``; issue 40, point 5),
    ``k_base_matters`` (k_base_1) and ``calib_matters`` (calib_robust); a claim whose control does not
    hold is not testable here. Noisy figures follow the one rule (:meth:`acl26.claims.Ledger.record_noisy`):
    the t-interval over seeds where every seed measured the figure (the headline, experts_matter,
    shallow_more), else a paired bootstrap over the main model's evaluation blocks.
    """
    g = results["grid"]
    nr = int(results.get("n_resamples", 2999))
    L = len(g["native"])
    kh = g["half"]
    k_orig = min(g["native"])
    # "half budget" is the budget nearest half the native top-k (spec.nearest_half): the rows say what it is
    half_text = (f"half budget k = {kh}" if 2 * kh == k_orig else
                 f"\"half\" budget k = {kh} ({kh / k_orig:.0%} of the native top-{k_orig}; the budget nearest half)")
    nll = g["nll"]
    seeds = results.get("seeds") or {}

    def nll_of(m):
        return nll[(kh, m)]

    def ratio(a, b):
        """The perplexity ratio of two arms' per-block NLLs (the "ppl_ratio" statistic's estimate)."""
        return ppl(a) / ppl(b)

    def per_seed_text(per: dict, fmt: str = "{:.4f}") -> str:
        return ", ".join(f"{s}: {fmt.format(v)}" for s, v in per.items())

    def noisy_ratio(cid, a, b, shown, note="", per_seed=None, needs=None):
        return ledger.record_noisy(cid, per_seed=per_seed, paired=(a, b), statistic="ppl_ratio", n_resamples=nr,
                                   shown=shown, note=note, needs=needs)

    def top1_control(cid, heads, a, b, extra="", note=""):
        """experts_matter on one subject: uniform top-1 against the native top-k, over its seeds' headlines
        (``heads``) where it has several, else on the paired blocks ``a`` (top-1) and ``b`` (native)."""
        per = {s: ratio(r["top1"], r["full"]) for s, r in heads.items()}
        lead = (f"{np.mean(list(per.values())):.3f}× mean over seeds ({per_seed_text(per, '{:.3f}')})" if len(per) >= 2
                else f"{ratio(a, b):.3f}×")
        noisy_ratio(cid, a, b, per_seed=list(per.values()), shown=lead + extra, note=note)

    # ---- controls
    top1_control("experts_matter", seeds, g["top1_nll"], g["full_nll"],
                 extra=f"; main model: top-1 ppl {ppl(g['top1_nll']):.2f} vs native {ppl(g['full_nll']):.2f}",
                 note="uniform top-1 against the native top-k, held-out blocks")
    second = (results.get("second") or {}).get("seeds") or {}
    if second:
        first = next(iter(second.values()))
        top1_control("experts_matter_trained", second, first["top1"], first["full"],
                     note="the trained MoE: uniform top-1 against the native top-k, held-out blocks")
    else:
        ledger.untested("experts_matter_trained", "the second subject (the trained MoE) was not run")
    kb = g["k_base"]
    if len(kb) >= 2:
        mean_nll = {b: float(np.mean(v)) for b, v in kb.items()}
        best = min(kb, key=mean_nll.get)
        ends = (min(kb), max(kb))
        worse = max(ends, key=mean_nll.get)
        noisy_ratio("k_base_matters", kb[worse], kb[best],
                    shown=f"{ratio(kb[worse], kb[best]):.4f} (K_base {worse}: ppl {ppl(kb[worse]):.2f}, best K_base {best}: "
                          f"ppl {ppl(kb[best]):.2f})",
                    note=f"Alloc-T at half budget (k = {kh}); the worse end of the sweep {sorted(kb)} against its best")
    else:
        ledger.untested("k_base_matters", f"the K_base sweep has fewer than two values ({sorted(kb)})")
    al = g["alloc_main"]
    noisy_ratio("calib_matters", g["nll_rand"], nll_of("alloc-l"),
                shown=f"{ratio(g['nll_rand'], nll_of('alloc-l')):.4f} (allocation {g['alloc_rand']} from random tokens "
                      f"vs {al})",
                note="Alloc-L alone at half budget, profiled on random token ids (uniform over the vocabulary, seed 0) "
                     "and on the first text")

    # ---- the regime control (issue 40, point 5): the isolated profile's rows are comparable (spec.CLAIMS says why)
    if g.get("S") is None:
        ledger.untested(REGIME_CONTROL, "the grid holds no isolated profile (S)")
    else:
        col = baseline_column(g["S"], g["native"])
        shown_rows = f"rows' baselines S[i, K_orig] from {col.min():.2f} (layer {int(col.argmin())}) to {col.max():.2f} " \
                     f"(layer {int(col.argmax())})"
        if g.get("S_parts") is not None:
            iv = profile_spread_bootstrap(g["S_parts"], g["S_weights"], g["native"], n_resamples=nr)
            ledger.record(REGIME_CONTROL, iv.estimate, interval=iv, shown=f"{iv.estimate:.3f}× ({shown_rows})",
                          note=f"max / min over the main subject's profile rows of S[i, K_orig]; percentile bootstrap over "
                               f"{iv.n} calibration segments of {SEGMENT} tokens")
        else:
            v = profile_spread(g["S"], g["native"])
            ledger.record(REGIME_CONTROL, v, shown=f"{v:.3f}× ({shown_rows})",
                          note="max / min over the main subject's profile rows of S[i, K_orig]; a point (the profile's "
                               "segments were not kept)")

    # ---- Alloc-T's mechanism (the control of t_helps and t_tight): its allocation follows routing entropy
    link = entropy_link(g, nr)
    if link is None:
        ledger.untested(T_MECHANISM, "no token-level Alloc-T counts at half budget (or every token got the same count)")
    else:
        ledger.record(T_MECHANISM, link.estimate, interval=link,
                      shown=f"{link.estimate:+.3f} at {half_text} ({link.method}); the paper's > 0.7")

    # ---- the paper's quality claims (each names experts_matter)
    def ratio_text(a, b):
        return (f"{ratio(nll_of(a), nll_of(b)):.4f} ({a} {ppl(nll_of(a)):.2f} vs {b} {ppl(nll_of(b)):.2f}, "
                f"{half_text})")

    per = {s: ratio(r["alloc-l+t"], r["uniform"]) for s, r in seeds.items()}
    if len(per) >= 2:
        main_iv = stats.paired_bootstrap(nll_of("alloc-l+t"), nll_of("uniform"), "ppl_ratio", n_resamples=nr)
        shown = (f"{np.mean(list(per.values())):.4f} mean over seeds ({per_seed_text(per)}); main model "
                 f"{main_iv.estimate:.4f} [{main_iv.lo:.4f}, {main_iv.hi:.4f}] (paired bootstrap over blocks)")
    else:
        shown = ratio_text("alloc-l+t", "uniform")
    noisy_ratio("lt_beats_uniform", nll_of("alloc-l+t"), nll_of("uniform"), per_seed=list(per.values()), shown=shown,
                note="Alloc-L+T / uniform perplexity at half budget" + (", each seed profiled on its own" if len(per) >= 2 else ""))
    _across_models(ledger, nll_of("alloc-l+t"), nll_of("uniform"), second, nr)
    for cid, m in (("l_helps", "alloc-l"), ("t_helps", "alloc-t")):
        noisy_ratio(cid, nll_of(m), nll_of("uniform"), shown=ratio_text(m, "uniform"),
                    note=f"allocation {g['alloc'].get((kh, m), [kh] * L)}")
    ks = sorted(k for k, m in nll if m == "uniform")
    tight, loose = ks[0], ks[-1]
    if tight != loose:
        a = nll[(tight, "uniform")] - nll[(tight, "alloc-t")]
        b = nll[(loose, "uniform")] - nll[(loose, "alloc-t")]
        ledger.record_noisy("t_tight", paired=(a, b), statistic="mean_diff", n_resamples=nr,
                            shown=f"{float(np.mean(a) - np.mean(b)):+.4f} nats (gain {float(np.mean(a)):+.4f} at k = {tight}, "
                                  f"{float(np.mean(b)):+.4f} at k = {loose})",
                            note="gain = mean NLL of uniform minus Alloc-T, per block")
    else:
        ledger.untested("t_tight", "the profile has a single budget")
    ivs = {m: stats.paired_bootstrap(nll_of("alloc-l+t"), nll_of(m), "ppl_ratio", n_resamples=nr)
           for m in ("lexi", "top-p", "skip")}
    failing = [m for m, v in ivs.items() if v.lo >= 1.0]
    pick = failing[0] if failing else max(ivs, key=lambda m: ivs[m].hi)
    noisy_ratio("beats_baselines", nll_of("alloc-l+t"), nll_of(pick),
                shown="; ".join(f"vs {LABELS[m]} {v.estimate:.4f} [{v.lo:.4f}, {v.hi:.4f}]" for m, v in ivs.items()),
                note=f"decided on the least favourable comparison ({LABELS[pick]})")
    if 1 in kb and len(kb) >= 2:
        noisy_ratio("k_base_1", kb[1], kb[best],
                    shown=(f"{ratio(kb[1], kb[best]):.4f} (K_base 1: {ppl(kb[1]):.2f}, best K_base {best}: {ppl(kb[best]):.2f})"
                           if best != 1 else f"K_base = 1 is the best of {sorted(kb)} (ppl {ppl(kb[1]):.2f}): ratio 1"),
                    note=f"Alloc-T at half budget, K_base swept over {sorted(kb)}", needs=BARELY)
    else:
        ledger.untested("k_base_1", "the K_base sweep did not include 1 and another value")
    h = L // 2

    def shallow(ks_):
        return float(np.mean(ks_[:h]) - np.mean(ks_[L - h:])) if h else 0.0

    per = {s: shallow(r["alloc"]) for s, r in seeds.items()}
    if len(per) < 2 and g.get("S_parts") is not None:
        # one model: the allocation's shape on resampled calibration segments (the profile re-derived)
        iv = allocation_bootstrap(g["S_parts"], g["S_weights"], kh * L, shallow, n_resamples=nr)
        ledger.record("shallow_more", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.2f} (allocation {al})",
                      note="mean k of the shallower half minus the deeper half, Alloc-L at half budget; percentile "
                           f"bootstrap over {iv.n} calibration segments of {SEGMENT} tokens, the profile and the DP re-run "
                           "on each draw")
        per = {}
    if per:
        ledger.record_noisy("shallow_more", per_seed=list(per.values()), point=shallow(al),
                            shown=f"{shallow(al):+.2f} on the main model (allocation {al})"
                                  + (f"; per seed {per_seed_text(per, '{:+.2f}')}, allocations "
                                     + ", ".join(f"{s}: {r['alloc']}" for s, r in seeds.items()) if len(per) >= 2 else ""),
                            note="mean k of the shallower half minus the deeper half, Alloc-L at half budget")
    noisy_ratio("calib_robust", g["nll_alt"], nll_of("alloc-l"),
                shown=f"{ratio(g['nll_alt'], nll_of('alloc-l')):.4f} (allocation {g['alloc_alt']} from the second text "
                      f"vs {al})",
                note="Alloc-L alone at half budget, profiled on each calibration text", needs=BARELY)

    # ---- speed: the MoE layers at the allocation Alloc-MoE chose, an upper bound on the whole model's speed-up
    sp = results.get("speed")
    if sp is None:
        for cid in ("speed_prefill", "speed_decode", "grouped_exact"):
            ledger.untested(cid, results.get("speed_reason") or "the speed study did not run")
    else:
        by = {(r["phase"], r.get("scope"), r["allocation"]): r for r in sp["rows"]}
        for cid, phase in (("speed_prefill", "prefill"), ("speed_decode", "decode")):
            r = by.get((phase, MOE_ONLY, "Alloc-MoE"))
            if r is None:
                ledger.untested(cid, f"the speed study timed no {phase} stack of MoE layers at Alloc-MoE's allocation")
                continue
            iv = stats.repeat_range(r["_ratios"])
            u, w = by.get((phase, MOE_ONLY, "uniform")), by.get((phase, WITH_REST, "Alloc-MoE"))
            ledger.record(cid, iv.estimate, interval=iv,
                          shown=f"{iv.estimate:.2f}× MoE layers at Alloc-MoE's allocation"
                                + (f"; uniform k: {u['speed-up']:.2f}×" if u else "")
                                + (f"; with attention projections and head {w['speed-up']:.2f}×" if w else "")
                                + f" ({sp['shape']}, {sp['layers']} layers)",
                          note="MoE blocks only (router, routed and shared experts), random weights, float32, this CPU, at "
                               f"the half-budget allocation Alloc-MoE chose on our model stretched to {sp['layers']} layers "
                               f"({sp.get('allocs', {}).get('Alloc-MoE', '?')}); attention, KV cache, norms and head cost "
                               "the same at every budget and are left out, so this bounds the whole model's speed-up from "
                               "above; range over rounds of the per-round ratio")
        ledger.record("grouped_exact", sp["grouped_err"], shown=f"{sp['grouped_err']:.2e}")

    # ---- our checks
    fixed = [(k, m) for (k, m) in g["budget"] if m not in ("top-p", "skip")]
    miss = max(abs(g["budget"][(k, m)] - sum(g["alloc"].get((k, m), [k] * L))) for k, m in fixed)
    ledger.record("budget_exact", miss, shown=f"{miss:.2e}")
    rel = max(abs(g["budget"][(k, m)] - k * L) / (k * L) for (k, m) in g["budget"] if m in ("top-p", "skip"))
    ledger.record("budget_matched", rel, shown=f"{rel:.1%}")


def _across_models(ledger: C.Ledger, lt: np.ndarray, uniform: np.ndarray, second: dict, nr: int) -> None:
    """``across_models``: Alloc-L+T / uniform at half budget on each subject, decided on the least
    favourable one: a subject whose interval lies wholly at or above 1 if there is one, else the one
    whose interval reaches highest. The main subject's interval is a paired bootstrap over its blocks;
    the trained MoE's the t-interval over its seeds (one rule, :func:`acl26.stats.noisy`)."""
    if not second:
        ledger.untested("across_models", "the second subject (the trained MoE) was not run")
        return
    first = next(iter(second.values()))
    per = [ppl(r["alloc-l+t"]) / ppl(r["uniform"]) for r in second.values()]
    arms = {"MoEfied SmolLM2": dict(per_seed=None, paired=(lt, uniform)),
            "trained MoE": dict(per_seed=per, paired=(first["alloc-l+t"], first["uniform"]))}
    got = {name: stats.noisy(a["per_seed"], a["paired"], statistic="ppl_ratio", n_resamples=nr) for name, a in arms.items()}
    losing = [n for n, (_, iv, _) in got.items() if iv is not None and iv.lo >= 1.0]
    pick = losing[0] if losing else max(got, key=lambda n: got[n][1].hi if got[n][1] is not None else float("inf"))
    value, iv, how = got[pick]
    shown = "; ".join(f"{n} {v:.4f}" + (f" [{i.lo:.4f}, {i.hi:.4f}]" if i is not None else "") for n, (v, i, _) in got.items())
    ledger.record("across_models", value, interval=iv, shown=shown,
                  note=f"Alloc-L+T / uniform perplexity at half budget, decided on the least favourable subject ({pick}): {how}")
