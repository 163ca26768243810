"""``acl26 bench mta`` (ACL 2026, arXiv 2605.01374): the per-step cost of the MTA loss against plain KD.

The paper's efficiency figure (spec's ``overhead`` claim) is a training step's time: 0.26 s/step for
its base KD loss and 0.48 s/step with MTA's two terms on its GPU, 1.85×. Here one distillation step
is timed under the base loss (DistiLLM's skew forward KL, the book profile's) and under base + DSA +
Hid (:func:`.distill.step_times`: the student's forward and backward through :func:`.distill.loss_terms`,
no weight update), in interleaved rounds whose order rotates, on the same batch; each round's ratio
compares the two arms under the same machine load. Two kinds of step are timed:

* **with the teacher's forward**, as a user runs a distillation step (its top-k log-probabilities,
  and for MTA its key-layer states): what the chapter's ``overhead`` claim decides on;
* **from the teacher cache**, as the chapter's own runs read the teacher's outputs: the student's
  side alone, where the MTA terms weigh most.

Shapes: the chapter's book setting, SmolLM2-135M's (30 layers, hidden 576, 9 heads, 3 KV heads,
MLP 1536, vocabulary 49,152) for the teacher and a 6-layer student made of its layers (the book's
``student_layers``), with random weights (the cost of a step depends on the shapes, not on the
values); 8 synthetic pairs of 88 tokens per step (24 of them response, about the book profile's
mean pair), with word and phrase units over the content tokens. ``quick``: a tiny LLaMA of the same kind (4 layers, hidden 64), 2 pairs of
48 tokens. Rows give medians with their range over rounds; goals the paper's 1.85×.
"""

from __future__ import annotations

import numpy as np
import torch

from acl26 import models, stats
from acl26.papers.mta import data as D
from acl26.papers.mta import distill as Dl
from acl26.papers.mta import losses as L
from acl26.papers.mta.spec import PAPER_STEP

#: SmolLM2-135M-Instruct's shapes (its config.json): the chapter's teacher
SMOLLM2 = dict(vocab=49152, hidden=576, layers=30, heads=9, kv_heads=3, intermediate=1536)
#: the quick run's tiny LLaMA (the smoke profile's teacher's kind, a smaller vocabulary)
TINY = dict(vocab=4096, hidden=64, layers=4, heads=4, kv_heads=2, intermediate=128)

#: the sizes of each run: model shapes, student layers, pairs per step, tokens per pair (response), top-k, rounds
#: (full: the book profile's batch_size and top_k, pairs as long as its mean pair; on 2 cores a step takes about
#: 2 s with the teacher's forward and 0.75 s without, each arm runs twice a round: about a minute in all)
FULL_RUN = dict(shape=SMOLLM2, student_layers=6, batch=8, length=88, response=24, top_k=64, rounds=5)
QUICK_RUN = dict(shape=TINY, student_layers=2, batch=2, length=48, response=16, top_k=8, rounds=3)


class SyntheticCache:
    """The teacher's outputs on the synthetic pairs, in memory: what :class:`.data.TeacherCache` gives a
    :class:`.distill.Setup` (``meta``, ``layers``, ``batch``), with no file behind it."""

    def __init__(self, topk_idx: torch.Tensor, topk_logp: torch.Tensor, hidden: torch.Tensor, layers: list[int]):
        self.topk_idx, self.topk_logp, self.hidden = topk_idx, topk_logp, hidden
        self.layers = list(layers)
        self.meta = {"top_k": int(topk_idx.shape[-1]), "hidden_size": int(hidden.shape[-1]), "key": "synthetic"}

    def batch(self, idx, length: int) -> dict[str, torch.Tensor]:
        idx = torch.as_tensor(list(idx), dtype=torch.long)
        return {"topk_idx": self.topk_idx[idx, :length], "topk_logp": self.topk_logp[idx, :length],
                "hidden": self.hidden[idx, :length]}


def synthetic_items(n: int, length: int, response: int, vocab: int, seed: int = 0) -> list[D.Encoded]:
    """``n`` encoded pairs of ``length`` tokens: a 4-token template head, the prompt's text, a 3-token template
    turn, then ``response`` tokens (the last the EOS); words of 1 or 2 tokens and phrases of 2 to 4 tokens over
    the content tokens (about two thirds of them in a phrase), as :func:`.data.encode` makes them from text."""
    rng = np.random.default_rng(seed)
    head, turn = 4, 3
    prompt_end = length - response - turn
    if prompt_end <= head:
        raise ValueError(f"length {length} leaves no prompt tokens for response={response}")
    out = []
    for _ in range(n):
        ids = rng.integers(3, vocab, length).tolist()
        labels = [i >= length - response for i in range(length)]
        content = [head <= i < prompt_end or i >= length - response for i in range(length)]
        words, phrases = [], []
        for lo, hi in ((head, prompt_end), (length - response, length - 1)):
            t = lo
            while t < hi:
                w = int(min(rng.integers(1, 3), hi - t))
                words.append((t, t + w))
                t += w
            t = lo
            while t < hi:
                p = int(min(rng.integers(2, 5), hi - t))
                if rng.random() < 2 / 3:
                    phrases.append((t, t + p))
                t += p
        out.append(D.Encoded(D.Pair("synthetic", "", ""), ids, labels, words, phrases, content))
    return out


def synthetic_setup(shape: dict, student_layers: int, batch: int, length: int, response: int, top_k: int,
                    seed: int = 0):
    """A random teacher of ``shape``, its ``student_layers``-layer student (:func:`.distill.make_student`), ``batch``
    synthetic pairs and the teacher's outputs on them: ``(setup, teacher, teacher key layers)``."""
    from transformers import AutoModelForCausalLM

    cfg = models.dense_config(shape["vocab"], hidden=shape["hidden"], layers=shape["layers"], heads=shape["heads"],
                              kv_heads=shape["kv_heads"], intermediate=shape["intermediate"])
    models.quiet_transformers()
    torch.manual_seed(seed)
    teacher = AutoModelForCausalLM.from_config(cfg)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    student = Dl.freeze_embeddings(Dl.make_student(teacher, Dl.layer_subset(shape["layers"], student_layers)))
    key = L.key_layers(student_layers)
    s_layers = key["word"] + [x for x in key["phrase"] if x not in key["word"]]
    t_layers = [L.teacher_layer(x, student_layers, shape["layers"]) for x in s_layers]
    items = synthetic_items(batch, length, response, shape["vocab"], seed=seed)
    b = D.pad_batch(items, 0)
    with torch.no_grad():
        out = teacher(input_ids=b["ids"], attention_mask=b["attn"].long(), output_hidden_states=True)
        top = torch.log_softmax(out.logits.float(), dim=-1).topk(top_k, dim=-1)
        hidden = torch.stack([out.hidden_states[x].float() for x in t_layers], dim=2)
    cache = SyntheticCache(top.indices, top.values, hidden.half().float(), t_layers)
    return Dl.Setup(student, "synthetic", items, cache, key, 0), teacher, t_layers


def _rows(kind: str, times: dict[str, list[float]]) -> tuple[list[dict], stats.Interval]:
    ratios = np.asarray(times["MTA"]) / np.asarray(times["base"])
    rows = []
    for arm, xs, unit in (("base KD (skew forward KL)", times["base"], "s/step"),
                          ("base KD + MTA (DSA + Hid)", times["MTA"], "s/step"),
                          ("ratio MTA / base (per round)", ratios, "×")):
        iv = stats.repeat_range(xs)
        rows.append({"step": kind, "arm": arm, "median": round(iv.estimate, 4), "min": round(iv.lo, 4),
                     "max": round(iv.hi, 4), "unit": unit, "rounds": iv.n})
    return rows, stats.repeat_range(ratios)


def benchmarks(quick: bool = False) -> dict:
    """Seconds per distillation step, base KD against base KD + MTA, with and without the teacher's forward
    (rows: medians with their range over interleaved rounds, and the same-round ratio), and the goals."""
    run = QUICK_RUN if quick else FULL_RUN
    setup, teacher, t_layers = synthetic_setup(run["shape"], run["student_layers"], run["batch"], run["length"],
                                               run["response"], run["top_k"])
    conds = {"base": Dl.Condition(base="sfkl"), "MTA": Dl.Condition(base="sfkl", dsa=True, hid=True)}
    paper = round(PAPER_STEP[1] / PAPER_STEP[0], 2)  # 1.85, the overhead claim's bound
    rows, goals = [], []
    for kind, with_teacher in (("with the teacher's forward", True), ("from the teacher cache", False)):
        times = Dl.step_times(setup, conds, batch_size=run["batch"], rounds=run["rounds"],
                              teacher=teacher if with_teacher else None, teacher_layers=t_layers)
        r, ratio = _rows(kind, times)
        rows += r
        measured = round(ratio.estimate, 4)
        goals.append({"goal": f"an MTA step {kind} costs at most the paper's {paper:.2f}× a base KD step",
                      "target": paper, "measured": measured, "met": bool(measured <= paper),
                      "unit": "× (median of the per-round ratios)"})
    s = run["shape"]
    model = (f"teacher: random LLaMA, {s['layers']} layers, hidden {s['hidden']}, vocabulary {s['vocab']:,}"
             + (" (SmolLM2-135M's shapes)" if s is SMOLLM2 else " (tiny)")
             + f"; student: {run['student_layers']} of its layers")
    return {"title": "MTA: seconds per distillation step, base KD against base KD + MTA", "rows": rows,
            "goals": goals, "model": model,
            "note": f"{run['batch']} synthetic pairs of {run['length']} tokens ({run['response']} response) per step, "
                    f"teacher top-k {run['top_k']}; {run['rounds']} interleaved rounds whose order rotates, each arm "
                    "warmed once per round; a step is the student's forward and backward (no weight update), with or "
                    f"without the teacher's forward; the paper: {PAPER_STEP[0]} → {PAPER_STEP[1]} s/step on its GPU"}
