"""The shared models the chapters train on: the corpus, its BPE, and the MoE LM.

Part of the shared core (not of any chapter), so that every chapter gets the same models through
one call and no chapter imports another's study: :func:`corpus` (the split corpus under a small
BPE trained on its train split) and :func:`trained` (the fine-grained MoE, a chapter's second
subject). A dense LM trained here once served a chapter's QAT until it moved onto SmolLM2-135M's
pretrained weights; no chapter needed it after that, so it is no longer trained. Each is trained once per
configuration and then loaded from the cache by a hash of its whole configuration (see
:mod:`acl26.training`). :data:`SPEC` holds their parameters and profiles; it is also the parameter
spec of the models page (``notebooks/models.ipynb``), which shows what each model is.
"""

from __future__ import annotations

import torch

from acl26 import corpus as corpus_mod
from acl26 import models, training
from acl26.checks import SEED_MAX
from acl26.params import Param, ParamSpec

#: the assets the shared models are built from (the corpus texts)
ASSETS = ("sotu", "shakespeare", "moby-dick")
#: SmolLM2-135M-Instruct's context (max_position_embeddings; its GGUF's llama.context_length):
#: :func:`acl26.evaluation.perplexity` refuses a longer context_length
SMOLLM2_CONTEXT = 8192
#: a scored prefix shorter than this may hold fewer than the 2 tokens a perplexity needs
#: ("Thank" is one token of the 2016 address's opening)
MIN_PPL_CHARS = 16


def attention_heads(hidden: int) -> tuple[int, int]:
    """``(heads, kv_heads)`` of a shared LM of width ``hidden``: one head per 32 dimensions, one
    key/value head per 64 (at least one of each)."""
    return max(1, hidden // 32), max(1, hidden // 64)


def heads_fit(hidden: int, kind: str = "dense") -> bool:
    """Whether transformers builds and runs a shared ``kind`` LM of width ``hidden`` with
    :func:`attention_heads`: an even head size (RoPE rotates pairs) and key/value heads that divide
    the heads (grouped-query attention; 160 fails: 5 heads, 2 key/value heads); the dense LM's heads
    split ``hidden`` evenly (LlamaConfig checks it), the MoE's experts (grouped_mm) need a width that
    is a multiple of 4 (16-byte strides)."""
    heads, kv = attention_heads(hidden)
    fits = (hidden // heads) % 2 == 0 and heads % kv == 0
    return fits and (hidden % heads == 0 if kind == "dense" else hidden % 4 == 0)


_MOE_HEADS_RULE = ("must be a multiple of 4 (the experts' grouped matmul) with attention heads (one per 32 dimensions, "
                   "one key/value head per 64) of an even size, the key/value heads dividing the heads: e.g. 32, 64, "
                   "96, 128, 192, 256", lambda h: heads_fit(h, "moe"))
_PPL_CHARS_RULE = (f"must be 0 (the whole address) or at least {MIN_PPL_CHARS} characters (a perplexity needs "
                   "2 tokens)", lambda v: v == 0 or v >= MIN_PPL_CHARS)

SPEC = ParamSpec(
    paper="models",
    params=(
        Param("ppl_chars", int, "characters of the 2016 State of the Union scored with SmolLM2 (0: all)", min=0,
              rule=_PPL_CHARS_RULE),
        Param("ppl_context", int, "SmolLM2 perplexity: context length (tokens)", min=16, max=SMOLLM2_CONTEXT),
        Param("ppl_stride", int, "SmolLM2 perplexity: stride between windows (tokens)", min=1),
        Param("vocab_size", int, "byte-level BPE vocabulary trained on the train split", min=300),
        Param("block_size", int, "training block length (tokens)", min=16),
        Param("val_blocks", int, "validation blocks for the reported perplexities", min=1),
        Param("moe_hidden", int, "MoE LM: hidden size", min=16, rule=_MOE_HEADS_RULE),
        Param("moe_layers", int, "MoE LM: layers (all MoE)", min=1),
        Param("moe_experts", int, "MoE LM: routed experts per layer", min=2),
        Param("moe_top_k", int, "MoE LM: experts per token", min=1),
        Param("moe_expert_intermediate", int, "MoE LM: width of one expert", min=4,
              rule=("must be a multiple of 4 (the experts' grouped matmul needs 16-byte strides)", lambda v: v % 4 == 0)),
        Param("moe_steps", int, "MoE LM: training steps", min=1),
        Param("batch_size", int, "training batch (blocks)", min=1),
        Param("lr", float, "peak learning rate (AdamW, cosine)", min=1e-6, max=1.0),
        Param("bf16", bool, "bf16 autocast in training where the CPU computes bf16 natively, else fp32 (fp32 weights; validation in fp32)"),
        Param("seed", int, "random seed of the shared models the chapters use", min=0, max=SEED_MAX),
        Param("extra_seeds", list, "further seeds of the MoE LM, trained once to measure the spread across seeds",
              elem=int, min_len=0, min=0, max=SEED_MAX),
    ),
    profiles={
        "book": dict(ppl_chars=0, ppl_context=2048, ppl_stride=1024, vocab_size=8192, block_size=256, val_blocks=256,
                     moe_hidden=256, moe_layers=6, moe_experts=32, moe_top_k=6, moe_expert_intermediate=128,
                     moe_steps=250, batch_size=16, lr=2e-3, bf16=True, seed=0, extra_seeds=[1, 2]),
        "smoke": dict(ppl_chars=3000, ppl_context=256, ppl_stride=128, vocab_size=1024, block_size=64, val_blocks=16,
                      moe_hidden=32, moe_layers=2, moe_experts=8, moe_top_k=3, moe_expert_intermediate=16,
                      moe_steps=20, batch_size=8, extra_seeds=[1]),
        "paper": dict(moe_steps=2000, val_blocks=1024, extra_seeds=[1, 2]),
    },
    checks=(
        ("moe_top_k must not exceed moe_experts", lambda p: p["moe_top_k"] <= p["moe_experts"]),
        ("ppl_stride must not exceed ppl_context", lambda p: p["ppl_stride"] <= p["ppl_context"]),
        ("extra_seeds must differ from seed", lambda p: p["seed"] not in p["extra_seeds"]),
    ),
)

# --------------------------------------------------------------------------------------------
# the models, trained once and cached


def corpus(params: dict) -> tuple[object, corpus_mod.Corpus]:
    """The BPE tokenizer trained on the train split and the corpus tokenized with it (both cached)."""
    tok = corpus_mod.train_bpe(params["vocab_size"])
    return tok, corpus_mod.load_corpus(tok, block_size=params["block_size"])


#: the kinds of shared LM trained here
KINDS = ("moe",)


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS} (the dense LM is no longer trained: no chapter needs it), "
                         f"got {kind!r}")
    return kind


def model_config(kind: str, params: dict, vocab_size: int):
    _kind(kind)
    heads, kv_heads = attention_heads(params["moe_hidden"])
    return models.moe_config(vocab_size, hidden=params["moe_hidden"], layers=params["moe_layers"],
                             heads=heads, kv_heads=kv_heads,
                             experts=params["moe_experts"], top_k=params["moe_top_k"],
                             expert_intermediate=params["moe_expert_intermediate"],
                             max_positions=params["block_size"])


def train_config(kind: str, params: dict) -> training.TrainConfig:
    _kind(kind)
    steps = params["moe_steps"]
    return training.TrainConfig(steps=steps, batch_size=params["batch_size"], lr=params["lr"], seed=params["seed"],
                                eval_every=max(1, steps // 10), eval_blocks=32, checkpoint_every=max(1, steps // 4),
                                warmup_frac=0.05, bf16=params["bf16"])


def trained(kind: str, profile: str = "book", overrides: dict | None = None, *, seed: int | None = None,
            progress: bool = True):
    """The shared ``kind`` (``"moe"``) LM of ``profile``: trained once, then from the cache.

    ``seed`` (default: the profile's ``seed``) picks another training seed, e.g. one of
    ``extra_seeds``. Returns ``(TrainResult, tokenizer, corpus)``.
    """
    _kind(kind)
    params = SPEC.resolve(profile, {**(overrides or {}), **({"seed": seed, "extra_seeds": []} if seed is not None else {})})
    tok, corp = corpus(params)
    train_blocks = torch.from_numpy(corp.blocks("train"))
    val = torch.from_numpy(corp.blocks("validation")[: params["val_blocks"]])
    result = training.train(model_config(kind, params, corp.vocab_size), train_config(kind, params), train_blocks, val,
                            name=f"{kind}-{profile}", data_fingerprint=corp.key, progress=progress)
    return result, tok, corp
