"""Sherry chapter (ACL 2026, arXiv 2601.07892): the accuracy experiments, and every experiment in order.

Backs ``notebooks/sherry.ipynb``. The packed formats and kernels are :mod:`acl26.kernels.ternary`,
the QAT machinery :mod:`.qat`, the decoders of real shapes :mod:`.decoder`, the decode-speed table
:mod:`.speed`, the paper's figures :mod:`.paper`, the kernel benchmarks :mod:`.kernel_bench`, the
whole-model files :mod:`.modelfile`. Here: post-training 3:4 ternary on SmolLM2 (:func:`ptq_smollm2`),
quantization-aware training of the shared dense LM in four variants with equal steps (:func:`qat`),
the check that the trained ternary model computes the same perplexity through the packed 1.25-bit
kernels (:func:`packed_perplexity`), its whole-model files read back bit for bit (:func:`model_files`);
:func:`run_experiments`, every experiment in order, returning what :func:`.verdicts.record_claims` decides every row on:
the paper's claims, facts by construction, our checks, and the controls that say whether this setup
can show a claim's effect. The parameters and rows are :mod:`.spec`, the tables, intervals and saved
metrics :mod:`.tables`, the verdicts :mod:`.verdicts`, the benchmarks :mod:`.bench`."""

from __future__ import annotations

import math
import time

import torch

from acl26 import assets, checks, corpus, evaluation, models, training
from acl26.papers.sherry import decoder, llamacpp, modelfile, speed, tables
from acl26.papers.sherry import qat as sherry
from acl26.papers.sherry.spec import (CLAIMS, GEMV_SHAPES, MODEL_GEMV_SHAPE, QAT_EVALS, QAT_LR_WARMUP, SPEC,  # noqa: F401
                                      VARIANTS)  # (study.SPEC, study.CLAIMS)


# --------------------------------------------------------------------------------------------
# post-training quantization of SmolLM2


def ptq_smollm2(params: dict) -> list[dict]:
    """Perplexity of the subject (SmolLM2, or ``checkpoint``) on the 2016 State of the Union: full
    precision, absmean (per-row scale) and 3:4 ternary in every block (no training)."""
    from acl26 import texts

    doc = next(d for d in texts.sotu_documents() if d.title.startswith("2016"))
    text = doc.text[: params["ptq_chars"]] if params["ptq_chars"] else doc.text
    rows, ids = [], None
    for mode in ("fp", "absmean_row", "sparse34"):
        model, tok, _ = subject(params)  # a fresh copy each time: wrap() quantizes in place (cached load, ~0.2 s)
        if mode != "fp":
            sherry.wrap(model, mode)
        if ids is None:
            ids = tok.encode(text, add_special_tokens=False)
        t0 = time.perf_counter()
        ppl = evaluation.perplexity(model, ids, context_length=1024, stride=1024)
        rows.append({"weights": {"fp": "full precision (dequantised Q4_1)", "absmean_row": "absmean ternary, per-row scale (PTQ)",
                                 "sparse34": "3:4 ternary (PTQ)"}[mode], "mode": mode, "ppl": ppl.ppl,
                     "tokens": ppl.n_tokens, "seconds": time.perf_counter() - t0})
    return rows


# --------------------------------------------------------------------------------------------
# quantization-aware training of SmolLM2 (a contiguous run of blocks, end to end; the rest frozen)


def subject(params: dict):
    """The model QAT starts from, freshly loaded: ``checkpoint`` (a local LLaMA-family causal LM) or
    SmolLM2-135M-Instruct; ``(model, tokenizer, name)``. ValueError naming the parameter where
    ``qat_blocks`` name a layer the model lacks, or the checkpoint has no tokenizer or no
    ``model.model.layers``."""
    if params["checkpoint"]:
        model, tok = models.load_local(params["checkpoint"])
        name = f"checkpoint {params['checkpoint']}"
        if tok is None:
            raise ValueError(f"checkpoint: {params['checkpoint']} has no tokenizer files (tokenizer_config.json)")
    else:
        model, tok = models.smollm2()
        name = "SmolLM2-135M-Instruct"
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ValueError(f"checkpoint: {name} is not a LLaMA-family causal LM (no model.model.layers), "
                         f"got {type(model).__name__}")
    bad = [i for i in params["qat_blocks"] if i >= len(layers)]
    if bad:
        raise ValueError(f"qat_blocks: {name} has {len(layers)} decoder layers (0..{len(layers) - 1}), got {bad}")
    return model, tok, name


def subject_key(params: dict) -> str:
    """What identifies the starting weights in the QAT runs' cache key: SmolLM2's pinned asset, or the
    checkpoint's folder with its config and the size and ends of each weight file."""
    import hashlib
    from pathlib import Path

    if not params["checkpoint"]:
        return f"smollm2 {models.SMOLLM2_DIR} {assets.load_manifest()['smollm2'].sha256}"
    folder = Path(params["checkpoint"]).resolve()
    h = hashlib.sha256((folder / "config.json").read_bytes())
    for f in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        size = f.stat().st_size
        with open(f, "rb") as fh:
            h.update(f"{f.name}|{size}|".encode() + fh.read(1 << 20))
            fh.seek(max(0, size - (1 << 20)))
            h.update(fh.read())
    return f"checkpoint {folder} {h.hexdigest()}"


def texts(params: dict, tok):
    """The real text QAT trains and is scored on, under the subject's tokenizer: the corpus's train
    split in ``block_size`` blocks, and its first ``eval_blocks`` test-split blocks (held out);
    ``(train, test, corpus)``. ValueError naming ``eval_blocks`` where the test split is shorter."""
    corp = corpus.load_corpus(tok, block_size=params["block_size"])
    test = corp.blocks("test")
    if len(test) < params["eval_blocks"]:
        raise ValueError(f"eval_blocks: the test split has {len(test)} blocks of {params['block_size']} tokens, "
                         f"got {params['eval_blocks']}")
    return torch.from_numpy(corp.blocks("train")), torch.from_numpy(test[: params["eval_blocks"]]), corp


def start_model(params: dict, mode: str, model=None):
    """The subject (``model``, or freshly loaded) with its ``qat_blocks`` wrapped in ``mode``'s quantizer
    (:func:`.qat.wrap`) and only those blocks' parameters trainable; everything else frozen in full
    precision."""
    if model is None:
        model, _, _ = subject(params)
    for p in model.parameters():
        p.requires_grad_(False)
    sherry.wrap(model, mode, blocks=params["qat_blocks"])
    for i in params["qat_blocks"]:
        for p in model.model.layers[i].parameters():
            p.requires_grad_(True)
    return model


def _track(model, blocks) -> list[str]:
    """Layers whose trapping statistics are recorded: the attention and MLP projections (q, up, down)
    of the middle one of the QAT'd ``blocks``."""
    mid = sorted(blocks)[len(blocks) // 2]
    return [n for n, _ in sherry.quantized_layers(model)
            if f".layers.{mid}." in n and n.rsplit(".", 1)[-1] in ("q_proj", "up_proj", "down_proj")]


def qat(params: dict, variant: str, *, seed: int | None = None, progress: bool = True,
        prefix: training.FrozenPrefix | None = None):
    """Train one QAT ``variant`` of the subject (:func:`subject`) for ``qat_steps`` with ``seed`` (default:
    the first of ``seeds``): its ``qat_blocks`` through the quantizer, end to end on the language-model
    loss, everything else frozen. Cached like every model, keeping only the trained blocks. All variants
    of one seed see the same batches. Returns ``(result, test blocks)``; the result's model is the
    inference model (Arenas' lambda 0: pure ternary). ``prefix`` (:func:`frozen_prefix`) keeps the frozen
    layers' outputs below the shallowest QAT block across calls: the same result, sooner."""
    seed = params["seeds"][0] if seed is None else seed
    mode, arenas, _ = VARIANTS[variant]
    probe, tok, _ = subject(params)
    start_model(params, mode, probe)
    train_blocks, test, corp = texts(params, tok)
    # the authors' schedule (spec.QAT_STEPS): a short warm-up, then a constant learning rate (min_lr_frac = 1)
    tc = training.TrainConfig(steps=params["qat_steps"], batch_size=params["qat_batch"], lr=params["qat_lr"],
                              warmup_frac=QAT_LR_WARMUP, min_lr_frac=1.0, weight_decay=0.0, seed=seed + 1,
                              eval_every=max(1, params["qat_steps"] // QAT_EVALS), eval_blocks=min(4, params["eval_blocks"]),
                              checkpoint_every=max(1, params["qat_steps"] // 4), bf16=True)
    monitor = sherry.QATMonitor(mode, params["qat_steps"], arenas, _track(probe, params["qat_blocks"]),
                                every=params["track_every"])
    cfg = probe.config
    del probe
    result = training.train(cfg, tc, train_blocks, test, name=f"qat-{variant}", data_fingerprint=corp.key,
                            init=lambda: start_model(params, mode), progress=progress, monitor=monitor,
                            key_extra={"subject": subject_key(params), "variant": variant, "mode": mode,
                                       "blocks": sorted(params["qat_blocks"]), "block_size": params["block_size"],
                                       "track_every": params["track_every"], "monitor": 2},
                            save="trainable", val_per_block=True, prefix=prefix)
    for _, m in sherry.quantized_layers(result.model):  # inference: pure ternary
        if isinstance(m, sherry.QuantLinear):
            m.lam = 0.0
    result.model.eval()
    return result, test


def frozen_prefix(params: dict) -> training.FrozenPrefix | None:
    """One :class:`acl26.training.FrozenPrefix` for the QAT runs of ``params``: the layers below the shallowest
    of ``qat_blocks`` (None where that is layer 0). Every variant of a seed draws the same batches, so
    the later variants find their batches' prefix outputs kept: measured on SmolLM2 (AMD EPYC, 2 cores), blocks
    0-12 took about 0.12 s of a 1.0 s step, and the evaluations run them too."""
    first = min(params["qat_blocks"])
    return training.FrozenPrefix(first) if first > 0 else None


def packed_perplexity(result, val: torch.Tensor, packed_model=None) -> dict:
    """Held-out perplexity of a 3:4 QAT model, fake-quantized vs. through the packed kernels
    (``packed_model``: :func:`.qat.to_packed` of a copy of it, made here when not given)."""
    fake = training.evaluate_loss(result.model, val)
    if packed_model is None:
        import copy

        packed_model = sherry.to_packed(copy.deepcopy(result.model))
    t0 = time.perf_counter()
    packed = training.evaluate_loss(packed_model, val)
    layers = [m for _, m in packed_model.named_modules() if isinstance(m, sherry.PackedLinear)]
    n_weights = sum(m.in_features * m.out_features for m in layers)
    return {"fake_ppl": math.exp(fake), "packed_ppl": math.exp(packed), "seconds": time.perf_counter() - t0,
            "layers": len(layers), "packed_bytes": sum(m.nbytes for m in layers),
            "bits_per_weight": 8 * sum(m.packed.nbytes for m in layers) / n_weights}


def model_files(model, variant: str, weights: tuple[str, ...] = modelfile.WEIGHTS) -> dict:
    """Write the QAT ``model`` (e.g. :func:`.qat.whole_ternary` of one) to whole-model files in Sherry's 1.25-bit format, the 2-bit format
    and bfloat16 (:mod:`.modelfile`, into a temporary folder removed afterwards), read each back and
    compare it bit for bit with the model (:func:`.modelfile.verify`).

    ``weights``: the formats to write (default all three). Returns ``{"variant", "exact", "mismatched", "tensors",
    "layers", "weights", "bytes": {weights:
    file bytes}, "layer_bytes": {weights: bytes of the quantized layers}, "header_bytes": {weights:
    bytes of the header}, "seconds"}``."""
    import tempfile
    from pathlib import Path

    t0 = time.perf_counter()
    out: dict = {"variant": variant, "bytes": {}, "layer_bytes": {}, "header_bytes": {}, "mismatched": [], "tensors": 0}
    with tempfile.TemporaryDirectory(prefix="acl26-sherry-files-") as folder:
        for fmt in weights:
            path = modelfile.save_model(model, Path(folder) / f"model-{fmt}.safetensors", fmt)
            check = modelfile.verify(model, path)
            out["bytes"][fmt] = check["bytes"]
            out["layer_bytes"][fmt] = check["layer_bytes"]
            out["header_bytes"][fmt] = check["header_bytes"]
            out["mismatched"] += [f"{fmt}: {name}" for name in check["mismatched"]]
            out["tensors"] += check["tensors"]
            out["layers"], out["weights"] = check["layers"], check["weights"]
    out["exact"] = not out["mismatched"]
    out["seconds"] = time.perf_counter() - t0
    return out


def shape_model(shape: str, seed: int = 0):
    """A transformers LLaMA of ``shape`` (a name in :data:`.decoder.SHAPES`: its widths, depth, heads,
    vocabulary and tied head) with random weights (transformers' initialisation, seeded), every decoder
    block's linear layers in 3:4 ternary with Arenas' residual at 0: the model whose files the paper's size
    table measures, but for the weights' values, which a file's bytes do not depend on."""
    from transformers import LlamaForCausalLM

    s = decoder.get_shape(shape, "size_shape")
    models.quiet_transformers()
    cfg = models.dense_config(s.vocab, hidden=s.hidden, layers=s.layers, heads=s.heads, kv_heads=s.kv_heads,
                              intermediate=s.intermediate, max_positions=2048, tie_word_embeddings=s.tied,
                              rope_theta=s.rope_theta)
    torch.manual_seed(checks.seed("seed", seed))
    model = sherry.wrap(LlamaForCausalLM(cfg).eval(), "sparse34")
    for _, m in sherry.quantized_layers(model):
        m.lam = 0.0
    return model


#: the formats written of the paper's shape: the two the size claim compares (a BF16 file of the 0.7B shape
#: would add 1.5 GB to write and read back, and about 4 GB to the peak memory, for a figure no row decides)
SHAPE_WEIGHTS = ("sherry", "i2")


def shape_files(shape: str, seed: int = 0) -> dict:
    """:func:`model_files` of :func:`shape_model` (``shape``) in :data:`SHAPE_WEIGHTS`: what decides the size
    claim, plus ``shape``."""
    model = shape_model(shape, seed)
    out = model_files(model, f"random 3:4 weights, {shape} shape", SHAPE_WEIGHTS)
    del model
    return out | {"shape": shape}


def run_experiments(params: dict, progress: bool = True) -> dict:
    """Every experiment of the chapter, in order; returns what :func:`.verdicts.record_claims` reads, and the
    training logs the notebook plots:

    ``bits`` (:func:`acl26.kernels.ternary.bits_per_weight` of each format at a 4096 x 4096 layer, row
    scales), ``llamacpp_gemv`` / ``llamacpp_reason`` (our GEMV beside llama.cpp's, or why not),
    ``llamacpp_model_gemv`` (the same summed over one decode step's projections of
    :data:`~acl26.papers.sherry.spec.MODEL_GEMV_SHAPE`, :func:`.peers.model_gemv`),
    ``speed`` (:func:`.speed.speed_table`), ``ptq`` (:func:`ptq_smollm2`), ``qat_ppl`` (the first
    seed's validation perplexity per variant), ``qat_seeds`` (``{variant: {seed: perplexity}}``),
    ``qat_block_nll`` (the first seed's per-block NLLs, :func:`.tables.block_nll`), ``rank_snapshots``
    (the first seed's input-gradient ranks, :func:`.tables.rank_snapshots`), ``trapping``
    (:func:`.tables.trapping_rows` of every run), ``packed`` (:func:`packed_perplexity` of the 3:4 model, or
    None), ``model_file`` (:func:`model_files` of the same model, or None), ``paper_file`` (:func:`shape_files`
    of ``size_shape``: what decides the size claim); and, for the plots only,
    ``qat_runs`` (per variant and seed: perplexity, time, cache hit, the training history and the
    monitor's records).
    """
    from acl26.kernels import ternary
    from acl26.papers.sherry import peers

    res: dict = {"bits": {fmt: ternary.bits_per_weight(fmt, (4096, 4096), scales="row") for fmt in ("sherry", "tl2", "i2")}}
    if llamacpp.available():
        res["llamacpp_gemv"] = [row for shape in GEMV_SHAPES
                                for row in peers.gemv_vs_llamacpp(shape, rounds=params["peer_rounds"])]
        res["llamacpp_model_gemv"] = peers.model_gemv(MODEL_GEMV_SHAPE, rounds=params["peer_rounds"],
                                                      progress=progress)
        res["llamacpp_reason"] = ""
    else:
        res["llamacpp_gemv"] = res["llamacpp_model_gemv"] = None
        res["llamacpp_reason"] = "llama.cpp was not built here (`acl26 prepare sherry`; `make book` builds it)"
    res["speed"] = speed.speed_table(params["speed_shapes"], params["speed_formats"], tokens=params["speed_tokens"],
                                     repeats=params["speed_repeats"], peers=params["speed_peers"], progress=progress)
    res["paper_file"] = shape_files(params["size_shape"])  # before the trainings: its peak (9 GB at 0.7B) stands alone
    res["ptq"] = ptq_smollm2(params)
    res["subject"] = subject_row(params)

    first = params["seeds"][0]
    runs, val, qat_runs, trapping = {}, None, [], []
    prefix = frozen_prefix(params)
    for seed in params["seeds"]:
        for variant in params["variants"]:
            if variant == "fp" and seed not in params["seeds"][:params["fp_seeds"]]:
                continue  # the control's reference (spec.FP_SEEDS)
            result, val = qat(params, variant, seed=seed, progress=progress, prefix=prefix)
            if seed == first:
                runs[variant] = result
            trapping += tables.trapping_rows(result, variant, seed)
            log = result.log
            qat_runs.append({"variant": variant, "seed": seed, "val_ppl": result.val_ppl, "seconds": log["seconds"],
                             "from_cache": result.from_cache, "history": log["history"],
                             "steps": params["qat_steps"],
                             "monitor": {k: log["monitor"].get(k, {}) for k in ("lambda", "effective_rank", "input_rank",
                                                                                "flip_rate")}})
    del prefix  # its kept outputs (about 0.6 MB a block of 256 tokens)
    res["qat_ppl"] = {v: r.val_ppl for v, r in runs.items()}
    res["qat_seeds"] = {v: {r["seed"]: r["val_ppl"] for r in qat_runs if r["variant"] == v} for v in params["variants"]}
    res["qat_block_nll"] = tables.block_nll(runs)
    res["rank_snapshots"] = tables.rank_snapshots(runs)  # the first seed's, the same snapshots in every variant
    res["trapping"] = trapping
    res["qat_runs"] = qat_runs
    target = "sparse34+arenas" if "sparse34+arenas" in runs else next((v for v in runs if v.startswith("sparse34")), None)
    res["packed"], res["generations"], res["model_file"] = None, [], None
    if target:
        import copy

        packed_model = sherry.to_packed(copy.deepcopy(runs[target].model))
        res["packed"] = packed_perplexity(runs[target], val, packed_model) | {"variant": target}
        if params["gen_tokens"]:
            from acl26.papers.sherry.engine import Engine

            base, tok, name = subject(params)
            engine = Engine.from_transformers(runs[target].model, "sherry", blocks=params["qat_blocks"], name=name)
            res["generations"] = generations(
                {f"{name}, full precision (transformers)": base,
                 f"{VARIANTS[target][2]}: blocks {checks.layer_span(params['qat_blocks'])} packed 1.25-bit, the rest bf16 "
                 "(our Engine)": engine}, tok, params["gen_tokens"])
            del base, engine
        del packed_model
        res["model_file"] = model_files(sherry.whole_ternary(runs[target].model), target)
    return res


#: the prompts the chapter continues greedily with the packed model and with the full-precision subject
GEN_PROMPTS = ("The President told Congress that", "Shall I compare thee to")


@torch.no_grad()
def generations(named_models: dict, tok, max_new_tokens: int, prompts=GEN_PROMPTS) -> list[dict]:
    """Greedy continuations of ``prompts`` by each of ``named_models`` (``{label: model}``: a transformers
    model, decoded by its own ``generate``, or an :class:`~acl26.papers.sherry.engine.Engine`): one row
    per (model, prompt) with the text and the seconds it took."""
    from acl26.papers.sherry.engine import Engine

    rows = []
    for label, model in named_models.items():
        for prompt in prompts:
            ids = tok(prompt, return_tensors="pt").input_ids
            t0 = time.perf_counter()
            if isinstance(model, Engine):
                new = model.generate(ids[0], max_new_tokens, eos_token_id=tok.eos_token_id)[ids.shape[1]:]
            else:
                model.eval()
                new = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                     do_sample=False, pad_token_id=tok.eos_token_id)[0, ids.shape[1]:]
            rows.append({"model": label, "prompt": prompt,
                         "continuation": tok.decode(new, skip_special_tokens=True),
                         "new tokens": int(len(new)), "seconds": time.perf_counter() - t0})
    return rows



def subject_row(params: dict) -> dict:
    """What the accuracy half trains: the subject, its QAT'd blocks and their share of its weights."""
    model, _, name = subject(params)
    total = sum(p.numel() for p in model.parameters())
    trained = sum(p.numel() for i in params["qat_blocks"] for p in model.model.layers[i].parameters())
    return {"subject": name, "decoder layers": len(model.model.layers), "QAT'd blocks": sorted(params["qat_blocks"]),
            "trained parameters": trained, "all parameters": total, "trained share": trained / total,
            "block size": params["block_size"], "blocks per step": params["qat_batch"], "steps": params["qat_steps"]}
