"""The shared-models page: SmolLM2 offline, and the dense and MoE LMs the chapters train on.

Backs ``notebooks/models.ipynb`` (a support page, run before the chapters) and gives the chapters
one call to get each shared model: :func:`corpus` (the split corpus under a small BPE trained on
its train split), :func:`trained` (the dense LLaMA-style LM for Sherry's QAT, the fine-grained MoE
for Alloc-MoE), both cached by a hash of their whole configuration (see :mod:`acl26.training`).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from acl26 import claims as C
from acl26 import data, evaluation, models, paths, training
from acl26.params import Param, ParamSpec

SPEC = ParamSpec(
    paper="models",
    params=(
        Param("ppl_chars", int, "characters of the 2016 State of the Union scored with SmolLM2 (0: all)", min=0),
        Param("ppl_context", int, "SmolLM2 perplexity: context length (tokens)", min=16),
        Param("ppl_stride", int, "SmolLM2 perplexity: stride between windows (tokens)", min=1),
        Param("vocab_size", int, "byte-level BPE vocabulary trained on the train split", min=300),
        Param("block_size", int, "training block length (tokens)", min=16),
        Param("val_blocks", int, "validation blocks for the reported perplexities", min=1),
        Param("dense_hidden", int, "dense LM: hidden size", min=16),
        Param("dense_layers", int, "dense LM: layers", min=1),
        Param("dense_intermediate", int, "dense LM: MLP width", min=16),
        Param("dense_steps", int, "dense LM: training steps", min=1),
        Param("moe_hidden", int, "MoE LM: hidden size", min=16),
        Param("moe_layers", int, "MoE LM: layers (all MoE)", min=1),
        Param("moe_experts", int, "MoE LM: routed experts per layer", min=2),
        Param("moe_top_k", int, "MoE LM: experts per token", min=1),
        Param("moe_expert_intermediate", int, "MoE LM: width of one expert", min=4),
        Param("moe_steps", int, "MoE LM: training steps", min=1),
        Param("batch_size", int, "training batch (blocks)", min=1),
        Param("lr", float, "peak learning rate (AdamW, cosine)", min=1e-6, max=1.0),
        Param("bf16", bool, "bf16 autocast in training (fp32 weights; validation in fp32)"),
        Param("seed", int, "random seed", min=0),
    ),
    profiles={
        "book": dict(ppl_chars=0, ppl_context=2048, ppl_stride=1024, vocab_size=8192, block_size=256, val_blocks=256,
                     dense_hidden=256, dense_layers=6, dense_intermediate=688, dense_steps=220,
                     moe_hidden=256, moe_layers=6, moe_experts=32, moe_top_k=6, moe_expert_intermediate=128,
                     moe_steps=250, batch_size=16, lr=2e-3, bf16=True, seed=0),
        "smoke": dict(ppl_chars=3000, ppl_context=256, ppl_stride=128, vocab_size=1024, block_size=64, val_blocks=16,
                      dense_hidden=32, dense_layers=2, dense_intermediate=64, dense_steps=20,
                      moe_hidden=32, moe_layers=2, moe_experts=8, moe_top_k=3, moe_expert_intermediate=16,
                      moe_steps=20, batch_size=8),
        "paper": dict(dense_steps=2000, moe_steps=2000, val_blocks=1024),
    },
    checks=(
        ("moe_top_k must not exceed moe_experts", lambda p: p["moe_top_k"] <= p["moe_experts"]),
        ("ppl_stride must not exceed ppl_context", lambda p: p["ppl_stride"] <= p["ppl_context"]),
    ),
)

CLAIMS = [
    C.Claim("smollm2_ppl", "SmolLM2-135M-Instruct (dequantised Q4_1) scores the 2016 State of the Union as expected",
            "≈ 22 (22.4 when the assets were surveyed)", "shared/papers/assets.md; issue #3",
            C.within(22.4, 0.10)),
    C.Claim("dense_learns", "The dense LM learns: validation perplexity under half the unigram baseline's",
            "—", "issue #3", C.predicate("ours ≤ 0.5 × unigram", lambda v: v <= 0.5)),
    C.Claim("moe_learns", "The MoE LM learns: validation perplexity under half the unigram baseline's",
            "—", "issue #3", C.predicate("ours ≤ 0.5 × unigram", lambda v: v <= 0.5)),
    C.Claim("experts_matter", "The experts matter: routing to top-1 instead of top-k costs ≥ 10% perplexity",
            "≥ 10%", "issue #3 (Alloc-MoE needs something to allocate)", C.at_least(0.10)),
]


# --------------------------------------------------------------------------------------------
# building blocks the chapters share


def corpus(params: dict) -> tuple[object, data.Corpus]:
    """The BPE tokenizer trained on the train split and the corpus tokenized with it (both cached)."""
    tok = data.train_bpe(params["vocab_size"])
    return tok, data.load_corpus(tok, block_size=params["block_size"])


def model_config(kind: str, params: dict, vocab_size: int):
    if kind == "dense":
        return models.dense_config(vocab_size, hidden=params["dense_hidden"], layers=params["dense_layers"],
                                   heads=max(1, params["dense_hidden"] // 32),
                                   kv_heads=max(1, params["dense_hidden"] // 64),
                                   intermediate=params["dense_intermediate"], max_positions=params["block_size"])
    if kind == "moe":
        return models.moe_config(vocab_size, hidden=params["moe_hidden"], layers=params["moe_layers"],
                                 heads=max(1, params["moe_hidden"] // 32), kv_heads=max(1, params["moe_hidden"] // 64),
                                 experts=params["moe_experts"], top_k=params["moe_top_k"],
                                 expert_intermediate=params["moe_expert_intermediate"],
                                 max_positions=params["block_size"])
    raise ValueError(f"kind must be 'dense' or 'moe', got {kind!r}")


def train_config(kind: str, params: dict) -> training.TrainConfig:
    steps = params["dense_steps"] if kind == "dense" else params["moe_steps"]
    return training.TrainConfig(steps=steps, batch_size=params["batch_size"], lr=params["lr"], seed=params["seed"],
                                eval_every=max(1, steps // 10), eval_blocks=32, checkpoint_every=max(1, steps // 4),
                                warmup_frac=0.05, bf16=params["bf16"])


def trained(kind: str, profile: str = "book", overrides: dict | None = None, *, progress: bool = True):
    """The shared ``kind`` ("dense" or "moe") LM of ``profile``: trained once, then from the cache.

    Returns ``(TrainResult, tokenizer, corpus)``.
    """
    params = SPEC.resolve(profile, overrides)
    tok, corp = corpus(params)
    train_blocks = torch.from_numpy(corp.blocks("train"))
    val = torch.from_numpy(corp.blocks("validation")[: params["val_blocks"]])
    result = training.train(model_config(kind, params, corp.vocab_size), train_config(kind, params), train_blocks, val,
                            name=f"{kind}-{profile}", data_fingerprint=corp.key, progress=progress)
    return result, tok, corp


# --------------------------------------------------------------------------------------------
# the page's measurements


def smollm2_perplexity(params: dict) -> dict:
    """Load SmolLM2 (timing the first and a cached load) and score the 2016 State of the Union."""
    from acl26 import texts

    t0 = time.perf_counter()
    folder_existed = (paths.cache_dir() / "models" / models.SMOLLM2_DIR / "config.json").is_file()
    model, tok = models.smollm2()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    model, tok = models.smollm2()
    cached = time.perf_counter() - t0
    doc = next(d for d in texts.sotu_documents() if d.title.startswith("2016"))
    text = doc.text[: params["ppl_chars"]] if params["ppl_chars"] else doc.text
    ids = tok.encode(text, add_special_tokens=False)
    t0 = time.perf_counter()
    ppl = evaluation.perplexity(model, ids, context_length=params["ppl_context"], stride=params["ppl_stride"],
                                progress=True)
    return {"model": model, "tokenizer": tok, "first_load_s": first, "converted_now": not folder_existed,
            "cached_load_s": cached, "ppl": ppl.ppl, "tokens": ppl.n_tokens, "chars": len(text),
            "document": doc.title, "seconds": time.perf_counter() - t0, "params": models.count_params(model)["total"]}


def top_k_sweep(model, val_blocks: torch.Tensor, ks: list[int]) -> list[dict]:
    """Validation perplexity of an MoE routed to each top-k (every layer), restoring its k after."""
    original = [layer.mlp.gate.top_k for layer in model.model.layers if hasattr(layer.mlp, "gate")]
    rows = []
    try:
        for k in ks:
            models.set_top_k(model, k)
            loss = training.evaluate_loss(model, val_blocks)
            rows.append({"top_k": k, "val_loss": loss, "val_ppl": math.exp(loss)})
    finally:
        models.set_top_k(model, original)
    return rows


def describe(result, kind: str, unigram: float) -> dict:
    """One row of the models table."""
    cfg = result.model.config
    counts = models.count_params(result.model)
    row = {"model": f"{kind} LM (trained here)", "class": type(result.model).__name__,
           "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "vocab": cfg.vocab_size,
           "params": counts["total"], "active params": counts["active"],
           "train tokens": result.log["tokens_seen"], "train time (s)": result.log["seconds"],
           "val ppl": result.val_ppl, "unigram ppl": unigram, "from cache": result.from_cache}
    if kind == "moe":
        row["experts"] = f"{cfg.num_experts} routed, top-{cfg.num_experts_per_tok}, no shared"
    return row
