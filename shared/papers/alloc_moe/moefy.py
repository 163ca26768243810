"""MoEfication (Zhang et al., Findings of ACL 2022): a dense LLaMA-family model's MLPs split into experts.

:func:`moefy` splits every MLP's intermediate neurons into ``n_experts`` experts of equal size, by
balanced clustering of the neurons' co-activation on calibration tokens, fits a router per layer
that scores each expert, and returns a copy of the model whose MLPs keep the router's top-``top_k``
experts per token and sum their outputs unweighted, as MoEfication does; ``n_shared`` of the clusters
(those of largest activation mass) can instead stay always on, as DeepSeek's shared experts.

A SwiGLU MLP, ``down(act(gate(x)) * up(x))``, is a sum over its intermediate neurons, so a partition
of the neurons into experts is exact: with every expert kept the converted model computes the dense
one (to fp32 summation order), and keeping k experts is the dense MLP with the other experts'
neurons zeroed.

The converted blocks have the interface :mod:`.routing` reads from the ``transformers`` MoE
families: a ``gate`` with ``top_k`` and ``num_experts`` whose forward returns ``(router_logits,
weights, indices)`` (weights all 1: the sum is unweighted; ``norm_topk_prob`` False; the policies
rank by its logits instead, ``scores_are_logits``, see :func:`.routing.route_scores`), and an
``experts`` module that takes those indices and weights and skips the sentinel index ``E``. So the
chapter's routing, profiling, allocation and baselines run on it unchanged.

Choices MoEfication leaves open, or that differ from it here:

* **The co-activation feature** of a neuron is its absolute activation ``|act(gate(x)) * up(x)|``
  over the calibration tokens, unit-normalised; SwiGLU's activations are not sparse as the ReLU ones
  MoEfication split are, so magnitude stands in for "fires".
* **Balanced clustering**: spherical k-means on those features, with each assignment step made
  balanced by a greedy pass over (neuron, expert) pairs in order of similarity (every expert takes
  exactly ``width / n_experts`` neurons); initialised from ``seed``; a fixed number of rounds.
* **The router** is linear (with a bias), fitted by ridge regression from the MLP's input to each
  expert's activation mass on the token (the sum of its neurons' absolute activations). MoEfication
  trains a small MLP router for the same target; a least-squares fit is deterministic and needs no
  training loop. Without a penalty (``ridge=0``) on activations that span fewer dimensions than the
  hidden size (fewer calibration tokens than that, a hidden channel constant over them), the fit is
  the minimum-norm least-squares one, as the penalty's limit at 0; activations that are not finite
  (non-finite weights, an overflow) are refused, naming the layer.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from acl26 import checks


class MoEfiedGate(nn.Module):
    """Scores each expert of one MLP (a linear router) and picks the top-``top_k`` per token."""

    norm_topk_prob = False
    #: the budgeted policies rank experts by the router's logits (each expert's predicted activation mass),
    #: since the kept experts' outputs are summed with weight 1 (routing.route_scores)
    scores_are_logits = True

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, top_k: int):
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)  # (E, H)
        self.bias = nn.Parameter(bias, requires_grad=False)  # (E,)
        self.num_experts = int(weight.shape[0])
        self.top_k = int(top_k)

    def forward(self, hidden_states: torch.Tensor):
        x = hidden_states.reshape(-1, hidden_states.shape[-1])
        logits = torch.nn.functional.linear(x.to(self.weight.dtype), self.weight, self.bias)
        indices = torch.topk(logits, self.top_k, dim=-1, sorted=True).indices
        weights = torch.ones(indices.shape, dtype=x.dtype, device=x.device)  # MoEfication: an unweighted sum
        return logits, weights, indices


class MoEfiedExperts(nn.Module):
    """The experts of one split MLP: expert ``e`` holds rows ``e`` of the stacked gate/up/down slices."""

    def __init__(self, gate_w: torch.Tensor, up_w: torch.Tensor, down_w: torch.Tensor, act_fn):
        super().__init__()
        self.gate_proj = nn.Parameter(gate_w, requires_grad=False)  # (E, m, H)
        self.up_proj = nn.Parameter(up_w, requires_grad=False)  # (E, m, H)
        self.down_proj = nn.Parameter(down_w, requires_grad=False)  # (E, H, m)
        self.num_experts = int(gate_w.shape[0])
        self.act_fn = act_fn

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor):
        out = torch.zeros_like(hidden_states)
        for e in range(self.num_experts):  # the sentinel index E (a dropped slot) is never visited
            tok, slot = torch.where(top_k_index == e)
            if tok.numel() == 0:
                continue
            x = hidden_states[tok]
            h = self.act_fn(x @ self.gate_proj[e].T) * (x @ self.up_proj[e].T)
            out.index_add_(0, tok, (h @ self.down_proj[e].T) * top_k_weights[tok, slot, None].to(h.dtype))
        return out


class SharedExperts(nn.Module):
    """The always-on experts of one split MLP, as one SwiGLU MLP over their neurons (DeepSeek's shared experts)."""

    def __init__(self, gate_w: torch.Tensor, up_w: torch.Tensor, down_w: torch.Tensor, act_fn, n: int):
        super().__init__()
        self.gate_proj = nn.Parameter(gate_w, requires_grad=False)  # (n * m, H)
        self.up_proj = nn.Parameter(up_w, requires_grad=False)  # (n * m, H)
        self.down_proj = nn.Parameter(down_w, requires_grad=False)  # (H, n * m)
        self.act_fn = act_fn
        self.num_experts = int(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.act_fn(x @ self.gate_proj.T) * (x @ self.up_proj.T)) @ self.down_proj.T


class MoEfiedMLP(nn.Module):
    """A dense MLP as experts: route, run the kept experts, sum their outputs (and the shared experts', if any)."""

    def __init__(self, gate: MoEfiedGate, experts: MoEfiedExperts, shared: SharedExperts | None = None):
        super().__init__()
        self.gate = gate
        self.experts = experts
        self.shared_experts = shared

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        _, weights, indices = self.gate(x)
        out = self.experts(x, indices, weights)
        if self.shared_experts is not None:
            out = out + self.shared_experts(x)
        return out.reshape(shape)


def _mlps(model, layers=None) -> tuple[list[int], list[nn.Module]]:
    """The indices of the decoder layers to convert (``layers``, checked; all by default) and their MLPs,
    each checked to be a dense SwiGLU MLP."""
    decoder = getattr(getattr(model, "model", None), "layers", None)
    if decoder is None:
        raise ValueError(f"model must be a LLaMA-family causal LM (model.model.layers), got {type(model).__name__}")
    which = list(range(len(decoder))) if layers is None else checks.layer_indices("layers", layers, len(decoder))
    mlps = [decoder[i].mlp for i in which]
    for i, m in zip(which, mlps):
        if not all(isinstance(getattr(m, n, None), nn.Linear) for n in ("gate_proj", "up_proj", "down_proj")) \
                or not hasattr(m, "act_fn"):
            raise ValueError(f"model: layer {i}'s MLP is not a dense SwiGLU MLP (gate_proj, up_proj, down_proj, act_fn), "
                             f"got {type(m).__name__}")
    return which, mlps


def _calibration(calibration, vocab: int) -> torch.Tensor:
    if not isinstance(calibration, torch.Tensor) or calibration.dtype != torch.long:
        raise ValueError(f"calibration must be a LongTensor of token ids, got "
                         f"{type(calibration).__name__}{'' if not isinstance(calibration, torch.Tensor) else ' of ' + str(calibration.dtype)}")
    if calibration.dim() == 1:
        calibration = calibration[None]
    if calibration.dim() != 2:
        raise ValueError(f"calibration must be 1-D (one sequence) or 2-D (a batch), got shape {tuple(calibration.shape)}")
    if calibration.numel() == 0:
        raise ValueError("calibration must hold at least one token, got an empty tensor")
    lo, hi = int(calibration.min()), int(calibration.max())
    if lo < 0 or hi >= vocab:
        raise ValueError(f"calibration: token ids must lie in [0, {vocab}), got [{lo}, {hi}]")
    return calibration


@torch.no_grad()
def _mlp_inputs(model, calibration: torch.Tensor, mlps: list[nn.Module], batch: int) -> list[torch.Tensor]:
    """Each MLP's input on the calibration tokens, (N, H) float32 per layer."""
    got: list[list[torch.Tensor]] = [[] for _ in mlps]
    hooks = [m.register_forward_pre_hook(lambda mod, args, i=i: got[i].append(args[0].reshape(-1, args[0].shape[-1])
                                                                              .float().cpu()))
             for i, m in enumerate(mlps)]
    try:
        for s in range(0, calibration.shape[0], batch):
            model(input_ids=calibration[s:s + batch].to(next(model.parameters()).device), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return [torch.cat(g) for g in got]


def balanced_clusters(features: np.ndarray, n_clusters: int, *, rounds: int = 20, seed: int = 0) -> np.ndarray:
    """Balanced spherical k-means: the cluster (0 … n_clusters-1) of each row of ``features``, every
    cluster of exactly ``len(features) / n_clusters`` rows (which must divide). Each assignment takes
    (row, cluster) pairs in order of cosine similarity, greedily, while the cluster has room."""
    f = np.asarray(features, dtype=np.float64)
    n = f.shape[0]
    n_clusters = checks.integer("n_clusters", n_clusters, 1, n)
    if n % n_clusters:
        raise ValueError(f"n_clusters must divide the number of rows ({n}), got {n_clusters}")
    size = n // n_clusters
    f = f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)
    rng = np.random.default_rng(seed)
    centres = f[rng.choice(n, n_clusters, replace=False)]
    labels = np.full(n, -1)
    for _ in range(rounds):
        sim = f @ centres.T  # (n, k)
        order = np.argsort(-sim, axis=None, kind="stable")
        new = np.full(n, -1)
        room = np.full(n_clusters, size)
        left = n
        for flat in order:
            r, c = divmod(int(flat), n_clusters)
            if new[r] < 0 and room[c] > 0:
                new[r], room[c], left = c, room[c] - 1, left - 1
                if left == 0:
                    break
        if np.array_equal(new, labels):
            break
        labels = new
        for c in range(n_clusters):
            m = f[labels == c].sum(axis=0)
            centres[c] = m / max(np.linalg.norm(m), 1e-12)
    return labels


def _ridge(x: torch.Tensor, y: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Least squares ``y ≈ x W^T + b`` with an L2 penalty ``alpha`` on W (not on b), in float64.

    Without a penalty, or one too small to lift the normal equations off singular (``x`` centred spans
    fewer than its columns: fewer rows, a constant column), W is the minimum-norm least-squares fit."""
    x, y = x.double(), y.double()
    mx, my = x.mean(0), y.mean(0)
    xc, yc = x - mx, y - my
    w = None
    if alpha > 0:
        a = xc.T @ xc + alpha * torch.eye(x.shape[1], dtype=x.dtype)
        try:
            w = torch.linalg.solve(a, xc.T @ yc).T  # (E, H)
        except torch.linalg.LinAlgError:  # singular to working precision
            w = None
    if w is None:
        w = torch.linalg.lstsq(xc, yc, driver="gelsd").solution.T  # SVD-based: rank-deficient xc is fine
    return w, my - w @ mx


def _finite(t: torch.Tensor, layer: int, what: str) -> None:
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"model: layer {layer}: NaN or inf in its {what} on the calibration tokens (non-finite "
                         f"weights in the model up to that layer, or an overflow); it cannot be split")


@torch.no_grad()
def moefy(model, n_experts: int, calibration: torch.Tensor, *, top_k: int, n_shared: int = 0, layers=None,
          batch: int = 8, seed: int = 0, rounds: int = 20, ridge: float = 1e-2):
    """A copy of ``model`` (a LLaMA-family causal LM with SwiGLU MLPs, e.g. SmolLM2) whose every MLP
    is split into ``n_experts`` experts of equal size by balanced clustering of its neurons'
    co-activation on ``calibration`` (token ids, a LongTensor, 1-D or a 2-D batch), with a linear
    router per layer fitted on the same activations; each token keeps its router's top-``top_k``
    experts, summed unweighted. ``model`` itself is left unchanged. ``layers`` (indices of the decoder
    layers to convert, default all of them) converts only those; the others keep their dense MLP.

    ``n_shared`` (default 0): the MLP is split into ``n_experts + n_shared`` clusters of equal size, and the
    ``n_shared`` clusters with the largest activation mass on the calibration tokens become shared experts,
    always on beside the routed ones (as DeepSeek-MoE and DeepSeek-V2 keep shared experts in every layer);
    the router is fitted on the ``n_experts`` routed clusters only. With every routed expert kept, the
    model still computes the dense one.

    ValueError, naming the argument, where ``n_experts + n_shared`` does not divide an MLP's width, ``n_shared``
    is not an integer ≥ 0, ``top_k`` is outside 1 … ``n_experts``, ``layers`` is empty, repeats a layer or names one the model lacks,
    ``calibration`` is empty or not token ids of the model's vocabulary, or ``ridge`` times the number
    of calibration tokens overflows; naming the layer, where an MLP's input or activations on the
    calibration tokens are not finite. ``ridge=0`` fits the minimum-norm least-squares router.

    The copy is for use in this process: its config still describes the dense model, so
    ``save_pretrained`` would write a checkpoint that loads back dense-shaped. Cache what
    :func:`moefy` is given (the model and the calibration ids) rather than its result.
    """
    which, mlps = _mlps(model, layers)
    widths = {m.gate_proj.out_features for m in mlps}
    n_experts = checks.integer("n_experts", n_experts, 1)
    n_shared = checks.integer("n_shared", n_shared, 0)
    clusters = n_experts + n_shared
    bad = sorted(w for w in widths if w % clusters)
    if bad:
        what = "n_experts" if not n_shared else f"n_experts + n_shared ({n_experts} + {n_shared})"
        raise ValueError(f"{what} must divide every MLP's width ({', '.join(map(str, sorted(widths)))}), "
                         f"got {clusters}")
    top_k = checks.integer("top_k", top_k, 1, n_experts)
    batch = checks.integer("batch", batch, 1)
    rounds = checks.integer("rounds", rounds, 1)
    ridge = checks.number("ridge", ridge, 0.0)
    checks.integer("seed", seed, 0)
    vocab = model.get_input_embeddings().weight.shape[0]
    calibration = _calibration(calibration, vocab)
    was_training = model.training
    model.eval()
    try:
        inputs = _mlp_inputs(model, calibration, mlps, batch)
    finally:
        model.train(was_training)
    tokens = inputs[0].shape[0]
    alpha = ridge * tokens  # the penalty of the fit over all the tokens
    if not math.isfinite(alpha):
        raise ValueError(f"ridge: {ridge} times the {tokens} calibration tokens overflows; give a smaller one")
    out = copy.deepcopy(model)
    for i, x in zip(which, inputs):
        layer = out.model.layers[i]
        mlp = layer.mlp
        g, u, d = (p.weight.detach().float() for p in (mlp.gate_proj, mlp.up_proj, mlp.down_proj))
        _finite(x, i, "MLP input")
        a = (mlp.act_fn(x @ g.T) * (x @ u.T)).abs()  # (N, I): each neuron's activation magnitude per token
        _finite(a, i, "MLP activations")
        labels = balanced_clusters(a.T.numpy(), clusters, rounds=rounds, seed=seed + i)
        groups = [np.flatnonzero(labels == e) for e in range(clusters)]
        mass = torch.stack([a[:, torch.as_tensor(ix)].sum(1) for ix in groups], dim=1)  # (N, E + S)
        # the shared experts: the clusters of largest total mass (ties: the lower index), in cluster order
        by_mass = sorted(range(clusters), key=lambda e: (-float(mass[:, e].sum()), e))
        shared_ids = sorted(by_mass[:n_shared])
        routed_ids = [e for e in range(clusters) if e not in shared_ids]
        w, b = _ridge(x, mass[:, routed_ids], alpha)  # the router's target: each routed expert's mass
        dtype, device = mlp.gate_proj.weight.dtype, mlp.gate_proj.weight.device
        take = [torch.as_tensor(groups[e], device=device) for e in routed_ids]
        experts = MoEfiedExperts(torch.stack([mlp.gate_proj.weight[ix] for ix in take]),
                                 torch.stack([mlp.up_proj.weight[ix] for ix in take]),
                                 torch.stack([mlp.down_proj.weight[:, ix] for ix in take]), mlp.act_fn)
        shared = None
        if n_shared:
            ix = torch.as_tensor(np.concatenate([groups[e] for e in shared_ids]), device=device)
            shared = SharedExperts(mlp.gate_proj.weight[ix], mlp.up_proj.weight[ix], mlp.down_proj.weight[:, ix],
                                   mlp.act_fn, n_shared)
        layer.mlp = MoEfiedMLP(MoEfiedGate(w.to(dtype=dtype, device=device), b.to(dtype=dtype, device=device), top_k),
                               experts, shared)
    return out
