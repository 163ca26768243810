"""The speed of budgeted routing at real shapes: one MoE layer of DeepSeek-V2-Lite with random weights.

:class:`MoELayer` holds one layer's routed experts (fused 3-D tensors in transformers 5.x's
layout: ``gate_up`` (E, 2I, H), ``down`` (E, H, I)), its shared experts (one MLP of width
``n_shared * I``, as DeepSeek-V2 fuses them) and its router. :func:`grouped_forward` really skips
inactive experts: the (token, expert) pairs are sorted by expert and each expert with at least one
token multiplies only its tokens; dropped slots (index ``E``) cost nothing. :func:`dense_forward`
is the reference (every expert on every token, weighted by the selection). :func:`hf_grouped`
runs transformers' own ``grouped_mm`` experts path on the same tensors, as a reference timing.

:func:`cost_curve` times prefill (``T`` tokens) and decode (one token) at every uniform
``k = 1..K`` in interleaved rounds whose order rotates; :func:`stack_speedups` turns the per-``k``
layer times of each round into the time of a stack of layers at an allocation (uniform or
Alloc-MoE's), and the speed-up at half budget as per-round ratios.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from acl26 import checks, timing

#: DeepSeek-V2-Lite's MoE layer (its config: hidden 2048, 64 routed experts of width 1408, 2 shared, top-6; 26 MoE
#: layers), its MLA attention projections (16 heads; q 16 x (128 + 64), compressed KV 512 + 64 rope, values 128)
#: and its 102,400-word output head
DSV2_LITE = dict(hidden=2048, experts=64, width=1408, shared=2, top_k=6, layers=26,
                 attn=((16 * 192, 2048), (512 + 64, 2048), (16 * (128 + 128), 512), (2048, 16 * 128)), vocab=102400)


@dataclass
class MoELayer:
    gate_up: torch.Tensor  # (E, 2I, H)
    down: torch.Tensor  # (E, H, I)
    router: torch.Tensor  # (E, H)
    shared_gate_up: torch.Tensor | None  # (2 * S * I, H)
    shared_down: torch.Tensor | None  # (H, S * I)
    top_k: int

    @property
    def num_experts(self) -> int:
        return int(self.gate_up.shape[0])

    @property
    def hidden(self) -> int:
        return int(self.gate_up.shape[2])


def random_layer(hidden: int, experts: int, width: int, shared: int, top_k: int, *, seed: int = 0,
                 dtype: torch.dtype = torch.float32) -> MoELayer:
    """A layer with random weights (scaled as at initialisation, so activations stay O(1))."""
    checks.integer("hidden", hidden, 1)
    checks.integer("experts", experts, 1)
    checks.integer("width", width, 1)
    checks.integer("shared", shared, 0)
    checks.integer("top_k", top_k, 1, experts)
    g = torch.Generator().manual_seed(checks.seed("seed", seed))

    def rnd(*shape, fan_in):
        return (torch.randn(*shape, generator=g, dtype=torch.float32) / math.sqrt(fan_in)).to(dtype)

    return MoELayer(gate_up=rnd(experts, 2 * width, hidden, fan_in=hidden), down=rnd(experts, hidden, width, fan_in=width),
                    router=rnd(experts, hidden, fan_in=hidden),
                    shared_gate_up=rnd(2 * shared * width, hidden, fan_in=hidden) if shared else None,
                    shared_down=rnd(hidden, shared * width, fan_in=shared * width) if shared else None, top_k=top_k)


def route(layer: MoELayer, x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax top-``k`` routing (unnormalised weights), padded with the sentinel ``E`` to ``top_k`` slots."""
    probs = torch.softmax(x @ layer.router.T, dim=-1, dtype=torch.float32)
    w, idx = torch.topk(probs, layer.top_k, dim=-1)
    if k < layer.top_k:
        idx = idx.clone()
        w = w.clone()
        idx[:, k:] = layer.num_experts
        w[:, k:] = 0
    return idx, w.to(x.dtype)


def _shared(layer: MoELayer, x: torch.Tensor) -> torch.Tensor:
    if layer.shared_gate_up is None:
        return torch.zeros_like(x)
    g, u = (x @ layer.shared_gate_up.T).chunk(2, dim=-1)
    return (F.silu(g) * u) @ layer.shared_down.T


def grouped_forward(layer: MoELayer, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Routed experts on their own tokens only (pairs grouped by expert; index E skipped), plus shared experts."""
    E = layer.num_experts
    T, K = idx.shape
    flat_e = idx.reshape(-1)
    keep = flat_e < E
    flat_t = torch.arange(T, device=x.device).repeat_interleave(K)[keep]
    flat_w = w.reshape(-1)[keep]
    flat_e = flat_e[keep]
    order = torch.argsort(flat_e, stable=True)
    e_sorted, t_sorted, w_sorted = flat_e[order], flat_t[order], flat_w[order]
    counts = torch.bincount(e_sorted, minlength=E).tolist()
    out = _shared(layer, x)
    start = 0
    for e, c in enumerate(counts):
        if not c:
            continue
        tok = t_sorted[start:start + c]
        g, u = (x[tok] @ layer.gate_up[e].T).chunk(2, dim=-1)
        y = (F.silu(g) * u) @ layer.down[e].T
        out.index_add_(0, tok, y * w_sorted[start:start + c, None])
        start += c
    return out


def dense_forward(layer: MoELayer, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The reference: every expert on every token, combined with the selection's weights (zeros elsewhere)."""
    E = layer.num_experts
    T = x.shape[0]
    sel = torch.zeros(T, E + 1, dtype=x.dtype)
    sel.scatter_add_(1, idx, w)
    sel = sel[:, :E]
    out = _shared(layer, x)
    for e in range(E):
        g, u = (x @ layer.gate_up[e].T).chunk(2, dim=-1)
        out = out + ((F.silu(g) * u) @ layer.down[e].T) * sel[:, e:e + 1]
    return out


def hf_experts(layer: MoELayer, implementation: str = "grouped_mm"):
    """transformers' Qwen3-MoE experts module on the same tensors (no copy), with ``implementation``."""
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

    cfg = Qwen3MoeConfig(hidden_size=layer.hidden, moe_intermediate_size=int(layer.down.shape[2]),
                         num_experts=layer.num_experts, num_experts_per_tok=layer.top_k)
    cfg._experts_implementation = implementation
    with torch.device("meta"):
        mod = Qwen3MoeExperts(cfg)
    mod.gate_up_proj = torch.nn.Parameter(layer.gate_up, requires_grad=False)
    mod.down_proj = torch.nn.Parameter(layer.down, requires_grad=False)
    return mod


def hf_forward(layer: MoELayer, experts, x: torch.Tensor, k: int) -> torch.Tensor:
    """HF's experts path at plain top-``k`` (no sentinel: its grouped_mm handles one only under expert parallelism)."""
    probs = torch.softmax(x @ layer.router.T, dim=-1, dtype=torch.float32)
    w, idx = torch.topk(probs, k, dim=-1)
    return experts(x, idx, w.to(x.dtype)) + _shared(layer, x)


@dataclass
class Rest:
    """What a decoder layer has besides its MoE block, and the model's head: the attention projections
    (each ``(out, in)``) and the output head, random weights. Softmax attention over the context and
    the KV cache are not modelled (at 512 tokens and batch 1 they are a small share)."""

    attn: list[torch.Tensor]
    head: torch.Tensor | None


def random_rest(attn_shapes: Sequence[tuple[int, int]], vocab: int, hidden: int, *, seed: int = 1) -> Rest:
    g = torch.Generator().manual_seed(seed)
    attn = [torch.randn(o, i, generator=g) / math.sqrt(i) for o, i in attn_shapes]
    return Rest(attn=attn, head=torch.randn(vocab, hidden, generator=g) / math.sqrt(hidden) if vocab else None)


def attn_forward(rest: Rest, x: torch.Tensor) -> list[torch.Tensor]:
    """One layer's attention projections in sequence: MLA's query, compressed KV, KV up-projection and
    output (``x`` stands in for the attention output feeding the last one: the same shape)."""
    q = x @ rest.attn[0].T
    kv = x @ rest.attn[1].T
    up = kv[:, : rest.attn[2].shape[1]] @ rest.attn[2].T
    o = x[:, : rest.attn[3].shape[1]] @ rest.attn[3].T
    return [q, up, o]


@torch.no_grad()
def cost_curve(layer: MoELayer, *, prefill_tokens: int, rounds: int, calls: int = 1, seed: int = 0,
               ks: Sequence[int] | None = None, hf: bool = True, threads: int | None = None,
               rest: Rest | None = None, decode_calls: int = 9) -> dict:
    """Seconds per layer call, per round, of prefill (``prefill_tokens`` tokens) and decode (1 token) at
    each uniform ``k``, ours (grouped) and, with ``hf``, transformers' grouped_mm at the same k; with
    ``rest``, also one layer's attention projections (key 0 under ``"attn"``) and the head on one
    token (``"head"``), in the same rounds. Prefill and decode each run in their own interleaved
    rounds (``calls`` and ``decode_calls`` timed calls per candidate per round, the round's figure
    their median).

    Returns ``{"ours": {phase: {k: [s per round]}}, "hf": {...}, "attn": {phase: {0: [...]}},
    "head": {phase: {0: [...]}}, "pairs": {phase: {k: n}}}``. Routing (the router GEMM and top-k)
    is inside the timed call for ours and HF's.
    """
    checks.integer("prefill_tokens", prefill_tokens, 1)
    checks.integer("rounds", rounds, 1)
    checks.integer("calls", calls, 1)
    checks.integer("decode_calls", decode_calls, 1)
    ks = list(ks or range(1, layer.top_k + 1))
    g = torch.Generator().manual_seed(seed)
    xs = {"prefill": torch.randn(prefill_tokens, layer.hidden, generator=g),
          "decode": torch.randn(1, layer.hidden, generator=g)}
    experts = hf_experts(layer) if hf else None
    cands = {}
    for phase, x in xs.items():
        for k in ks:
            cands[("ours", phase, k)] = (lambda x=x, k=k: grouped_forward(layer, x, *route(layer, x, k)))
            if hf:
                cands[("hf", phase, k)] = (lambda x=x, k=k: hf_forward(layer, experts, x, k))
        if rest is not None:
            cands[("attn", phase, 0)] = (lambda x=x: attn_forward(rest, x))
            if rest.head is not None:
                cands[("head", phase, 0)] = (lambda x=x: x[-1:] @ rest.head.T)
    ctx = timing.threads(threads) if threads else _null()
    times, n_calls = {}, {"prefill": calls, "decode": decode_calls}
    with ctx:
        # each phase in its own interleaved rounds (ratios are taken within a phase): a prefill call takes
        # about a second, so once per round; a decode call tens of ms, so the median of decode_calls
        for phase in xs:
            times.update(timing.interleaved({c: f for c, f in cands.items() if c[1] == phase}, rounds=rounds,
                                            calls=n_calls[phase], warm_s=0.0))
    out: dict = {"ours": {}, "hf": {}, "attn": {}, "head": {}, "pairs": {}}
    for (who, phase, k), ts in times.items():
        c = n_calls[phase]
        per_round = [float(np.median(ts[i * c:(i + 1) * c])) for i in range(rounds)]
        out[who].setdefault(phase, {})[k] = per_round
        if who in ("ours", "hf"):
            out["pairs"].setdefault(phase, {})[k] = xs[phase].shape[0] * k
    return out


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def stack_time(per_k: dict[int, list[float]], ks: Sequence[int], extra: Sequence[float] | None = None) -> list[float]:
    """Per round: the time of a stack of layers at allocation ``ks`` (the sum of each layer's per-k time),
    plus ``extra[r]`` (e.g. the attention projections of every layer and the head) where given."""
    n = min(len(v) for v in per_k.values())
    return [sum(per_k[k][r] for k in ks) + (extra[r] if extra is not None else 0.0) for r in range(n)]


def _extra(curve: dict, phase: str, layers: int) -> list[float] | None:
    attn = curve.get("attn", {}).get(phase, {}).get(0)
    if attn is None:
        return None
    head = curve.get("head", {}).get(phase, {}).get(0) or [0.0] * len(attn)
    return [layers * a + h for a, h in zip(attn, head)]


def stack_speedups(curve: dict, allocations: dict[str, Sequence[int]], full: Sequence[int], who: str = "ours",
                   with_rest: bool = False) -> list[dict]:
    """Rows per (phase, allocation): the stack's time over the full-budget stack's, as per-round speed-ups.
    With ``with_rest``, every stack also pays its layers' attention projections and the head (the
    curve's ``attn`` and ``head``), the same at every budget."""
    from acl26 import stats

    rows = []
    for phase, per_k in curve[who].items():
        extra = _extra(curve, phase, len(full)) if with_rest else None
        if with_rest and extra is None:
            raise ValueError("with_rest needs a cost curve timed with rest= (attention projections and head)")
        base = stack_time(per_k, full, extra)
        for name, ks in allocations.items():
            t = stack_time(per_k, ks, extra)
            ratios = [b / x for b, x in zip(base, t)]
            iv = stats.repeat_range(ratios)
            rows.append({"phase": phase, "allocation": name, "scope": "MoE + attention projections + head" if with_rest
                         else "MoE layers only", "experts (sum k)": int(sum(ks)), "layers": len(ks),
                         "stack ms (median)": 1e3 * float(np.median(t)), "full-budget ms (median)": 1e3 * float(np.median(base)),
                         "speed-up": iv.estimate, "speed-up min": iv.lo, "speed-up max": iv.hi, "rounds": iv.n,
                         "_ratios": ratios})
    return rows


def stretch(ks: Sequence[int], layers: int, budget: int, k_max: int) -> list[int]:
    """An allocation of ``len(ks)`` layers stretched to ``layers`` layers (nearest source layer by
    relative depth), then adjusted one expert at a time so it sums to ``budget`` within 1..k_max
    (adding where the stretched shape is highest, removing where it is lowest, deepest first)."""
    checks.integer("layers", layers, 1)
    checks.integer("k_max", k_max, 1)
    checks.integer("budget", budget, layers, layers * k_max)
    src = [checks.integer(f"ks[{i}]", k, 1) for i, k in enumerate(ks)]  # 2.5 is refused, never cut to 2
    if not src:
        raise ValueError("ks must not be empty")
    out = [int(min(k_max, max(1, src[min(len(src) - 1, int(i * len(src) / layers))]))) for i in range(layers)]
    while sum(out) < budget:
        cands = [i for i in range(layers) if out[i] < k_max]
        i = max(cands, key=lambda j: (out[j], -j))
        out[i] += 1
    while sum(out) > budget:
        cands = [i for i in range(layers) if out[i] > 1]
        i = min(cands, key=lambda j: (out[j], -j))
        out[i] -= 1
    return out
