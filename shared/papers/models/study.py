"""The shared-models page (a support chapter): SmolLM2 offline, and the MoE LM trained here.

Backs ``notebooks/models.ipynb``, run before the chapters. The models themselves, and their
parameters, are the shared core's :mod:`acl26.zoo`; this module holds the page's measurements
(SmolLM2's perplexity, the MoE's top-k sweep, the seeds) and :func:`run_experiments`, all of them. The checks
are :mod:`.spec`, the tables :mod:`.tables`, their verdicts :mod:`.verdicts`, the benchmarks :mod:`.bench`.
"""

from __future__ import annotations

import math
import time

import torch

from acl26 import evaluation, models, paths, training


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


def seed_rows(params: dict, sweep_blocks: torch.Tensor, unigram: float, *, progress: bool = True) -> list[dict]:
    """The shared MoE LM at ``seed`` and every ``extra_seeds`` (trained once each, then cached): its
    validation perplexity, its ratio to the unigram baseline, and its top-1 cost on ``sweep_blocks``.
    The spread across these rows is the spread a re-run of the book can draw."""
    from acl26 import zoo

    rows = []
    for seed in [params["seed"], *params["extra_seeds"]]:
        moe, _, _ = zoo.trained("moe", params["profile"], _overrides(params), seed=seed, progress=progress)
        sweep = {r["top_k"]: r["val_ppl"] for r in top_k_sweep(moe.model, sweep_blocks, [1, params["moe_top_k"]])}
        rows.append({"seed": seed, "moe val ppl": moe.val_ppl, "moe / unigram": moe.val_ppl / unigram,
                     "moe top-1 ppl": sweep[1], "top-1 cost": sweep[1] / sweep[params["moe_top_k"]] - 1,
                     "moe train s": moe.log["seconds"], "from cache": moe.from_cache})
    return rows


def run_experiments(params: dict, progress: bool = True) -> dict:
    """Everything the page measures, in the notebook's order, and what :func:`record_claims` reads.

    ``smollm2`` (:func:`smollm2_perplexity`), ``tokenizer``, ``corpus``, ``train_blocks``, ``val``
    (the validation blocks), ``unigram`` (the unigram baseline's perplexity on them), ``moe`` (the
    :class:`acl26.training.TrainResult` of the seed the chapters use), ``sweep_val``
    (half the validation blocks) and ``top_k`` (the MoE's top-k sweep on them), ``seeds``
    (:func:`seed_rows`), and the figures the checks read: ``smollm2_ppl``, ``ppl_chars``,
    ``ppl_context``, ``ppl_stride``, ``moe_ppl``, ``moe_top_k``.
    """
    from acl26 import zoo
    from acl26.corpus import unigram_perplexity

    torch.manual_seed(params["seed"])
    sm = smollm2_perplexity(params)
    tok, corp = zoo.corpus(params)
    train_blocks = torch.from_numpy(corp.blocks("train"))
    val = torch.from_numpy(corp.blocks("validation")[: params["val_blocks"]])
    unigram = unigram_perplexity(corp.ids["train"], val.flatten().numpy(), corp.vocab_size)
    moe = training.train(zoo.model_config("moe", params, corp.vocab_size), zoo.train_config("moe", params),
                         train_blocks, val, name=f"moe-{params['profile']}", data_fingerprint=corp.key, progress=progress)
    sweep_val = val[: max(1, len(val) // 2)]  # half the validation blocks: the sweep's evaluations stay short
    top_k = top_k_sweep(moe.model, sweep_val, list(range(1, params["moe_top_k"] + 1)))
    seeds = seed_rows(params, sweep_val, unigram, progress=progress)
    return {"smollm2": sm, "tokenizer": tok, "corpus": corp, "train_blocks": train_blocks, "val": val,
            "unigram": unigram, "moe": moe, "sweep_val": sweep_val, "top_k": top_k, "seeds": seeds,
            "smollm2_ppl": sm["ppl"], "ppl_chars": params["ppl_chars"], "ppl_context": params["ppl_context"],
            "ppl_stride": params["ppl_stride"], "moe_ppl": moe.val_ppl,
            "moe_top_k": params["moe_top_k"]}


def _overrides(params: dict) -> dict:
    from acl26 import zoo

    return {k: v for k, v in params.items() if k in zoo.SPEC.names}
