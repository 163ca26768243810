"""Inference through oneDNN's prepacked float32 linear (the weight layout ``torch.compile`` freezes to on CPU).

On CPU, ``torch.nn.functional.linear`` in float32 calls MKL's ``sgemm``. With few rows (a decode step
of a few dozen sequences) that path is slow on this project's machines: measured on a 2-core AMD EPYC,
a (4 × 576) · (576 × 49 152) head took 17.5 ms through MKL and 3.4 ms through oneDNN with the weight
reordered once (``torch.ops.mkldnn._reorder_linear_weight``), and 24 prompts × 4 rollouts of a 135M
model took 27–29 s against 19–20 s, with the same tokens. Both paths compute in float32 (no reduced
precision): logits agree to a relative 1e-5, only the order of the sums differs.

:func:`prepacked` swaps the forward of every plain ``torch.nn.Linear`` of a model for the prepacked call
while the block runs, and restores it on exit. It packs only where the result is the same computation:
float32 weights on the CPU, no gradient wanted (``torch.inference_mode`` / ``torch.no_grad``), a build with
oneDNN, and a check on the first layer that both paths agree. Elsewhere it leaves the model as it is and
says why (:attr:`Packing.reason`); subclasses of ``Linear`` (quantised or custom layers) and modules whose
``forward`` was already replaced (accelerate's hooks) are never touched.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

#: the largest relative difference from ``F.linear`` the entry check accepts (float32 sums in another order)
TOLERANCE = 1e-4


@dataclass
class Packing:
    """What :func:`prepacked` did: ``layers`` swapped (0 when it packed nothing), and ``reason`` when it did not."""

    layers: int = 0
    reason: str | None = None

    @property
    def backend(self) -> str:
        return "oneDNN prepacked float32" if self.layers else "torch (F.linear)"


def available() -> str | None:
    """None when this torch can prepack; else why not."""
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN"
    ops = torch.ops.mkldnn
    for name in ("_reorder_linear_weight", "_linear_pointwise"):
        try:
            getattr(ops, name)
        except (AttributeError, RuntimeError):
            return f"this torch build lacks torch.ops.mkldnn.{name}"
    return None


def _packed_forward(weight: torch.Tensor, bias: torch.Tensor | None, out_features: int):
    packed = torch.ops.mkldnn._reorder_linear_weight(weight)
    call = torch.ops.mkldnn._linear_pointwise

    def forward(x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or x.device.type != "cpu" or torch.is_grad_enabled():
            return torch.nn.functional.linear(x, weight, bias)
        lead = x.shape[:-1]
        y = call(x.reshape(-1, x.shape[-1]), packed, bias, "none", [], "")
        return y.reshape(*lead, out_features)

    return forward


def _eligible(model: torch.nn.Module) -> list[tuple[str, torch.nn.Linear]]:
    return [(name, mod) for name, mod in model.named_modules()
            if type(mod) is torch.nn.Linear and "forward" not in vars(mod)]


def _why_not(layers) -> str | None:
    if torch.is_grad_enabled():
        return "gradients are enabled (prepacking is for inference only)"
    why = available()
    if why:
        return why
    if not layers:
        return "the model has no plain torch.nn.Linear"
    for _, mod in layers:
        w = mod.weight
        if w.device.type != "cpu":
            return f"the weights are on {w.device.type}, not the CPU"
        if w.dtype != torch.float32:
            return f"the weights are {w.dtype}, not float32"
    return None


def _agrees(mod: torch.nn.Linear, forward) -> bool:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, mod.in_features, generator=g)
    ref = torch.nn.functional.linear(x, mod.weight, mod.bias)
    got = forward(x)
    scale = float(ref.abs().max()) or 1.0
    return got.shape == ref.shape and float((got - ref).abs().max()) <= TOLERANCE * scale


@contextlib.contextmanager
def prepacked(model: torch.nn.Module, enabled: bool = True):
    """Run ``model``'s plain float32 linears through oneDNN's prepacked kernel inside the block (CPU inference).

    Yields a :class:`Packing`. The weights are packed on entry, so load weights *before* entering; the
    model's own parameters are never changed, and every swapped ``forward`` is removed on exit, error or
    not. With ``enabled=False`` it packs nothing (``reason`` says so).
    """
    if not enabled:
        yield Packing(reason="prepacking was turned off")
        return
    layers = _eligible(model)
    why = _why_not(layers)
    if why:
        yield Packing(reason=why)
        return
    swapped: list[torch.nn.Module] = []
    try:
        for i, (_, mod) in enumerate(layers):
            fwd = _packed_forward(mod.weight.detach(), None if mod.bias is None else mod.bias.detach(), mod.out_features)
            if i == 0 and not _agrees(mod, fwd):
                yield Packing(reason="oneDNN's prepacked linear disagreed with F.linear on the first layer")
                return
            mod.forward = fwd
            swapped.append(mod)
        yield Packing(layers=len(swapped))
    finally:
        for mod in swapped:
            vars(mod).pop("forward", None)
