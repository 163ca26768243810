"""MTA chapter (ACL 2026, arXiv 2605.01374): parameters, claims, the runs, the verdicts.

Backs ``notebooks/mta.ipynb``. The losses are :mod:`.losses`, the units :mod:`.units`, the pairs
and the teacher's cache :mod:`.data`, the student and the loop :mod:`.distill`. Here: the teacher
and the start student (made here or local checkpoints, :func:`load_models`), the conditions
(:func:`conditions`), every run and its evaluation (:func:`run`) and :func:`record_claims`, which
decides each verdict on an interval: over seeds for the main comparison, over held-out pairs
(paired bootstrap) for the ablations.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

from acl26 import claims as C
from acl26 import models, stats
from acl26.papers.mta import data as D
from acl26.papers.mta import distill as Dl
from acl26.papers.mta import losses as L
from acl26.checks import SEED_MAX
from acl26.params import TORCH_DEVICE, Param, ParamSpec, folder_with

#: the paper's average ROUGE-L (GPT-2 1.5B -> 120M), base -> base + MTA, and its ablations (DistiLLM base)
PAPER_MAIN = {"FDD": (19.48, 20.50), "DistiLLM": (20.21, 21.45), "DistiLLM-2": (18.59, 19.94)}
PAPER_ABLATIONS = {"full MTA": 21.45, "+Hid only": 20.55, "+DSA only": 20.92, "word units only": 20.80,
                   "phrase units only": 21.17, "no importance weights": 20.66}
#: the ablation conditions (name -> changes to the full MTA condition)
ABLATIONS = {"+Hid only": dict(dsa=False), "+DSA only": dict(hid=False), "word units only": dict(units="word"),
             "phrase units only": dict(units="phrase"), "no importance weights": dict(importance=False)}
#: the paper's per-step cost on its GPU (s/step), base -> base + MTA
PAPER_STEP = (0.26, 0.48)
#: decoder layers of the named teachers: SmolLM2-135M-Instruct (its GGUF's llama.block_count) and
#: :func:`tiny_teacher`; a student made here keeps at most this many (distill.layer_subset)
TEACHER_LAYERS = {"smollm2": 30, "tiny": 4}
#: their vocabulary (both SmolLM2's tokenizer): the teacher cache keeps at most this many logits (top_k)
TEACHER_VOCAB = {"smollm2": 49152, "tiny": 49152}


def teacher_config(teacher: str, key: str) -> int | None:
    """``num_hidden_layers`` or ``vocab_size`` of ``teacher`` (a name, or a local folder's config.json),
    None if unknown (the study then checks against the loaded model)."""
    named = {"num_hidden_layers": TEACHER_LAYERS, "vocab_size": TEACHER_VOCAB}[key]
    if teacher in named:
        return named[teacher]
    try:
        n = json.loads((Path(teacher) / "config.json").read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def _at_most(p: dict, name: str, key: str) -> bool:
    limit = teacher_config(p["teacher"], key)
    return limit is None or p[name] <= limit


_TEACHER_RULE = (f"must be {' or '.join(map(repr, TEACHER_LAYERS))} or a local HF folder with config.json and "
                 "tokenizer_config.json",
                 lambda v: v in TEACHER_LAYERS or folder_with("config.json", "tokenizer_config.json", empty=False)[1](v))

SPEC = ParamSpec(
    paper="mta",
    params=(
        Param("teacher", str, "the teacher: 'smollm2' (SmolLM2-135M-Instruct), 'tiny' (a random 4-layer LM, smoke "
              "profile) or a local HF folder", rule=_TEACHER_RULE, path=True, path_keep=tuple(TEACHER_LAYERS)),
        Param("student", str, "a local HF folder of the start student ('' = made here: a layer subset of the "
              "teacher, then a recovery training)", rule=folder_with("config.json"), path=True),
        Param("student_layers", int, "layers of the student made here (evenly spaced teacher layers)", min=1),
        Param("recovery_steps", int, "recovery training of the student made here: steps", min=1),
        Param("recovery_batch", int, "recovery training: blocks per step", min=1),
        Param("recovery_lr", float, "recovery training: peak learning rate", min=1e-7, max=1.0),
        Param("block_size", int, "recovery training: tokens per block of the corpus", min=8),
        Param("train_pairs", int, "training pool of prompt/response pairs", min=4),
        Param("eval_pairs", int, "held-out pairs", min=2),
        Param("gym_share", float, "share of reasoning-gym chain_sum pairs (the rest: State of the Union)", min=0.0, max=1.0),
        Param("prompt_words", int, "State of the Union prompt: words", min=1),
        Param("response_words", int, "State of the Union reference: words", min=1),
        Param("max_len", int, "longest pair (tokens)", min=16),
        Param("top_k", int, "teacher logits cached per position (top-k + the rest)", min=1),
        Param("base_losses", list, "base KD losses of the main comparison (fkl, sfkl, srkl)", elem=str,
              choices=("fkl", "sfkl", "srkl")),
        Param("ablation_base", str, "base loss of the ablations", choices=("fkl", "sfkl", "srkl")),
        Param("seeds", list, "seeds of the main comparison (each: its own batch order)", elem=int, min_len=2,
              min=0, max=SEED_MAX),
        Param("ablation_seeds", int, "the ablations run on the first this-many seeds", min=1),
        Param("steps", int, "distillation steps per run", min=1),
        Param("batch_size", int, "pairs per distillation step", min=1),
        Param("lr", float, "distillation peak learning rate", min=1e-7, max=1.0),
        Param("lambda_dsa", float, "weight of the DSA loss (paper, GPT-2: 2)", min=0.0),
        Param("lambda_hid", float, "weight of the Hid loss (paper, GPT-2: 0.2)", min=0.0),
        Param("samples", int, "sampled responses per held-out prompt (T = 1, top-p 1) for ROUGE-L", min=1),
        Param("max_new_tokens", int, "longest sampled response (tokens)", min=1),
        Param("eval_batch", int, "sequences per generation batch in the evaluation", min=1),
        Param("timing_rounds", int, "interleaved rounds of the per-step overhead measurement", min=1),
        Param("n_resamples", int, "bootstrap resamples of every interval", min=99),
        Param("seed", int, "seed of the pairs, the recovery training and the sampling", min=0, max=SEED_MAX),
        Param("device", str, "torch device of the teacher cache, the distillation and the evaluation (the "
              "recovery training of a student made here runs on the CPU)", choices=("cpu", "cuda"), rule=TORCH_DEVICE),
    ),
    profiles={
        "book": dict(teacher="smollm2", student="", student_layers=6, recovery_steps=150, recovery_batch=8,
                     recovery_lr=1e-3, block_size=128, train_pairs=512, eval_pairs=96, gym_share=0.25,
                     prompt_words=32, response_words=24, max_len=128, top_k=64, base_losses=["sfkl"],
                     ablation_base="sfkl", seeds=[0, 1, 2], ablation_seeds=2, steps=48, batch_size=8, lr=3e-4,
                     lambda_dsa=2.0, lambda_hid=0.2, samples=2, max_new_tokens=40, eval_batch=96, timing_rounds=6,
                     n_resamples=1999, seed=0, device="cpu"),
        "smoke": dict(teacher="tiny", student_layers=2, recovery_steps=3, recovery_batch=2, block_size=32,
                      train_pairs=12, eval_pairs=4, max_len=96, top_k=8, seeds=[0, 1], ablation_seeds=1, steps=2,
                      batch_size=2, samples=1, max_new_tokens=6, timing_rounds=1, n_resamples=199),
        "paper": dict(base_losses=["fkl", "sfkl", "srkl"], seeds=[0, 1, 2, 3, 4], ablation_seeds=3, steps=200,
                      train_pairs=2048, eval_pairs=256, samples=5, recovery_steps=600, n_resamples=4999),
    },
    checks=(
        ("ablation_seeds must not exceed the number of seeds", lambda p: p["ablation_seeds"] <= len(p["seeds"])),
        # distill.layer_subset: a student made here keeps some of the teacher's layers
        ("student_layers must not exceed the teacher's layers ("
         + ", ".join(f"{t} {n}" for t, n in TEACHER_LAYERS.items()) + ", a folder's num_hidden_layers)",
         lambda p: bool(p["student"]) or _at_most(p, "student_layers", "num_hidden_layers")),
        # data.teacher_cache keeps the teacher's top_k logits per position (torch.topk over its vocabulary)
        ("top_k must not exceed the teacher's vocabulary ("
         + ", ".join(f"{t} {n}" for t, n in TEACHER_VOCAB.items()) + ", a folder's vocab_size)",
         lambda p: _at_most(p, "top_k", "vocab_size")),
        # run() refuses fewer training pairs than a batch (and the length filter can only drop pairs)
        ("batch_size must not exceed train_pairs", lambda p: p["batch_size"] <= p["train_pairs"]),
    ),
)


def _improves(base: str) -> C.Claim:
    paper = {"sfkl": "DistiLLM 20.21 → 21.45 (GPT-2 120M), 19.80 → 21.01 (Qwen1.5-0.5B)",
             "fkl": "+1.0 to +1.4 over each base it was added to (FDD, DistiLLM, DistiLLM-2)",
             "srkl": "+1.0 to +1.4 over each base it was added to (FDD, DistiLLM, DistiLLM-2)"}[base]
    return C.Claim(f"improves_{base}", f"MTA improves the student distilled with {L.BASE_NAMES[base]}", paper,
                   "main table (average ROUGE-L)",
                   C.predicate("ours: ROUGE-L(base + MTA) − ROUGE-L(base) > 0, on the t-interval over seeds",
                               lambda v: v > 0))


CLAIMS = [
    _improves("sfkl"), _improves("fkl"), _improves("srkl"),
    C.Claim("dsa_over_hid", "DSA contributes more than Hid", "+DSA only 20.92 vs +Hid only 20.55", "ablation table",
            C.predicate("ours: ROUGE-L(+DSA only) − ROUGE-L(+Hid only) > 0", lambda v: v > 0)),
    C.Claim("word_and_phrase", "Word and phrase units together beat either alone",
            "21.45 vs word only 20.80, phrase only 21.17", "ablation table",
            C.predicate("ours: ROUGE-L(full) − ROUGE-L(each of word only, phrase only) > 0", lambda v: v > 0)),
    C.Claim("importance_helps", "Importance weights help", "21.45 vs 20.66 without", "ablation table",
            C.predicate("ours: ROUGE-L(full) − ROUGE-L(no importance weights) > 0", lambda v: v > 0)),
    C.Claim("overhead", "MTA's extra terms cost at most the paper's per-step overhead",
            "0.26 → 0.48 s/step (1.85×) on its GPU", "training cost",
            C.predicate("ours: step time (base + MTA) / step time (base) ≤ 1.85", lambda v: v <= 1.85)),
    C.Claim("student_recovers", "The recovery training repairs the copied layers", "—", "ours",
            C.predicate("perplexity after recovery / with copied layers only < 1", lambda v: v < 1), kind="check"),
    C.Claim("kd_learns", "Distillation improves the start student", "—", "ours",
            C.predicate("held-out perplexity (base KD, first seed) / start student's < 1", lambda v: v < 1), kind="check"),
    C.Claim("teacher_ahead", "The teacher is ahead of the start student", "—", "ours",
            C.predicate("ROUGE-L(teacher) − ROUGE-L(start student) > 0", lambda v: v > 0), kind="check"),
    C.Claim("trl_agrees", "Our forward KL is TRL's generalised JSD at β = 0", "—", "ours",
            C.predicate("max |difference| on a real batch ≤ 1e-5 nats", lambda v: v <= 1e-5), kind="check"),
]


# --------------------------------------------------------------------------------------------
# models


def tiny_teacher(seed: int = 0):
    """A random 4-layer LLaMA on SmolLM2's tokenizer (hidden 32): the smoke profile's teacher."""
    from transformers import AutoModelForCausalLM

    from acl26 import tokenization

    tok = tokenization.load("smollm2")
    cfg = models.dense_config(len(tok), hidden=32, layers=TEACHER_LAYERS["tiny"], heads=4, kv_heads=2, intermediate=64)
    models.quiet_transformers()
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    model.eval()
    return model, tok


def load_models(params: dict, progress: bool = True) -> dict:
    """The teacher and the start student: ``{"teacher", "tokenizer", "student", "student_id", "recovery", ...}``."""
    if params["teacher"] == "smollm2":
        teacher, tok = models.smollm2()
        teacher_id = "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised)"
    elif params["teacher"] == "tiny":
        teacher, tok = tiny_teacher()
        teacher_id = "tiny random LLaMA, seed 0"
    else:
        teacher, tok = models.load_local(params["teacher"])
        if tok is None:
            raise ValueError(f"teacher folder {params['teacher']} has no tokenizer")
        teacher_id = f"local: {params['teacher']}"
    if getattr(tok, "chat_template", None) is None:
        raise ValueError(f"the teacher's tokenizer ({teacher_id}) has no chat template: the pairs are chat-formatted")
    for p in teacher.parameters():
        p.requires_grad_(False)
    out = {"teacher": teacher, "tokenizer": tok, "teacher_id": teacher_id, "recovery": None}
    if params["student"]:
        student, stok = models.load_local(params["student"])
        if stok is not None and stok.get_vocab() != tok.get_vocab():
            raise ValueError("the student's tokenizer differs from the teacher's: MTA needs a shared tokenizer")
        out["student"] = Dl.freeze_embeddings(student)
        out["student_id"] = f"local: {params['student']} ({D.state_digest(student)[:12]})"
    else:
        rec = Dl.recover(teacher, teacher_id + " " + D.state_digest(teacher)[:12], params, progress=progress)
        out["student"] = rec["model"]
        out["student_id"] = f"recovered {rec['folder']}"
        out["recovery"] = {k: v for k, v in rec.items() if k != "model"}
    if params.get("device", "cpu") != "cpu":
        if not torch.cuda.is_available():
            raise ValueError(f"device={params['device']!r} but torch sees no CUDA device")
        teacher.to(params["device"])
        out["student"].to(params["device"])
    out["student"].eval()
    return out


def conditions(params: dict) -> list[tuple[str, str, Dl.Condition, list[int]]]:
    """Every run: ``(base, condition name, Condition, seeds)``; the main pair per base loss, then the ablations."""
    lam = dict(lambda_dsa=params["lambda_dsa"], lambda_hid=params["lambda_hid"])
    out = []
    for base in params["base_losses"]:
        out.append((base, "base", Dl.Condition(base=base, **lam), list(params["seeds"])))
        out.append((base, "MTA", Dl.Condition(base=base, dsa=True, hid=True, **lam), list(params["seeds"])))
    ab_seeds = list(params["seeds"])[: params["ablation_seeds"]]
    ab = params["ablation_base"]
    if ab not in params["base_losses"]:  # the ablations compare against the full MTA and the base of their loss
        out.append((ab, "base", Dl.Condition(base=ab, **lam), ab_seeds))
        out.append((ab, "MTA", Dl.Condition(base=ab, dsa=True, hid=True, **lam), ab_seeds))
    for name, change in ABLATIONS.items():
        out.append((ab, name, Dl.Condition(base=ab, **{**dict(dsa=True, hid=True, **lam), **change}), ab_seeds))
    return out


def run_key(base: str, name: str, seed: int) -> str:
    return f"{base}|{name}|{seed}"


def trl_difference(teacher, student, batch: dict) -> float:
    """max |our forward KL − TRL's ``generalized_jsd_loss(beta=0)``| on one real batch (full vocabulary)."""
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental.gkd import GKDTrainer

    dev = next(student.parameters()).device
    batch = {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    with torch.no_grad():
        attn = batch["attn"].long()
        s = student(input_ids=batch["ids"], attention_mask=attn).logits.float()
        t = teacher(input_ids=batch["ids"], attention_mask=attn).logits.float()
        pos = D.predict_mask(batch["labels"]) & batch["attn"]
        labels = torch.where(pos, torch.zeros_like(batch["ids"]), torch.full_like(batch["ids"], -100))
        ours = L.forward_kl(torch.log_softmax(s, -1), torch.log_softmax(t, -1), pos).cpu()
        s, t, labels = s.cpu(), t.cpu(), labels.cpu()
        theirs = GKDTrainer.generalized_jsd_loss(s, t, labels=labels, beta=0.0)
    return float((ours.double() - theirs.double()).abs())


def run(params: dict, progress: bool = True) -> dict:
    """The whole study: models, pairs, teacher cache, every run, every evaluation; the inputs of :func:`record_claims`."""
    m = load_models(params, progress)
    teacher, tok, student = m["teacher"], m["tokenizer"], m["student"]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    pairs = D.examples(params)
    drawn = {k: len(v) for k, v in pairs.items()}
    train_items = D.encode(tok, pairs["train"], max_len=params["max_len"], skip_unlabelled=True)
    held_items = D.encode(tok, pairs["heldout"], max_len=params["max_len"], with_units=False, skip_unlabelled=True)
    # a prompt of max_len tokens or more leaves no response token: such pairs are left out
    pairs = {"train": [e.pair for e in train_items], "heldout": [e.pair for e in held_items]}
    if len(train_items) < params["batch_size"] or len(held_items) < 2:
        raise ValueError(f"max_len={params['max_len']} leaves too few pairs with a response token "
                         f"({len(train_items)} training, {len(held_items)} held-out)")
    n_s, n_t = student.config.num_hidden_layers, teacher.config.num_hidden_layers
    key = L.key_layers(n_s)
    s_layers = key["word"] + [x for x in key["phrase"] if x not in key["word"]]
    t_layers = [L.teacher_layer(x, n_s, n_t) for x in s_layers]
    cache = D.teacher_cache(teacher, train_items, t_layers, top_k=params["top_k"], pad_id=pad, progress=progress)
    setup = Dl.Setup(student, m["student_id"], train_items, cache, key, pad)

    ev = dict(samples=params["samples"], max_new_tokens=params["max_new_tokens"], seed=params["seed"] + 77, pad_id=pad,
              batch_size=params["eval_batch"], progress=progress)
    evals = {"teacher": Dl.evaluate(teacher, tok, pairs["heldout"], held_items, cache_key={"who": "teacher"}, **ev),
             "start": Dl.evaluate(student, tok, pairs["heldout"], held_items, cache_key={"who": "start"}, **ev)}
    runs, logs = {}, {}
    plan = conditions(params)
    for base, name, cond, seeds in plan:
        for seed in seeds:
            k = run_key(base, name, seed)
            if k in runs:
                continue
            cfg = Dl.DistillConfig(steps=params["steps"], batch_size=params["batch_size"], lr=params["lr"], seed=seed)
            res = Dl.distill(setup, cond, cfg, name=f"{base}-{name.replace(' ', '_').replace('+', '')}-s{seed}",
                             progress=progress)
            runs[k] = Dl.evaluate(res.model, tok, pairs["heldout"], held_items, cache_key={"who": k}, **ev)
            h = res.log["history"]
            logs[k] = {"seconds": res.log["seconds"], "from_cache": res.from_cache, "loss": h["loss"],
                       "base": h["base"], "dsa": h["dsa"], "hid": h["hid"],
                       "step_s_median": float(np.median(h["seconds"]))}
            del res
    ab = params["ablation_base"]
    timing = Dl.step_times(setup, {"base": Dl.Condition(base=ab),
                                   "MTA": Dl.Condition(base=ab, dsa=True, hid=True)},
                           batch_size=params["batch_size"], rounds=params["timing_rounds"])
    trl = trl_difference(teacher, student, setup.batch(list(range(min(4, len(train_items))))))
    return {"runs": runs, "logs": logs, "evals": evals, "timing": timing, "trl_diff": trl,
            "recovery": m["recovery"], "teacher_id": m["teacher_id"], "student_id": m["student_id"],
            "key_layers": key, "teacher_layers": t_layers, "student_layer_map": (m["recovery"] or {}).get("layers"),
            "n_student": n_s, "n_teacher": n_t, "base_losses": list(params["base_losses"]),
            "ablation_base": ab, "seeds": list(params["seeds"]), "ablation_seeds": list(params["seeds"])[: params["ablation_seeds"]],
            "n_resamples": params["n_resamples"], "pairs": pairs, "pairs_drawn": drawn, "tokenizer": tok, "train_items": train_items, "cache": cache,
            "params": {k: params[k] for k in ("steps", "batch_size", "lr", "lambda_dsa", "lambda_hid")}}


# --------------------------------------------------------------------------------------------
# tables


def _mean_ppl(nll) -> float:
    return float(math.exp(np.mean(nll)))


def seed_rows(results: dict) -> list[dict]:
    """One row per run: base, condition, seed, ROUGE-L and held-out perplexity."""
    rows = []
    for k, rec in results["runs"].items():
        base, name, seed = k.split("|")
        rows.append({"base loss": base, "condition": name, "seed": int(seed), "ROUGE-L": float(np.mean(rec["rouge"])),
                     "perplexity": _mean_ppl(rec["nll"])})
    return rows


def main_frame(results: dict):
    """Per base loss: base and base + MTA, mean over seeds with the t-interval, and their difference."""
    import pandas as pd

    rows = []
    for base in results["base_losses"]:
        for metric, fn in (("ROUGE-L", lambda r: float(np.mean(r["rouge"]))),
                           ("log-perplexity", lambda r: float(np.mean(r["nll"])))):
            vals = {c: [fn(results["runs"][run_key(base, c, s)]) for s in results["seeds"]] for c in ("base", "MTA")}
            d = stats.seed_interval(np.subtract(vals["MTA"], vals["base"]))
            row = {"base loss": L.BASE_NAMES[base], "metric": metric}
            for c in ("base", "MTA"):
                iv = stats.seed_interval(vals[c])
                row.update({f"{c}": iv.estimate, f"{c} ±": iv.hi - iv.estimate})
            row.update({"MTA − base": d.estimate, "lo": d.lo, "hi": d.hi,
                        "seeds MTA better": int(sum((a > b) if metric == "ROUGE-L" else (a < b)
                                                    for a, b in zip(vals["MTA"], vals["base"])))})
            rows.append(row)
    return pd.DataFrame(rows).set_index(["base loss", "metric"])


def ablation_frame(results: dict):
    """The ablations on their seeds: per-pair ROUGE-L averaged over seeds, with a bootstrap interval over pairs."""
    import pandas as pd

    ab = results["ablation_base"]
    rows = []
    full = _avg(results, ab, "MTA", "rouge")
    for name in ["base", "MTA"] + list(ABLATIONS):
        r = _avg(results, ab, name, "rouge")
        nll = _avg(results, ab, name, "nll")
        iv = stats.paired_bootstrap(r, full, "mean_diff", n_resamples=int(results["n_resamples"]), unit="pairs") \
            if name != "MTA" else None
        paper = PAPER_ABLATIONS.get("full MTA" if name == "MTA" else name)
        rows.append({"condition": "full MTA" if name == "MTA" else name, "paper ROUGE-L": paper, "ROUGE-L": float(np.mean(r)),
                     "perplexity": float(math.exp(np.mean(nll))),
                     "− full MTA": iv.estimate if iv else 0.0, "lo": iv.lo if iv else 0.0, "hi": iv.hi if iv else 0.0})
    return pd.DataFrame(rows).set_index("condition")


def _avg(results: dict, base: str, name: str, metric: str) -> np.ndarray:
    """Per held-out pair, ``metric`` averaged over the ablation seeds."""
    return np.mean([results["runs"][run_key(base, name, s)][metric] for s in results["ablation_seeds"]], axis=0)


# --------------------------------------------------------------------------------------------
# verdicts


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every claim from :func:`run`'s results.

    ``results``: ``runs`` {"base|condition|seed": {"rouge": [...], "nll": [...]}}, ``evals`` (teacher,
    start), ``seeds``, ``ablation_seeds``, ``base_losses``, ``ablation_base``, ``timing`` {"base": [s],
    "MTA": [s]} (interleaved, same length), ``recovery`` (or None), ``trl_diff``, ``n_resamples``.
    """
    runs, nr = results["runs"], int(results.get("n_resamples", 1999))
    seeds = results["seeds"]
    for base in ("sfkl", "fkl", "srkl"):
        cid = f"improves_{base}"
        if base not in results["base_losses"]:
            ledger.untested(cid, "this profile runs the main comparison for another base loss only (the paper profile "
                                 "runs all three)")
            continue
        b = [float(np.mean(runs[run_key(base, "base", s)]["rouge"])) for s in seeds]
        m = [float(np.mean(runs[run_key(base, "MTA", s)]["rouge"])) for s in seeds]
        d = np.subtract(m, b)
        ledger.record_noisy(cid, per_seed=list(d), point=float(np.mean(d)),
                            shown=f"{np.mean(d):+.2f} (ROUGE-L {np.mean(b):.2f} → {np.mean(m):.2f}; MTA better on "
                                  f"{sum(x > y for x, y in zip(m, b))} of {len(seeds)} seeds)",
                            note="difference per seed (same batches)")
    ab = results["ablation_base"]

    def diff(a: str, b: str) -> stats.Interval:
        return stats.paired_bootstrap(_avg(results, ab, a, "rouge"), _avg(results, ab, b, "rouge"), "mean_diff",
                                      n_resamples=nr, unit="held-out pairs")

    where = f"{L.BASE_NAMES[ab]} base, per-pair ROUGE-L averaged over {len(results['ablation_seeds'])} seed(s)"
    iv = diff("+DSA only", "+Hid only")
    ledger.record("dsa_over_hid", iv.estimate, interval=iv, shown=f"{iv.estimate:+.2f}", note=where)
    ivs = {n: diff("MTA", n) for n in ("word units only", "phrase units only")}
    test = next(c for c in CLAIMS if c.id == "word_and_phrase").test
    rank = {C.FAILS: 0, C.INCONCLUSIVE: 1, C.HOLDS: 2}
    pick = min(ivs, key=lambda n: (rank[test.decide(ivs[n])], ivs[n].lo))
    ledger.record("word_and_phrase", ivs[pick].estimate, interval=ivs[pick],
                  shown="; ".join(f"vs {n} {v.estimate:+.2f} [{v.lo:+.2f}, {v.hi:+.2f}]" for n, v in ivs.items()),
                  note=f"decided on the least favourable comparison ({pick}): it must hold against both; {where}")
    iv = diff("MTA", "no importance weights")
    ledger.record("importance_helps", iv.estimate, interval=iv, shown=f"{iv.estimate:+.2f}", note=where)
    t = results["timing"]
    ratios = np.asarray(t["MTA"]) / np.asarray(t["base"])
    iv = stats.repeat_range(ratios)
    ledger.record("overhead", iv.estimate, interval=iv,
                  shown=f"{iv.estimate:.2f}× ({np.median(t['base']):.2f} → {np.median(t['MTA']):.2f} s/step, median)",
                  note="forward + backward of one batch, interleaved rounds; the teacher's states come from the cache")
    rec = results.get("recovery")
    if rec is None:
        ledger.untested("student_recovers", "a local start student was given: no recovery training ran")
    else:
        v = rec["log"]["final"]["val_ppl"] / rec["copied_val_ppl"]
        ledger.record("student_recovers", v, shown=f"{v:.3g} ({rec['copied_val_ppl']:,.0f} → {rec['log']['final']['val_ppl']:.1f})")
    first = results["base_losses"][0]
    iv = stats.paired_bootstrap(runs[run_key(first, "base", seeds[0])]["nll"], results["evals"]["start"]["nll"],
                                "ppl_ratio", n_resamples=nr, unit="held-out pairs")
    ledger.record("kd_learns", iv.estimate, interval=iv, shown=f"{iv.estimate:.3f}")
    iv = stats.paired_bootstrap(results["evals"]["teacher"]["rouge"], results["evals"]["start"]["rouge"], "mean_diff",
                                n_resamples=nr, unit="held-out pairs")
    ledger.record("teacher_ahead", iv.estimate, interval=iv, shown=f"{iv.estimate:+.2f}")
    ledger.record("trl_agrees", float(results["trl_diff"]), shown=f"{results['trl_diff']:.2g}")


def reading(ledger: C.Ledger, results: dict, params: dict) -> str:
    """The notebook's "Reading the verdicts": each paper claim that does not hold, or cannot be decided,
    with its likely reason, from this run's figures (Markdown). Text that depends on a verdict is made
    here, in tested code, never by a notebook cell branching on verdicts."""
    v = ledger.entries
    abl_d = ablation_frame(results)
    notes = []
    for base in results["base_losses"]:
        e = v[f"improves_{base}"]
        if e.holds != C.HOLDS:
            notes.append(f"- **MTA improves {L.BASE_NAMES[base]}: {e.holds}.** Over {len(results['seeds'])} seeds the "
                         f"difference is {e.shown}. Each run has {params['steps']} steps, so the students stay close to "
                         "where they started, and a gain of the paper's size is of the order of the spread between seeds.")
    e = v["dsa_over_hid"]
    if e.holds != C.HOLDS:
        notes.append(f"- **DSA contributes more than Hid: {e.holds}.** Here +DSA only reaches ROUGE-L "
                     f"{abl_d.loc['+DSA only', 'ROUGE-L']:.2f} and perplexity {abl_d.loc['+DSA only', 'perplexity']:.0f}, "
                     f"against +Hid only's {abl_d.loc['+Hid only', 'ROUGE-L']:.2f} and "
                     f"{abl_d.loc['+Hid only', 'perplexity']:.0f} (the base: {abl_d.loc['base', 'ROUGE-L']:.2f} and "
                     f"{abl_d.loc['base', 'perplexity']:.0f}). A likely reason is how our student is made: its layers are "
                     "copies of the teacher's, so its states start in the teacher's basis. Hid, whose projection starts at "
                     "the identity, then gives every content token a direct target. DSA only asks the units' relative "
                     "geometry to match, which copied layers already share in part. The paper's students are separately "
                     "pretrained models, whose states live in another basis.")
    e = v["word_and_phrase"]
    if e.holds != C.HOLDS:
        hid_leads = abl_d.loc["+Hid only", "ROUGE-L"] >= abl_d.loc["+DSA only", "ROUGE-L"]
        notes.append(f"- **Word and phrase units together beat either alone: {e.holds}** ({e.shown}). "
                     + ("Hid, which uses no units, does at least as well alone as DSA does here, so changing DSA's units "
                        "moves the result little." if hid_leads else
                        "The difference the unit choice makes is smaller than the interval over held-out pairs at this "
                        "length."))
    e = v["importance_helps"]
    if e.holds != C.HOLDS:
        interval = f", interval {e.interval.describe()}" if e.interval is not None else ""
        notes.append(f"- **Importance weights help: {e.holds}** (full − no weights {e.shown}{interval}). "
                     f"Each ablation runs on {len(results['ablation_seeds'])} seeds only, and an effect of this size lies "
                     "within its interval over held-out pairs.")
    e = v["overhead"]
    if e.holds != C.HOLDS:
        notes.append(f"- **Overhead: {e.holds}** ({e.shown}).")
    return "\n".join(notes) if notes else "Every claim tested here holds."
