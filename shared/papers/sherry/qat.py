"""Sherry (ACL 2026, arXiv 2601.07892): 3:4-sparse ternary quantization-aware training with Arenas.

The packed formats and kernels are :mod:`acl26.kernels.ternary`; this module is the training side:

* :func:`sparse34` -- the 3:4 quantizer in torch (Sparse-AbsMean: per group of 4 inputs the
  smallest |w| becomes 0, the others ``sign(w)``; scale = mean |w| of the kept weights per output
  row), identical to :func:`acl26.kernels.ternary.sparse_ternarize`;
* :func:`absmean` -- BitNet b1.58's absmean ternary quantizer (1.58-bit), for comparison: one
  scale per tensor, or, with ``per_row=True`` (mode ``"absmean_row"``), one per output row, the
  granularity of 3:4's scale;
* :class:`QuantLinear` -- a ``Linear`` whose forward uses the quantized weight with a
  straight-through estimator, plus the **Arenas** residual ``lambda_t * W`` while training:
  ``y = x [Q(W) + lambda_t W]^T`` (in eval mode the residual is 0, as in the authors' ``Arenas``:
  ``eps = 0`` when not training, so every evaluation scores the pure ternary model);
* :func:`arenas_lambda` -- lambda_t: linear warm-up to 1 over the first 10% of steps, then cosine
  decay to 0, so the model at the end of training is purely ternary;
* :class:`QATMonitor` -- drives lambda_t and records the evidence of *weight trapping*: the effective
  rank of each tracked layer's input gradient dL/dX (tokens x features, the quantity the paper's §3
  says Arenas keeps from collapsing), the effective rank of its weight gradient dL/dW, and the share
  of weights that never change their ternary state;
* :func:`to_packed` -- replace the quantized layers by :class:`PackedLinear`, which runs the packed
  1.25-bit GEMM kernel, to check that the deployed model computes what the fake-quantized one did.

The quantizers refuse a weight holding NaN or inf with a ``ValueError`` naming it, as the kernels'
:func:`~acl26.kernels.ternary.sparse_ternarize` does (a NaN weight has no ternary state).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from acl26 import checks, training
from acl26.papers.sherry.decoder import PackedWeights

MODES = ("fp", "absmean", "absmean_row", "sparse34")
#: the ternary modes whose scale is one per output row (the others: one per tensor)
ROW_SCALED = ("absmean_row", "sparse34")


def check_finite(w: torch.Tensor, name: str = "w") -> None:
    """Refuse NaN and ±inf in the weight ``w`` (one reduction)."""
    if not bool(torch.isfinite(w.detach()).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")


def sparse34(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """3:4 ternary ``(T, scale)`` of a ``(out, in)`` weight (``in % 4 == 0``); see the module docstring.

    Ties: the first of the tied smallest |w| is zeroed (``argmin`` returns the first); a kept
    weight is -1 if ``w < 0`` else +1. ``scale`` has shape ``(out,)``. NaN or inf in ``w`` raises.
    """
    out_f, in_f = w.shape
    if in_f % 4:
        raise ValueError(f"3:4 sparsity needs in_features divisible by 4, got {in_f}")
    d = w.detach()
    if d.numel() and d.device.type == "cpu" and d.dtype == torch.float32 and d.is_contiguous():
        # one Numba pass instead of argmin, scatter and where (a sixth of a QAT step on SmolLM2); the scale
        # is summed by the same torch reduction over the same numbers as below, so both paths agree bit for bit
        from acl26.kernels import ternary

        try:
            t, kept = (torch.from_numpy(a) for a in ternary.sparse_split(d.numpy()))
        except ValueError as exc:  # the only refusal left for a 2-D, non-empty float32 weight of width 4k
            raise ValueError("w must be finite (no NaN or inf)") from exc
        kept = kept.reshape(out_f, in_f // 4, 4)
        count = torch.full((out_f,), float(3 * (in_f // 4)), dtype=torch.float32)
        return t, kept.sum(dim=(1, 2)) / count
    check_finite(w)
    g = d.reshape(out_f, in_f // 4, 4)
    a = g.abs()
    keep = torch.ones_like(g).scatter_(-1, a.argmin(-1, keepdim=True), 0.0)
    t = torch.where(g < 0, -1.0, 1.0).to(w.dtype) * keep
    scale = (a * keep).sum(dim=(1, 2)) / keep.sum(dim=(1, 2))
    return t.reshape(out_f, in_f), scale


def absmean(w: torch.Tensor, per_row: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """BitNet b1.58 ternary ``(T, scale)``: ``clip(round(W / g), -1, 1)``, ``g = max(mean|W|, 1e-5)``: a
    scalar, or with ``per_row`` one per output row, shape ``(out,)`` (the mean over that row).

    NaN or inf in ``w`` raises."""
    check_finite(w)
    a = w.detach().abs()
    if per_row:
        g = a.mean(dim=1).clamp_min(1e-5)
        return torch.clamp(torch.round(w.detach() / g[:, None]), -1, 1), g
    g = a.mean().clamp_min(1e-5)
    return torch.clamp(torch.round(w.detach() / g), -1, 1), g


def ternarize(w: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(T, scale)`` of ``w`` under the ternary ``mode``: ``"sparse34"`` (:func:`sparse34`),
    ``"absmean"`` or ``"absmean_row"`` (:func:`absmean` per tensor or per row). NaN or inf raises."""
    if mode == "sparse34":
        return sparse34(w)
    if mode in ("absmean", "absmean_row"):
        return absmean(w, per_row=mode == "absmean_row")
    raise ValueError(f"mode must be one of {MODES[1:]}, got {mode!r}")


def quantize(w: torch.Tensor, mode: str) -> torch.Tensor:
    """The dequantized weight ``scale * T`` for ``mode`` (NaN or inf in ``w`` raises)."""
    t, s = ternarize(w, mode)
    return t * (s[:, None] if s.dim() else s)


def arenas_lambda(step: int, total: int, warmup_frac: float = 0.1) -> float:
    """Arenas residual weight: 0 -> 1 linearly over ``warmup_frac`` of training, then cosine to 0.

    ``step`` >= 0 and ``total`` >= 1 are integers, ``warmup_frac`` a fraction in [0, 1]."""
    step = checks.integer("step", step, 0)
    total = checks.integer("total", total, 1)
    warmup_frac = checks.probability("warmup_frac", warmup_frac)
    warm = max(1, int(round(warmup_frac * total)))
    if step < warm:
        return step / warm
    progress = (step - warm) / max(1, total - 1 - warm)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


class QuantLinear(nn.Linear):
    """A ``Linear`` trained through a ternary quantizer (straight-through) with an optional Arenas residual."""

    def __init__(self, in_features: int, out_features: int, bias: bool, mode: str):
        super().__init__(in_features, out_features, bias=bias)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.lam = 0.0

    def effective_weight(self) -> torch.Tensor:
        w = self.weight
        if self.mode == "fp":
            return w
        q = quantize(w, self.mode)
        w_q = w + (q - w).detach()  # straight-through estimator
        lam = self.lam if self.training else 0.0  # the authors' Arenas: eps = 0 when not training
        return w_q + lam * w if lam else w_q

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.effective_weight(), self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mode={self.mode}"


def _block_linears(model, blocks=None) -> list[tuple[str, nn.Module]]:
    keep = None if blocks is None else {f".layers.{i}." for i in blocks}
    return [(n, m) for n, m in model.named_modules()
            if isinstance(m, nn.Linear) and ".layers." in n and "lm_head" not in n
            and (keep is None or any(k in n + "." for k in keep))]


def quantized_layers(model, blocks=None) -> list[tuple[str, nn.Module]]:
    """The linear layers of the decoder blocks (embeddings and the output head stay full precision);
    with ``blocks`` (decoder layer indices), of those blocks only. In a model partly wrapped
    (:func:`wrap` with ``blocks``), the wrapped layers only: the others stay in full precision."""
    layers = _block_linears(model, blocks)
    if any(isinstance(m, QuantLinear) for _, m in layers):
        return [(n, m) for n, m in layers if isinstance(m, QuantLinear)]
    return layers


def wrap(model, mode: str, blocks=None):
    """Replace every decoder-block ``Linear`` (of ``blocks`` only, when given: decoder layer indices,
    e.g. a contiguous run trained while the rest stays in full precision) by a :class:`QuantLinear`
    of ``mode`` sharing its parameters."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if blocks is not None:
        blocks = checks.layer_indices("blocks", blocks, len(getattr(getattr(model, "model", None), "layers", [])))
    for name, lin in [(n, m) for n, m in _block_linears(model, blocks) if not isinstance(m, QuantLinear)]:
        q = QuantLinear(lin.in_features, lin.out_features, lin.bias is not None, mode)
        q.train(lin.training)  # the mode of the layer it replaces (the residual applies in training only)
        q.weight = lin.weight
        if lin.bias is not None:
            q.bias = lin.bias
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, q)
    return model


def effective_rank(g: torch.Tensor) -> float:
    """Roy & Vetterli's effective rank: exp of the entropy of the normalised singular values; NaN
    when ``g`` holds NaN or inf (a diverged gradient has no rank to report)."""
    if not bool(torch.isfinite(g.detach()).all()):
        return math.nan
    s = torch.linalg.svdvals(g.detach().float())
    p = s / s.sum().clamp_min(1e-30)
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def ternary_state(w: torch.Tensor, mode: str) -> torch.Tensor:
    """The int8 ternary state (-1, 0, +1) of each weight under ``mode`` (NaN or inf in ``w`` raises)."""
    return ternarize(w, mode)[0].to(torch.int8)


class QATMonitor(training.Monitor):
    """Sets the Arenas lambda each step; records weight trapping and the gradients' effective rank.

    Every ``every`` steps (and at the last step) it snapshots the ternary states of the ``track`` layers
    and counts, per weight, how often its state changed since the previous snapshot; at the end, the
    *stuck share* is the fraction of weights whose state never changed after the first ``skip_frac`` of
    training, and ``flip_rate`` the share that changed between consecutive snapshots (trapping over
    training: a falling rate is weights settling into one state). At the same steps it measures the
    effective rank of each tracked layer's input gradient dL/dX (``input_rank``: a backward hook on
    the layer, the gradient through that layer alone, reshaped tokens x features; the paper's measure of
    trapping) and of its weight gradient dL/dW (``effective_rank``, shown beside it: Arenas scales a
    layer's own dL/dW by (1 + lambda) and so leaves its rank unchanged).
    """

    def __init__(self, mode: str, total_steps: int, arenas: bool, track: list[str], every: int = 10,
                 skip_frac: float = 0.1):
        total_steps = checks.integer("total_steps", total_steps, 1)
        every = checks.integer("every", every, 1)
        skip_frac = checks.probability("skip_frac", skip_frac)
        self.mode, self.total, self.arenas, self.track, self.every = mode, total_steps, arenas, list(track), every
        self.skip = int(skip_frac * total_steps)
        self.flips: dict[str, torch.Tensor] = {}
        self.last: dict[str, torch.Tensor] = {}
        self.ranks: dict[str, list[tuple[int, float]]] = {n: [] for n in self.track}
        #: per tracked layer, (step, effective rank of dL/dX through that layer)
        self.input_ranks: dict[str, list[tuple[int, float]]] = {n: [] for n in self.track}
        self._x_grads: dict[str, torch.Tensor] = {}
        self._handles: list = []
        self.lams: list[tuple[int, float]] = []
        #: per tracked layer, (step, share of weights whose state changed since the last snapshot)
        self.rates: dict[str, list[tuple[int, float]]] = {n: [] for n in self.track}

    def before_step(self, step, model):
        lam = arenas_lambda(step, self.total) if (self.arenas and self.mode != "fp") else 0.0
        for _, m in quantized_layers(model):
            if isinstance(m, QuantLinear):
                m.lam = lam
        if step % self.every == 0:
            self.lams.append((step, lam))
        if self._snapshot(step):
            self._hook_inputs(model)

    def _snapshot(self, step: int) -> bool:
        return step % self.every == 0 or step == self.total - 1

    def _hook_inputs(self, model) -> None:
        """Backward hooks on the tracked layers for this step: each keeps the gradient of the loss with
        respect to its layer's input, through that layer alone (``grad_input``), as tokens x features."""
        self._drop_hooks()
        mods = dict(model.named_modules())

        def keep(name):
            def hook(module, grad_input, grad_output):
                g = grad_input[0]
                if g is not None:
                    self._x_grads[name] = g.detach().reshape(-1, g.shape[-1]).float()
            return hook

        self._handles = [mods[n].register_full_backward_hook(keep(n)) for n in self.track]

    def _drop_hooks(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles, self._x_grads = [], {}

    def on_grads(self, step, model):
        if not self._snapshot(step):
            return
        x_grads = self._x_grads
        self._drop_hooks()
        mods = dict(model.named_modules())
        for name in self.track:
            m = mods[name]
            if name in x_grads:
                self.input_ranks[name].append((step, effective_rank(x_grads[name])))
            if m.weight.grad is not None:
                self.ranks[name].append((step, effective_rank(m.weight.grad)))
            if self.mode == "fp":
                continue
            state = ternary_state(m.weight, self.mode)
            if name in self.last and step >= self.skip:
                changed = (state != self.last[name]).to(torch.int32)
                self.flips[name] = self.flips.get(name, torch.zeros_like(changed)) + changed
                self.rates.setdefault(name, []).append((step, float(changed.float().mean())))
            if step >= self.skip or name not in self.last:
                self.last[name] = state

    def state_dict(self):
        return {"flips": self.flips, "last": self.last, "ranks": self.ranks, "lams": self.lams, "rates": self.rates,
                "input_ranks": self.input_ranks}

    def load_state_dict(self, state):
        self.flips = state.get("flips", {})
        self.last = state.get("last", {})
        self.ranks = state.get("ranks", {n: [] for n in self.track})
        self.lams = state.get("lams", [])
        self.rates = state.get("rates", {n: [] for n in self.track})
        self.input_ranks = state.get("input_ranks", {n: [] for n in self.track})

    def summary(self):
        out = {"lambda": self.lams, "effective_rank": self.ranks, "input_rank": self.input_ranks, "stuck_share": {},
               "mean_flips": {}, "flip_rate": self.rates}
        for name, f in self.flips.items():
            out["stuck_share"][name] = float((f == 0).float().mean())
            out["mean_flips"][name] = float(f.float().mean())
        return out


# --------------------------------------------------------------------------------------------
# deployment: the trained ternary model through the packed kernels


class PackedLinear(nn.Module, PackedWeights):
    """A 3:4 ternary layer stored packed (1.25 bits/weight) and run with ``gemm("sherry", ...)``
    (:meth:`from_packed`: any packed format of :mod:`acl26.kernels.ternary`, run with its own ``gemm``).

    The one packed-layer type of the chapter: a torch module for QAT deployment and the model files,
    and a :class:`acl26.papers.sherry.decoder.PackedWeights` (its ``fmt``, ``packed``, ``scale``,
    ``gemv``/``gemm``, ``dense``), so :meth:`acl26.papers.sherry.engine.Engine.from_transformers`
    decodes a model of these layers from their own streams."""

    def __init__(self, t: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None):
        from acl26.kernels import ternary

        self._setup(ternary.pack_sherry(t.to(torch.int8).numpy()), scale, bias)

    def _setup(self, packed, scale, bias) -> None:
        nn.Module.__init__(self)
        PackedWeights.__init__(self, packed.fmt, packed, np.asarray(
            scale.detach().float().numpy() if torch.is_tensor(scale) else scale, np.float32))
        self.out_features, self.in_features = packed.shape
        self.bias = None if bias is None else bias.detach().clone()

    @classmethod
    def from_packed(cls, packed, scale, bias: torch.Tensor | None = None) -> "PackedLinear":
        """A layer around existing streams (a :class:`acl26.kernels.ternary.Packed`, e.g. read from a file)."""
        layer = cls.__new__(cls)
        layer._setup(packed, scale, bias)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        xs = np.ascontiguousarray(x.detach().reshape(-1, self.in_features).float().numpy())
        y = torch.from_numpy(self.gemm(xs)).reshape(*lead, self.out_features)
        if self.bias is not None:
            y = y + self.bias
        return y.to(x.dtype)


def to_packed(model):
    """Replace every 3:4 :class:`QuantLinear` (its pure ternary weight, lambda = 0) by a :class:`PackedLinear`."""
    for name, m in quantized_layers(model):
        if not (isinstance(m, QuantLinear) and m.mode == "sparse34"):
            raise ValueError(f"{name}: only 3:4 QuantLinear layers can be packed, got {type(m).__name__}")
        check_finite(m.weight, f"{name}.weight")
        t, s = sparse34(m.weight)
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, PackedLinear(t, s, m.bias))
    return model


def whole_ternary(model):
    """A copy of the QAT'd ``model`` with every decoder block in 3:4 ternary: the QAT'd blocks as they
    were trained, every other block's linear layers ternarized without training (:func:`wrap`).
    The size claim is decided on its files: their bytes depend on the format, not on the training."""
    import copy

    whole = wrap(copy.deepcopy(model), "sparse34")
    for _, m in quantized_layers(whole):
        if m.mode != "sparse34":
            raise ValueError(f"whole_ternary takes a 3:4 QAT model, got a layer of mode {m.mode!r}")
        m.lam = 0.0
    return whole
