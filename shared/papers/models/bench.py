"""``acl26 bench models``: what the shared models cost to run on this CPU.

SmolLM2-135M's forward pass over one block (tokens per second, what every chapter that scores SmolLM2
pays), and the book's MoE LM (the zoo's ``book`` shape, randomly initialised: timing needs no trained
weights) at top-1 against its trained top-k, in one process with the order rotated every round:
medians with their range, and the same-run ratio. The goal is the premise Alloc-MoE's budgets rest
on: routing a token to fewer experts costs less time on this machine.
"""

from __future__ import annotations

import numpy as np
import torch

from acl26 import models, stats, timing, zoo


def _forward(model, ids: torch.Tensor):
    def f():
        with torch.inference_mode():
            model(input_ids=ids)
    return f


def benchmarks(quick: bool = False) -> dict:
    """Rows (medians over rounds, rotated order) and the goal (top-1 forward time over top-k's < 1)."""
    rounds, calls = (2, 2) if quick else (5, 3)
    tokens = 64 if quick else 256
    params = zoo.SPEC.resolve("book")
    gen = torch.Generator().manual_seed(0)
    rows, goals = [], []

    smollm2, _ = models.smollm2()
    smollm2.eval()
    ids = torch.randint(0, smollm2.config.vocab_size, (1, tokens), generator=gen)
    t = timing.interleaved({"smollm2": _forward(smollm2, ids)}, rounds=rounds, calls=calls)["smollm2"]
    r = stats.repeat_range(t)
    rows.append({"benchmark": f"SmolLM2-135M forward, {tokens} tokens", "ms (median)": round(1e3 * r.estimate, 2),
                 "ms min": round(1e3 * r.lo, 2), "ms max": round(1e3 * r.hi, 2),
                 "tokens/s (median)": round(tokens / r.estimate, 1), "calls": len(t)})
    del smollm2

    from transformers import AutoModelForCausalLM

    models.quiet_transformers()
    torch.manual_seed(0)
    k = params["moe_top_k"]
    moe = AutoModelForCausalLM.from_config(zoo.model_config("moe", params, params["vocab_size"]))
    moe.eval()
    ids = torch.randint(0, params["vocab_size"], (4 if not quick else 1, params["block_size"]), generator=gen)

    def at(kk):
        f = _forward(moe, ids)

        def g():
            models.set_top_k(moe, kk)
            f()
        return g

    t = timing.interleaved({f"top-{k}": at(k), "top-1": at(1)}, rounds=rounds, calls=calls)
    models.set_top_k(moe, k)
    for name, ts in t.items():
        r = stats.repeat_range(ts)
        rows.append({"benchmark": f"MoE LM (book shape) forward, {name}, {ids.numel()} tokens",
                     "ms (median)": round(1e3 * r.estimate, 2), "ms min": round(1e3 * r.lo, 2),
                     "ms max": round(1e3 * r.hi, 2), "tokens/s (median)": round(ids.numel() / r.estimate, 1),
                     "calls": len(ts)})
    # the same-run ratio: call i of top-1 over call i of top-k (the two ran in the same round)
    ratio = stats.repeat_range(np.asarray(t["top-1"]) / np.asarray(t[f"top-{k}"]))
    rows.append({"benchmark": f"MoE LM: top-1 time over top-{k} time (same round)", "ratio (median)": round(ratio.estimate, 3),
                 "ratio min": round(ratio.lo, 3), "ratio max": round(ratio.hi, 3), "calls": len(t["top-1"])})
    goals.append({"goal": f"routing to 1 expert is faster than to {k} (the premise of a budget on experts)",
                  "target": 1.0, "measured": round(ratio.hi, 3), "met": bool(ratio.hi < 1.0),
                  "unit": f"top-1 / top-{k} forward time (worst round)"})
    return {"title": "The shared models: forward cost on this CPU", "rows": rows, "goals": goals,
            "note": "one process; candidates interleaved with their order rotated each round (acl26.timing.interleaved); "
                    "the MoE is randomly initialised at the book's shape"}
