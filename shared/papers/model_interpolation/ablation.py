"""The paper's ablations (§5.3, Fig. 5, Table 3) as merges: one part left at Instruct, every other tensor
interpolated. Each row is a set of :func:`.merge.interpolate` keywords (``skip``, ``skip_layers``) under the
row name :mod:`.spec` gives it."""

from __future__ import annotations

from acl26 import checks
from acl26.papers.model_interpolation.spec import ONLY_FIRST, ONLY_LATE, SKIP_ATTN, SKIP_MLP


def thirds(n_layers: int) -> dict[str, list[int]]:
    """The paper's layer ranges scaled to ``n_layers``: the first third and the last two thirds."""
    n_layers = checks.integer("n_layers", n_layers, 1)
    cut = max(1, n_layers // 3)
    return {"first third": list(range(cut)), "last two thirds": list(range(cut, n_layers))}


def ablations(n_layers: int) -> dict[str, dict]:
    """The ablation merges: {row name: :func:`.merge.interpolate` keywords} (a one-layer model has no layer
    ablation)."""
    parts = thirds(n_layers)
    out = {SKIP_ATTN: {"skip": "attn"}, SKIP_MLP: {"skip": "mlp"}}
    if parts["last two thirds"]:
        out[ONLY_FIRST] = {"skip_layers": parts["last two thirds"]}
        out[ONLY_LATE] = {"skip_layers": parts["first third"]}
    return out
