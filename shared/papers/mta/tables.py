"""MTA chapter (ACL 2026, arXiv 2605.01374): the tables, from :func:`.study.run_experiments`'s results.

Pure functions from the results (or parts of them) to rows, frames, intervals and the saved
``metrics``: no file written, no model loaded, no printing, no timing; the same results give the
same tables. What the notebook shows and what :mod:`.verdicts` reads are made here, once:

* :func:`run_key` names one run in ``results["runs"]`` (``"base|condition|seed"``); :func:`avg`
  averages a run's per-pair metric over the ablation seeds; :func:`base_name` names a base loss.
* :func:`setup_info`, :func:`recovery_frame`, :func:`pair_sources`, :func:`pair_lengths`,
  :func:`importance_frame`, :func:`heaviest_tokens`: the setup (teacher, student, pairs, weights).
* :func:`main_frame`, :func:`seed_rows`, :func:`main_seed_frame`, :func:`seed_intervals`,
  :func:`reference_frame`: the main comparison; :func:`ablation_frame`, :func:`ablation_errorbars`:
  the ablations; :func:`training_curves`, :func:`run_seconds`, :func:`training_minutes`: the
  training logs.
* :func:`step_ratios`, :func:`timing_frame`: the per-step overhead; :func:`metrics`: what the
  notebook saves with the ledger.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from acl26 import stats
from acl26.papers.mta import data as D
from acl26.papers.mta import losses as L
from acl26.papers.mta.spec import ABLATIONS, PAPER_ABLATIONS, PAPER_STEP


def run_key(base: str, name: str, seed: int) -> str:
    """The key of one run in ``results["runs"]``, ``logs`` and ``kl``: base loss, condition, seed."""
    return f"{base}|{name}|{seed}"


def base_name(base: str) -> str:
    """The base loss ``base`` (``fkl``, ``sfkl``, ``srkl``) in words (:data:`.losses.BASE_NAMES`)."""
    return L.BASE_NAMES[base]


def avg(results: dict, base: str, name: str, metric: str) -> np.ndarray:
    """Per held-out pair, ``metric`` averaged over the ablation seeds."""
    return np.mean([results["runs"][run_key(base, name, s)][metric] for s in results["ablation_seeds"]], axis=0)


def mean_ppl(nll) -> float:
    """The perplexity of a mean per-pair NLL (nats/token)."""
    return float(math.exp(np.mean(nll)))


# --------------------------------------------------------------------------------------------
# the setup


def setup_info(results: dict, params: dict) -> dict:
    """Teacher, student, key layers, pairs kept and runs: the notebook's first table (saved as ``info``)."""
    key, t_layers = results["key_layers"], results["teacher_layers"]
    return {"teacher": results["teacher_id"], "teacher layers": results["n_teacher"], "student": results["student_id"],
            "student layers": results["n_student"],
            "teacher layers kept": results["student_layer_map"] if results["student_layer_map"] else "— (local student)",
            "word key layer (student → teacher)": ", ".join(f"{s} → {t}" for s, t in zip(key["word"], t_layers)),
            "phrase key layers (student → teacher)": ", ".join(f"{s} → {t}" for s, t in
                                                               zip(key["phrase"], t_layers[len(key["word"]):])),
            "training pairs (kept of drawn)": f"{len(results['pairs']['train'])} of {results['pairs_drawn']['train']}",
            "held-out pairs (kept of drawn)": f"{len(results['pairs']['heldout'])} of {results['pairs_drawn']['heldout']}",
            "runs": len(results["runs"]), "steps per run": params["steps"], "pairs per step": params["batch_size"],
            "training precision": results.get("precision", "fp32")}


def recovery_frame(results: dict, params: dict) -> pd.DataFrame | None:
    """The recovery training of a student made here (one row), or None for a local start student."""
    rec = results["recovery"]
    if not rec:
        return None
    lg = rec["log"]
    return pd.DataFrame([{"steps": lg["train_config"]["steps"], "blocks per step": lg["train_config"]["batch_size"],
                          "tokens per block": params["block_size"], "lr": lg["train_config"]["lr"],
                          "seconds": lg["seconds"], "precision": lg["precision"],
                          "val perplexity, copied layers only": round(rec["copied_val_ppl"], 1),
                          "val perplexity, recovered": round(lg["final"]["val_ppl"], 1)}], index=["recovery"])


def pair_sources(results: dict) -> pd.DataFrame:
    """Training and held-out pairs per source, and in all."""
    src = pd.Series([p.source for p in results["pairs"]["train"]]).value_counts().rename("training pairs").to_frame()
    src["held-out pairs"] = pd.Series([p.source for p in results["pairs"]["heldout"]]).value_counts()
    src.loc["all", :] = [len(results["pairs"]["train"]), len(results["pairs"]["heldout"])]
    return src.fillna(0).astype(int)


def pair_lengths(results: dict) -> pd.DataFrame:
    """Tokens, response tokens, words and phrases per training pair: mean, min, median, max."""
    items = results["train_items"]
    lens = pd.DataFrame({"tokens": [len(e.ids) for e in items], "response tokens": [sum(e.labels) for e in items],
                         "words": [len(e.words) for e in items], "phrases": [len(e.phrases) for e in items]})
    return lens.describe().loc[["mean", "min", "50%", "max"]].round(1)


def _importance_batch(results: dict, n: int):
    sub = results["train_items"][:n]
    tok = results["tokenizer"]
    bb = D.pad_batch(sub, tok.pad_token_id if tok.pad_token_id is not None else 0)
    hid = results["cache"].batch(list(range(len(sub))), bb["ids"].shape[1])["hidden"]
    return bb, hid


def importance_frame(results: dict, n: int = 16) -> pd.DataFrame:
    """Per teacher key layer, on the first ``n`` training pairs: state norms of the first token and the content
    tokens, and the token importance over every token against over the content tokens only."""
    bb, hid = _importance_batch(results, n)
    rows = []
    for j, layer in enumerate(results["teacher_layers"]):
        h = hid[:, :, j]
        w_all = L.token_importance(h, bb["attn"])
        w_c = L.token_importance(h, bb["content"])
        norms = h.norm(dim=-1)
        rows.append({"teacher layer": layer, "state norm, first token (median)": float(norms[:, 0].median()),
                     "state norm, content tokens (median)": float(norms[bb["content"]].median()),
                     "weight on the first token, all tokens": float(w_all[:, 0].mean()),
                     "largest weight, content only": float(w_c.max(-1).values.mean()),
                     "uniform weight, content only": float((1 / bb["content"].sum(-1)).mean())})
    return pd.DataFrame(rows).set_index("teacher layer")


def heaviest_tokens(results: dict, k: int = 8, n: int = 16) -> list[tuple[str, float]]:
    """The ``k`` heaviest tokens of the first training pair at the word layer (content only): (token, weight)."""
    bb, hid = _importance_batch(results, n)
    top = L.token_importance(hid[:, :, 0], bb["content"])[0].topk(k)
    tok = results["tokenizer"]
    return [(tok.decode([int(bb["ids"][0, int(i)])]), float(v)) for v, i in zip(top.values, top.indices)]


# --------------------------------------------------------------------------------------------
# the main comparison


def seed_rows(results: dict) -> list[dict]:
    """One row per run: base, condition, seed, ROUGE-L and held-out perplexity."""
    rows = []
    for k, rec in results["runs"].items():
        base, name, seed = k.split("|")
        rows.append({"base loss": base, "condition": name, "seed": int(seed), "ROUGE-L": float(np.mean(rec["rouge"])),
                     "perplexity": mean_ppl(rec["nll"])})
    return rows


def main_seed_frame(results: dict) -> pd.DataFrame:
    """:func:`seed_rows` of the main comparison only (base and MTA of each main base loss)."""
    seeds = pd.DataFrame(seed_rows(results))
    return seeds[seeds["condition"].isin(["base", "MTA"]) & seeds["base loss"].isin(results["base_losses"])]


def seed_intervals(results: dict, metrics: tuple[str, ...] = ("ROUGE-L", "perplexity")) -> pd.DataFrame:
    """Per metric, base loss and arm of the main comparison: the mean over seeds with its 95% t-interval."""
    main = main_seed_frame(results)
    rows = []
    for metric in metrics:
        for base, grp in main.groupby("base loss"):
            for cond in ("base", "MTA"):
                iv = stats.seed_interval(grp[grp["condition"] == cond][metric].to_numpy())
                rows.append({"metric": metric, "base loss": base, "condition": cond, "mean": iv.estimate,
                             "lo": iv.lo, "hi": iv.hi})
    return pd.DataFrame(rows)


def main_frame(results: dict) -> pd.DataFrame:
    """Per base loss: base and base + MTA, mean over seeds with the t-interval, and their difference."""
    rows = []
    for base in results["base_losses"]:
        kl = results.get("kl", {})
        for metric, fn in (("ROUGE-L", lambda k: float(np.mean(results["runs"][k]["rouge"]))),
                           ("log-perplexity", lambda k: float(np.mean(results["runs"][k]["nll"]))),
                           ("KL to the teacher", lambda k: float(np.mean(kl[k])))):
            if metric == "KL to the teacher" and not kl:
                continue
            vals = {c: [fn(run_key(base, c, s)) for s in results["seeds"]] for c in ("base", "MTA")}
            d = stats.seed_interval(np.subtract(vals["MTA"], vals["base"]))
            row = {"base loss": base_name(base), "metric": metric}
            for c in ("base", "MTA"):
                iv = stats.seed_interval(vals[c])
                row.update({f"{c}": iv.estimate, f"{c} ±": iv.hi - iv.estimate})
            row.update({"MTA − base": d.estimate, "lo": d.lo, "hi": d.hi,
                        "seeds MTA better": int(sum((a > b) if metric == "ROUGE-L" else (a < b)
                                                    for a, b in zip(vals["MTA"], vals["base"])))})
            rows.append(row)
    return pd.DataFrame(rows).set_index(["base loss", "metric"])


def _reference(results: dict, who: str) -> dict:
    ev = results["evals"][who]
    return {"rouge": float(np.mean(ev["rouge"])), "ppl": math.exp(np.mean(ev["nll"]))}


def reference_frame(results: dict) -> pd.DataFrame:
    """The teacher's and the start student's held-out ROUGE-L and perplexity."""
    rows = []
    for who, model in (("teacher", "teacher"), ("start", "start student")):
        r = _reference(results, who)
        rows.append({"model": model, "ROUGE-L": r["rouge"], "perplexity": r["ppl"]})
    return pd.DataFrame(rows).set_index("model")


# --------------------------------------------------------------------------------------------
# the ablations


def ablation_frame(results: dict) -> pd.DataFrame:
    """The ablations on their seeds: per-pair ROUGE-L averaged over seeds, with a bootstrap interval over pairs."""
    ab = results["ablation_base"]
    rows = []
    full = avg(results, ab, "MTA", "rouge")
    for name in ["base", "MTA"] + list(ABLATIONS):
        r = avg(results, ab, name, "rouge")
        nll = avg(results, ab, name, "nll")
        iv = stats.paired_bootstrap(r, full, "mean_diff", n_resamples=int(results["n_resamples"]), unit="pairs") \
            if name != "MTA" else None
        paper = PAPER_ABLATIONS.get("full MTA" if name == "MTA" else name)
        rows.append({"condition": "full MTA" if name == "MTA" else name, "paper ROUGE-L": paper, "ROUGE-L": float(np.mean(r)),
                     "perplexity": float(math.exp(np.mean(nll))),
                     "− full MTA": iv.estimate if iv else 0.0, "lo": iv.lo if iv else 0.0, "hi": iv.hi if iv else 0.0})
    return pd.DataFrame(rows).set_index("condition")


def ablation_errorbars(frame: pd.DataFrame) -> pd.DataFrame:
    """Per condition of :func:`ablation_frame`'s ``frame``: the difference from the full MTA and the lengths of
    its error bar below and above (for ``errorbar(xerr=[below, above])``)."""
    d = frame.reset_index()
    return pd.DataFrame({"condition": d["condition"], "− full MTA": d["− full MTA"],
                         "below": d["− full MTA"] - d["lo"], "above": d["hi"] - d["− full MTA"]})


# --------------------------------------------------------------------------------------------
# training


def training_curves(results: dict) -> pd.DataFrame:
    """Per step of each run of the ablation base: its condition, seed, base KD loss and the MTA terms (None where off)."""
    rows = []
    for k, lg in results["logs"].items():
        base, name, seed = k.split("|")
        if base != results["ablation_base"]:
            continue
        for step, (b, ds, hd) in enumerate(zip(lg["base"], lg["dsa"], lg["hid"]), start=1):
            rows.append({"condition": name, "seed": seed, "step": step, "base KD loss": b, "DSA": ds, "Hid": hd})
    return pd.DataFrame(rows)


def run_seconds(results: dict) -> pd.DataFrame:
    """Per run: its training seconds, median seconds per step, and whether it came from the cache."""
    return pd.DataFrame([{"run": k, "seconds": lg["seconds"], "median s/step": lg["step_s_median"],
                          "from cache": lg["from_cache"]} for k, lg in results["logs"].items()]).set_index("run")


def training_minutes(results: dict) -> float:
    """Minutes of distillation training over every run, as each ran when it was trained (cached runs included)."""
    return float(sum(lg["seconds"] for lg in results["logs"].values())) / 60


# --------------------------------------------------------------------------------------------
# the per-step overhead


def step_ratios(results: dict) -> np.ndarray:
    """Per interleaved round, the base + MTA step's seconds over the base step's (the same round's load)."""
    t = results["timing"]
    return np.asarray(t["MTA"]) / np.asarray(t["base"])


def paper_step_ratio() -> float:
    """The paper's per-step cost of MTA over its base (0.48 / 0.26 s/step)."""
    return PAPER_STEP[1] / PAPER_STEP[0]


def timing_frame(results: dict) -> pd.DataFrame:
    """Seconds per step of each arm, and their per-round ratio: median, min and max over the rounds."""
    t = results["timing"]
    rows = []
    for name, xs in (("base", t["base"]), ("base + MTA", t["MTA"]), ("ratio (per round)", step_ratios(results))):
        xs = np.asarray(xs)
        rows.append({"condition": name, "median s/step": np.median(xs), "min": xs.min(), "max": xs.max()})
    return pd.DataFrame(rows).set_index("condition")


# --------------------------------------------------------------------------------------------
# what the notebook saves


def metrics(results: dict, params: dict) -> dict:
    """The ``metrics`` the notebook saves with the ledger: the main, ablation and seed tables, the timing, the
    setup and the teacher's and start student's held-out ROUGE-L and perplexity."""
    return {"main": main_frame(results).reset_index().to_dict("records"),
            "ablations": ablation_frame(results).reset_index().to_dict("records"),
            "seeds": seed_rows(results), "timing": results["timing"], "info": setup_info(results, params),
            "teacher": _reference(results, "teacher"), "start": _reference(results, "start")}
