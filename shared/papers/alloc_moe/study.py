"""Alloc-MoE chapter (ACL 2026, arXiv 2604.08133): the experiments, whose results the verdicts read.

Backs ``notebooks/alloc_moe.ipynb``. The routing policies are :mod:`.routing`, how each method spends
a budget (scoring, Alloc-L's profile and DP, the LExI-style costs, matched thresholds) :mod:`.allocation`,
the real-shape layer timing :mod:`.speed`, the parameters and claims :mod:`.spec`, the tables
:mod:`.tables`, the verdicts :mod:`.verdicts`. Here: the subject model (the shared MoE LM, or a local
checkpoint), its texts, the method grid on it (:func:`run_grid`), the half-budget headline on each
model (:func:`headline_seed`), the speed study (:func:`speed_study`) and :func:`run_experiments`, every
experiment in one call: what :func:`acl26.papers.alloc_moe.verdicts.record_claims` reads.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from acl26 import corpus as corpus_mod
from acl26 import checks, models, zoo
from acl26.papers.alloc_moe import routing as R
from acl26.papers.alloc_moe import speed as moe_speed
from acl26.papers.alloc_moe.allocation import (METHODS, allocate, capture_prefix, evaluate, lexi_costs, match_threshold,
                                               methods_at, moe_depths, profile_sensitivity, segment_weights)
from acl26.papers.alloc_moe.moefy import moefy
from acl26.papers.alloc_moe.spec import check_below_native, nearest_half
from acl26.papers.alloc_moe.tables import SEGMENT, log_profile, ppl, token_entropy


# --------------------------------------------------------------------------------------------
# the subject model and the texts


def subject(params: dict, seed: int | None = None, progress: bool = True):
    """``(model, tokenizer, info)``: the shared MoE of ``models_profile`` (training seed ``seed``), the
    second subject. ``info`` says which, with the training log."""
    res, tok, _ = zoo.trained("moe", params["models_profile"], seed=seed, progress=progress)
    res.model.eval()
    return res.model, tok, {"source": f"trained MoE ({params['models_profile']} profile, seed {seed})",
                            "class": type(res.model).__name__, "seed": seed, "val_ppl": res.val_ppl,
                            "from_cache": res.from_cache, "train_s": res.log["seconds"]}



def main_subject(params: dict, progress: bool = True):
    """``(model, tokenizer, info)``: the subject every quality claim is decided on.

    By default SmolLM2-135M-Instruct's pretrained weights made into a mixture of experts by
    :func:`moefy` (``moefy_experts`` routed experts, and ``moefy_shared`` always-on shared ones, in each of the
    ``moefy_layers``; issue 40, point 5), with its native top-k
    chosen by :func:`choose_native_k`. A ``checkpoint`` takes its place: a real MoE as it is, or a
    dense LLaMA-family model, which is MoEfied the same way. ``info["native_k_table"]`` holds the
    native-k choice (None for a real MoE)."""
    if params["checkpoint"]:
        model, tok = models.load_local(params["checkpoint"])
        if tok is None:
            raise ValueError(f"checkpoint: {params['checkpoint']} has no tokenizer files (tokenizer_config.json)")
        try:
            R.moe_blocks(model)
        except ValueError:
            what = f"checkpoint {params['checkpoint']}"
        else:
            return model, tok, {"source": f"checkpoint {params['checkpoint']}", "class": type(model).__name__,
                                "seed": None, "val_ppl": None, "native_k_table": None}
    else:
        model, tok = models.smollm2()
        what = "SmolLM2-135M-Instruct"
    model.eval()
    if not hasattr(getattr(model, "model", None), "layers"):
        raise ValueError(f"checkpoint: {what} is neither a MoE nor a LLaMA-family causal LM (model.model.layers), "
                         f"got {type(model).__name__}")
    n = len(model.model.layers)
    bad = [i for i in params["moefy_layers"] if i >= n]
    if bad:
        raise ValueError(f"moefy_layers: {what} has {n} decoder layers, got {bad}")
    size = block_size(params, model)
    native_val, moefy_val = heldout_blocks(tok, size, params["native_blocks"], params["moefy_blocks"])
    t0 = time.perf_counter()
    moe = moefy(model, params["moefy_experts"], moefy_val, top_k=params["moefy_experts"], n_shared=params["moefy_shared"],
                layers=params["moefy_layers"], batch=params["batch_blocks"])
    del model
    k, table = choose_native_k(moe, native_val, params["native_margin"], batch_blocks=params["batch_blocks"],
                               progress=progress)
    check_below_native(params["budgets"], k, "the MoEfied subject's",
                       f"the smallest k within {params['native_margin']:.0%} of the dense model")
    shared = f" + {params['moefy_shared']} shared" if params["moefy_shared"] else ""
    return moe, tok, {"source": f"{what} MoEfied: {params['moefy_experts']} routed{shared} experts in each of layers "
                                f"{checks.layer_span(params['moefy_layers'])}, native top-{k}",
                      "class": f"{type(moe).__name__} (MoEfied)", "seed": None, "val_ppl": None,
                      "moefy_s": round(time.perf_counter() - t0, 1), "native_k_table": table}



def set_native_k(model, k: int) -> None:
    """Every MoE block's native top-k set to ``k`` (a MoEfied model's K_orig)."""
    for b in R.moe_blocks(model):
        b.gate.top_k = int(k)



def choose_native_k(model, blocks: torch.Tensor, margin: float, *, batch_blocks: int,
                    progress: bool = True) -> tuple[int, list[dict]]:
    """K_orig of a MoEfied model: the smallest k such that top-k, and every k above it, keeps the
    perplexity of ``blocks`` within ``1 + margin`` of the model with every expert (which computes the
    dense model exactly). Tried from all experts down, stopping at the first k outside the margin.
    Sets the model's native top-k to the choice; returns it and one row per k tried."""
    E = min(R.num_experts(b) for b in R.moe_blocks(model))
    set_native_k(model, E)
    # the layers before the first MoE one do not depend on k: computed once (allocation.capture_prefix)
    pre = capture_prefix(model, blocks, batch_blocks=batch_blocks, starts=moe_depths(model)[:1])
    ref = ppl(evaluate(model, blocks, None, batch_blocks=batch_blocks, prefix=pre)[0])
    rows, k = [{"k": E, "ppl": ref, "ratio to dense": 1.0, "within margin": True}], E
    for kk in range(E - 1, 0, -1):
        set_native_k(model, kk)
        p = ppl(evaluate(model, blocks, None, batch_blocks=batch_blocks, prefix=pre)[0])
        ok = p / ref <= 1 + margin
        rows.append({"k": kk, "ppl": p, "ratio to dense": p / ref, "within margin": ok})
        if not ok:
            break
        k = kk
    set_native_k(model, k)
    return k, rows



def block_size(params: dict, model, *, shared: bool = False) -> int:
    """The block length: the models page's for the ``shared`` (trained) MoE, else 256, capped by the
    model's context."""
    if shared:
        return int(zoo.SPEC.resolve(params["models_profile"])["block_size"])
    return int(min(256, getattr(model.config, "max_position_embeddings", 256) or 256))



def heldout_blocks(tok, size: int, n_native: int, n_moefy: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two disjoint sets of blocks spread evenly over the corpus's **validation** split: ``n_native`` on
    which K_orig is chosen and ``n_moefy`` on which the experts and routers are fitted. Neither the
    profiles and thresholds (train split) nor the scoring (test split) see them. ValueError, naming
    them, when the split has too few blocks."""
    blocks = corpus_mod.load_corpus(tok, block_size=size).blocks("validation")
    if len(blocks) < n_native + n_moefy:
        raise ValueError(f"native_blocks + moefy_blocks: the validation split has {len(blocks)} blocks of {size} "
                         f"tokens, got {n_native} + {n_moefy}")
    native = np.unique(np.linspace(0, len(blocks) - 1, n_native).round().astype(int))
    rest = np.setdiff1d(np.arange(len(blocks)), native)
    fit = rest[np.unique(np.linspace(0, len(rest) - 1, n_moefy).round().astype(int))]
    return torch.from_numpy(blocks[native]), torch.from_numpy(blocks[fit])



def calibration_blocks(tok, source: str, n: int, size: int) -> torch.Tensor:
    """``n`` blocks of ``size`` tokens evenly spaced over the whole train split of ``source``."""
    blocks = corpus_mod.load_corpus(tok, sources=(source,), block_size=size).blocks("train")
    pick = np.linspace(0, len(blocks) - 1, min(n, len(blocks))).round().astype(int)
    return torch.from_numpy(blocks[pick])



def texts(params: dict, tok, size: int) -> dict[str, torch.Tensor]:
    """Held-out evaluation blocks (test split of all three sources), calibration blocks (train split of
    each calibration source), token ids under ``tok``, and ``"random"``: as many blocks of random token
    ids (:func:`random_blocks`, uniform over ``tok``'s vocabulary), the ``calib_matters`` control's
    calibration text."""
    full = corpus_mod.load_corpus(tok, block_size=size)
    test = torch.from_numpy(full.blocks("test")[: params["eval_blocks"]])
    if len(test) < 2:
        raise ValueError(f"eval_blocks: the test split has only {len(test)} blocks of {size} tokens")
    out = {"eval": test}
    for src in (params["calib_source"], params["calib_alt"]):
        # evenly spaced blocks over the whole train split, not its first documents only
        out[src] = calibration_blocks(tok, src, params["calib_blocks"], size)
    n = len(out[params["calib_source"]])
    out["random"] = random_blocks(n, size, len(tok)).to(out[params["calib_source"]].dtype)
    return out



def random_blocks(n: int, size: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """``n`` blocks of ``size`` token ids drawn uniformly from ``0 .. vocab - 1`` (fixed ``seed``): a
    calibration text that carries no language."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n, size), generator=g)


# --------------------------------------------------------------------------------------------
# the method grid


def half_budget(params: dict, native: int) -> int:
    """The uniform-equivalent k of half budget (the budget nearest native/2 among ``budgets``)."""
    return nearest_half(params["budgets"], native)



def run_grid(model, tx: dict, params: dict, *, progress: bool = True) -> dict:
    """Everything the chapter measures on one model: profiles, allocations, every method at every
    budget, the K_base sweep, token allocations against entropy, expert loads, calibration sensitivity."""
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    native = R.native_k(model)
    L = len(native)
    check_below_native(params["budgets"], min(native), "the model's smallest layer's")
    bb = params["batch_blocks"]
    calib, alt = tx[params["calib_source"]], tx[params["calib_alt"]]
    S, S_parts = profile_sensitivity(model, calib, batch_blocks=bb, progress=progress, segment=SEGMENT)
    S_alt = profile_sensitivity(model, alt, batch_blocks=bb, progress=progress)
    # the calib_matters control: the same profile on random token ids
    S_rand = profile_sensitivity(model, tx["random"], batch_blocks=bb, progress=progress)
    lexi = lexi_costs(model, samples=params["lexi_samples"])
    # every policy changes only the MoE layers: the layers before the first are computed once per set of blocks,
    # and every score below is the full forward's, bit for bit (allocation.capture_prefix)
    first = moe_depths(model)[:1]
    pre = capture_prefix(model, tx["eval"], batch_blocks=bb, starts=first)
    full_nll, full_counter = evaluate(model, tx["eval"], None, batch_blocks=bb, prefix=pre)
    out = {"native": native, "S": S, "S_parts": S_parts, "S_weights": segment_weights(calib.shape[1] - 1, SEGMENT, len(calib)),
           "S_alt": S_alt, "S_rand": S_rand, "lexi": lexi, "full_nll": full_nll,
           "full_budget": full_counter.experts_per_token(), "nll": {}, "counts": {}, "budget": {}, "alloc": {},
           "thresholds": {}, "load_sim": {}}
    match = tx[params["calib_source"]][: params["match_blocks"]]
    match_pre = capture_prefix(model, match, batch_blocks=bb, starts=first)
    jobs = [(k, m) for k in params["budgets"] for m in METHODS]
    bar = tqdm(total=len(jobs), desc="methods x budgets", disable=not progress, leave=False)
    for k in params["budgets"]:
        th = {}
        for kind, name in (("topp", "top-p"), ("skip", "skip")):
            th[name], _ = match_threshold(model, match, kind, k * L, iters=params["match_iters"], batch_blocks=bb,
                                          prefix=match_pre)
        out["thresholds"][k] = th
        pols = methods_at(k, L, s_alloc=S, lexi=lexi, k_base=params["k_base"], thresholds=th)
        for m, pol in pols.items():
            nll, counter = evaluate(model, tx["eval"], pol, batch_blocks=bb, per_token=(m == "alloc-t"), prefix=pre)
            out["nll"][(k, m)] = nll
            out["budget"][(k, m)] = counter.experts_per_token()
            out["counts"][(k, m)] = counter.per_layer()
            out["load_sim"][(k, m)] = R.load_similarity(counter, full_counter)
            if pol.ks is not None:
                out["alloc"][(k, m)] = list(pol.ks)
            if m == "alloc-t":
                out.setdefault("token_alloc", {})[k] = token_entropy(counter)
            bar.update()
    bar.close()
    kh = half_budget(params, min(native))
    out["half"] = kh
    al = allocate(S, kh * L)
    out["k_base"] = {}
    for kb in params["k_base_sweep"]:
        if kb > kh:
            continue
        nll, _ = evaluate(model, tx["eval"], R.alloc_t([kh] * L, kb), batch_blocks=bb, prefix=pre)
        out["k_base"][kb] = nll
    al_alt = allocate(S_alt, kh * L)
    out["alloc_alt"] = al_alt
    out["nll_alt"] = _alloc_l_nll(model, tx["eval"], al_alt, al, out["nll"][(kh, "alloc-l")], bb, pre)
    # a labelled deviation (issue 40, point 7; no claim reads it): the same DP over log S, the sum of log-perplexities
    al_log = allocate(log_profile(S), kh * L)
    out["alloc_log"] = al_log
    out["nll_log"] = _alloc_l_nll(model, tx["eval"], al_log, al, out["nll"][(kh, "alloc-l")], bb, pre)
    al_rand = allocate(S_rand, kh * L)
    out["alloc_rand"] = al_rand
    out["nll_rand"] = _alloc_l_nll(model, tx["eval"], al_rand, al, out["nll"][(kh, "alloc-l")], bb, pre)
    # the experts_matter control: uniform top-1 against the native top-k (already scored if 1 is a budget)
    out["top1_nll"] = out["nll"][(1, "uniform")] if (1, "uniform") in out["nll"] else \
        evaluate(model, tx["eval"], R.topk([1] * L), batch_blocks=bb, prefix=pre)[0]
    out["alloc_main"] = al
    out["seconds"] = time.perf_counter() - t0
    return out



def _alloc_l_nll(model, blocks, ks, main_ks, main_nll, batch_blocks, prefix=None):
    """Per-block NLLs of Alloc-L at allocation ``ks``; the main allocation's when it is the same one."""
    if list(ks) == list(main_ks):
        return np.array(main_nll, copy=True)
    return evaluate(model, blocks, R.topk(ks), batch_blocks=batch_blocks, prefix=prefix)[0]


# --------------------------------------------------------------------------------------------
# the half-budget headline on each model


def headline_seed(model, tx: dict, params: dict, progress: bool = True) -> dict:
    """The half-budget headline on one model: uniform vs Alloc-L+T (profiled on the calibration text), the
    native top-k and uniform top-1 (the ``experts_matter`` control), per-block NLLs, and the allocation."""
    native = R.native_k(model)
    L = len(native)
    kh = half_budget(params, min(native))
    bb = params["batch_blocks"]
    S = profile_sensitivity(model, tx[params["calib_source"]], batch_blocks=bb, progress=progress)
    al = allocate(S, kh * L)
    pre = capture_prefix(model, tx["eval"], batch_blocks=bb, starts=moe_depths(model)[:1])
    u, _ = evaluate(model, tx["eval"], R.topk([kh] * L), batch_blocks=bb, prefix=pre)
    lt, _ = evaluate(model, tx["eval"], R.alloc_t(al, min(params["k_base"], min(al))), batch_blocks=bb, prefix=pre)
    full, _ = evaluate(model, tx["eval"], None, batch_blocks=bb, prefix=pre)
    top1, _ = evaluate(model, tx["eval"], R.topk([1] * L), batch_blocks=bb, prefix=pre)
    return {"uniform": u, "alloc-l+t": lt, "full": full, "top1": top1, "alloc": al}



def from_grid(grid: dict) -> dict:
    """The headline of :func:`headline_seed` for the main model, read off its grid (nothing re-run)."""
    kh = grid["half"]
    return {"uniform": grid["nll"][(kh, "uniform")], "alloc-l+t": grid["nll"][(kh, "alloc-l+t")],
            "full": grid["full_nll"], "top1": grid["top1_nll"], "alloc": grid["alloc_main"]}



def run_experiments(params: dict, progress: bool = True) -> dict:
    """Every experiment of the chapter: what :func:`record_claims` reads.

    Returns ``{"grid", "seeds", "second", "speed", "n_resamples", "info"}``:

    * ``grid``: :func:`run_grid` on the main subject (:func:`main_subject`: MoEfied SmolLM2-135M, or the
      ``checkpoint``), which holds the ``experts_matter`` (``top1_nll``) and ``calib_matters``
      (``nll_rand``) measurements and the K_base sweep of ``k_base_matters``;
    * ``seeds``: ``{None: headline}``, the main subject's half-budget headline read off its grid
      (:func:`from_grid`); one model, so its verdicts rest on paired bootstraps over blocks;
    * ``second``: the trained MoE of the models page, the second subject of ``across_models``:
      ``{"seeds": {seed: headline_seed(...)}, "info": {seed: description}}`` over ``seeds``;
    * ``speed``: :func:`speed_study` at the main subject's half-budget allocation.

    ``info`` (for display only, never read by the verdicts) describes the main subject, with its
    native-k choice (``native_k_table``).
    """
    model, tok, info = main_subject(params, progress=progress)
    size = block_size(params, model)
    tx = texts(params, tok, size)
    native = R.native_k(model)
    info = {**info, "MoE layers": len(native), "experts per layer": R.num_experts(R.moe_blocks(model)[0]),
            "native top-k": max(native), "native budget (Σk)": sum(native), "block (tokens)": size,
            "eval blocks": len(tx["eval"]), "calibration blocks": len(tx[params["calib_source"]]),
            "tokens per forward batch (Alloc-T's T)": params["batch_blocks"] * size}
    grid = run_grid(model, tx, params, progress=progress)
    del model
    speed = speed_study(params, grid["alloc_main"], max(native))
    second = second_subject(params, progress=progress)
    return {"grid": grid, "seeds": {None: from_grid(grid)}, "second": second, "speed": speed,
            "n_resamples": params["n_resamples"], "info": info}



def second_subject(params: dict, progress: bool = True) -> dict:
    """The half-budget headline (:func:`headline_seed`) on the trained MoE of the models page, for each
    training seed of ``seeds``, each model on its own calibration profile: ``{"seeds": {seed:
    headline}, "info": {seed: description}}``."""
    out: dict = {"seeds": {}, "info": {}}
    tx = None
    for s in params["seeds"]:
        m, tok, inf = subject(params, seed=s, progress=progress)
        if tx is None:  # every seed shares the tokenizer and the corpus
            tx = texts(params, tok, block_size(params, m, shared=True))
        native = R.native_k(m)
        check_below_native(params["budgets"], min(native), "the trained MoE's")
        out["seeds"][s] = headline_seed(m, tx, params, progress=progress)
        out["info"][s] = {**inf, "MoE layers": len(native), "native top-k": max(native)}
        del m
    return out


# --------------------------------------------------------------------------------------------
# speed at real shapes


def speed_layer(params: dict) -> tuple[moe_speed.MoELayer, moe_speed.Rest]:
    """The timed MoE layer and the rest of a decoder layer (attention projections) and the head."""
    if params["speed_shape"] == "dsv2-lite":
        s = moe_speed.DSV2_LITE
        return (moe_speed.random_layer(s["hidden"], s["experts"], s["width"], s["shared"], s["top_k"], seed=0),
                moe_speed.random_rest(s["attn"], s["vocab"], s["hidden"]))
    return (moe_speed.random_layer(64, 16, 32, 2, 6, seed=0),
            moe_speed.random_rest(((96, 64), (40, 64), (128, 32), (64, 64)), 500, 64))



def speed_study(params: dict, alloc_shape: Sequence[int], native: int) -> dict:
    """The real-shape layer: grouped vs dense check, the cost curve (ours and HF grouped_mm), and
    the stack speed-ups at half budget over DeepSeek-V2-Lite's 26 layers: uniform, and ``"Alloc-MoE"``,
    the half-budget allocation Alloc-MoE chose on our model (``alloc_shape``, its layers' k scaled from
    ``native`` to the timed layer's top-k), stretched to 26 layers. Each stack is timed as its MoE layers
    only (what the speed claims are decided on) and with attention projections and the head."""
    layer, rest = speed_layer(params)
    K = layer.top_k
    n_layers = moe_speed.DSV2_LITE["layers"] if params["speed_shape"] == "dsv2-lite" else 6
    x = torch.randn(64, layer.hidden, generator=torch.Generator().manual_seed(1))
    errs = []
    with torch.no_grad():
        for k in (1, K // 2, K):
            idx, w = moe_speed.route(layer, x, k)
            a, b = moe_speed.grouped_forward(layer, x, idx, w), moe_speed.dense_forward(layer, x, idx, w)
            errs.append(float((a - b).abs().max() / b.abs().max()))
    curve = moe_speed.cost_curve(layer, prefill_tokens=params["speed_prefill"], rounds=params["speed_rounds"], rest=rest)
    half = n_layers * K // 2
    shaped = moe_speed.stretch([min(K, max(1, round(k * K / native))) for k in alloc_shape], n_layers, half, K)
    allocs = {"uniform": [K // 2] * n_layers, "Alloc-MoE": shaped}
    rows = (moe_speed.stack_speedups(curve, allocs, [K] * n_layers, with_rest=True)
            + moe_speed.stack_speedups(curve, allocs, [K] * n_layers))
    hf_rows = moe_speed.stack_speedups(curve, {"uniform": [K // 2] * n_layers}, [K] * n_layers, who="hf", with_rest=True)
    return {"grouped_err": max(errs), "curve": curve, "rows": rows, "hf_rows": hf_rows, "allocs": allocs,
            "layers": n_layers, "shape": params["speed_shape"]}
