"""Sherry chapter (ACL 2026, arXiv 2601.07892): the tables, from :func:`.study.run_experiments`'s results.

Pure functions from results (the dict the study returns, or one training result of it) to rows,
summaries and the saved ``metrics``: no I/O, no timing, deterministic. The notebook shows what these
return; :mod:`.verdicts` decides the claims. The per-run extracts the study files into its results
(:func:`trapping_rows`, :func:`block_nll`, :func:`rank_snapshots`) are here too, and the book's
fragment on the decoded shapes (:func:`decoded_shapes`, read from a saved result)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from acl26.papers.sherry.spec import VARIANTS

#: the trapping statistics of one tracked layer (:func:`trapping_rows`)
TRAPPING_STATS = ("grad effective rank (mean)", "stuck share", "mean state changes")


def _layer(name: str) -> str:
    """A tracked layer's name from its block on (``"model.layers.15.mlp.up_proj"`` -> ``"15.mlp.up_proj"``)."""
    return name.split("layers.")[-1]


# --------------------------------------------------------------------------------------------
# what the study files of each QAT run


def trapping_rows(result, variant: str, seed: int) -> list[dict]:
    """Per tracked layer of one QAT run (``result``: a :class:`acl26.training.TrainResult` whose log
    holds the monitor's records): the stuck share, mean state changes and mean gradient effective rank."""
    mon = result.log["monitor"]
    rows = []
    for layer, share in mon.get("stuck_share", {}).items():
        ranks = [r for _, r in mon["effective_rank"].get(layer, [])]
        rows.append({"variant": variant, "seed": seed, "layer": _layer(layer), "stuck share": share,
                     "mean state changes": mon["mean_flips"][layer],
                     "grad effective rank (mean)": float(np.mean(ranks)) if ranks else float("nan")})
    return rows


def block_nll(runs: dict) -> dict[str, list[float]]:
    """Per held-out block, the mean NLL of each QAT variant's inference model (``runs``: ``{variant:
    training result}``; the same blocks for all, scored at the end of its training and logged), for the
    paired bootstrap of the accuracy claims."""
    return {v: list(res.log["final"]["val_block_losses"]) for v, res in runs.items()}


def rank_snapshots(runs: dict) -> dict[str, list[float]]:
    """Per variant of ``runs`` (``{variant: training result}``, one seed), its gradients' effective ranks
    layer by layer and step by step: the same snapshots in every variant, for the paired bootstrap of
    the trapping claims."""
    return {v: [r for layer in sorted(ranks) for _, r in ranks[layer]]
            for v, r_ in runs.items() for ranks in [r_.log["monitor"].get("effective_rank", {})]}


# --------------------------------------------------------------------------------------------
# the notebook's tables


def bits_rows(results: dict) -> list[dict]:
    """Bits per weight of each packed format at the 4096 x 4096 layer (``results["bits"]``), one row per format."""
    return [{"format": fmt, "index bits/w": b["index"], "sign bits/w": b["sign"], "streams bits/w": b["streams"],
             "scales bits/w (fp32 per row)": b["scales"], "total bits/w": b["total"]}
            for fmt, b in results["bits"].items()]


def ptq_rows(results: dict) -> list[dict]:
    """The post-training ternarization rows (``results["ptq"]``): weights, mode, perplexity, tokens, seconds."""
    return [dict(r) for r in results["ptq"]]


def qat_rows(results: dict) -> list[dict]:
    """One row per QAT run (variant and seed): its held-out perplexity with the inference weights, its
    training time and whether it came from the cache."""
    return [{"variant": VARIANTS[r["variant"]][2], "key": r["variant"], "seed": r["seed"],
             "held-out ppl (inference weights)": r["val_ppl"], "train time (s)": r["seconds"],
             "from cache": r["from_cache"]} for r in results["qat_runs"]]


def qat_spread(results: dict) -> pd.DataFrame:
    """The held-out perplexity of each variant over its seeds (``results["qat_seeds"]``): mean, standard
    deviation, min and max, one column per variant."""
    return pd.DataFrame({v: pd.Series(d) for v, d in results["qat_seeds"].items()}).agg(["mean", "std", "min", "max"])


def arenas_gains(results: dict) -> dict | None:
    """Per seed, the 3:4 model's held-out perplexity without Arenas over with it, less 1 (positive: Arenas
    lowers the perplexity); None where either variant was not trained."""
    by_seed = results["qat_seeds"]
    if not {"sparse34", "sparse34+arenas"} <= set(by_seed):
        return None
    return {s: by_seed["sparse34"][s] / by_seed["sparse34+arenas"][s] - 1 for s in by_seed["sparse34"]}


def _runs_of(results: dict, seed) -> dict:
    """``{variant: run record}`` of ``results["qat_runs"]`` for one ``seed``."""
    return {r["variant"]: r for r in results["qat_runs"] if r["seed"] == seed}


def loss_curves(results: dict, seed) -> list[dict]:
    """The held-out loss over training of each variant's run with ``seed``: one row per (variant, evaluation step)."""
    rows = []
    for v, r in _runs_of(results, seed).items():
        h = r["history"]
        rows += [{"variant": v, "step": s, "val loss": l} for s, l in zip(h["eval_step"], h["val_loss"])]
    return rows


def arenas_lambda(results: dict, seed) -> list[dict] | None:
    """Arenas' residual weight over training in the ``sparse34+arenas`` run with ``seed`` (rows of step and
    lambda); None where that variant was not trained."""
    run = _runs_of(results, seed).get("sparse34+arenas")
    if run is None:
        return None
    return [{"step": s, "lambda": lam} for s, lam in run["monitor"]["lambda"]]


def trapping_summary(results: dict) -> pd.DataFrame:
    """The trapping statistics (``results["trapping"]``) per variant and tracked layer: mean, min and max
    over seeds; an empty frame where nothing was tracked."""
    trap = pd.DataFrame(results["trapping"])
    if not len(trap):
        return trap
    return trap.groupby(["variant", "layer"])[list(TRAPPING_STATS)].agg(["mean", "min", "max"])


def rank_curves(results: dict, seed) -> list[dict]:
    """The gradients' effective rank over training per variant and tracked layer, in the runs with ``seed``."""
    rows = []
    for v, r in _runs_of(results, seed).items():
        for layer, pts in r["monitor"]["effective_rank"].items():
            rows += [{"variant": v, "layer": _layer(layer), "step": s, "effective rank": x} for s, x in pts]
    return rows


def flip_rows(results: dict) -> list[dict]:
    """The share of the tracked weights whose ternary state changed between two snapshots, per run
    (variant and seed), tracked layer and step."""
    rows = []
    for r in results["qat_runs"]:
        for layer, pts in r["monitor"].get("flip_rate", {}).items():
            rows += [{"variant": r["variant"], "seed": r["seed"], "layer": _layer(layer), "step": st,
                      "changed share": x} for st, x in pts]
    return rows


def file_bytes(results: dict) -> pd.DataFrame | None:
    """The bytes of each whole-model file (``results["model_file"]``, one row per weight format): the
    file, its quantized layers, its header and the rest (embeddings, norms); None where no file was written."""
    mf = results["model_file"]
    if not mf:
        return None
    files = pd.DataFrame({"file bytes": mf["bytes"], "quantized layers": mf["layer_bytes"], "header": mf["header_bytes"]})
    files["rest (embeddings, norms)"] = files["file bytes"] - files["quantized layers"] - files["header"]
    return files


# --------------------------------------------------------------------------------------------
# what is saved beside the verdicts, and the book's fragment


def metrics(results: dict) -> dict:
    """The figures of a run worth keeping beside the verdicts (``ledger.save(metrics=...)``): JSON-ready."""
    keep = ("bits", "speed", "ptq", "subject", "qat_seeds", "trapping", "packed", "generations", "model_file",
            "llamacpp_reason")
    out = {k: results.get(k) for k in keep}
    out["qat"] = [{k: r[k] for k in ("variant", "seed", "val_ppl", "seconds", "from_cache")}
                  for r in results.get("qat_runs") or []]
    return out


def decoded_shapes(result: dict | None) -> str:
    """The intro's fragment, from a saved result (its ``metrics``): which (shape, format) pairs the Sherry
    run decoded and which it skipped."""
    rows = ((result or {}).get("metrics") or {}).get("speed") or []
    if not rows:
        return "*(the Sherry chapter has not run in this build)*\n"
    lines = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        done = [r["format"] for r in rows if r["shape"] == shape and r["status"] == "ok"]
        skipped = [f"{r['format']} ({r['reason']})" for r in rows if r["shape"] == shape and r["status"] != "ok"]
        text = f"- `{shape}`: decoded in {', '.join(done) or 'no format'}"
        lines.append(text + (f"; skipped: {'; '.join(skipped)}" if skipped else "") + ".")
    return "\n".join(lines) + "\n"
