"""Alloc-MoE chapter (ACL 2026, arXiv 2604.08133): the experiments, whose results the verdicts read.

Backs ``notebooks/alloc_moe.ipynb``. The routing policies are :mod:`.routing`, the real-shape layer
timing :mod:`.speed`, the layer allocation DP :mod:`acl26.kernels.dp_alloc`, the parameters and
claims :mod:`.spec`, the verdicts :mod:`.verdicts`. Here: the subject model (the shared MoE LM, or a
local checkpoint), per-block perplexity under a policy (:func:`evaluate`), Alloc-L's isolated
sensitivity profile (:func:`profile_sensitivity`), the LExI-style data-free costs
(:func:`lexi_costs`), top-p / skipping thresholds matched to a budget (:func:`match_threshold`), the
method grid (:func:`methods_at`), the speed study (:func:`speed_study`) and :func:`run`, every
experiment in one call: what :func:`acl26.papers.alloc_moe.verdicts.record_claims` reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import torch

from acl26 import corpus as corpus_mod
from acl26 import checks, models, stats, zoo
from acl26.kernels import dp_alloc
from acl26.papers.alloc_moe import routing as R
from acl26.papers.alloc_moe import speed as moe_speed
from acl26.papers.alloc_moe.moefy import moefy
from acl26.papers.alloc_moe.spec import (CALIB_SOURCES, CLAIMS, SPEC, check_below_native,  # noqa: F401  (re-exported:
                                         native_top_k, nearest_half)  # study.SPEC, study.CLAIMS, study.native_top_k)

#: tokens per calibration segment: the unit the bootstrap of the allocation's shape resamples
SEGMENT = 32

#: the methods compared at every budget, in table order
METHODS = ("uniform", "lexi", "top-p", "skip", "alloc-l", "alloc-t", "alloc-l+t")
LABELS = {"uniform": "uniform top-k", "lexi": "LExI-style (data-free per-layer k)", "top-p": "top-p (Dynamic-MoE)",
          "skip": "dynamic skipping (NAEE-style)", "alloc-l": "Alloc-L", "alloc-t": "Alloc-T", "alloc-l+t": "Alloc-L+T (Alloc-MoE)",
          "full": "unconstrained (native top-k)"}


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
    :func:`moefy` (``moefy_experts`` experts in each of the ``moefy_layers``), with its native top-k
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
    moe = moefy(model, params["moefy_experts"], moefy_val, top_k=params["moefy_experts"], layers=params["moefy_layers"],
                batch=params["batch_blocks"])
    del model
    k, table = choose_native_k(moe, native_val, params["native_margin"], batch_blocks=params["batch_blocks"],
                               progress=progress)
    check_below_native(params["budgets"], k, "the MoEfied subject's",
                       f"the smallest k within {params['native_margin']:.0%} of the dense model")
    return moe, tok, {"source": f"{what} MoEfied: {params['moefy_experts']} experts in each of layers "
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
    ref = ppl(evaluate(model, blocks, None, batch_blocks=batch_blocks)[0])
    rows, k = [{"k": E, "ppl": ref, "ratio to dense": 1.0, "within margin": True}], E
    for kk in range(E - 1, 0, -1):
        set_native_k(model, kk)
        p = ppl(evaluate(model, blocks, None, batch_blocks=batch_blocks)[0])
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
# scoring under a policy


@torch.no_grad()
def evaluate(model, blocks: torch.Tensor, policy: R.Policy | None, *, batch_blocks: int,
             per_token: bool = False, segment: int | None = None) -> tuple[np.ndarray, R.Counter]:
    """Per-block mean next-token NLL (nats) of ``blocks`` under ``policy``, and the activation counter.
    ``segment``: per-segment means instead, each block's predicted tokens cut into runs of ``segment``
    (the last may be shorter), block after block: the units a bootstrap over calibration text resamples."""
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
            nll = nll.reshape(x.shape[0], -1)
            if segment:  # (blocks, segments), block after block
                out.append(torch.stack([part.mean(dim=1) for part in torch.split(nll, segment, dim=1)], dim=1)
                           .reshape(-1).numpy())
            else:
                out.append(nll.mean(dim=1).numpy())
    return np.concatenate(out).astype(np.float64), counter


def ppl(nll: np.ndarray) -> float:
    return float(math.exp(float(np.mean(nll))))


# --------------------------------------------------------------------------------------------
# Alloc-L: isolated sensitivity profiling, then the DP


def profile_sensitivity(model, calib: torch.Tensor, *, batch_blocks: int, progress: bool = True,
                        segment: int | None = None):
    """Alloc-L's isolated profile S (L, K): S[i, k-1] is the calibration perplexity with layer ``i`` at
    top-``k``, every deeper layer at top-1 and every shallower layer at its native top-k. Layers are
    profiled deep to shallow; L·K evaluations.

    With ``segment``, returns ``(S, parts)``: ``parts[i, k-1]`` the mean NLLs of the calibration text's
    segments of ``segment`` tokens (:func:`evaluate`), so that S can be re-derived on resampled
    segments (:func:`allocation_bootstrap`); NaN where S is +inf."""
    from tqdm.auto import tqdm

    native = R.native_k(model)
    L, K = len(native), max(native)
    S = np.full((L, K), np.nan)
    parts = None
    weights = _segment_weights(calib.shape[1] - 1, segment, calib.shape[0]) if segment else None
    jobs = [(i, k) for i in reversed(range(L)) for k in range(native[i], 0, -1)]
    for i, k in tqdm(jobs, desc="Alloc-L profile", disable=not progress, leave=False):
        ks = [native[j] if j < i else 1 for j in range(L)]
        ks[i] = k
        nll, _ = evaluate(model, calib, R.topk(ks), batch_blocks=batch_blocks, segment=segment)
        if segment:
            if parts is None:
                parts = np.full((L, K, len(nll)), np.nan)
            parts[i, k - 1] = nll
            S[i, k - 1] = math.exp(float(np.average(nll, weights=weights)))
        else:
            S[i, k - 1] = ppl(nll)
    # a layer with a smaller native k cannot take more: pad its row so the DP never picks beyond it
    for i in range(L):
        if native[i] < K:
            S[i, native[i]:] = np.inf
    return (S, parts) if segment else S


def _segment_weights(tokens: int, segment: int, blocks: int) -> np.ndarray:
    """Tokens in each segment of :func:`evaluate`'s ``segment`` output (block after block)."""
    one = [min(segment, tokens - s) for s in range(0, tokens, segment)]
    return np.tile(np.asarray(one, dtype=np.float64), blocks)


def allocation_bootstrap(parts: np.ndarray, weights: np.ndarray, budget: int, fn, *, n_resamples: int,
                         seed: int = 0, level: float = 0.95) -> stats.Interval:
    """A percentile bootstrap of ``fn(allocation)`` over the calibration segments of a profile: each
    resample draws the segments with replacement, re-derives S (the token-weighted mean NLL of the drawn
    segments, as a perplexity; +inf where the profile has none) and allocates ``budget`` by the DP.
    The estimate is ``fn`` of the allocation from all the segments."""
    L, K, n = parts.shape
    rng = np.random.default_rng(seed)

    def from_idx(ix):
        w = weights[ix]
        with np.errstate(invalid="ignore"):
            S = np.exp((parts[:, :, ix] * w).sum(axis=2) / w.sum())
        return fn(allocate(np.where(np.isnan(S), np.inf, S), budget))

    est = float(from_idx(np.arange(n)))
    draws = np.array([from_idx(rng.integers(0, n, n)) for _ in range(n_resamples)], dtype=np.float64)
    a = (1 - level) / 2
    lo, hi = (float(v) for v in np.quantile(draws, [a, 1 - a]))
    return stats.Interval(est, min(lo, est), max(hi, est), level, "bootstrap over calibration segments", n)


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
    full_nll, full_counter = evaluate(model, tx["eval"], None, batch_blocks=bb)
    out = {"native": native, "S": S, "S_parts": S_parts, "S_weights": _segment_weights(calib.shape[1] - 1, SEGMENT, len(calib)),
           "S_alt": S_alt, "S_rand": S_rand, "lexi": lexi, "full_nll": full_nll,
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
    out["nll_alt"] = _alloc_l_nll(model, tx["eval"], al_alt, al, out["nll"][(kh, "alloc-l")], bb)
    al_rand = allocate(S_rand, kh * L)
    out["alloc_rand"] = al_rand
    out["nll_rand"] = _alloc_l_nll(model, tx["eval"], al_rand, al, out["nll"][(kh, "alloc-l")], bb)
    # the experts_matter control: uniform top-1 against the native top-k (already scored if 1 is a budget)
    out["top1_nll"] = out["nll"][(1, "uniform")] if (1, "uniform") in out["nll"] else \
        evaluate(model, tx["eval"], R.topk([1] * L), batch_blocks=bb)[0]
    out["alloc_main"] = al
    out["seconds"] = time.perf_counter() - t0
    return out


def _alloc_l_nll(model, blocks, ks, main_ks, main_nll, batch_blocks):
    """Per-block NLLs of Alloc-L at allocation ``ks``; the main allocation's when it is the same one."""
    if list(ks) == list(main_ks):
        return np.array(main_nll, copy=True)
    return evaluate(model, blocks, R.topk(ks), batch_blocks=batch_blocks)[0]


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
    """The half-budget headline on one model: uniform vs Alloc-L+T (profiled on the calibration text), the
    native top-k and uniform top-1 (the ``experts_matter`` control), per-block NLLs, and the allocation."""
    native = R.native_k(model)
    L = len(native)
    kh = half_budget(params, min(native))
    S = profile_sensitivity(model, tx[params["calib_source"]], batch_blocks=params["batch_blocks"], progress=progress)
    al = allocate(S, kh * L)
    u, _ = evaluate(model, tx["eval"], R.topk([kh] * L), batch_blocks=params["batch_blocks"])
    lt, _ = evaluate(model, tx["eval"], R.alloc_t(al, min(params["k_base"], min(al))), batch_blocks=params["batch_blocks"])
    full, _ = evaluate(model, tx["eval"], None, batch_blocks=params["batch_blocks"])
    top1, _ = evaluate(model, tx["eval"], R.topk([1] * L), batch_blocks=params["batch_blocks"])
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


def seed_table(seeds: dict, info: dict, n_resamples: int) -> list[dict]:
    """One row per model of a headline (``{seed: headline}``): perplexities, the Alloc-L+T / uniform
    ratio with its paired bootstrap over blocks, the top-1 / native ratio (``experts_matter``) and the
    allocation. ``info``: ``{seed: description}`` (its ``val_ppl``, where there is one)."""
    rows = []
    for s, r in seeds.items():
        iv = stats.paired_bootstrap(r["alloc-l+t"], r["uniform"], "ppl_ratio", n_resamples=n_resamples)
        rows.append({"seed": s, "val ppl (models page)": info.get(s, {}).get("val_ppl"),
                     "native ppl": ppl(r["full"]), "top-1 ppl": ppl(r["top1"]), "top-1 / native": ppl(r["top1"]) / ppl(r["full"]),
                     "uniform ppl": ppl(r["uniform"]), "Alloc-L+T ppl": ppl(r["alloc-l+t"]), "ratio": iv.estimate,
                     "lo": iv.lo, "hi": iv.hi, "allocation": r["alloc"]})
    return rows


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
# benchmarks


def benchmarks(quick: bool = False) -> dict:
    """``acl26 bench alloc_moe``: the DP against pure Python and scipy's MILP; the real-shape layer."""
    from acl26.papers.alloc_moe import bench

    return bench.benchmarks(quick)
