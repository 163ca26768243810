"""Sherry chapter (ACL 2026, arXiv 2601.07892): parameters, claims, accuracy experiments, benchmarks.

Backs ``notebooks/sherry.ipynb``. The packed formats and kernels are :mod:`acl26.kernels.ternary`,
the QAT machinery :mod:`acl26.sherry`, the decode-speed table :mod:`acl26.sherry_speed`. Here:
post-training 3:4 ternary on SmolLM2 (:func:`ptq_smollm2`), quantization-aware training of the
shared dense LM in four variants with equal steps (:func:`qat`), and the check that the trained
ternary model computes the same perplexity through the packed 1.25-bit kernels
(:func:`packed_perplexity`).
"""

from __future__ import annotations

import math
import time

import torch

from acl26 import claims as C
from acl26 import evaluation, models, models_study, sherry, sherry_speed, training
from acl26.params import Param, ParamSpec

VARIANTS = {
    "fp": ("fp", False, "full precision (continued training)"),
    "absmean": ("absmean", False, "absmean ternary, 1.58-bit (BitNet b1.58)"),
    "sparse34": ("sparse34", False, "3:4 ternary, 1.25-bit, without Arenas"),
    "sparse34+arenas": ("sparse34", True, "3:4 ternary, 1.25-bit, with Arenas (Sherry)"),
}

SPEC = ParamSpec(
    paper="sherry",
    params=(
        Param("speed_shapes", list, "model shapes for the decode-speed table", elem=str,
              choices=tuple(sherry_speed.SHAPES) + tuple(sherry_speed.ALIASES)),
        Param("speed_formats", list, "weight formats for the decode-speed table", elem=str,
              choices=tuple(sherry_speed.FORMATS)),
        Param("speed_tokens", int, "decode steps timed per (shape, format)", min=1),
        Param("speed_repeats", int, "timing repeats (medians are reported)", min=1),
        Param("ptq_chars", int, "characters of the 2016 State of the Union scored with SmolLM2 (0: all)", min=0),
        Param("models_profile", str, "profile of the shared dense LM to start QAT from", choices=("smoke", "book", "paper")),
        Param("variants", list, "QAT variants, all trained for the same steps", elem=str, choices=tuple(VARIANTS)),
        Param("qat_steps", int, "QAT steps per variant", min=2),
        Param("qat_lr", float, "QAT peak learning rate", min=1e-6, max=1.0),
        Param("eval_blocks", int, "validation blocks for the reported perplexities", min=1),
        Param("track_every", int, "steps between weight-trapping snapshots", min=1),
        Param("seed", int, "random seed", min=0),
    ),
    profiles={
        "book": dict(speed_shapes=["bitnet-0.7b", "llama-3.2-1b", "bitnet-3b"],
                     speed_formats=["fp32", "bf16", "i2", "tl2", "sherry"], speed_tokens=8, speed_repeats=3,
                     ptq_chars=0, models_profile="book", variants=list(VARIANTS), qat_steps=90, qat_lr=1e-3,
                     eval_blocks=64, track_every=10, seed=0),
        "smoke": dict(speed_shapes=["tiny"], speed_tokens=3, speed_repeats=1, ptq_chars=2000,
                      models_profile="smoke", qat_steps=6, eval_blocks=4, track_every=2),
        "paper": dict(speed_tokens=32, speed_repeats=5, qat_steps=1000, eval_blocks=256),
    },
)

CLAIMS = [
    C.Claim("bits", "3:4 ternary packs into 5 bits per 4 weights", "1.25 bits/weight", "§3 (encoding)",
            C.equals(1.25)),
    C.Claim("size", "Sherry's linear weights take 62.5% of the 2-bit format's bytes", "62.5%",
            "§3; speed/size table", C.predicate("ours = 62.5% (± 0.5 points)", lambda v: abs(v - 0.625) <= 0.005)),
    C.Claim("speed_vs_tl2", "Sherry decodes faster than the 1.67-bit format (TL2)", "148.27 vs 116.83 tok/s (0.7B)",
            "speed table, i7-14700HX", C.predicate("ours > 1.0×", lambda v: v > 1.0)),
    C.Claim("speed_vs_i2", "Sherry decodes at least as fast as the 2-bit format (I2_S)", "148.27 vs 132.13 tok/s (0.7B)",
            "speed table, i7-14700HX", C.predicate("ours ≥ 1.0×", lambda v: v >= 1.0)),
    C.Claim("ptq_collapses", "Ternarizing a pretrained model without training destroys it (the reason to train)",
            "motivates QAT", "§1-2", C.predicate("ppl ≥ 10× the full-precision model's", lambda v: v >= 10)),
    C.Claim("arenas_gain", "Arenas improves 3:4 ternary training", "+4.59 points average accuracy (1B)",
            "ablation table", C.predicate("ours: lower perplexity with Arenas (ratio < 1)", lambda v: v < 1.0)),
    C.Claim("matches_158", "3:4 ternary with Arenas matches a denser ternary format's accuracy",
            "Sherry .519 = Tequila .519 (1B)", "main table",
            C.predicate("ours: perplexity within 5% of absmean ternary", lambda v: v <= 1.05)),
    C.Claim("trapping", "3:4 sparsity traps weights: more of them stay in one ternary state than in dense ternary",
            "weight trapping, gradient rank collapse", "§3 (Arenas)",
            C.predicate("ours: stuck share of 3:4 minus absmean's > 0", lambda v: v > 0)),
    C.Claim("arenas_frees", "Arenas frees trapped weights", "representational diversity kept", "§3 (Arenas)",
            C.predicate("ours: stuck share at least 1 point lower with Arenas", lambda v: v <= -0.01)),
    C.Claim("packed_exact", "The packed 1.25-bit model computes what the fake-quantized model did",
            "(deployment)", "§4", C.predicate("|Δ ppl| / ppl < 1e-4", lambda v: v < 1e-4)),
]


# --------------------------------------------------------------------------------------------
# post-training quantization of SmolLM2


def ptq_smollm2(params: dict) -> list[dict]:
    """Perplexity of SmolLM2 on the 2016 State of the Union: full precision, absmean and 3:4 ternary (no training)."""
    from acl26 import texts

    doc = next(d for d in texts.sotu_documents() if d.title.startswith("2016"))
    text = doc.text[: params["ptq_chars"]] if params["ptq_chars"] else doc.text
    rows, ids = [], None
    for mode in ("fp", "absmean", "sparse34"):
        model, tok = models.smollm2()  # a fresh copy each time: wrap() quantizes in place (cached load, ~0.2 s)
        if mode != "fp":
            sherry.wrap(model, mode)
        if ids is None:
            ids = tok.encode(text, add_special_tokens=False)
        t0 = time.perf_counter()
        ppl = evaluation.perplexity(model, ids, context_length=1024, stride=1024)
        rows.append({"weights": {"fp": "full precision (dequantised Q4_1)", "absmean": "absmean ternary (PTQ)",
                                 "sparse34": "3:4 ternary (PTQ)"}[mode], "mode": mode, "ppl": ppl.ppl,
                     "tokens": ppl.n_tokens, "seconds": time.perf_counter() - t0})
    return rows


# --------------------------------------------------------------------------------------------
# quantization-aware training of the shared dense LM


def _track(model) -> list[str]:
    """Layers whose trapping statistics are recorded: a middle block's attention and MLP projections."""
    names = [n for n, _ in sherry.quantized_layers(model)]
    mid = model.config.num_hidden_layers // 2
    return [n for n in names if f".layers.{mid}." in n and n.rsplit(".", 1)[-1] in ("q_proj", "up_proj", "down_proj")]


def qat(params: dict, variant: str, *, progress: bool = True):
    """Train one QAT ``variant`` from the shared dense LM for ``qat_steps``; cached like every model."""
    mode, arenas, _ = VARIANTS[variant]
    base, tok, corp = models_study.trained("dense", params["models_profile"], progress=progress)
    mparams = models_study.SPEC.resolve(params["models_profile"])
    train_blocks = torch.from_numpy(corp.blocks("train"))
    val = torch.from_numpy(corp.blocks("validation")[: params["eval_blocks"]])
    cfg = models_study.model_config("dense", mparams, corp.vocab_size)
    tc = training.TrainConfig(steps=params["qat_steps"], batch_size=mparams["batch_size"], lr=params["qat_lr"],
                              warmup_frac=0.05, seed=params["seed"] + 1, eval_every=max(1, params["qat_steps"] // 10),
                              eval_blocks=min(32, params["eval_blocks"]), checkpoint_every=max(1, params["qat_steps"] // 5),
                              bf16=mparams["bf16"])

    def start():
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(base.folder)
        return sherry.wrap(model, mode)

    probe = start()
    monitor = sherry.QATMonitor(mode, params["qat_steps"], arenas, _track(probe), every=params["track_every"])
    del probe
    result = training.train(cfg, tc, train_blocks, val, name=f"qat-{variant}-{params['models_profile']}",
                            data_fingerprint=corp.key, init=start, progress=progress, monitor=monitor,
                            key_extra={"base": base.log["key"], "variant": variant, "track_every": params["track_every"]},
                            prepare=lambda m: sherry.wrap(m, mode))
    for _, m in sherry.quantized_layers(result.model):  # inference: pure ternary
        if isinstance(m, sherry.QuantLinear):
            m.lam = 0.0
    return result, val


def packed_perplexity(result, val: torch.Tensor) -> dict:
    """Validation perplexity of a 3:4 QAT model, fake-quantized vs. through the packed kernels."""
    fake = training.evaluate_loss(result.model, val)
    import copy

    packed_model = sherry.to_packed(copy.deepcopy(result.model))
    t0 = time.perf_counter()
    packed = training.evaluate_loss(packed_model, val)
    layers = [m for _, m in packed_model.named_modules() if isinstance(m, sherry.PackedLinear)]
    n_weights = sum(m.in_features * m.out_features for m in layers)
    return {"fake_ppl": math.exp(fake), "packed_ppl": math.exp(packed), "seconds": time.perf_counter() - t0,
            "layers": len(layers), "packed_bytes": sum(m.nbytes for m in layers),
            "bits_per_weight": 8 * sum(m.packed.nbytes for m in layers) / n_weights}


def benchmarks(quick: bool = False) -> dict:
    """``acl26 bench sherry``: the kernel micro-benchmarks and the decode-speed goals."""
    from acl26 import sherry_speed, ternary_bench

    kern = ternary_bench.benchmarks(quick=quick)
    dec = sherry_speed.benchmarks(quick=quick)
    return {"title": "Sherry: ternary kernels and decode speed", "rows": kern["rows"] + dec["rows"],
            "goals": kern["goals"] + dec["goals"], "note": f"{kern.get('note', '')} {dec.get('note', '')}".strip()}
