"""Sherry chapter (ACL 2026, arXiv 2601.07892): parameters, claims, accuracy experiments, benchmarks.

Backs ``notebooks/sherry.ipynb``. The packed formats and kernels are :mod:`acl26.kernels.ternary`,
the QAT machinery :mod:`.qat`, the decoders of real shapes :mod:`.decoder`, the decode-speed table
:mod:`.speed`, the paper's figures :mod:`.paper`, the kernel benchmarks :mod:`.kernel_bench`, the
whole-model files :mod:`.modelfile`. Here: post-training 3:4 ternary on SmolLM2 (:func:`ptq_smollm2`),
quantization-aware training of the shared dense LM in four variants with equal steps (:func:`qat`),
the check that the trained ternary model computes the same perplexity through the packed 1.25-bit
kernels (:func:`packed_perplexity`), its whole-model files read back bit for bit (:func:`model_files`);
:func:`run`, every experiment in order, returning what :func:`.verdicts.record_claims` decides every row on:
the paper's claims, facts by construction, our checks, and the controls that say whether this setup
can show a claim's effect. The parameters and rows are :mod:`.spec`, the verdicts :mod:`.verdicts`,
the benchmarks :mod:`.bench`."""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from acl26 import evaluation, models, training, zoo
from acl26.papers.sherry import llamacpp, modelfile, speed
from acl26.papers.sherry import qat as sherry
from acl26.papers.sherry.spec import CLAIMS, GEMV_SHAPES, SPEC, VARIANTS  # noqa: F401  (study.SPEC, study.CLAIMS)


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


def qat(params: dict, variant: str, *, seed: int | None = None, progress: bool = True):
    """Train one QAT ``variant`` from the shared dense LM for ``qat_steps`` with ``seed`` (default: the
    first of ``seeds``); cached like every model. All variants of one seed see the same batches."""
    seed = params["seeds"][0] if seed is None else seed
    mode, arenas, _ = VARIANTS[variant]
    base, tok, corp = zoo.trained("dense", params["models_profile"], progress=progress)
    mparams = zoo.SPEC.resolve(params["models_profile"])
    train_blocks = torch.from_numpy(corp.blocks("train"))
    val = torch.from_numpy(corp.blocks("validation")[: params["eval_blocks"]])
    cfg = zoo.model_config("dense", mparams, corp.vocab_size)
    tc = training.TrainConfig(steps=params["qat_steps"], batch_size=mparams["batch_size"], lr=params["qat_lr"],
                              warmup_frac=0.05, seed=seed + 1, eval_every=max(1, params["qat_steps"] // 10),
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


def trapping_rows(result, variant: str, seed: int) -> list[dict]:
    """Per tracked layer of one QAT run: the stuck share, mean state changes and mean gradient effective rank."""
    mon = result.log["monitor"]
    rows = []
    for layer, share in mon.get("stuck_share", {}).items():
        ranks = [r for _, r in mon["effective_rank"].get(layer, [])]
        rows.append({"variant": variant, "seed": seed, "layer": layer.split("layers.")[-1], "stuck share": share,
                     "mean state changes": mon["mean_flips"][layer],
                     "grad effective rank (mean)": float(np.mean(ranks)) if ranks else float("nan")})
    return rows


def block_nll(runs: dict, val: torch.Tensor) -> dict[str, list[float]]:
    """Per validation block, the mean NLL of each QAT variant's inference model (the same blocks for
    all), for the paired bootstrap of the accuracy claims."""
    return {v: training.block_losses(res.model, val) for v, res in runs.items()}


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


def model_files(result, variant: str) -> dict:
    """Write the QAT model ``result`` to whole-model files in Sherry's 1.25-bit format, the 2-bit format
    and bfloat16 (:mod:`.modelfile`, into a temporary folder removed afterwards), read each back and
    compare it bit for bit with the model (:func:`.modelfile.verify`).

    Returns ``{"variant", "exact", "mismatched", "tensors", "layers", "weights", "bytes": {weights:
    file bytes}, "layer_bytes": {weights: bytes of the quantized layers}, "header_bytes": {weights:
    bytes of the header}, "seconds"}``."""
    import tempfile
    from pathlib import Path

    t0 = time.perf_counter()
    out: dict = {"variant": variant, "bytes": {}, "layer_bytes": {}, "header_bytes": {}, "mismatched": [], "tensors": 0}
    with tempfile.TemporaryDirectory(prefix="acl26-sherry-files-") as folder:
        for weights in modelfile.WEIGHTS:
            path = modelfile.save_model(result.model, Path(folder) / f"model-{weights}.safetensors", weights)
            check = modelfile.verify(result.model, path)
            out["bytes"][weights] = check["bytes"]
            out["layer_bytes"][weights] = check["layer_bytes"]
            out["header_bytes"][weights] = check["header_bytes"]
            out["mismatched"] += [f"{weights}: {name}" for name in check["mismatched"]]
            out["tensors"] += check["tensors"]
            out["layers"], out["weights"] = check["layers"], check["weights"]
    out["exact"] = not out["mismatched"]
    out["seconds"] = time.perf_counter() - t0
    return out


def run(params: dict, progress: bool = True) -> dict:
    """Every experiment of the chapter, in order; returns what :func:`record_claims` reads, and the
    training logs the notebook plots:

    ``bits`` (:func:`acl26.kernels.ternary.bits_per_weight` of each format at a 4096 x 4096 layer, row
    scales), ``llamacpp_gemv`` / ``llamacpp_reason`` (our GEMV beside llama.cpp's, or why not),
    ``speed`` (:func:`.speed.speed_table`), ``ptq`` (:func:`ptq_smollm2`), ``qat_ppl`` (the first
    seed's validation perplexity per variant), ``qat_seeds`` (``{variant: {seed: perplexity}}``),
    ``qat_block_nll`` (the first seed's per-block NLLs, :func:`block_nll`), ``trapping``
    (:func:`trapping_rows` of every run), ``packed`` (:func:`packed_perplexity` of the 3:4 model, or
    None), ``model_file`` (:func:`model_files` of the same model, or None); and, for the plots only,
    ``qat_runs`` (per variant and seed: perplexity, time, cache hit, the training history and the
    monitor's records).
    """
    from acl26.kernels import ternary
    from acl26.papers.sherry import peers

    res: dict = {"bits": {fmt: ternary.bits_per_weight(fmt, (4096, 4096), scales="row") for fmt in ("sherry", "tl2", "i2")}}
    if llamacpp.available():
        res["llamacpp_gemv"] = [row for shape in GEMV_SHAPES
                                for row in peers.gemv_vs_llamacpp(shape, rounds=params["peer_rounds"])]
        res["llamacpp_reason"] = ""
    else:
        res["llamacpp_gemv"] = None
        res["llamacpp_reason"] = "llama.cpp was not built here (`acl26 prepare sherry`; `make book` builds it)"
    res["speed"] = speed.speed_table(params["speed_shapes"], params["speed_formats"], tokens=params["speed_tokens"],
                                     repeats=params["speed_repeats"], peers=params["speed_peers"], progress=progress)
    res["ptq"] = ptq_smollm2(params)

    first = params["seeds"][0]
    runs, val, qat_runs, trapping = {}, None, [], []
    for seed in params["seeds"]:
        for variant in params["variants"]:
            result, val = qat(params, variant, seed=seed, progress=progress)
            if seed == first:
                runs[variant] = result
            trapping += trapping_rows(result, variant, seed)
            log = result.log
            qat_runs.append({"variant": variant, "seed": seed, "val_ppl": result.val_ppl, "seconds": log["seconds"],
                             "from_cache": result.from_cache, "history": log["history"],
                             "monitor": {k: log["monitor"].get(k, {}) for k in ("lambda", "effective_rank", "flip_rate")}})
    res["qat_ppl"] = {v: r.val_ppl for v, r in runs.items()}
    res["qat_seeds"] = {v: {r["seed"]: r["val_ppl"] for r in qat_runs if r["variant"] == v} for v in params["variants"]}
    res["qat_block_nll"] = block_nll(runs, val)
    res["trapping"] = trapping
    res["qat_runs"] = qat_runs
    target = "sparse34+arenas" if "sparse34+arenas" in runs else next((v for v in runs if v.startswith("sparse34")), None)
    res["packed"] = packed_perplexity(runs[target], val) | {"variant": target} if target else None
    res["model_file"] = model_files(runs[target], target) if target else None
    return res


def decoded_shapes(result: dict | None) -> str:
    """The intro's fragment: which (shape, format) pairs the Sherry run decoded and which it skipped."""
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
# the verdicts


def metrics(results: dict) -> dict:
    """The figures of a run worth keeping beside the verdicts (``ledger.save(metrics=...)``): JSON-ready."""
    keep = ("bits", "speed", "ptq", "qat_seeds", "trapping", "packed", "model_file", "llamacpp_reason")
    out = {k: results.get(k) for k in keep}
    out["qat"] = [{k: r[k] for k in ("variant", "seed", "val_ppl", "seconds", "from_cache")}
                  for r in results.get("qat_runs") or []]
    return out
