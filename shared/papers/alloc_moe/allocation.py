"""Alloc-MoE: how each method spends an activation budget.

Scoring under a routing policy (:func:`evaluate`, per-block or per-segment mean NLLs), Alloc-L's
isolated sensitivity profile (:func:`profile_sensitivity`) and its DP allocation (:func:`allocate`,
over :func:`acl26.kernels.dp_alloc.allocate`), the LExI-style data-free costs (:func:`lexi_costs`),
top-p's and skipping's thresholds matched to a budget (:func:`match_threshold`), and every method's
policy at a budget (:func:`methods_at`, the methods of :data:`METHODS`). The routing policies
themselves are :mod:`.routing`; :mod:`.study` runs these on the subjects.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from acl26.kernels import dp_alloc
from acl26.papers.alloc_moe import routing as R

#: the methods compared at every budget, in table order
METHODS = ("uniform", "lexi", "top-p", "skip", "alloc-l", "alloc-t", "alloc-l+t")


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


def segment_weights(tokens: int, segment: int, blocks: int) -> np.ndarray:
    """Tokens in each segment of :func:`evaluate`'s ``segment`` output (block after block)."""
    one = [min(segment, tokens - s) for s in range(0, tokens, segment)]
    return np.tile(np.asarray(one, dtype=np.float64), blocks)


# --------------------------------------------------------------------------------------------
# Alloc-L: isolated sensitivity profiling, then the DP


def profile_sensitivity(model, calib: torch.Tensor, *, batch_blocks: int, progress: bool = True,
                        segment: int | None = None):
    """Alloc-L's isolated profile S (L, K): S[i, k-1] is the calibration perplexity with layer ``i`` at
    top-``k``, every deeper layer at top-1 and every shallower layer at its native top-k. Layers are
    profiled deep to shallow; L·K evaluations.

    With ``segment``, returns ``(S, parts)``: ``parts[i, k-1]`` the mean NLLs of the calibration text's
    segments of ``segment`` tokens (:func:`evaluate`), so that S can be re-derived on resampled
    segments (:func:`acl26.papers.alloc_moe.tables.allocation_bootstrap`); NaN where S is +inf."""
    from tqdm.auto import tqdm

    native = R.native_k(model)
    L, K = len(native), max(native)
    S = np.full((L, K), np.nan)
    parts = None
    weights = segment_weights(calib.shape[1] - 1, segment, calib.shape[0]) if segment else None
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
            S[i, k - 1] = math.exp(float(np.mean(nll)))  # the perplexity (acl26.papers.alloc_moe.tables.ppl)
    # a layer with a smaller native k cannot take more: pad its row so the DP never picks beyond it
    for i in range(L):
        if native[i] < K:
            S[i, native[i]:] = np.inf
    return (S, parts) if segment else S


def allocate(cost: np.ndarray, budget: int) -> list[int]:
    """The DP allocation (:func:`acl26.kernels.dp_alloc.allocate`); costs beyond a layer's native k (+inf)
    are excluded. NaN or −inf in ``cost`` raises (it would otherwise be taken for an excluded count)."""
    cost = np.asarray(cost, dtype=np.float64)
    if np.isnan(cost).any() or np.isneginf(cost).any():
        raise ValueError("cost holds NaN or -inf (+inf marks a count beyond a layer's native k)")
    c = np.where(np.isfinite(cost), cost, np.nanmax(np.where(np.isfinite(cost), cost, -np.inf)) * 1e6 + 1e6)
    return [int(k) for k in dp_alloc.allocate(c, budget)]


# --------------------------------------------------------------------------------------------
# LExI-style data-free costs


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
# every method at a budget


def methods_at(k: int, L: int, *, s_alloc: np.ndarray, lexi: np.ndarray, k_base: int,
               thresholds: dict[str, float]) -> dict[str, R.Policy]:
    """Every method's policy at the budget ``k * L`` (uniform-equivalent ``k``)."""
    B = k * L
    al = allocate(s_alloc, B)
    kb = min(k_base, min(al), k)
    return {"uniform": R.topk([k] * L), "lexi": R.topk(allocate(lexi, B)), "top-p": R.topp(thresholds["top-p"]),
            "skip": R.skip(thresholds["skip"]), "alloc-l": R.topk(al), "alloc-t": R.alloc_t([k] * L, min(k_base, k)),
            "alloc-l+t": R.alloc_t(al, kb)}
