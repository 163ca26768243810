"""MTA chapter (ACL 2026, arXiv 2605.01374): the runs.

Backs ``notebooks/mta.ipynb``. The losses are :mod:`.losses`, the units :mod:`.units`, the pairs
and the teacher's cache :mod:`.data`, the student and the loop :mod:`.distill`. Here: the teacher
and the start student (made here or local checkpoints, :func:`load_models`), the conditions
(:func:`conditions`), every run and its evaluation (:func:`run_experiments`: what
:func:`.verdicts.record_claims` reads). The parameters and claims are :mod:`.spec`, the tables made
from the results :mod:`.tables`.
"""

from __future__ import annotations

import numpy as np
import torch

from acl26 import models
from acl26.papers.mta import data as D
from acl26.papers.mta import distill as Dl
from acl26.papers.mta import losses as L
from acl26.papers.mta.spec import ABLATIONS, TEACHER_LAYERS
from acl26.papers.mta.tables import run_key


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


def _precision(params: dict, student) -> str:
    """The training precision the runs really use (bf16 autocast only where the device computes it natively)."""
    from acl26 import training

    dev = next(student.parameters()).device
    return "bf16 autocast (fp32 weights, optimizer and losses)" if training.bf16_runs(params["bf16"], dev) \
        else ("fp32 (bf16 asked for, not native here)" if params["bf16"] else "fp32")


def run_experiments(params: dict, progress: bool = True) -> dict:
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
    evals = {"teacher": Dl.evaluate(teacher, tok, pairs["heldout"], held_items, cache_key={"who": "teacher"}, **ev)}
    # distillation's own measure beside ROUGE-L: KL(teacher ‖ student) per held-out pair (nats/token), from
    # the pass that scores the NLL; the teacher's log-probabilities are made once, each model then runs alone
    t_lp = Dl.teacher_logprobs(teacher, held_items, pad)
    ev_kl = dict(ev, teacher_lp=t_lp, teacher_key=m["teacher_id"] + " " + D.state_digest(teacher))
    evals["start"] = Dl.evaluate(student, tok, pairs["heldout"], held_items, cache_key={"who": "start"}, **ev_kl)
    kl = {"start": evals["start"].pop("kl")}
    runs, logs = {}, {}
    plan = conditions(params)
    for base, name, cond, seeds in plan:
        for seed in seeds:
            k = run_key(base, name, seed)
            if k in runs:
                continue
            cfg = Dl.DistillConfig(steps=params["steps"], batch_size=params["batch_size"], lr=params["lr"], seed=seed,
                                   bf16=params["bf16"])
            res = Dl.distill(setup, cond, cfg, name=f"{base}-{name.replace(' ', '_').replace('+', '')}-s{seed}",
                             progress=progress)
            runs[k] = Dl.evaluate(res.model, tok, pairs["heldout"], held_items, cache_key={"who": k}, **ev_kl)
            kl[k] = runs[k].pop("kl")
            h = res.log["history"]
            logs[k] = {"seconds": res.log["seconds"], "from_cache": res.from_cache, "loss": h["loss"],
                       "base": h["base"], "dsa": h["dsa"], "hid": h["hid"],
                       "step_s_median": float(np.median(h["seconds"]))}
            del res
    ab = params["ablation_base"]
    timing = Dl.step_times(setup, {"base": Dl.Condition(base=ab),
                                   "MTA": Dl.Condition(base=ab, dsa=True, hid=True)},
                           batch_size=params["batch_size"], rounds=params["timing_rounds"],
                           teacher=teacher, teacher_layers=t_layers, bf16=params["bf16"])
    trl = trl_difference(teacher, student, setup.batch(list(range(min(4, len(train_items))))))
    del t_lp
    return {"runs": runs, "logs": logs, "evals": evals, "kl": kl, "timing": timing, "trl_diff": trl,
            "recovery": m["recovery"], "teacher_id": m["teacher_id"], "student_id": m["student_id"],
            "key_layers": key, "teacher_layers": t_layers, "student_layer_map": (m["recovery"] or {}).get("layers"),
            "n_student": n_s, "n_teacher": n_t, "base_losses": list(params["base_losses"]),
            "ablation_base": ab, "seeds": list(params["seeds"]), "ablation_seeds": list(params["seeds"])[: params["ablation_seeds"]],
            "n_resamples": params["n_resamples"], "precision": _precision(params, student), "pairs": pairs, "pairs_drawn": drawn, "tokenizer": tok, "train_items": train_items, "cache": cache,
            "params": {k: params[k] for k in ("steps", "batch_size", "lr", "lambda_dsa", "lambda_hid")}}

