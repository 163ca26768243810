"""Sherry chapter (ACL 2026, arXiv 2601.07892): parameters, claims, accuracy experiments, benchmarks.

Backs ``notebooks/sherry.ipynb``. The packed formats and kernels are :mod:`acl26.kernels.ternary`,
the QAT machinery :mod:`.qat`, the decoders of real shapes :mod:`.decoder`, the decode-speed table
:mod:`.speed`, the paper's figures :mod:`.paper`, the kernel benchmarks :mod:`.kernel_bench`. Here:
post-training 3:4 ternary on SmolLM2 (:func:`ptq_smollm2`), quantization-aware training of the
shared dense LM in four variants with equal steps (:func:`qat`), and the check that the trained
ternary model computes the same perplexity through the packed 1.25-bit kernels
(:func:`packed_perplexity`), and :func:`record_claims`, which decides every claim from the results.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from acl26 import claims as C
from acl26 import evaluation, models, training, zoo
from acl26.papers.sherry import decoder, kernel_bench, speed
from acl26.papers.sherry import qat as sherry
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
              choices=tuple(decoder.SHAPES) + tuple(decoder.ALIASES)),
        Param("speed_formats", list, "weight formats for the decode-speed table", elem=str,
              choices=tuple(decoder.FORMATS)),
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
    base, tok, corp = zoo.trained("dense", params["models_profile"], progress=progress)
    mparams = zoo.SPEC.resolve(params["models_profile"])
    train_blocks = torch.from_numpy(corp.blocks("train"))
    val = torch.from_numpy(corp.blocks("validation")[: params["eval_blocks"]])
    cfg = zoo.model_config("dense", mparams, corp.vocab_size)
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
    kern = kernel_bench.benchmarks(quick=quick)
    dec = speed.benchmarks(quick=quick)
    return {"title": "Sherry: ternary kernels and decode speed", "rows": kern["rows"] + dec["rows"],
            "goals": kern["goals"] + dec["goals"], "note": f"{kern.get('note', '')} {dec.get('note', '')}".strip()}


# --------------------------------------------------------------------------------------------
# the verdicts


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every Sherry claim from the study's results.

    ``results``: ``bits`` (``{format: bits_per_weight(...)}`` at the 4096 x 4096 layer), ``speed``
    (rows of :func:`acl26.papers.sherry.speed.speed_table`), ``ptq`` (rows of :func:`ptq_smollm2`),
    ``qat_ppl`` (``{variant: validation perplexity}``), ``trapping`` (rows ``{"variant", "layer",
    "stuck share", "grad effective rank (mean)"}``) and ``packed`` (:func:`packed_perplexity`'s
    dict, or None). The speed and size claims are decided at the first shape of the speed table
    where all three ternary formats were timed.
    """
    b = results["bits"]["sherry"]
    ledger.record("bits", float(b["streams"]), shown=f"{b['streams']:.4f} (streams) + {b['scales']:.4f} (scales)")

    ok = [r for r in results["speed"] if r["status"] == "ok"]
    by = {(r["shape"], r["format"]): r for r in ok}
    shape = next((r["shape"] for r in ok if all((r["shape"], f) in by for f in ("sherry", "i2", "tl2"))), None)
    if shape:
        s, i2, tl2 = by[(shape, "sherry")], by[(shape, "i2")], by[(shape, "tl2")]
        streams = s["stream_bits_per_weight"] / i2["stream_bits_per_weight"]
        ledger.record("size", streams,
                      shown=f"{streams:.1%} of the packed streams ({shape}); "
                            f"{s['weight_mb'] / i2['weight_mb']:.1%} with row scales; "
                            f"{s['total_mb'] / i2['total_mb']:.1%} of the whole model")
        for cid, other in (("speed_vs_tl2", tl2), ("speed_vs_i2", i2)):
            ratio = s["decode_tok_s"] / other["decode_tok_s"]
            ledger.record(cid, ratio, shown=f"{s['decode_tok_s']:.2f} vs {other['decode_tok_s']:.2f} tok/s ({shape}): {ratio:.2f}×")
    else:
        for cid in ("size", "speed_vs_tl2", "speed_vs_i2"):
            ledger.untested(cid, "the speed table lacks a shape with all three ternary formats")

    ptq = {r["mode"]: r["ppl"] for r in results["ptq"]}
    if {"fp", "sparse34"} <= set(ptq):
        fp_ppl, s34 = ptq["fp"], ptq["sparse34"]
        ledger.record("ptq_collapses", s34 / fp_ppl,
                      shown=f"3:4 PTQ ppl {s34:,.0f} vs full precision {fp_ppl:.1f} ({s34 / fp_ppl:,.0f}×)")
    else:
        ledger.untested("ptq_collapses", "full precision and 3:4 PTQ are both needed")

    ppl = results["qat_ppl"]
    if {"sparse34", "sparse34+arenas"} <= set(ppl):
        r = ppl["sparse34+arenas"] / ppl["sparse34"]
        ledger.record("arenas_gain", r, shown=f"{ppl['sparse34+arenas']:.1f} with vs {ppl['sparse34']:.1f} without ({r:.3f}×)")
    else:
        ledger.untested("arenas_gain", "both 3:4 variants are needed")
    if {"absmean", "sparse34+arenas"} <= set(ppl):
        r = ppl["sparse34+arenas"] / ppl["absmean"]
        ledger.record("matches_158", r, shown=f"{ppl['sparse34+arenas']:.1f} vs absmean {ppl['absmean']:.1f} ({r:.3f}×)")
    else:
        ledger.untested("matches_158", "absmean and Arenas variants are needed")

    def mean_by_variant(key):
        acc: dict[str, list[float]] = {}
        for row in results["trapping"]:
            acc.setdefault(row["variant"], []).append(row[key])
        return {v: float(np.mean(xs)) for v, xs in acc.items()}

    stuck, grank = mean_by_variant("stuck share"), mean_by_variant("grad effective rank (mean)")
    if {"sparse34", "absmean"} <= set(stuck):
        ledger.record("trapping", stuck["sparse34"] - stuck["absmean"],
                      shown=f"stuck share {stuck['sparse34']:.1%} (3:4) vs {stuck['absmean']:.1%} (absmean); "
                            f"gradient effective rank {grank['sparse34']:.1f} vs {grank['absmean']:.1f}")
    else:
        ledger.untested("trapping", "the absmean and 3:4 (no Arenas) variants are needed")
    if {"sparse34", "sparse34+arenas"} <= set(stuck):
        ledger.record("arenas_frees", stuck["sparse34+arenas"] - stuck["sparse34"],
                      shown=f"stuck share {stuck['sparse34+arenas']:.1%} with Arenas vs {stuck['sparse34']:.1%} without; "
                            f"gradient effective rank {grank['sparse34+arenas']:.1f} vs {grank['sparse34']:.1f}")
    else:
        ledger.untested("arenas_frees", "both 3:4 variants are needed")

    pk = results.get("packed")
    if pk:
        rel = abs(pk["packed_ppl"] - pk["fake_ppl"]) / pk["fake_ppl"]
        ledger.record("packed_exact", rel,
                      shown=f"{pk['packed_ppl']:.4f} packed vs {pk['fake_ppl']:.4f} fake-quantized (rel. {rel:.1e})")
    else:
        ledger.untested("packed_exact", "no 3:4 variant was trained")
