"""Sherry chapter (ACL 2026, arXiv 2601.07892): the tables, from :func:`.study.run_experiments`'s results.

Pure functions from results (the dict the study returns, or one training result of it) to rows,
summaries and the saved ``metrics``: no I/O, no timing, deterministic. The notebook shows what these
return; :mod:`.verdicts` decides the claims. The per-run extracts the study files into its results
(:func:`trapping_rows`, :func:`block_nll`, :func:`rank_snapshots`) are here too, and the book's
fragment on the decoded shapes (:func:`decoded_shapes`, read from a saved result)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from acl26 import stats
from acl26.papers.sherry.decoder import FUSED
from acl26.papers.sherry.paper import PAPER_LABELS, paper_table, ratio_or_none
from acl26.papers.sherry.qat import arenas_lambda as lambda_at
from acl26.papers.sherry.spec import ARENAS_FADED, QAT_EVALS, VARIANTS
from acl26.papers.sherry.speed import SpeedFormat

#: the trapping statistic the claims are decided on: the effective rank of the layer's input gradient dL/dX
INPUT_RANK = "dL/dX effective rank (mean)"
#: the same of the weight gradient dL/dW, shown beside it
WEIGHT_RANK = "dL/dW effective rank (mean)"
#: the trapping statistics of one tracked layer (:func:`trapping_rows`)
TRAPPING_STATS = (INPUT_RANK, WEIGHT_RANK, "stuck share", "mean state changes")


def _layer(name: str) -> str:
    """A tracked layer's name from its block on (``"model.layers.15.mlp.up_proj"`` -> ``"15.mlp.up_proj"``)."""
    return name.split("layers.")[-1]


# --------------------------------------------------------------------------------------------
# what the study files of each QAT run


def trapping_rows(result, variant: str, seed: int) -> list[dict]:
    """Per tracked layer of one QAT run (``result``: a :class:`acl26.training.TrainResult` whose log
    holds the monitor's records): the mean effective rank of its input gradient dL/dX and of its weight
    gradient dL/dW over the snapshots, the stuck share and mean state changes (NaN where not recorded:
    full precision has no ternary state)."""
    mon = result.log["monitor"]

    def mean(pts):
        return float(np.mean([r for _, r in pts])) if pts else float("nan")

    layers = list(dict.fromkeys([*mon.get("input_rank", {}), *mon.get("effective_rank", {})]))
    return [{"variant": variant, "seed": seed, "layer": _layer(layer),
             INPUT_RANK: mean(mon.get("input_rank", {}).get(layer)), WEIGHT_RANK: mean(mon["effective_rank"].get(layer)),
             "stuck share": mon.get("stuck_share", {}).get(layer, float("nan")),
             "mean state changes": mon.get("mean_flips", {}).get(layer, float("nan"))} for layer in layers]


def block_nll(runs: dict) -> dict[str, list[float]]:
    """Per held-out block, the mean NLL of each QAT variant's inference model (``runs``: ``{variant:
    training result}``; the same blocks for all, scored at the end of its training and logged), for the
    paired bootstrap of the accuracy claims."""
    return {v: list(res.log["final"]["val_block_losses"]) for v, res in runs.items()}


def rank_snapshots(runs: dict, key: str = "input_rank") -> dict[str, list[float]]:
    """Per variant of ``runs`` (``{variant: training result}``, one seed), its input gradients' effective
    ranks (``key="effective_rank"``: the weight gradients') layer by layer and step by step: the same
    snapshots in every variant, for the paired bootstrap of the trapping claims."""
    return {v: [r for layer in sorted(ranks) for _, r in ranks[layer]]
            for v, r_ in runs.items() for ranks in [r_.log["monitor"].get(key, {})]}


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
    """The gradients' effective rank over training per variant, tracked layer and gradient (``"dL/dX"``, the
    layer's input gradient; ``"dL/dW"``, its weight gradient), in the runs with ``seed``."""
    rows = []
    for v, r in _runs_of(results, seed).items():
        for key, grad in (("input_rank", "dL/dX"), ("effective_rank", "dL/dW")):
            for layer, pts in r["monitor"].get(key, {}).items():
                rows += [{"variant": v, "layer": _layer(layer), "gradient": grad, "step": s, "effective rank": x}
                         for s, x in pts]
    return rows


def arenas_settle(results: dict) -> list[dict]:
    """Per seed, the Arenas run's last evaluation during training and the one a full evaluation interval
    before it (``results["qat_runs"]``; the interval is ``steps // QAT_EVALS``, so a final evaluation forced
    a few steps after the previous one is not compared with it): their steps, Arenas' lambda at the step
    before each (the training step that led to it; :func:`.qat.arenas_lambda`), their held-out perplexities
    (pure ternary: lambda is 0 in evaluation), the relative change between them, and whether both lie where
    lambda < :data:`.spec.ARENAS_FADED`. Empty where the variant was not trained or has no such pair."""
    rows = []
    for r in results["qat_runs"]:
        h = r["history"]
        if r["variant"] != "sparse34+arenas" or len(h["eval_step"]) < 2:
            continue
        steps = r.get("steps") or h["step"][-1]
        gap = max(1, steps // QAT_EVALS)
        s1, l1 = h["eval_step"][-1], h["val_loss"][-1]
        before = [(s, l) for s, l in zip(h["eval_step"], h["val_loss"]) if s <= s1 - gap]
        if not before:
            continue
        s0, l0 = before[-1]
        lam0, lam1 = (lambda_at(s - 1, steps) for s in (s0, s1))
        rows.append({"seed": r["seed"], "steps": f"{s0}, {s1}", "lambda": f"{lam0:.3f}, {lam1:.3f}",
                     "ppl before": float(np.exp(l0)), "ppl last": float(np.exp(l1)),
                     "relative change": float(np.expm1(l1 - l0)), "faded": max(lam0, lam1) < ARENAS_FADED})
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


def file_bytes(results: dict, key: str = "model_file") -> pd.DataFrame | None:
    """The bytes of each whole-model file of ``results[key]`` (``"model_file"``: the trained subject's;
    ``"paper_file"``: the paper's 0.7B shape's), one row per weight format: the file, its quantized layers,
    its header and the rest (embeddings, norms); None where no file was written."""
    mf = results.get(key)
    if not mf:
        return None
    files = pd.DataFrame({"file bytes": mf["bytes"], "quantized layers": mf["layer_bytes"], "header": mf["header_bytes"]})
    files["rest (embeddings, norms)"] = files["file bytes"] - files["quantized layers"] - files["header"]
    if "i2" in files.index:
        files["of the 2-bit file"] = files["file bytes"] / files.loc["i2", "file bytes"]
    return files


# --------------------------------------------------------------------------------------------
# what is saved beside the verdicts, and the book's fragment


def metrics(results: dict) -> dict:
    """The figures of a run worth keeping beside the verdicts (``ledger.save(metrics=...)``): JSON-ready."""
    keep = ("bits", "speed", "ptq", "subject", "qat_seeds", "trapping", "packed", "generations", "model_file",
            "paper_file", "llamacpp_reason")
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


# --------------------------------------------------------------------------------------------
# the speed tables: medians over rounds, same-machine ratios, ours beside the paper's and llama.cpp's


def model_gemv_summary(rows: list[dict]) -> list[dict]:
    """Median and range over rounds of :func:`.peers.model_gemv`'s per-token sums, and each format's median over Sherry's."""
    sherry = [r["us_per_token"] for r in rows if r["format"] == "sherry"]
    out = []
    for fmt in dict.fromkeys(r["format"] for r in rows):
        at = [r for r in rows if r["format"] == fmt]
        iv = stats.repeat_range([r["us_per_token"] for r in at])
        out.append(dict(shape=at[0]["shape"], format=fmt, source=at[0]["source"], median_ms=iv.estimate / 1e3,
                        min_ms=iv.lo / 1e3, max_ms=iv.hi / 1e3, rounds=iv.n, products=at[0]["products"],
                        shapes=at[0]["shapes"], threads=at[0]["threads"],
                        vs_sherry=iv.estimate / float(np.median(sherry)) if sherry else None))
    return out


def gemv_summary(rows: list[dict]) -> list[dict]:
    """Median and range over rounds of each (shape, format) of :func:`.peers.gemv_vs_llamacpp`, with each
    format's median time over Sherry's at that shape."""
    out = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        at = [r for r in rows if r["shape"] == shape]
        sherry = [r["us"] for r in at if r["format"] == "sherry"]
        for fmt in dict.fromkeys(r["format"] for r in at):
            xs = [r["us"] for r in at if r["format"] == fmt]
            iv = stats.repeat_range(xs)
            src = next(r["source"] for r in at if r["format"] == fmt)
            out.append(dict(shape=shape, format=fmt, source=src, median_us=iv.estimate, min_us=iv.lo, max_us=iv.hi,
                            rounds=iv.n, threads=at[0]["threads"],
                            vs_sherry=iv.estimate / float(np.median(sherry)) if sherry else None))
    return out


def decode_summary(rows: list[dict], against: str = "sherry") -> list[dict]:
    """Per shape, every timed format of a speed table (:func:`acl26.papers.sherry.speed.speed_table`
    with ``peers``): median decode tok/s and its range over rounds, and ``against``'s speed over it
    like for like (per-round ratios: median and range; the rounds ran both formats in a rotating
    order): a row with an 8-bit head (ours ``-q8head``, llama.cpp's ``q8_0``) is compared with
    ``against`` + ``-q8head`` where that was timed, every other row with ``against`` (bf16 head); ``vs``
    names the reference. ValueError if ``against`` is not one of our formats
    (:data:`~acl26.papers.sherry.speed.SPEED_FORMATS`)."""
    ours = SpeedFormat.parse(against)
    # the like-for-like reference of a row with an 8-bit head: ``against`` reading one too
    against_q8 = dataclasses.replace(ours, head="q8_0").name if ours.packing in FUSED else None

    out = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        at = {r["format"]: r for r in rows if r["shape"] == shape and r["status"] == "ok"}
        for fmt, r in at.items():
            iv = stats.repeat_range(r["decode_runs"] or [r["decode_tok_s"]])
            types = r.get("gguf_types")  # a string for llama.cpp's rows; None (NaN through pandas) for ours
            types = types if isinstance(types, str) else ""
            head = types.partition("head: ")[2].rstrip(")") or r.get("head") or ("fp32" if fmt == "fp32" else "bf16")
            eight = r.get("head") == "q8_0"
            ref_key = against_q8 if eight and against_q8 in at else against
            ref = at.get(ref_key)
            row = dict(shape=shape, format=fmt, label=r["label"],
                       source=(r.get("engine") or "llama.cpp") if r.get("peer") is True else "ours",
                       decode_tok_s=iv.estimate, min_tok_s=iv.lo, max_tok_s=iv.hi, rounds=iv.n,
                       total_mb=r.get("total_mb"), bits_per_weight=r.get("bits_per_weight"), head=head)
            if ref is not None and fmt != ref_key:
                n = min(len(ref["decode_runs"]), len(r["decode_runs"]))
                ratios = [a / b for a, b in zip(ref["decode_runs"][:n], r["decode_runs"][:n])]
                riv = stats.repeat_range(ratios or [ref["decode_tok_s"] / r["decode_tok_s"]])
                row.update({"vs": ref_key, f"{against} / this": riv.estimate, "min ratio": riv.lo,
                            "max ratio": riv.hi})
            out.append(row)
    _mark_fastest_peers(out)
    return out


def _mark_fastest_peers(rows: list[dict]) -> None:
    """``fastest_peer`` on every row: True on the fastest peer row (median decode tok/s) of each shape and
    head precision (8-bit heads apart from the others, like for like), False on the other peer rows, None
    on ours."""
    best: dict = {}
    for r in rows:
        if r["source"] != "ours":
            k = (r["shape"], r["head"] == "q8_0")
            if k not in best or r["decode_tok_s"] > best[k]["decode_tok_s"]:
                best[k] = r
    for r in rows:
        r["fastest_peer"] = None if r["source"] == "ours" else r is best[(r["shape"], r["head"] == "q8_0")]


def fastest_peers(rows: list[dict]) -> list[dict]:
    """The fastest peer row of each shape and head precision in a :func:`decode_summary`, and Sherry's
    like-for-like speed over it (the summary's per-round ratio)."""
    return [r for r in rows if r.get("fastest_peer")]


COMPARISONS = (("sherry", "i2"), ("sherry", "tl2"), ("sherry", "bf16"))


def compare(rows: list[dict], paper: list[dict] | None = None) -> list[dict]:
    """Same-machine ratios, ours beside the paper's, for every shape in ``rows`` and each of Sherry
    vs I2 / TL2 / BF16: decode speed (Sherry's tok/s over the other's; also prefill, and the
    blocks alone without the output head) and size (Sherry's MB over the other's: whole model,
    and linear layers alone). The paper's ratios are those of the row the shape stands for
    (``paper_row``); shapes that stand for none (the LLaMA shapes) get None there."""
    paper = paper_table() if paper is None else paper
    pap = {(r["model"], r["format"]): r for r in paper}
    by = {(r["shape"], r["format"]): r for r in rows}
    out = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        prow = next(r["paper_row"] for r in rows if r["shape"] == shape)
        for a, b in COMPARISONS:
            ra, rb = by.get((shape, a)), by.get((shape, b))
            pa, pb = pap.get((prow, a)), pap.get((prow, b))

            ok = ra is not None and rb is not None
            out.append(dict(
                shape=shape, paper_row=prow, comparison=f"{PAPER_LABELS[a]} vs {PAPER_LABELS[b]}",
                paper_speed_ratio=ratio_or_none(pa["tok_s"], pb["tok_s"]) if pa and pb else None,
                ours_speed_ratio=ratio_or_none(ra["decode_tok_s"], rb["decode_tok_s"]) if ok else None,
                ours_prefill_ratio=ratio_or_none(ra["prefill_tok_s"], rb["prefill_tok_s"]) if ok else None,
                ours_blocks_speed_ratio=ratio_or_none(rb["blocks_ms"], ra["blocks_ms"]) if ok else None,
                paper_size_ratio=ratio_or_none(pa["mb"], pb["mb"]) if pa and pb else None,
                ours_size_ratio=ratio_or_none(ra["total_mb"], rb["total_mb"]) if ok else None,
                ours_weight_size_ratio=ratio_or_none(ra["weight_mb"], rb["weight_mb"]) if ok else None))
    return out


def side_by_side(rows: list[dict], paper: list[dict] | None = None) -> list[dict]:
    """Paper | ours per (paper model, format), for the shapes that stand for a paper row:
    tok/s and MB, and the speedup over BF16 on each machine."""
    paper = paper_table() if paper is None else paper
    by = {(r["shape"], r["format"]): r for r in rows}
    out = []
    for p in paper:
        for shape in dict.fromkeys(r["shape"] for r in rows if r["paper_row"] == p["model"]):
            ours = by.get((shape, p["format"]))
            if ours is None:
                continue
            pb = next((q for q in paper if q["model"] == p["model"] and q["format"] == "bf16"), None)
            ob = by.get((shape, "bf16"))
            out.append(dict(model=p["model"], shape=shape, format=p["format"], label=p["label"],
                            paper_tok_s=p["tok_s"], ours_tok_s=ours["decode_tok_s"], paper_mb=p["mb"],
                            ours_mb=ours["total_mb"], ours_weight_mb=ours["weight_mb"],
                            paper_vs_bf16=p["tok_s"] / pb["tok_s"] if pb else None,
                            ours_vs_bf16=(ours["decode_tok_s"] / ob["decode_tok_s"]
                                          if ob and ours["decode_tok_s"] and ob["decode_tok_s"] else None),
                            status=ours["status"], reason=ours["reason"]))
    return out
