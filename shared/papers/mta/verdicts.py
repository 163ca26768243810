"""MTA chapter (ACL 2026, arXiv 2605.01374): the verdicts, decided from :func:`acl26.papers.mta.study.run`'s
results, each on an interval: over seeds for the main comparison, over held-out pairs (paired
bootstrap) for the ablations; and the prose that depends on them (:func:`reading`)."""

from __future__ import annotations

import math

import numpy as np

from acl26 import claims as C
from acl26 import stats
from acl26.papers.mta import losses as L
from acl26.papers.mta.spec import CLAIMS
from acl26.papers.mta.study import _avg, ablation_frame, run_key


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every claim from :func:`run`'s results.

    ``results``: ``runs`` {"base|condition|seed": {"rouge": [...], "nll": [...]}}, ``evals`` (teacher,
    start), ``seeds``, ``ablation_seeds``, ``base_losses``, ``ablation_base``, ``timing`` {"base": [s],
    "MTA": [s]} (interleaved, same length), ``recovery`` (or None), ``trl_diff``, ``n_resamples``.
    """
    runs, nr = results["runs"], int(results.get("n_resamples", 1999))
    seeds = results["seeds"]
    # the control first: the teacher's lead, in units of the main comparison's widest half-width
    lead = stats.paired_bootstrap(results["evals"]["teacher"]["rouge"], results["evals"]["start"]["rouge"], "mean_diff",
                                  n_resamples=nr, unit="held-out pairs")
    widths = []
    for base in results["base_losses"]:
        d = [float(np.mean(runs[run_key(base, "MTA", s)]["rouge"])) - float(np.mean(runs[run_key(base, "base", s)]["rouge"]))
             for s in seeds]
        if len(d) >= 2:
            iv = stats.seed_interval(d)
            widths.append((iv.hi - iv.lo) / 2)
    h = max(widths) if widths else None
    if h is None:
        ledger.untested("teacher_ahead", "no main comparison over two or more seeds, so no interval half-width")
    elif h == 0:
        ledger.record("teacher_ahead", math.inf, shown=f"lead {lead.estimate:+.2f} ROUGE-L, half-width 0")
    else:
        scaled = stats.Interval(lead.estimate / h, lead.lo / h, lead.hi / h, lead.level,
                                f"{lead.method}, over the half-width", lead.n)
        ledger.record("teacher_ahead", scaled.estimate, interval=scaled,
                      shown=f"{scaled.estimate:.2f}× (teacher's lead {lead.estimate:+.2f} [{lead.lo:+.2f}, {lead.hi:+.2f}] "
                            f"ROUGE-L over the start student; widest half-width over seeds ±{h:.2f})")
    for base in ("sfkl", "fkl", "srkl"):
        cid = f"improves_{base}"
        if base not in results["base_losses"]:
            ledger.untested(cid, "this profile runs the main comparison for another base loss only (the paper profile "
                                 "runs all three)")
            continue
        b = [float(np.mean(runs[run_key(base, "base", s)]["rouge"])) for s in seeds]
        m = [float(np.mean(runs[run_key(base, "MTA", s)]["rouge"])) for s in seeds]
        d = np.subtract(m, b)
        ledger.record_noisy(cid, per_seed=list(d), point=float(np.mean(d)),
                            shown=f"{np.mean(d):+.2f} (ROUGE-L {np.mean(b):.2f} → {np.mean(m):.2f}; MTA better on "
                                  f"{sum(x > y for x, y in zip(m, b))} of {len(seeds)} seeds)",
                            note="difference per seed (same batches)")
    ab = results["ablation_base"]

    def diff(a: str, b: str) -> stats.Interval:
        return stats.paired_bootstrap(_avg(results, ab, a, "rouge"), _avg(results, ab, b, "rouge"), "mean_diff",
                                      n_resamples=nr, unit="held-out pairs")

    where = f"{L.BASE_NAMES[ab]} base, per-pair ROUGE-L averaged over {len(results['ablation_seeds'])} seed(s)"
    iv = diff("+DSA only", "+Hid only")
    ledger.record("dsa_over_hid", iv.estimate, interval=iv, shown=f"{iv.estimate:+.2f}", note=where)
    ivs = {n: diff("MTA", n) for n in ("word units only", "phrase units only")}
    test = next(c for c in CLAIMS if c.id == "word_and_phrase").test
    rank = {C.FAILS: 0, C.INCONCLUSIVE: 1, C.HOLDS: 2}
    pick = min(ivs, key=lambda n: (rank[test.decide(ivs[n])], ivs[n].lo))
    ledger.record("word_and_phrase", ivs[pick].estimate, interval=ivs[pick],
                  shown="; ".join(f"vs {n} {v.estimate:+.2f} [{v.lo:+.2f}, {v.hi:+.2f}]" for n, v in ivs.items()),
                  note=f"decided on the least favourable comparison ({pick}): it must hold against both; {where}")
    iv = diff("MTA", "no importance weights")
    ledger.record("importance_helps", iv.estimate, interval=iv, shown=f"{iv.estimate:+.2f}", note=where)
    t = results["timing"]
    ratios = np.asarray(t["MTA"]) / np.asarray(t["base"])
    iv = stats.repeat_range(ratios)
    ledger.record("overhead", iv.estimate, interval=iv,
                  shown=f"{iv.estimate:.2f}× ({np.median(t['base']):.2f} → {np.median(t['MTA']):.2f} s/step, median)",
                  note="a distillation step as a user runs it, on both arms: the teacher's forward (top-k "
                       "log-probabilities, and its key-layer states for MTA) and the student's forward and backward, "
                       "on the same batch, in interleaved rounds")
    rec = results.get("recovery")
    if rec is None:
        ledger.untested("student_recovers", "a local start student was given: no recovery training ran")
    else:
        v = rec["log"]["final"]["val_ppl"] / rec["copied_val_ppl"]
        ledger.record("student_recovers", v, shown=f"{v:.3g} ({rec['copied_val_ppl']:,.0f} → {rec['log']['final']['val_ppl']:.1f})")
    first = results["base_losses"][0]
    iv = stats.paired_bootstrap(runs[run_key(first, "base", seeds[0])]["nll"], results["evals"]["start"]["nll"],
                                "ppl_ratio", n_resamples=nr, unit="held-out pairs")
    ledger.record("kd_learns", iv.estimate, interval=iv, shown=f"{iv.estimate:.3f}")
    ledger.record("trl_agrees", float(results["trl_diff"]), shown=f"{results['trl_diff']:.2g}")


def reading(ledger: C.Ledger, results: dict, params: dict) -> str:
    """The notebook's "Reading the verdicts": each paper claim that does not hold, or cannot be decided,
    with its likely reason, from this run's figures (Markdown). Text that depends on a verdict is made
    here, in tested code, never by a notebook cell branching on verdicts."""
    v = ledger.entries
    abl_d = ablation_frame(results)
    notes = []
    for base in results["base_losses"]:
        e = v[f"improves_{base}"]
        if e.holds != C.HOLDS:
            notes.append(f"- **MTA improves {L.BASE_NAMES[base]}: {e.holds}.** Over {len(results['seeds'])} seeds the "
                         f"difference is {e.shown}. Each run has {params['steps']} steps, so the students stay close to "
                         "where they started, and a gain of the paper's size is of the order of the spread between seeds.")
    e = v["dsa_over_hid"]
    if e.holds != C.HOLDS:
        notes.append(f"- **DSA contributes more than Hid: {e.holds}.** Here +DSA only reaches ROUGE-L "
                     f"{abl_d.loc['+DSA only', 'ROUGE-L']:.2f} and perplexity {abl_d.loc['+DSA only', 'perplexity']:.0f}, "
                     f"against +Hid only's {abl_d.loc['+Hid only', 'ROUGE-L']:.2f} and "
                     f"{abl_d.loc['+Hid only', 'perplexity']:.0f} (the base: {abl_d.loc['base', 'ROUGE-L']:.2f} and "
                     f"{abl_d.loc['base', 'perplexity']:.0f}). A likely reason is how our student is made: its layers are "
                     "copies of the teacher's, so its states start in the teacher's basis. Hid, whose projection starts at "
                     "the identity, then gives every content token a direct target. DSA only asks the units' relative "
                     "geometry to match, which copied layers already share in part. The paper's students are separately "
                     "pretrained models, whose states live in another basis.")
    e = v["word_and_phrase"]
    if e.holds != C.HOLDS:
        hid_leads = abl_d.loc["+Hid only", "ROUGE-L"] >= abl_d.loc["+DSA only", "ROUGE-L"]
        notes.append(f"- **Word and phrase units together beat either alone: {e.holds}** ({e.shown}). "
                     + ("Hid, which uses no units, does at least as well alone as DSA does here, so changing DSA's units "
                        "moves the result little." if hid_leads else
                        "The difference the unit choice makes is smaller than the interval over held-out pairs at this "
                        "length."))
    e = v["importance_helps"]
    if e.holds != C.HOLDS:
        interval = f", interval {e.interval.describe()}" if e.interval is not None else ""
        notes.append(f"- **Importance weights help: {e.holds}** (full − no weights {e.shown}{interval}). "
                     f"Each ablation runs on {len(results['ablation_seeds'])} seeds only, and an effect of this size lies "
                     "within its interval over held-out pairs.")
    e = v["overhead"]
    if e.holds != C.HOLDS:
        notes.append(f"- **Overhead: {e.holds}** ({e.shown}).")
    return "\n".join(notes) if notes else "Every claim tested here holds."
