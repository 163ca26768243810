"""Alloc-MoE chapter (ACL 2026, arXiv 2604.08133): parameters, claims, experiments, verdicts.

Backs ``notebooks/alloc_moe.ipynb``. The routing policies are :mod:`.routing`, the real-shape layer
timing :mod:`.speed`, the layer allocation DP :mod:`acl26.kernels.dp_alloc`. Here: the subject
model (the shared MoE LM, or a local checkpoint), per-block perplexity under a policy
(:func:`evaluate`), Alloc-L's isolated sensitivity profile (:func:`profile_sensitivity`), the
LExI-style data-free costs (:func:`lexi_costs`), top-p / skipping thresholds matched to a budget
(:func:`match_threshold`), the method grid (:func:`methods_at`) and :func:`record_claims`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from acl26 import claims as C
from acl26 import corpus as corpus_mod
from acl26 import models, stats, zoo
from acl26.checks import SEED_MAX
from acl26.kernels import dp_alloc
from acl26.papers.alloc_moe import routing as R
from acl26.papers.alloc_moe import speed as moe_speed
from acl26.params import Param, ParamSpec, folder_with

#: the methods compared at every budget, in table order
METHODS = ("uniform", "lexi", "top-p", "skip", "alloc-l", "alloc-t", "alloc-l+t")
LABELS = {"uniform": "uniform top-k", "lexi": "LExI-style (data-free per-layer k)", "top-p": "top-p (Dynamic-MoE)",
          "skip": "dynamic skipping (NAEE-style)", "alloc-l": "Alloc-L", "alloc-t": "Alloc-T", "alloc-l+t": "Alloc-L+T (Alloc-MoE)",
          "full": "unconstrained (native top-k)"}
CALIB_SOURCES = ("sotu", "shakespeare", "moby-dick")


def native_top_k(params: dict) -> int | None:
    """The subject's native top-k, known before any model loads: the shared MoE's ``moe_top_k`` (models
    page, ``models_profile``), or a ``checkpoint``'s ``num_experts_per_tok`` (None if its config.json
    does not say; :func:`run_grid` then checks the budgets against the loaded model)."""
    if not params["checkpoint"]:
        return int(zoo.SPEC.resolve(params["models_profile"])["moe_top_k"])
    try:
        k = json.loads((Path(params["checkpoint"]) / "config.json").read_text()).get("num_experts_per_tok")
    except (OSError, ValueError, AttributeError):
        return None
    return k if isinstance(k, int) and not isinstance(k, bool) and k >= 1 else None


def _budgets_below_native(p: dict) -> bool:
    native = native_top_k(p)
    return native is None or max(p["budgets"]) < native


def _k_base_sweep_reaches_half(p: dict) -> bool:
    """The notebook's K_base table needs a swept value at or below the half budget (run_grid skips the rest)."""
    native = native_top_k(p)
    return native is None or min(p["k_base_sweep"]) <= _nearest_half(p["budgets"], native)


def _nearest_half(budgets: Sequence[int], native: int) -> int:
    """The half budget (:func:`half_budget`): the one of ``budgets`` nearest ``native / 2``, the smaller on a tie."""
    return min(budgets, key=lambda k: (abs(k - native / 2), k))


_SHARED_TOP_K = ", ".join(f"{prof} {zoo.SPEC.resolve(prof)['moe_top_k']}" for prof in ("smoke", "book", "paper"))


SPEC = ParamSpec(
    paper="alloc_moe",
    params=(
        Param("models_profile", str, "profile of the shared MoE LM (models page)", choices=("smoke", "book", "paper")),
        Param("checkpoint", str, "local folder of a real Hugging Face MoE checkpoint (DeepSeek-V2-Lite, OLMoE, "
              "Qwen1.5-MoE, ...) to profile and allocate instead of the shared MoE; '' for the shared MoE",
              rule=folder_with("config.json", "tokenizer_config.json"), path=True),
        Param("seeds", list, "training seeds of the shared MoE for the half-budget headline (first: the main model)",
              elem=int, min_len=1, min=0, max=SEED_MAX),
        Param("budgets", list, "budgets as uniform-equivalent k (budget = k x layers), each below the native top-k",
              elem=int, min_len=1, min=1),
        Param("eval_blocks", int, "held-out (test split) blocks scored for every method", min=2),
        Param("calib_blocks", int, "calibration blocks (train split of the calibration source) for profiling", min=1),
        Param("calib_source", str, "calibration text of Alloc-L's profile", choices=CALIB_SOURCES),
        Param("calib_alt", str, "second calibration text (calibration-set sensitivity)", choices=CALIB_SOURCES),
        Param("batch_blocks", int, "blocks per forward batch: Alloc-T pools over the batch's tokens", min=1),
        Param("k_base", int, "Alloc-T: experts every token keeps", min=0),
        Param("k_base_sweep", list, "Alloc-T K_base values swept at half budget", elem=int, min_len=1, min=0),
        Param("lexi_samples", int, "LExI-style profile: random inputs per layer", min=1),
        Param("match_iters", int, "bisection steps matching top-p's p and skipping's beta to a budget", min=1),
        Param("match_blocks", int, "calibration blocks on which p and beta are matched to the budget", min=1),
        Param("n_resamples", int, "bootstrap resamples of every interval", min=99),
        Param("speed_shape", str, "MoE layer timed for speed: DeepSeek-V2-Lite's, or a tiny one", choices=("dsv2-lite", "tiny")),
        Param("speed_prefill", int, "prefill tokens timed", min=1),
        Param("speed_rounds", int, "interleaved timing rounds", min=1),
    ),
    profiles={
        "book": dict(models_profile="book", checkpoint="", seeds=[0, 1, 2], budgets=[2, 3, 4, 5], eval_blocks=96,
                     calib_blocks=16, calib_source="sotu", calib_alt="shakespeare", batch_blocks=8, k_base=1,
                     k_base_sweep=[0, 1, 2, 3], lexi_samples=512, match_iters=10, match_blocks=8, n_resamples=2999,
                     speed_shape="dsv2-lite", speed_prefill=512, speed_rounds=7),
        "smoke": dict(models_profile="smoke", seeds=[0], budgets=[1, 2], eval_blocks=8, calib_blocks=2, batch_blocks=2,
                      k_base_sweep=[0, 1], lexi_samples=32, match_iters=4, match_blocks=2, n_resamples=199,
                      speed_shape="tiny", speed_prefill=32, speed_rounds=2),
        "paper": dict(models_profile="paper", eval_blocks=256, calib_blocks=64, n_resamples=4999, speed_rounds=9),
    },
    checks=(
        # run_grid refuses a budget at or above the native top-k (a budget must cut something)
        (f"budgets must each be below the native top-k (the shared MoE's moe_top_k by models_profile: {_SHARED_TOP_K}; "
         "a checkpoint's num_experts_per_tok)", _budgets_below_native),
        ("k_base must not exceed the smallest budget", lambda p: p["k_base"] <= min(p["budgets"])),
        ("k_base_sweep needs a value at or below the half budget (the one of budgets nearest half the native top-k)",
         _k_base_sweep_reaches_half),
        ("calib_alt must differ from calib_source", lambda p: p["calib_alt"] != p["calib_source"]),
    ),
)

CLAIMS = [
    C.Claim("lt_beats_uniform", "At half budget, Alloc-L+T (Alloc-MoE) beats uniform top-k",
            "43.09 vs 41.27 … 45.48 vs 43.90 at B = 78 (avg. accuracy, DeepSeek-V2-Lite)", "ablation table",
            C.predicate("ours: perplexity ratio Alloc-L+T / uniform < 1 (interval over seeds)", lambda v: v < 1.0)),
    C.Claim("l_helps", "Alloc-L alone beats uniform top-k at half budget", "44.61 vs 43.90 (B = 78)", "ablation table",
            C.predicate("ours: perplexity ratio Alloc-L / uniform < 1", lambda v: v < 1.0)),
    C.Claim("t_helps", "Alloc-T alone beats uniform top-k at half budget", "45.42 vs 43.90 (B = 78)", "ablation table",
            C.predicate("ours: perplexity ratio Alloc-T / uniform < 1", lambda v: v < 1.0)),
    C.Claim("t_tight", "Alloc-T helps most at tight budgets", "+1.56 points at B = 52, +0.24 at B = 130",
            "ablation table",
            C.predicate("ours: log-perplexity gain of Alloc-T at the tightest budget minus at the loosest > 0",
                        lambda v: v > 0)),
    C.Claim("beats_baselines", "At half budget Alloc-MoE beats the budgeted baselines (LExI, top-p, NAEE)",
            "best average on NLU, reasoning and math", "main table",
            C.predicate("ours: perplexity ratio Alloc-L+T / each baseline < 1 (the least favourable shown)",
                        lambda v: v < 1.0)),
    C.Claim("k_base_1", "K_base = 1 is near-optimal for Alloc-T", "K_base ablation", "§ analysis",
            C.predicate("ours: perplexity at K_base = 1 within 2% of the best K_base", lambda v: v <= 1.02)),
    C.Claim("shallow_more", "Alloc-L gives shallow layers more experts than deep ones", "allocation figure",
            "§ analysis", C.predicate("ours: mean k of the shallower half minus the deeper half > 0", lambda v: v > 0)),
    C.Claim("calib_robust", "The calibration set barely matters", "calibration ablation", "§ analysis",
            C.predicate("ours: perplexity ratio (profiled on the second text / the first) within 2% of 1",
                        lambda v: abs(v - 1.0) <= 0.02)),
    C.Claim("speed_prefill", "At half budget prefill runs 1.15× faster", "1.15×", "speed table (DeepSeek-V2-Lite)",
            C.at_least(1.15, "×")),
    C.Claim("speed_decode", "At half budget decode runs 1.34× faster", "1.34×", "speed table (DeepSeek-V2-Lite)",
            C.at_least(1.34, "×")),
    C.Claim("budget_exact", "Every fixed-count method spends exactly its budget (counted activated pairs)", "—",
            "ours", C.predicate("max |measured − budget| ≤ 1e-9 experts/token", lambda v: v <= 1e-9), kind="check"),
    C.Claim("budget_matched", "Top-p and skipping, matched on calibration text, spend their budget on held-out text",
            "—", "ours", C.predicate("max relative miss ≤ 5%", lambda v: v <= 0.05), kind="check"),
    C.Claim("grouped_exact", "The grouped MoE layer (skipping inactive experts) computes the dense reference", "—",
            "ours", C.predicate("max relative error < 1e-4", lambda v: v < 1e-4), kind="check"),
    C.Claim("experts_matter", "Budgets cost quality: uniform top-k at the tightest budget is worse than the native "
            "top-k", "—", "ours", C.predicate("perplexity ratio > 1.02", lambda v: v > 1.02), kind="check"),
]


# --------------------------------------------------------------------------------------------
# the subject model and the texts


def subject(params: dict, seed: int | None = None, progress: bool = True):
    """``(model, tokenizer, info)``: the shared MoE of ``models_profile`` (training seed ``seed``), or
    the local ``checkpoint``. ``info`` says which, with the training log where there is one."""
    if params["checkpoint"]:
        model, tok = models.load_local(params["checkpoint"])
        if tok is None:
            raise ValueError(f"checkpoint: {params['checkpoint']} has no tokenizer files (tokenizer_config.json)")
        R.moe_blocks(model)  # fails fast, naming the class, when it has none
        return model, tok, {"source": f"checkpoint {params['checkpoint']}", "class": type(model).__name__,
                            "seed": None, "val_ppl": None}
    res, tok, _ = zoo.trained("moe", params["models_profile"], seed=seed, progress=progress)
    res.model.eval()
    return res.model, tok, {"source": f"shared MoE ({params['models_profile']} profile, seed {seed})",
                            "class": type(res.model).__name__, "seed": seed, "val_ppl": res.val_ppl,
                            "from_cache": res.from_cache, "train_s": res.log["seconds"]}


def block_size(params: dict, model) -> int:
    """The block length: the models page's for the shared MoE, else 256 (capped by the model's context)."""
    if params["checkpoint"]:
        return int(min(256, getattr(model.config, "max_position_embeddings", 256) or 256))
    return int(zoo.SPEC.resolve(params["models_profile"])["block_size"])


def texts(params: dict, tok, size: int) -> dict[str, torch.Tensor]:
    """Held-out evaluation blocks (test split of all three sources) and calibration blocks (train
    split of each calibration source), token ids under ``tok``."""
    full = corpus_mod.load_corpus(tok, block_size=size)
    test = torch.from_numpy(full.blocks("test")[: params["eval_blocks"]])
    if len(test) < 2:
        raise ValueError(f"eval_blocks: the test split has only {len(test)} blocks of {size} tokens")
    out = {"eval": test}
    for src in (params["calib_source"], params["calib_alt"]):
        one = corpus_mod.load_corpus(tok, sources=(src,), block_size=size)
        blocks = one.blocks("train")
        # evenly spaced blocks over the whole train split, not its first documents only
        n = min(params["calib_blocks"], len(blocks))
        pick = np.linspace(0, len(blocks) - 1, n).round().astype(int)
        out[src] = torch.from_numpy(blocks[pick])
    return out


# --------------------------------------------------------------------------------------------
# scoring under a policy


@torch.no_grad()
def evaluate(model, blocks: torch.Tensor, policy: R.Policy | None, *, batch_blocks: int,
             per_token: bool = False) -> tuple[np.ndarray, R.Counter]:
    """Per-block mean next-token NLL (nats) of ``blocks`` under ``policy``, and the activation counter."""
    import torch.nn.functional as F

    model.eval()
    blocks_ = R.moe_blocks(model)
    counter = R.Counter(len(blocks_), [R.num_experts(b) for b in blocks_], per_token=per_token)
    out = []
    with R.budgeted(model, policy, counter):
        for i in range(0, len(blocks), batch_blocks):
            x = blocks[i:i + batch_blocks]
            logits = model(input_ids=x).logits[:, :-1].float()
            nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="none")
            out.append(nll.reshape(x.shape[0], -1).mean(dim=1).numpy())
    return np.concatenate(out).astype(np.float64), counter


def ppl(nll: np.ndarray) -> float:
    return float(math.exp(float(np.mean(nll))))


# --------------------------------------------------------------------------------------------
# Alloc-L: isolated sensitivity profiling, then the DP


def profile_sensitivity(model, calib: torch.Tensor, *, batch_blocks: int, progress: bool = True) -> np.ndarray:
    """Alloc-L's isolated profile S (L, K): S[i, k-1] is the calibration perplexity with layer ``i`` at
    top-``k``, every deeper layer at top-1 and every shallower layer at its native top-k. Layers are
    profiled deep to shallow; L·K evaluations."""
    from tqdm.auto import tqdm

    native = R.native_k(model)
    L, K = len(native), max(native)
    S = np.full((L, K), np.nan)
    jobs = [(i, k) for i in reversed(range(L)) for k in range(native[i], 0, -1)]
    for i, k in tqdm(jobs, desc="Alloc-L profile", disable=not progress, leave=False):
        ks = [native[j] if j < i else 1 for j in range(L)]
        ks[i] = k
        nll, _ = evaluate(model, calib, R.topk(ks), batch_blocks=batch_blocks)
        S[i, k - 1] = ppl(nll)
    # a layer with a smaller native k cannot take more: pad its row so the DP never picks beyond it
    for i in range(L):
        if native[i] < K:
            S[i, native[i]:] = np.inf
    return S


def allocate(cost: np.ndarray, budget: int) -> list[int]:
    """The DP allocation (:func:`acl26.kernels.dp_alloc.allocate`); costs beyond a layer's native k (+inf)
    are excluded. NaN or −inf in ``cost`` raises (it would otherwise be taken for an excluded count)."""
    cost = np.asarray(cost, dtype=np.float64)
    if np.isnan(cost).any() or np.isneginf(cost).any():
        raise ValueError("cost holds NaN or -inf (+inf marks a count beyond a layer's native k)")
    c = np.where(np.isfinite(cost), cost, np.nanmax(np.where(np.isfinite(cost), cost, -np.inf)) * 1e6 + 1e6)
    return [int(k) for k in dp_alloc.allocate(c, budget)]


@torch.no_grad()
def lexi_costs(model, *, samples: int, seed: int = 0) -> np.ndarray:
    """LExI-style data-free sensitivity (L, K): for each MoE layer alone, the relative squared change
    of its output on random Gaussian inputs when it runs at top-k instead of its native top-k."""
    blocks = R.moe_blocks(model)
    native = R.native_k(model)
    L, K = len(blocks), max(native)
    g = torch.Generator().manual_seed(seed)
    dtype = next(model.parameters()).dtype
    cost = np.full((L, K), np.inf)
    for i, b in enumerate(blocks):
        hidden = b.gate.weight.shape[-1]
        x = torch.randn(1, samples, hidden, generator=g).to(dtype)
        with R.budgeted(model, None):
            ref = _block_out(b, x)
        for k in range(1, native[i] + 1):
            ks = list(native)
            ks[i] = k
            with R.budgeted(model, R.topk(ks)):
                y = _block_out(b, x)
            cost[i, k - 1] = float(((y - ref) ** 2).sum() / (ref ** 2).sum().clamp_min(1e-30))
    return cost


def _block_out(block, x):
    out = block(x)
    return out[0] if isinstance(out, tuple) else out


# --------------------------------------------------------------------------------------------
# top-p and skipping matched to a budget


def measured_budget(model, blocks: torch.Tensor, policy: R.Policy, batch_blocks: int) -> float:
    """Σ over layers of the mean experts per token under ``policy`` (a forward pass; no loss)."""
    blocks_ = R.moe_blocks(model)
    counter = R.Counter(len(blocks_), [R.num_experts(b) for b in blocks_])
    with torch.no_grad(), R.budgeted(model, policy, counter):
        for i in range(0, len(blocks), batch_blocks):
            model(input_ids=blocks[i:i + batch_blocks])
    return counter.experts_per_token()


def match_threshold(model, blocks: torch.Tensor, kind: str, budget: float, *, iters: int,
                    batch_blocks: int) -> tuple[float, float]:
    """Bisection on top-p's ``p`` (count rises with p) or skipping's ``beta`` (count falls with beta) so
    that the measured Σ_l experts/token on ``blocks`` is as close to ``budget`` as ``iters`` steps get.
    Returns ``(threshold, measured budget)`` of the closest one tried."""
    if kind not in ("topp", "skip"):
        raise ValueError(f"kind must be 'topp' or 'skip', got {kind!r}")
    lo, hi = (0.0, 1.0)
    best = None
    for _ in range(iters):
        mid = (lo + hi) / 2
        pol = R.topp(max(mid, 1e-6)) if kind == "topp" else R.skip(mid)
        got = measured_budget(model, blocks, pol, batch_blocks)
        if best is None or abs(got - budget) < abs(best[1] - budget):
            best = (mid, got)
        too_many = got > budget
        if kind == "topp":
            hi, lo = (mid, lo) if too_many else (hi, mid)
        else:
            lo, hi = (mid, hi) if too_many else (lo, mid)
    return best


# --------------------------------------------------------------------------------------------
# the method grid


def methods_at(k: int, L: int, *, s_alloc: np.ndarray, lexi: np.ndarray, k_base: int,
               thresholds: dict[str, float]) -> dict[str, R.Policy]:
    """Every method's policy at the budget ``k * L`` (uniform-equivalent ``k``)."""
    B = k * L
    al = allocate(s_alloc, B)
    kb = min(k_base, min(al), k)
    return {"uniform": R.topk([k] * L), "lexi": R.topk(allocate(lexi, B)), "top-p": R.topp(thresholds["top-p"]),
            "skip": R.skip(thresholds["skip"]), "alloc-l": R.topk(al), "alloc-t": R.alloc_t([k] * L, min(k_base, k)),
            "alloc-l+t": R.alloc_t(al, kb)}


def half_budget(params: dict, native: int) -> int:
    """The uniform-equivalent k of half budget (the budget nearest native/2 among ``budgets``)."""
    return _nearest_half(params["budgets"], native)


def run_grid(model, tx: dict, params: dict, *, progress: bool = True) -> dict:
    """Everything the chapter measures on one model: profiles, allocations, every method at every
    budget, the K_base sweep, token allocations against entropy, expert loads, calibration sensitivity."""
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    native = R.native_k(model)
    L, K = len(native), max(native)
    for k in params["budgets"]:
        if k >= min(native):
            raise ValueError(f"budgets: {k} is not below the native top-k ({min(native)})")
    bb = params["batch_blocks"]
    calib, alt = tx[params["calib_source"]], tx[params["calib_alt"]]
    S = profile_sensitivity(model, calib, batch_blocks=bb, progress=progress)
    S_alt = profile_sensitivity(model, alt, batch_blocks=bb, progress=progress)
    lexi = lexi_costs(model, samples=params["lexi_samples"])
    full_nll, full_counter = evaluate(model, tx["eval"], None, batch_blocks=bb)
    out = {"native": native, "S": S, "S_alt": S_alt, "lexi": lexi, "full_nll": full_nll,
           "full_budget": full_counter.experts_per_token(), "nll": {}, "counts": {}, "budget": {}, "alloc": {},
           "thresholds": {}, "load_sim": {}}
    match = tx[params["calib_source"]][: params["match_blocks"]]
    jobs = [(k, m) for k in params["budgets"] for m in METHODS]
    bar = tqdm(total=len(jobs), desc="methods x budgets", disable=not progress, leave=False)
    for k in params["budgets"]:
        th = {}
        for kind, name in (("topp", "top-p"), ("skip", "skip")):
            th[name], _ = match_threshold(model, match, kind, k * L, iters=params["match_iters"], batch_blocks=bb)
        out["thresholds"][k] = th
        pols = methods_at(k, L, s_alloc=S, lexi=lexi, k_base=params["k_base"], thresholds=th)
        for m, pol in pols.items():
            nll, counter = evaluate(model, tx["eval"], pol, batch_blocks=bb, per_token=(m == "alloc-t"))
            out["nll"][(k, m)] = nll
            out["budget"][(k, m)] = counter.experts_per_token()
            out["counts"][(k, m)] = counter.per_layer()
            out["load_sim"][(k, m)] = R.load_similarity(counter, full_counter)
            if pol.ks is not None:
                out["alloc"][(k, m)] = list(pol.ks)
            if m == "alloc-t":
                out.setdefault("token_alloc", {})[k] = _token_entropy(counter)
            bar.update()
    bar.close()
    kh = half_budget(params, min(native))
    out["half"] = kh
    al = allocate(S, kh * L)
    out["k_base"] = {}
    for kb in params["k_base_sweep"]:
        if kb > kh:
            continue
        nll, _ = evaluate(model, tx["eval"], R.alloc_t([kh] * L, kb), batch_blocks=bb)
        out["k_base"][kb] = nll
    al_alt = allocate(S_alt, kh * L)
    out["alloc_alt"] = al_alt
    out["nll_alt"] = evaluate(model, tx["eval"], R.topk(al_alt), batch_blocks=bb)[0]
    out["alloc_main"] = al
    out["seconds"] = time.perf_counter() - t0
    return out


def _token_entropy(counter: R.Counter) -> dict:
    """Per layer: Spearman correlation of each token's Alloc-T expert count with its routing entropy."""
    from scipy import stats as sps

    rows = []
    for i in range(counter.n_layers):
        c = np.concatenate(counter.token_counts[i]) if counter.token_counts[i] else np.array([])
        h = np.concatenate(counter.token_entropy[i]) if counter.token_entropy[i] else np.array([])
        rho = float(sps.spearmanr(c, h).statistic) if len(c) > 2 and np.ptp(c) > 0 else float("nan")
        rows.append({"layer": i, "spearman": rho, "mean k": float(c.mean()) if len(c) else float("nan"),
                     "min k": int(c.min()) if len(c) else 0, "max k": int(c.max()) if len(c) else 0,
                     "_counts": c, "_entropy": h})
    return rows


def headline_seed(model, tx: dict, params: dict, progress: bool = True) -> dict:
    """The half-budget headline on one model: uniform vs Alloc-L+T (profiled on the calibration text)."""
    native = R.native_k(model)
    L = len(native)
    kh = half_budget(params, min(native))
    S = profile_sensitivity(model, tx[params["calib_source"]], batch_blocks=params["batch_blocks"], progress=progress)
    al = allocate(S, kh * L)
    u, _ = evaluate(model, tx["eval"], R.topk([kh] * L), batch_blocks=params["batch_blocks"])
    lt, _ = evaluate(model, tx["eval"], R.alloc_t(al, min(params["k_base"], min(al))), batch_blocks=params["batch_blocks"])
    full, _ = evaluate(model, tx["eval"], None, batch_blocks=params["batch_blocks"])
    return {"uniform": u, "alloc-l+t": lt, "full": full, "alloc": al}


# --------------------------------------------------------------------------------------------
# tables


def quality_table(grid: dict, *, n_resamples: int) -> list[dict]:
    """One row per (budget, method): perplexity, measured budget, load similarity and the paired
    bootstrap interval of its perplexity ratio to uniform top-k at the same budget."""
    L = len(grid["native"])
    rows = [{"budget k": max(grid["native"]), "budget (Σk)": round(grid["full_budget"], 3), "method": LABELS["full"],
             "key": "full", "ppl": ppl(grid["full_nll"]), "ratio to uniform": float("nan"), "ratio lo": float("nan"),
             "ratio hi": float("nan"), "measured Σk": round(grid["full_budget"], 3), "load similarity": 1.0}]
    for (k, m), nll in grid["nll"].items():
        u = grid["nll"][(k, "uniform")]
        iv = stats.paired_bootstrap(nll, u, "ppl_ratio", n_resamples=n_resamples) if m != "uniform" else None
        rows.append({"budget k": k, "budget (Σk)": k * L, "method": LABELS[m], "key": m, "ppl": ppl(nll),
                     "ratio to uniform": iv.estimate if iv else 1.0, "ratio lo": iv.lo if iv else 1.0,
                     "ratio hi": iv.hi if iv else 1.0, "measured Σk": round(grid["budget"][(k, m)], 3),
                     "load similarity": grid["load_sim"][(k, m)]})
    return rows


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
    the stack speed-ups at half budget (uniform, Alloc-L-shaped) over DeepSeek-V2-Lite's 26 layers."""
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
    allocs = {"uniform": [K // 2] * n_layers, "Alloc-L-shaped": shaped}
    rows = (moe_speed.stack_speedups(curve, allocs, [K] * n_layers, with_rest=True)
            + moe_speed.stack_speedups(curve, allocs, [K] * n_layers))
    hf_rows = moe_speed.stack_speedups(curve, {"uniform": [K // 2] * n_layers}, [K] * n_layers, who="hf", with_rest=True)
    return {"grouped_err": max(errs), "curve": curve, "rows": rows, "hf_rows": hf_rows, "allocs": allocs,
            "layers": n_layers, "shape": params["speed_shape"]}


def curve_rows(curve: dict) -> list[dict]:
    rows = []
    for who, label in (("ours", "ours (grouped, skips inactive experts)"), ("hf", "transformers grouped_mm")):
        for phase, per_k in curve.get(who, {}).items():
            for k, ts in per_k.items():
                sp = stats.repeat_range([1e3 * t for t in ts])
                rows.append({"path": label, "phase": phase, "k": k, "pairs": curve["pairs"][phase][k],
                             "ms (median)": sp.estimate, "ms min": sp.lo, "ms max": sp.hi})
    return rows


# --------------------------------------------------------------------------------------------
# verdicts


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every Alloc-MoE claim from the study's results.

    ``results``: ``grid`` (:func:`run_grid` on the main model: ``native``, ``nll`` {(k, method):
    per-block NLLs}, ``budget`` {(k, method): measured Σk}, ``alloc``, ``alloc_main``, ``half``,
    ``k_base`` {K_base: NLLs}, ``nll_alt``, ``full_nll``), ``seeds`` ({seed: :func:`headline_seed`}),
    ``speed`` (:func:`speed_study`, or None with ``speed_reason``), ``n_resamples``.
    Ratios of perplexity are paired bootstraps over evaluation blocks; the headline is decided on
    the t-interval over seeds of each seed's ratio when there are two or more seeds, else on the
    bootstrap of the one model.
    """
    g = results["grid"]
    nr = int(results.get("n_resamples", 2999))
    L = len(g["native"])
    kh = g["half"]
    nll = g["nll"]

    def boot(a, b):
        return stats.paired_bootstrap(a, b, "ppl_ratio", n_resamples=nr)

    def ratio_text(iv, a, b):
        return f"{iv.estimate:.4f} ({a} {ppl(nll_of(a)):.2f} vs {b} {ppl(nll_of(b)):.2f}, half budget k = {kh})"

    def nll_of(m):
        return nll[(kh, m)]

    seeds = results.get("seeds") or {}
    per_seed = {s: ppl(r["alloc-l+t"]) / ppl(r["uniform"]) for s, r in seeds.items()}
    main_iv = boot(nll_of("alloc-l+t"), nll_of("uniform"))
    if len(per_seed) >= 2:
        iv = stats.seed_interval(list(per_seed.values()))
        ledger.record("lt_beats_uniform", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:.4f} mean over seeds " + ", ".join(f"{s}: {v:.4f}" for s, v in per_seed.items())
                            + f"; main model {main_iv.estimate:.4f} [{main_iv.lo:.4f}, {main_iv.hi:.4f}]",
                      note=f"perplexity ratio per seed, t-interval over {len(per_seed)} seeds; the main model's interval "
                           "is a paired bootstrap over blocks")
    else:
        ledger.record("lt_beats_uniform", main_iv.estimate, interval=main_iv,
                      shown=ratio_text(main_iv, "alloc-l+t", "uniform"),
                      note="one model only: paired bootstrap over evaluation blocks (no seed spread)")
    for cid, m in (("l_helps", "alloc-l"), ("t_helps", "alloc-t")):
        iv = boot(nll_of(m), nll_of("uniform"))
        ledger.record(cid, iv.estimate, interval=iv, shown=ratio_text(iv, m, "uniform"),
                      note=f"allocation {g['alloc'].get((kh, m), [kh] * L)}")
    ks = sorted(k for k, _ in nll if _ == "uniform")
    tight, loose = ks[0], ks[-1]
    if tight != loose:
        a = nll[(tight, "uniform")] - nll[(tight, "alloc-t")]
        b = nll[(loose, "uniform")] - nll[(loose, "alloc-t")]
        iv = stats.paired_bootstrap(a, b, "mean_diff", n_resamples=nr)
        ledger.record("t_tight", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.4f} nats (gain {float(np.mean(a)):+.4f} at k = {tight}, {float(np.mean(b)):+.4f} "
                            f"at k = {loose})", note="gain = mean NLL of uniform minus Alloc-T, per block; paired bootstrap")
    else:
        ledger.untested("t_tight", "the profile has a single budget")
    ivs = {m: boot(nll_of("alloc-l+t"), nll_of(m)) for m in ("lexi", "top-p", "skip")}
    failing = [m for m, v in ivs.items() if v.lo >= 1.0]
    pick = failing[0] if failing else max(ivs, key=lambda m: ivs[m].hi)
    ledger.record("beats_baselines", ivs[pick].estimate, interval=ivs[pick],
                  shown="; ".join(f"vs {LABELS[m]} {v.estimate:.4f} [{v.lo:.4f}, {v.hi:.4f}]" for m, v in ivs.items()),
                  note=f"decided on the least favourable comparison ({LABELS[pick]})")
    kb = g["k_base"]
    if 1 in kb and len(kb) >= 2:
        best = min(kb, key=lambda b: float(np.mean(kb[b])))
        if best == 1:
            ledger.record("k_base_1", 1.0, shown=f"K_base = 1 is the best of {sorted(kb)} (ppl {ppl(kb[1]):.2f})",
                          note="the best K_base; its ratio to itself is 1")
        else:
            iv = boot(kb[1], kb[best])
            ledger.record("k_base_1", iv.estimate, interval=iv,
                          shown=f"{iv.estimate:.4f} (K_base 1: {ppl(kb[1]):.2f}, best K_base {best}: {ppl(kb[best]):.2f})",
                          note=f"Alloc-T at half budget, K_base swept over {sorted(kb)}")
    else:
        ledger.untested("k_base_1", "the K_base sweep did not include 1 and another value")
    al = g["alloc_main"]
    h = L // 2
    diff = float(np.mean(al[:h]) - np.mean(al[L - h:])) if h else 0.0
    others = {s: r["alloc"] for s, r in seeds.items()}
    ledger.record("shallow_more", diff, shown=f"{diff:+.2f} (allocation {al}"
                  + ("; per seed " + ", ".join(f"{s}: {a}" for s, a in others.items()) if others else "") + ")",
                  note="a point value on the main model's allocation at half budget")
    iv = boot(g["nll_alt"], nll_of("alloc-l"))
    ledger.record("calib_robust", iv.estimate, interval=iv,
                  shown=f"{iv.estimate:.4f} (allocation {g['alloc_alt']} from the second text vs {al})",
                  note="Alloc-L alone at half budget, profiled on each calibration text")
    sp = results.get("speed")
    if sp is None:
        for cid in ("speed_prefill", "speed_decode"):
            ledger.untested(cid, results.get("speed_reason") or "the speed study did not run")
    else:
        scope = "MoE + attention projections + head"
        rows_ = [r for r in sp["rows"] if r.get("scope", scope) == scope] or sp["rows"]
        by = {(r["phase"], r["allocation"]): r for r in rows_}
        moe_only = {(r["phase"], r["allocation"]): r for r in sp["rows"] if r.get("scope") == "MoE layers only"}
        for cid, phase in (("speed_prefill", "prefill"), ("speed_decode", "decode")):
            r = by[(phase, "uniform")]
            iv = stats.repeat_range(r["_ratios"])
            alt = by.get((phase, "Alloc-L-shaped"))
            mo = moe_only.get((phase, "uniform"))
            ledger.record(cid, iv.estimate, interval=iv,
                          shown=f"{iv.estimate:.2f}× uniform" + (f", {alt['speed-up']:.2f}× Alloc-L-shaped" if alt else "")
                                + f" ({sp['shape']}, {sp['layers']} layers with attention projections and head"
                                + (f"; MoE layers alone {mo['speed-up']:.2f}×" if mo else "") + ")",
                          note="random weights, float32, this CPU; each layer's MoE block and attention projections plus "
                               "the head, without softmax attention or a KV cache; range over rounds of the per-round ratio")
        ledger.record("grouped_exact", sp["grouped_err"], shown=f"{sp['grouped_err']:.2e}")
    if sp is None:
        ledger.untested("grouped_exact", results.get("speed_reason") or "the speed study did not run")
    fixed = [(k, m) for (k, m) in g["budget"] if m not in ("top-p", "skip")]
    miss = max(abs(g["budget"][(k, m)] - sum(g["alloc"].get((k, m), [k] * L))) for k, m in fixed)
    ledger.record("budget_exact", miss, shown=f"{miss:.2e}")
    rel = max(abs(g["budget"][(k, m)] - k * L) / (k * L) for (k, m) in g["budget"] if m in ("top-p", "skip"))
    ledger.record("budget_matched", rel, shown=f"{rel:.1%}")
    iv = boot(nll[(tight, "uniform")], g["full_nll"])
    ledger.record("experts_matter", iv.estimate, interval=iv, shown=f"{iv.estimate:.3f} (k = {tight} vs native)")


# --------------------------------------------------------------------------------------------
# benchmarks


def benchmarks(quick: bool = False) -> dict:
    """``acl26 bench alloc_moe``: the DP against pure Python and scipy's MILP; the real-shape layer."""
    from acl26.papers.alloc_moe import bench

    return bench.benchmarks(quick)
