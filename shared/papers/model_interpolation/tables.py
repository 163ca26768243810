"""Model-interpolation chapter: what :func:`.study.run_experiments`'s results show, as pure functions.

Per-problem figures and summaries of one configuration (:func:`per_problem`, :func:`summary`), the band
width the verdicts bootstrap (:func:`band_width`), intervals over problems (:func:`mean_interval`), the
notebook's tables (:func:`curve_frame`, :func:`curve_intervals`, :func:`comparison_frame`,
:func:`variants_frame`, :func:`ablation_frame`, :func:`grid_frame`, :func:`gsm8k_frame`,
:func:`pair_info`, :func:`training_frame`, :func:`data_frame`) and the saved :func:`metrics`. No I/O;
the same results give the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from acl26 import evaluation, stats
from acl26.papers.model_interpolation.ablation import ablations
from acl26.papers.model_interpolation.spec import PAPER_TABLE2, label_of
from acl26.papers.model_interpolation.stages import BAND_HIGH, BAND_LOW

#: the band width of a curve that never rises from ≤ 10% to ≥ 90%: wider than any λ range in [0, 1]
NEVER = 2.0


# --------------------------------------------------------------------------------------------
# one configuration


def per_problem(rec: dict) -> dict[str, np.ndarray]:
    """Per-problem Mean@k, Pass@k (unbiased, from all samples), Think #R, mean tokens, and the share of its
    responses cut off at the token cap (``cut``)."""
    k = rec["k"]
    acc = np.array([np.mean(r[:k]) for r in rec["correct"]], dtype=float)
    pas = np.array([evaluation.pass_at_k(len(r), int(sum(r)), k) for r in rec["correct"]], dtype=float)
    think = np.array([np.mean(r) for r in rec["think"]], dtype=float)
    tokens = np.array([np.mean(r) for r in rec["tokens"]], dtype=float)
    cut = np.array([1.0 - np.mean(r) for r in rec["finished"]], dtype=float)
    return {"mean@k": acc, "pass@k": pas, "think": think, "tokens": tokens, "cut": cut}


def summary(rec: dict) -> dict:
    """Mean@k, Pass@k, Vote@k, Token #N and Think #R of one configuration."""
    pp = per_problem(rec)
    vote = evaluation.vote_at_k(rec["answers"], rec["golds"], rec["k"])
    return {"mean@k": float(pp["mean@k"].mean()), "pass@k": float(pp["pass@k"].mean()), "vote@k": vote,
            "tokens": float(np.mean([x for r in rec["tokens"] for x in r])),
            "think": float(np.mean([x for r in rec["think"] for x in r])),
            "finished": float(np.mean([x for r in rec["finished"] for x in r]))}


def mean_interval(values, n_resamples: int) -> stats.Interval:
    """Mean over problems with a bootstrap interval (resampling problems)."""
    v = np.asarray(values, dtype=float)
    return stats.paired_bootstrap(v, np.zeros_like(v), "mean_diff", n_resamples=n_resamples, unit="problems")


def _resamples(results: dict) -> int:
    return int(results.get("n_resamples", 1999))


# --------------------------------------------------------------------------------------------
# the band's width


def crossing(lam: np.ndarray, rate: np.ndarray, level: float) -> float:
    """The first λ where the piecewise-linear curve reaches ``level`` (inf if never)."""
    for i in range(len(lam)):
        if rate[i] >= level:
            if i == 0:
                return float(lam[0])
            x0, x1, y0, y1 = lam[i - 1], lam[i], rate[i - 1], rate[i]
            return float(x0 + (level - y0) * (x1 - x0) / (y1 - y0))
    return math.inf


def band_width(lams: Sequence[float], think_matrix: np.ndarray) -> float:
    """λ-width from Think #R first reaching 10% to first reaching 90% (``think_matrix``: problems × λ).

    :data:`NEVER` when the curve never reaches 90%, or does not start at or below 10% (then it does
    not rise from ≈ 0)."""
    order = np.argsort(lams)
    lam = np.asarray(lams, dtype=float)[order]
    rate = np.asarray(think_matrix, dtype=float)[:, order].mean(axis=0)
    hi = crossing(lam, rate, BAND_HIGH)
    if math.isinf(hi) or rate[0] > BAND_LOW:
        return NEVER
    return hi - crossing(lam, rate, BAND_LOW)


# --------------------------------------------------------------------------------------------
# the notebook's tables


def curve_frame(results: dict) -> pd.DataFrame:
    """The sweep: :func:`summary` of every λ, indexed by λ."""
    rows = []
    for lam, rec in results["sweep"].items():
        s = summary(rec)
        rows.append({"λ": lam, **s})
    return pd.DataFrame(rows).set_index("λ")


def curve_intervals(results: dict) -> pd.DataFrame:
    """The sweep's curves with their 95% bootstrap intervals over problems: one row per λ and metric (Mean@k,
    Pass@k and Think #R in %, Token #N in tokens), columns ``value``, ``lo``, ``hi``."""
    nr = _resamples(results)
    rows = []
    for lam, rec in results["sweep"].items():
        d = per_problem(rec)
        for metric, col, scale in (("Mean@k", "mean@k", 100), ("Pass@k", "pass@k", 100), ("Think #R", "think", 100),
                                   ("Token #N", "tokens", 1)):
            iv = mean_interval(d[col], nr)
            rows.append({"λ": lam, "metric": metric, "value": scale * iv.estimate, "lo": scale * iv.lo,
                         "hi": scale * iv.hi})
    return pd.DataFrame(rows)


def comparison_frame(results: dict) -> pd.DataFrame:
    """Our Table 2 beside the paper's: Instruct, Thinking, TA, TIES and MI at the paper's λ values;
    our Mean@k with its 95% bootstrap interval over problems (on ``power_problems`` where the λ is decisive,
    else on the sweep's problems: the ``problems`` column says which)."""
    sw, var, dec = results["sweep"], results["variants"], results.get("decisive", {})
    ties = [var[n] for n in results.get("ties", []) if n in var]
    ours = {"Instruct": dec.get(0.0, sw.get(0.0)), "Thinking": dec.get(1.0, sw.get(1.0)), "TA": var.get("TA"),
            # the paper's TIES is density 0.2 (its "sparsity 0.2"): the first of ties_densities
            "TIES": ties[0] if ties else None}
    for lam in (0.4, 0.5, 0.6, 0.8):
        ours[label_of(lam)] = dec.get(lam, sw.get(lam))
    rows = []
    for name, rec in ours.items():
        p = PAPER_TABLE2[name]
        row = {"method": name, "paper Mean@64": p[0], "paper Pass@64": p[1], "paper tokens": p[2], "paper Think %": p[3]}
        if rec is not None:
            s = summary(rec)
            iv = mean_interval(per_problem(rec)["mean@k"], _resamples(results))
            row.update({"problems": len(rec["correct"]), "ours Mean@k": 100 * s["mean@k"], "Mean@k lo": 100 * iv.lo, "Mean@k hi": 100 * iv.hi,
                        "ours Pass@k": 100 * s["pass@k"],
                        "ours Vote@k": 100 * s["vote@k"], "ours tokens": s["tokens"], "ours Think %": 100 * s["think"]})
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


def _scored(rec: dict, n_resamples: int, *, votes: bool) -> dict:
    """One scored record's columns: k, Mean@k with its 95% bootstrap interval over problems (``lo``, ``hi``),
    Pass@k and Vote@k if ``votes``, then tokens, Think #R, the share finished and the recorded seconds."""
    s = summary(rec)
    iv = mean_interval(per_problem(rec)["mean@k"], n_resamples)
    row = {"k": rec["k"], "Mean@k": s["mean@k"], "lo": iv.lo, "hi": iv.hi}
    if votes:
        row.update({"Pass@k": s["pass@k"], "Vote@k": s["vote@k"]})
    row.update({"Token #N": s["tokens"], "Think #R": s["think"], "finished": s["finished"], "seconds": rec["seconds"]})
    return row


def variants_frame(results: dict) -> pd.DataFrame:
    """Every variant (TA, TIES, the ablations, the decoding grid): its summary, Mean@k's 95% bootstrap interval
    over problems (``lo``, ``hi``) and its recorded seconds, indexed by the variant's name."""
    nr = _resamples(results)
    rows = [{"variant": name, "problems": len(rec["correct"]), **_scored(rec, nr, votes=True)}
            for name, rec in results["variants"].items()]
    return pd.DataFrame(rows).set_index("variant") if rows else pd.DataFrame()


def ablation_frame(results: dict, extra_lambdas: Sequence[float] = ()) -> pd.DataFrame:
    """Think #R and Mean@k of the full merge and of each ablation, at the verdicts' ablation λ and at each of
    ``extra_lambdas`` (the rows tagged ``@ λ x``, shown apart): columns ``λ``, ``merge``, ``Think #R``, ``Mean@k``."""
    rows = []
    decisive_at = results["ablation_lambda"]
    for at in ([decisive_at] if decisive_at is not None else []) + [x for x in extra_lambdas if x != decisive_at]:
        tag = "" if at == decisive_at else f" @ λ {at:g}"
        when = f"{at:g}" + (" (verdicts)" if not tag else " (shown apart)")
        full = results["decisive"].get(at, results["sweep"].get(at))
        if full is not None:
            s = summary(full)
            rows.append({"λ": when, "merge": "every tensor (the full merge)", "Think #R": s["think"], "Mean@k": s["mean@k"]})
        for part in ablations(results["n_layers"]):
            if part + tag in results["variants"]:
                s = summary(results["variants"][part + tag])
                rows.append({"λ": when, "merge": part, "Think #R": s["think"], "Mean@k": s["mean@k"]})
    return pd.DataFrame(rows)


def grid_frame(results: dict) -> pd.DataFrame:
    """Mean@k of every decoding of the grid that ran: columns ``temperature``, ``top-p``, ``Mean@k``."""
    return pd.DataFrame([{"temperature": float(g.split("T ")[1].split(",")[0]), "top-p": float(g.split("top-p ")[1]),
                          "Mean@k": summary(results["variants"][g])["mean@k"]}
                         for g in results["grid"] if g in results["variants"]])


def gsm8k_frame(results: dict) -> pd.DataFrame:
    """The GSM8K rows, indexed by λ: Mean@k with its 95% bootstrap interval over questions, tokens, Think #R,
    the share finished and the recorded seconds (empty when GSM8K did not run)."""
    nr = _resamples(results)
    rows = [{"λ": lam, "questions": len(rec["golds"]), **_scored(rec, nr, votes=False)}
            for lam, rec in results["gsm8k"].items()]
    return pd.DataFrame(rows).set_index("λ") if rows else pd.DataFrame()


def pair_info(results: dict, params: dict) -> dict:
    """The pair and the evaluation's size: source, layers, parameters (the head left out), σ, problems, k."""
    instruct = results["pair"]["instruct"]
    return {"pair": results["source"], "layers": results["n_layers"],
            "parameters": sum(v.numel() for k, v in instruct.items() if k != "lm_head.weight"),
            "σ (mean over tensors)": round(results["sigma"], 5), "σ (pooled)": round(results["sigma_pooled"], 5),
            "held-out problems (verdicts)": len(results["items"]), "of them on the curve": params["eval_problems"],
            "rollouts per problem (k)": params["k"], "max new tokens": params["max_new_tokens"]}


def training_frame(logs: dict) -> pd.DataFrame:
    """The pair's fine-tunes (``results["logs"]``): steps, batch, lr, seconds, precision, final validation loss."""
    return pd.DataFrame([{"model": s, "steps": lg["train_config"]["steps"], "batch": lg["train_config"]["batch_size"],
                          "lr": lg["train_config"]["lr"], "seconds": lg["seconds"], "precision": lg["precision"],
                          "final response loss (val, nats/token)": round(lg["final"]["val_loss"], 4)}
                         for s, lg in logs.items()]).set_index("model")


def data_frame(data: dict) -> pd.DataFrame:
    """The pair's training data (:func:`.pair.describe_data`): examples per source, response tokens (median, max)."""
    return pd.DataFrame([{"model": s, "examples": d["examples"], **{f"from {k}": v for k, v in d["sources"].items()},
                          "response tokens (median)": float(np.median(d["response_tokens"])),
                          "response tokens (max)": int(np.max(d["response_tokens"]))}
                         for s, d in data.items()]).set_index("model")


def metrics(results: dict, params: dict) -> dict:
    """The figures saved with the ledger: the curve, the band and the λ values it places, the variants, our
    Table 2, the GSM8K summaries, σ and :func:`pair_info`."""
    return {"curve": curve_frame(results).reset_index().to_dict("records"), "band": results["band"],
            "grid_lambda": results["grid_lambda"], "best_lambda": results["best_lambda"],
            "variants": variants_frame(results).reset_index().to_dict("records"),
            "table2": comparison_frame(results).reset_index().to_dict("records"),
            "gsm8k": {str(k): summary(v) for k, v in results["gsm8k"].items()},
            "sigma": results["sigma"], "sigma_pooled": results["sigma_pooled"], "info": pair_info(results, params)}
