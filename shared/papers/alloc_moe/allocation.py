"""Alloc-MoE: how each method spends an activation budget.

Scoring under a routing policy (:func:`evaluate`, per-block or per-segment mean NLLs), Alloc-L's
isolated sensitivity profile (:func:`profile_sensitivity`) and its DP allocation (:func:`allocate`,
over :func:`acl26.kernels.dp_alloc.allocate`), the LExI-style data-free costs (:func:`lexi_costs`),
top-p's and skipping's thresholds matched to a budget (:func:`match_threshold`), and every method's
policy at a budget (:func:`methods_at`, the methods of :data:`METHODS`). The routing policies
themselves are :mod:`.routing`; :mod:`.study` runs these on the subjects.

**Cached prefixes** (:class:`Prefix`, :func:`capture_prefix`). Every policy routes only the MoE layers, so
the decoder layers before a policy's first change compute the same hidden states under every policy. The
chapter scores the same blocks under dozens of policies (and profiles each layer with every shallower layer
at its native top-k), so it computes those states once per set of blocks, batch by batch as the scoring
batches them, and runs each later forward from there (``inputs_embeds`` into the decoder layers from
``start`` on). The same operations run on the same inputs in the same batches, so the figures are the ones a
full forward gives, bit for bit (tested); :func:`evaluate` refuses a prefix that a policy would change.
"""

from __future__ import annotations

import math

import numpy as np
import torch

import contextlib
from dataclasses import dataclass

from acl26.kernels import dp_alloc
from acl26.papers.alloc_moe import routing as R

#: the methods compared at every budget, in table order
METHODS = ("uniform", "lexi", "top-p", "skip", "alloc-l", "alloc-t", "alloc-l+t")


# --------------------------------------------------------------------------------------------
# cached prefixes


def decoder_layers(model) -> torch.nn.ModuleList:
    """The decoder layers of a causal LM in the LLaMA layout (``model.model.layers``)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise ValueError(f"{type(model).__name__} has no decoder layers at model.model.layers")
    return layers


def moe_depths(model) -> list[int]:
    """The decoder layer that holds each MoE block (:func:`.routing.moe_blocks` order)."""
    owner = {id(m): d for d, layer in enumerate(decoder_layers(model)) for m in layer.modules()}
    out = []
    for b in R.moe_blocks(model):
        if id(b) not in owner:
            raise ValueError(f"a MoE block of {type(model).__name__} lies outside its decoder layers")
        out.append(owner[id(b)])
    return out


@dataclass(frozen=True)
class Prefix:
    """The hidden states entering decoder layer ``s`` (for each ``s`` of ``states``) of ``blocks``, one tensor
    per batch of ``batch_blocks`` blocks, computed under the native routing whose per-MoE-layer top-k was
    ``native`` (:func:`capture_prefix`)."""

    blocks: torch.Tensor
    batch_blocks: int
    states: dict[int, list[torch.Tensor]]
    native: tuple[int, ...]


class _Stop(Exception):
    """Raised by a hook to end a forward pass early (its remaining layers are not needed)."""


@contextlib.contextmanager
def _stop_at(model, depth: int | None):
    """Inside the block, a forward pass ends on entering decoder layer ``depth`` (raising :class:`_Stop`);
    None or a depth past the last layer: it runs to the end."""
    layers = decoder_layers(model)
    if depth is None or depth >= len(layers):
        yield
        return

    def stop(module, args, kwargs):
        raise _Stop

    handle = layers[depth].register_forward_pre_hook(stop, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


@torch.no_grad()
def capture_prefix(model, blocks: torch.Tensor, *, batch_blocks: int, starts) -> Prefix:
    """The hidden states entering each decoder layer of ``starts`` for ``blocks``, batch by batch as
    :func:`evaluate` batches them, under the native routing (:func:`.routing.budgeted` with no policy, as
    :func:`evaluate` routes it). The pass stops at the deepest start."""
    layers = decoder_layers(model)
    starts = sorted({int(s) for s in starts})
    if not starts or starts[0] < 0 or starts[-1] >= len(layers):
        raise ValueError(f"starts must be decoder layers 0..{len(layers) - 1}, got {starts}")
    states: dict[int, list[torch.Tensor]] = {s: [] for s in starts}

    def keep(depth):
        def hook(module, args, kwargs):
            h = args[0] if args else kwargs["hidden_states"]
            states[depth].append(h.detach().clone())
        return hook

    handles = [layers[s].register_forward_pre_hook(keep(s), with_kwargs=True) for s in starts]
    model.eval()
    try:
        with R.budgeted(model, None), _stop_at(model, starts[-1] + 1):
            for i in range(0, len(blocks), batch_blocks):
                try:
                    model(input_ids=blocks[i:i + batch_blocks], use_cache=False)
                except _Stop:
                    pass
    finally:
        for h in handles:
            h.remove()
    return Prefix(blocks.clone(), int(batch_blocks), states, tuple(R.native_k(model)))


def _check_prefix(model, prefix: Prefix, start: int, blocks: torch.Tensor, batch_blocks: int,
                  policy: R.Policy | None) -> None:
    """A prefix is used only where it is the forward's own: the same blocks and batches, the model's native
    top-k unchanged in the MoE layers before ``start``, which ``policy`` must leave at their native top-k."""
    if start not in prefix.states:
        raise ValueError(f"prefix holds decoder layers {sorted(prefix.states)}, not {start}")
    if prefix.batch_blocks != batch_blocks or not torch.equal(prefix.blocks, blocks):
        raise ValueError("prefix was captured on other blocks or batches than the ones scored")
    native = R.native_k(model)
    before = [j for j, d in enumerate(moe_depths(model)) if d < start]
    if any(native[j] != prefix.native[j] for j in before):
        raise ValueError("the native top-k of a MoE layer before the prefix's start changed since it was captured")
    if before and policy is not None and not (policy.kind == "topk" and all(policy.ks[j] == native[j] for j in before)):
        raise ValueError(f"policy {policy.kind!r} changes a MoE layer before decoder layer {start}: "
                         "the cached prefix would not be its forward")


@contextlib.contextmanager
def _from(model, start: int):
    """Inside the block the model runs decoder layers ``start`` on (fed ``inputs_embeds``: the prefix's states)."""
    base = model.model
    full = base.layers
    base.layers = torch.nn.ModuleList(list(full)[start:])
    try:
        yield
    finally:
        base.layers = full


def _batches(blocks, batch_blocks, prefix: Prefix | None, start: int | None):
    """``(input ids, forward kwargs, start)`` per batch: the ids, or the prefix's states from ``start``."""
    for b, i in enumerate(range(0, len(blocks), batch_blocks)):
        x = blocks[i:i + batch_blocks]
        if prefix is None:
            yield x, {"input_ids": x}
        else:
            yield x, {"inputs_embeds": prefix.states[start][b]}


def _first_start(prefix: Prefix | None, start: int | None) -> int | None:
    if prefix is None:
        if start is not None:
            raise ValueError("start needs a prefix")
        return None
    return min(prefix.states) if start is None else int(start)


# --------------------------------------------------------------------------------------------
# scoring under a policy


@torch.no_grad()
def evaluate(model, blocks: torch.Tensor, policy: R.Policy | None, *, batch_blocks: int,
             per_token: bool = False, segment: int | None = None, prefix: Prefix | None = None,
             start: int | None = None) -> tuple[np.ndarray, R.Counter]:
    """Per-block mean next-token NLL (nats) of ``blocks`` under ``policy``, and the activation counter.
    ``segment``: per-segment means instead, each block's predicted tokens cut into runs of ``segment``
    (the last may be shorter), block after block: the units a bootstrap over calibration text resamples.
    ``prefix`` (:func:`capture_prefix` on these blocks and batches): run from its decoder layer ``start``
    (default: its shallowest) on; the same figures, and counts of the MoE layers from ``start`` on."""
    import torch.nn.functional as F

    model.eval()
    start = _first_start(prefix, start)
    if prefix is not None:
        _check_prefix(model, prefix, start, blocks, batch_blocks, policy)
    blocks_ = R.moe_blocks(model)
    counter = R.Counter(len(blocks_), [R.num_experts(b) for b in blocks_], per_token=per_token)
    out = []
    with R.budgeted(model, policy, counter), (_from(model, start) if prefix is not None else contextlib.nullcontext()):
        for x, inputs in _batches(blocks, batch_blocks, prefix, start):
            logits = model(**inputs, use_cache=False).logits[:, :-1].float()
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
    # every pass of layer i runs the shallower layers at their native top-k: their states are cached once
    depths = moe_depths(model)
    prefix = capture_prefix(model, calib, batch_blocks=batch_blocks, starts=depths)
    for i, k in tqdm(jobs, desc="Alloc-L profile", disable=not progress, leave=False):
        ks = [native[j] if j < i else 1 for j in range(L)]
        ks[i] = k
        nll, _ = evaluate(model, calib, R.topk(ks), batch_blocks=batch_blocks, segment=segment, prefix=prefix,
                          start=depths[i])
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


def measured_budget(model, blocks: torch.Tensor, policy: R.Policy, batch_blocks: int, *,
                    prefix: Prefix | None = None) -> float:
    """Σ over layers of the mean experts per token under ``policy`` (a forward pass up to the last MoE layer;
    no loss). ``prefix``: from its shallowest layer on, which must lie at or before the first MoE layer."""
    start = _first_start(prefix, None)
    depths = moe_depths(model)
    if prefix is not None:
        if start > depths[0]:
            raise ValueError(f"a budget counts every MoE layer: the prefix starts at {start}, after the first ({depths[0]})")
        _check_prefix(model, prefix, start, blocks, batch_blocks, policy)
    blocks_ = R.moe_blocks(model)
    counter = R.Counter(len(blocks_), [R.num_experts(b) for b in blocks_])
    # the pass ends on entering the layer after the last MoE one (numbered within the layers it runs)
    stop = depths[-1] + 1 - (start or 0)
    with torch.no_grad(), R.budgeted(model, policy, counter), \
            (_from(model, start) if prefix is not None else contextlib.nullcontext()), _stop_at(model, stop):
        for _, inputs in _batches(blocks, batch_blocks, prefix, start):
            try:
                model(**inputs, use_cache=False)
            except _Stop:
                pass
    return counter.experts_per_token()


def match_threshold(model, blocks: torch.Tensor, kind: str, budget: float, *, iters: int,
                    batch_blocks: int, prefix: Prefix | None = None) -> tuple[float, float]:
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
        got = measured_budget(model, blocks, pol, batch_blocks, prefix=prefix)
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
