"""Routing under an activation budget, for the ``transformers`` MoE families (Qwen2/3-MoE, OLMoE,
Mixtral, DeepSeek-V2).

Every one of those families has, in transformers 5.x, an MoE block with a ``gate`` (the router)
whose ``top_k`` attribute is the native expert count and whose forward returns ``(router_logits,
weights, indices)`` with ``weights`` and ``indices`` of shape (T, top_k), and an ``experts``
module that takes those indices and weights. :func:`budgeted` wraps each router for the duration
of a ``with`` block: the router runs as it would (top-``K_orig``, the model's own gate weights,
its own normalisation, which for our MoE is none, ``norm_topk_prob=False``), and a **policy** then
drops some of those ``K_orig`` candidates per token. A dropped slot gets the sentinel index ``E``
(one past the last expert) and weight 0. The eager experts loop of transformers 5.x skips index
``E``; in 5.24 the default ``grouped_mm`` path and ``batched_mm`` handle the sentinel only under
expert parallelism (NaN rows and an index error otherwise), so inside :func:`budgeted` the experts
run eagerly, and the tests check the result against plain truncation (``gate.top_k = k``) on every
path. Kept weights are not renormalised unless the router itself normalises its top-k (Mixtral;
``norm_topk_prob=True``), in which case the kept ones are normalised as that router would at the
smaller k; our MoE has ``norm_topk_prob=False``, so its kept weights are the router's own. (The speed section times its own grouped forward and
HF's ``grouped_mm`` at plain top-k; see :mod:`.speed`.)

Policies (all drop only from the native top-``K_orig``):

* ``topk``: per-layer top-``k_l`` (uniform, LExI-style or Alloc-L allocations);
* ``topp``: Dynamic-MoE top-p: sort the full softmax, keep experts until the cumulative
  probability first exceeds ``p`` (the crossing expert kept), capped at ``K_orig``;
* ``skip``: NAEE-style dynamic skipping, generalised from top-2: the expert ranked ``j >= 2``
  is kept when its weight is at least ``beta`` times the top-1 weight;
* ``alloc_t``: Alloc-T (:func:`alloc_t_mask`) at ``k_l`` per layer, over the T tokens of the
  forward batch.

A :class:`Counter` records, per layer, the real number of activated (token, expert) pairs (the
ground truth of every budget), the expert loads, and optionally each token's expert count and
routing entropy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from acl26 import checks

POLICIES = ("topk", "topp", "skip", "alloc_t")


# --------------------------------------------------------------------------------------------
# Alloc-T


def alloc_t_mask(scores, k, *, k_base=1, k_max):
    """Alloc-T's token-level selection over a batch: a boolean (T, E) mask of exactly ``k * T`` pairs.

    Each of the T tokens keeps its top-``k_base`` experts by ``scores`` (shape (T, E)). The
    candidates each token ranks ``k_base + 1 … k_max`` are pooled across the batch and the
    ``(k - k_base) * T`` highest-scoring of them are kept, so every token ends with between
    ``k_base`` and ``k_max`` experts and the layer spends exactly ``k * T``. With ``k_base == k``,
    ``k == k_max`` or ``T == 1`` it is exactly top-``k``.

    Ties break by expert index (within a token's ranking, and in the pool the lower expert index
    wins), then by token index (in the pool, the earlier token wins). ``scores`` may be a torch
    tensor (the mask is a torch bool tensor on its device) or anything numpy reads (the mask is a
    numpy bool array). Raises ValueError naming the problem for a non-2-D or non-finite ``scores``
    and for counts outside ``0 <= k_base <= k <= k_max <= E``.
    """
    is_torch = isinstance(scores, torch.Tensor)
    s = scores.detach() if is_torch else torch.as_tensor(_as_real_array(scores))
    if s.ndim != 2:
        raise ValueError(f"scores must be 2-D (tokens, experts), got shape {tuple(s.shape)}")
    if s.dtype == torch.bool or s.is_complex():
        raise ValueError(f"scores must hold real numbers, got dtype {s.dtype}")
    T, E = s.shape
    k_max = checks.integer("k_max", k_max, 0, E)
    k = checks.integer("k", k, 0, k_max)
    k_base = checks.integer("k_base", k_base, 0, k)
    if s.numel() and not bool(torch.isfinite(s.float() if not s.is_floating_point() else s).all()):
        raise ValueError("scores must be finite (no NaN or infinity)")
    mask = _alloc_t(s, k, k_base, k_max)
    return mask if is_torch else mask.cpu().numpy()


def _as_real_array(x) -> np.ndarray:
    try:
        arr = np.asarray(x)
    except Exception as exc:
        raise ValueError(f"scores must be a 2-D array of real numbers: {exc}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"scores must hold real numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError("scores must hold real numbers, got complex values")
    if arr.dtype == np.float16 or np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        arr = arr.astype(np.float64)
    return arr


def _rank_desc(s: torch.Tensor) -> torch.Tensor:
    """Per row, the expert indices from highest to lowest score, ties by lower expert index."""
    return torch.sort(s, dim=1, descending=True, stable=True).indices


def _alloc_t(s: torch.Tensor, k: int, k_base: int, k_max: int) -> torch.Tensor:
    T, E = s.shape
    mask = torch.zeros((T, E), dtype=torch.bool, device=s.device)
    if T == 0 or k == 0:
        return mask
    order = _rank_desc(s)
    rows = torch.arange(T, device=s.device)
    if k_base:
        mask[rows[:, None], order[:, :k_base]] = True
    extra = (k - k_base) * T
    if extra == 0:
        return mask
    cand_e = order[:, k_base:k_max].reshape(-1)  # token-major, within a token by rank
    cand_t = rows[:, None].expand(T, k_max - k_base).reshape(-1)
    cand_s = s[cand_t, cand_e]
    # lexicographic (-score, expert, token) by stable sorts from the last key to the first
    perm = torch.sort(cand_t, stable=True).indices
    perm = perm[torch.sort(cand_e[perm], stable=True).indices]
    perm = perm[torch.sort(cand_s[perm], descending=True, stable=True).indices]
    pick = perm[:extra]
    mask[cand_t[pick], cand_e[pick]] = True
    return mask


# --------------------------------------------------------------------------------------------
# the MoE blocks of a model


def moe_blocks(model) -> list[torch.nn.Module]:
    """The MoE blocks of ``model`` in depth order: modules with a ``gate`` that has ``top_k`` and an
    ``experts`` module (Qwen2/3-MoE, OLMoE, Mixtral, DeepSeek-V2 in transformers 5.x)."""
    found = [m for m in model.modules()
             if hasattr(m, "experts") and hasattr(getattr(m, "gate", None), "top_k")]
    if not found:
        raise ValueError(f"{type(model).__name__} has no MoE blocks (a module with `gate.top_k` and `experts`)")
    return found


def num_experts(block) -> int:
    gate = block.gate
    for name in ("num_experts", "n_routed_experts"):
        if isinstance(getattr(gate, name, None), int):
            return getattr(gate, name)
    return int(gate.weight.shape[0])


def native_k(model) -> list[int]:
    """Each MoE block's native ``top_k`` (K_orig)."""
    return [int(b.gate.top_k) for b in moe_blocks(model)]


# --------------------------------------------------------------------------------------------
# policies


@dataclass(frozen=True)
class Policy:
    """How many of the native top-``K_orig`` candidates each token keeps in each layer.

    ``kind``: one of :data:`POLICIES`. ``ks``: one ``k_l`` per MoE layer (``topk``, ``alloc_t``);
    ``p`` (``topp``), ``beta`` (``skip``), ``k_base`` (``alloc_t``).
    """

    kind: str
    ks: tuple[int, ...] | None = None
    p: float | None = None
    beta: float | None = None
    k_base: int = 1
    label: str = ""

    def __post_init__(self):
        if self.kind not in POLICIES:
            raise ValueError(f"kind must be one of {POLICIES}, got {self.kind!r}")
        if self.kind in ("topk", "alloc_t"):
            if self.ks is None or len(self.ks) == 0:
                raise ValueError(f"a {self.kind!r} policy needs ks (one k per MoE layer)")
            object.__setattr__(self, "ks", tuple(checks.integer("ks[i]", k, 1) for k in self.ks))
        if self.kind == "topp":
            if self.p is None:
                raise ValueError("p must be in (0, 1], got None")
            checks.probability("p", self.p, lo_open=True)
        if self.kind == "skip":
            if self.beta is None:
                raise ValueError("beta must be in [0, 1], got None")
            checks.probability("beta", self.beta)
        if self.kind == "alloc_t":
            checks.integer("k_base", self.k_base, 0)
            if self.k_base > min(self.ks):
                raise ValueError(f"k_base ({self.k_base}) must not exceed any layer's k (min {min(self.ks)})")

    def budget(self) -> int | None:
        """Σ k_l for the fixed-count policies (None for top-p and skipping, whose count is measured)."""
        return sum(self.ks) if self.ks is not None else None


def topk(ks: Sequence[int], label: str = "") -> Policy:
    return Policy("topk", ks=tuple(ks), label=label)


def alloc_t(ks: Sequence[int], k_base: int = 1, label: str = "") -> Policy:
    return Policy("alloc_t", ks=tuple(ks), k_base=k_base, label=label)


def topp(p: float, label: str = "") -> Policy:
    return Policy("topp", p=float(p), label=label)


def skip(beta: float, label: str = "") -> Policy:
    return Policy("skip", beta=float(beta), label=label)


def keep_slots(policy: Policy, layer: int, logits: torch.Tensor, weights: torch.Tensor,
               indices: torch.Tensor, num_experts: int) -> torch.Tensor:
    """The (T, K_orig) boolean keep mask over the router's slots (sorted by weight, descending).

    ``weights`` and ``indices`` are the router's top-``K_orig`` output sorted descending by weight
    (ties by expert index); ``logits`` its (T, E) logits.
    """
    T, K = weights.shape
    ranks = torch.arange(K, device=weights.device)
    if policy.kind == "topk":
        k = policy.ks[layer]
        return (ranks < min(k, K)).expand(T, K)
    if policy.kind == "topp":
        probs = torch.softmax(logits.float(), dim=-1)
        sp = torch.sort(probs, dim=-1, descending=True).values
        cum = torch.cumsum(sp, dim=-1)
        # experts kept: up to and including the first whose cumulative sum exceeds p
        n = (cum <= float(policy.p)).sum(dim=-1) + 1
        n = n.clamp(max=K)
        return ranks[None, :] < n[:, None]
    if policy.kind == "skip":
        w = weights.float()
        keep = w >= float(policy.beta) * w[:, :1]
        keep[:, 0] = True
        return keep
    # alloc_t: ranking by the router's weights among the K_orig candidates
    k = min(policy.ks[layer], K)
    w = weights.double()
    # experts outside the router's top-K score below every candidate, so only candidates are ranked
    full = torch.full((T, num_experts), (float(w.min()) if w.numel() else 0.0) - 1.0, dtype=torch.float64,
                      device=weights.device)
    full.scatter_(1, indices, w)
    mask = _alloc_t(full, k, min(policy.k_base, k), K)
    return mask.gather(1, indices)


# --------------------------------------------------------------------------------------------
# counting


@dataclass
class Counter:
    """Per MoE layer: tokens routed, activated (token, expert) pairs, expert loads; optionally each
    token's expert count and routing entropy (``per_token=True``)."""

    n_layers: int
    n_experts: list[int]
    per_token: bool = False
    tokens: list[int] = field(default_factory=list)
    pairs: list[int] = field(default_factory=list)
    load: list[np.ndarray] = field(default_factory=list)
    token_counts: list[list[np.ndarray]] = field(default_factory=list)
    token_entropy: list[list[np.ndarray]] = field(default_factory=list)

    def __post_init__(self):
        self.tokens = [0] * self.n_layers
        self.pairs = [0] * self.n_layers
        self.load = [np.zeros(e, dtype=np.int64) for e in self.n_experts]
        self.token_counts = [[] for _ in range(self.n_layers)]
        self.token_entropy = [[] for _ in range(self.n_layers)]

    def add(self, layer: int, logits: torch.Tensor, kept_idx: torch.Tensor, keep: torch.Tensor) -> None:
        E = self.n_experts[layer]
        self.tokens[layer] += int(keep.shape[0])
        self.pairs[layer] += int(keep.sum())
        ids = kept_idx[keep]
        self.load[layer] += np.bincount(ids.cpu().numpy(), minlength=E)[:E]
        if self.per_token:
            self.token_counts[layer].append(keep.sum(dim=1).cpu().numpy())
            p = torch.softmax(logits.float(), dim=-1)
            self.token_entropy[layer].append((-(p * torch.log(p.clamp_min(1e-30))).sum(dim=-1)).cpu().numpy())

    def per_layer(self) -> list[float]:
        """Mean experts per token in each layer (pairs / tokens)."""
        return [p / t if t else float("nan") for p, t in zip(self.pairs, self.tokens)]

    def experts_per_token(self) -> float:
        """Σ over layers of the mean experts per token: the measured budget."""
        return float(sum(self.per_layer()))

    def load_share(self) -> list[np.ndarray]:
        return [l / l.sum() if l.sum() else l.astype(float) for l in self.load]

    def summary(self) -> dict:
        return {"per_layer": self.per_layer(), "budget": self.experts_per_token(), "pairs": list(self.pairs),
                "tokens": list(self.tokens)}


# --------------------------------------------------------------------------------------------
# installing a policy


def renormalises(gate, weights: torch.Tensor) -> bool:
    """Whether the router normalises its top-k weights: its ``norm_topk_prob`` where it has one
    (Qwen2/3-MoE, OLMoE), else whether every token's weights sum to 1 (Mixtral always normalises;
    DeepSeek-V2 scales by ``routed_scaling_factor`` and does not)."""
    flag = getattr(gate, "norm_topk_prob", None)
    if isinstance(flag, bool):
        return flag
    if weights.numel() == 0:
        return False
    return bool(torch.allclose(weights.float().sum(dim=-1), torch.ones(weights.shape[0]), atol=1e-4))


def route_scores(gate, logits: torch.Tensor, indices: torch.Tensor,
                 weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logits, scores)`` the policies read: the router's (T, E) logits and each kept slot's score.

    For a softmax router (every transformers MoE family) the scores are its gate weights and the
    logits are its own. A router whose gate has ``scores_are_logits`` (a MoEfied MLP: its kept
    experts are summed unweighted, every weight 1) routes by a non-negative score per expert, its
    logit (the expert's predicted activation mass): the scores are those, clamped at 0, and the
    logits their logarithm, so that top-p and the routing entropy read each expert's share of the
    token's total score rather than a softmax of it. The slot scores are those shares too: each kept
    expert's mass over the token's total, the gate probability a softmax router's weights are. Skipping
    compares each score with the token's top one (unchanged by the division), and Alloc-T pools the
    shares across the batch's tokens, as the paper ranks candidates by gate probability, so a confident
    token gives up slots to uncertain ones (issue 40, point 6; before, Alloc-T pooled the raw masses,
    which sent extra slots to tokens with large activations instead)."""
    if not getattr(gate, "scores_are_logits", False):
        return logits, weights
    mass = logits.float().clamp_min(0.0)
    share = mass / mass.sum(dim=-1, keepdim=True).clamp_min(1e-30)
    return torch.log(mass.clamp_min(1e-30)), share.gather(-1, indices).to(weights.dtype)


def _wrap(block, layer: int, policy: Policy, counter: Counter | None, original):
    E = num_experts(block)

    def forward(hidden_states, *args, **kwargs):
        out = original(hidden_states, *args, **kwargs)
        logits, weights, indices = out[0], out[1], out[2]
        # sort the candidates by weight, ties by the router's logit, then by expert index (DeepSeek-V2's topk
        # is unsorted; a MoEfied router gives every kept expert weight 1, so its logits order the candidates)
        logits2 = logits.reshape(-1, logits.shape[-1])
        by_index = torch.sort(indices, dim=-1, stable=True)
        indices, weights = by_index.values, weights.gather(-1, by_index.indices)
        order = torch.sort(logits2.gather(-1, indices), dim=-1, descending=True, stable=True).indices
        indices, weights = indices.gather(-1, order), weights.gather(-1, order)
        # what the policies rank by: the gate weights, or, for a router whose kept experts are summed
        # unweighted (a MoEfied MLP), the scores it routed by (see scores_are_logits)
        route_logits, scores = route_scores(block.gate, logits2, indices, weights)
        order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
        indices, weights, scores = indices.gather(-1, order), weights.gather(-1, order), scores.gather(-1, order)
        keep = keep_slots(policy, layer, route_logits, scores, indices, E)
        if counter is not None:
            counter.add(layer, route_logits, indices, keep)
        indices = torch.where(keep, indices, torch.full_like(indices, E))
        kept = torch.where(keep, weights, torch.zeros_like(weights))
        if renormalises(block.gate, weights):
            # a router that normalises its top-k (Mixtral; norm_topk_prob=True) normalises what is kept,
            # as it would at that k: the kept weights are rescaled to the sum the router gave
            total = weights.sum(dim=-1, keepdim=True)
            kept = kept * (total / kept.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(kept.dtype).tiny))
        weights = kept
        return (logits, weights, indices, *out[3:])

    return forward


@contextlib.contextmanager
def budgeted(model, policy: Policy | None, counter: Counter | None = None) -> Iterator[Counter]:
    """Route ``model`` under ``policy`` inside the ``with`` block (None: the native top-k, counted).

    Yields the :class:`Counter` (a fresh one unless given). The routers are restored on exit, also
    after an exception.
    """
    blocks = moe_blocks(model)
    if policy is not None and policy.ks is not None and len(policy.ks) != len(blocks):
        raise ValueError(f"policy has {len(policy.ks)} per-layer counts but the model has {len(blocks)} MoE layers")
    if policy is not None and policy.ks is not None:
        for i, (k, b) in enumerate(zip(policy.ks, blocks)):
            if k > b.gate.top_k:
                raise ValueError(f"layer {i}: k = {k} exceeds the native top_k {b.gate.top_k} (policies only drop experts)")
    if counter is None:
        counter = Counter(len(blocks), [num_experts(b) for b in blocks])
    pol = policy if policy is not None else topk(native_k(model))
    saved, impls = [], []
    try:
        # dropped slots carry the sentinel index E: the eager experts loop skips it exactly, while in
        # transformers 5.24 grouped_mm and batched_mm handle it only under expert parallelism (NaN
        # rows, an index error), so the experts run eagerly inside the block (tested against truncation)
        for cfg in {id(c): c for c in (getattr(b.experts, "config", None) for b in blocks) if c is not None}.values():
            impl = getattr(cfg, "_experts_implementation", None)
            if impl not in (None, "eager"):
                impls.append((cfg, impl))
                cfg._experts_implementation = "eager"
        for i, b in enumerate(blocks):
            had = "forward" in b.gate.__dict__
            saved.append((b.gate, had, b.gate.__dict__.get("forward")))
            b.gate.forward = _wrap(b, i, pol, counter, b.gate.forward)
        yield counter
    finally:
        for gate, had, fwd in saved:
            if had:
                gate.forward = fwd
            else:
                del gate.forward
        for cfg, impl in impls:
            cfg._experts_implementation = impl


def uniform_ks(model, k: int) -> tuple[int, ...]:
    return tuple([int(k)] * len(moe_blocks(model)))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b / (na * nb)) if na and nb else float("nan")


def load_similarity(counter: Counter, reference: Counter) -> float:
    """Mean over layers of the cosine similarity between expert-load vectors (1: the same shares)."""
    return float(np.mean([cosine(a.astype(float), b.astype(float)) for a, b in zip(counter.load, reference.load)]))


__all__ = ["POLICIES", "Counter", "Policy", "alloc_t", "alloc_t_mask", "budgeted", "keep_slots", "load_similarity",
           "moe_blocks", "native_k", "num_experts", "skip", "topk", "topp", "uniform_ks"]
