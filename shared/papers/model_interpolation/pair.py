"""The Instruct / Thinking pair of the model-interpolation chapter, made here from one parent.

No Thinking checkpoint can be had offline, so both ends of the interpolation are fine-tuned from
the same parent (SmolLM2-135M-Instruct, or a tiny LM in the smoke profile) on the same problems,
with two answer styles (:func:`target`):

* **Instruct** answers directly: ``#### <answer>``;
* **Thinking** first reasons inside ``<think> … </think>``, one line per step, then answers.
  A share of the traces (``check_share``) adds a checking pass that redoes the steps, and the
  problems have 1 to several steps, so the traces vary in length and over-thinking can show.

The problems (:func:`training_problems`) are reasoning-gym ``chain_sum`` sums of 2 to
``max_terms`` terms and ``gsm_symbolic`` problems from the training half of the GSM8K templates
(:func:`acl26.problems.gsm8k_templates`), kept when the prompt and the Thinking response fit in
``max_len`` tokens. The evaluation problems (:func:`eval_problems`) are held out: other seeds,
any question seen in training removed, and the other half of the GSM8K templates.

:func:`fine_tune` runs supervised fine-tuning (loss on the response tokens only) through the
book's one training loop (:func:`acl26.training.train`), so each model is trained once per
configuration and cached.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import torch

from acl26 import checks, models, problems, training
from acl26.problems import Problem

STYLES = ("instruct", "thinking")
#: the system prompt of every rollout and training example (short: prefill costs on 2 cores)
SYSTEM = "Solve the problem."
CHECK_HEADER = "Let me check."


def prompt_text(tokenizer, question: str, *, system: str | None = SYSTEM) -> str:
    """The chat-formatted prompt, ending with the assistant's turn."""
    messages = ([{"role": "system", "content": system}] if system is not None else []) + \
               [{"role": "user", "content": question}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def target(problem: Problem, style: str, *, check: bool = False) -> str:
    """The response a model of ``style`` is trained to give; ``check`` adds a checking pass (Thinking)."""
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    if style == "instruct":
        return problems.format_response(problem, "direct")
    steps = problem.steps()
    if steps is None:
        raise ValueError(f"problem {problem.id} has no worked solution")
    body = steps + (f"\n{CHECK_HEADER}\n{steps}" if check else "")
    return f"<think>\n{body}\n</think>\n\n#### {problem.answer}"


def training_problems(n: int, seed: int, *, max_terms: int, gsm_share: float) -> tuple[Problem, ...]:
    """``n`` training problems: ``chain_sum`` (2..max_terms terms of 1-2 digits) and a share of ``gsm_symbolic``
    from the training half of the GSM8K templates."""
    checks.integer("n", n, 1)
    checks.seed("seed", seed)
    checks.integer("max_terms", max_terms, 2)
    checks.number("gsm_share", gsm_share, 0, 1)
    n_gsm = int(round(n * gsm_share))
    out = list(problems.reasoning_gym_problems("chain_sum", n - n_gsm, seed, min_terms=2, max_terms=max_terms,
                                               min_digits=1, max_digits=2)) if n - n_gsm else []
    if n_gsm:
        out += [p for p in problems.reasoning_gym_problems("gsm_symbolic", n_gsm, seed,
                                                           templates=problems.gsm8k_templates("train"))
                if p.solution is not None]
    random.Random(seed).shuffle(out)
    return tuple(out)


def eval_problems(n: int, seed: int, *, max_terms: int, exclude: Sequence[Problem] = ()) -> tuple[Problem, ...]:
    """``n`` held-out ``chain_sum`` problems (2..max_terms terms), none with a question in ``exclude``."""
    checks.integer("n", n, 1)
    checks.seed("seed", seed)
    seen = {p.question for p in exclude}
    out: list[Problem] = []
    draw = 0
    while len(out) < n:
        batch = problems.reasoning_gym_problems("chain_sum", 4 * n, seed + 7919 * draw, min_terms=2,
                                                max_terms=max_terms, min_digits=1, max_digits=2)
        for p in batch:
            if p.question not in seen and len(out) < n:
                seen.add(p.question)
                out.append(p)
        draw += 1
        if draw > 20:
            raise ValueError(f"could not draw {n} held-out problems distinct from the training set")
    return tuple(out)


def encode(tokenizer, items: Sequence[Problem], style: str, *, max_len: int, check_share: float, seed: int,
           system: str | None = SYSTEM) -> tuple[torch.Tensor, torch.Tensor, list[Problem]]:
    """Token rows, labels (:data:`acl26.training.IGNORE` on the prompt and the padding) and the problems kept.

    The response ends with the tokenizer's EOS. Each problem gets its check by a coin of ``seed``,
    the same for both styles (only Thinking shows it). A problem is kept only if the prompt and its
    *Thinking* response fit in ``max_len``, so both styles train on the same problems.
    """
    checks.integer("max_len", max_len, 8)
    checks.number("check_share", check_share, 0, 1)
    rng = random.Random(checks.seed("seed", seed))
    eos = tokenizer.eos_token
    rows, labels, kept = [], [], []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    for p in items:
        check = rng.random() < check_share
        prompt = tokenizer(prompt_text(tokenizer, p.question, system=system), add_special_tokens=False)["input_ids"]
        longest = tokenizer(target(p, "thinking", check=check) + eos, add_special_tokens=False)["input_ids"]
        if len(prompt) + len(longest) > max_len:
            continue
        resp = tokenizer(target(p, style, check=check) + eos, add_special_tokens=False)["input_ids"]
        ids = prompt + resp
        rows.append(ids + [pad] * (max_len - len(ids)))
        labels.append([training.IGNORE] * len(prompt) + resp + [training.IGNORE] * (max_len - len(ids)))
        kept.append(p)
    if not rows:
        raise ValueError(f"no problem fits in max_len={max_len} tokens")
    return torch.tensor(rows, dtype=torch.long), torch.tensor(labels, dtype=torch.long), kept


def fingerprint(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def tiny_parent(seed: int = 0):
    """A tiny random LLaMA-style LM on SmolLM2's tokenizer (smoke profile and tests): 2 layers, hidden 32."""
    from transformers import AutoModelForCausalLM

    from acl26 import tokenization

    tok = tokenization.load("smollm2")
    cfg = models.dense_config(len(tok), hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64)
    cfg.tie_word_embeddings = True
    models.quiet_transformers()
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(cfg), tok


def parent(kind: str):
    """``(model, tokenizer)`` of the pair's parent: ``"smollm2"`` or ``"tiny"``."""
    if kind == "smollm2":
        return models.smollm2()
    if kind == "tiny":
        return tiny_parent()
    raise ValueError(f"parent must be 'smollm2' or 'tiny', got {kind!r}")


def fine_tune(style: str, params: dict, *, progress: bool = True) -> training.TrainResult:
    """Fine-tune the parent to ``style`` (cached by its whole configuration; see :mod:`acl26.training`).

    ``params``: ``parent``, ``train_problems``, ``max_terms``, ``gsm_share``, ``check_share``,
    ``max_len``, ``steps_instruct`` / ``steps_thinking``, ``ft_batch``, ``ft_lr``, ``seed`` and, if present,
    ``bf16`` (autocast where the CPU computes bf16 natively, :class:`acl26.training.TrainConfig`).
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    base, tok = parent(params["parent"])
    items = training_problems(params["train_problems"], params["seed"], max_terms=params["max_terms"],
                              gsm_share=params["gsm_share"])
    x, y, kept = encode(tok, items, style, max_len=params["max_len"], check_share=params["check_share"],
                        seed=params["seed"])
    n_val = max(8, len(x) // 20)
    train_x, train_y, val_x, val_y = x[n_val:], y[n_val:], x[:n_val], y[:n_val]
    tc = training.TrainConfig(steps=params[f"steps_{style}"], batch_size=params["ft_batch"], lr=params["ft_lr"],
                              warmup_frac=0.1, min_lr_frac=0.1, weight_decay=0.0, seed=params["seed"],
                              eval_every=max(1, params[f"steps_{style}"] // 4), eval_blocks=len(val_x),
                              checkpoint_every=25, bf16=bool(params.get("bf16", False)))
    parent_id = {"smollm2": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised)", "tiny": "tiny random LLaMA, seed 0"}
    extra = {"parent": parent_id[params["parent"]], "style": style, "task": "model_interpolation pair v1"}
    return training.train(base.config, tc, train_x, val_x, name=f"mi-{style}-{params['parent']}",
                          data_fingerprint=fingerprint(x, y), init=lambda: base, key_extra=extra,
                          train_labels=train_y, val_labels=val_y, progress=progress)


def describe_data(params: dict) -> dict:
    """What the pair trains on: counts per source, the share with a check and the token lengths."""
    tok = _smollm2_tokenizer()  # both parents use SmolLM2's tokenizer
    items = training_problems(params["train_problems"], params["seed"], max_terms=params["max_terms"],
                              gsm_share=params["gsm_share"])
    out = {}
    for style in STYLES:
        x, y, kept = encode(tok, items, style, max_len=params["max_len"], check_share=params["check_share"],
                            seed=params["seed"])
        lengths = (y != training.IGNORE).sum(dim=1).tolist()
        out[style] = {"examples": len(kept), "response_tokens": lengths,
                      "sources": {s: sum(p.source == s for p in kept) for s in sorted({p.source for p in kept})}}
    return out


def _smollm2_tokenizer():
    from acl26 import tokenization

    return tokenization.load("smollm2")
