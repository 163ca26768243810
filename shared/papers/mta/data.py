"""MTA's data: prompt/response pairs with real references, their units, and the teacher's cache.

No Dolly-style instruction set is on the registries, so the pairs are built from real text and
real tasks (:func:`examples`):

* **State of the Union continuation**: a passage of ``prompt_words`` words from an address is the
  prompt ("Continue this passage from a State of the Union address"), and the address's true next
  ``response_words`` words are the reference. Training pairs come from the corpus's train split
  of addresses, held-out pairs from its test split (other addresses; :mod:`acl26.corpus`).
* **reasoning-gym ``chain_sum``**: the question is the prompt and the worked solution (one line
  per step, then ``#### answer``) the reference; held-out problems have another seed, and any
  question seen in training is removed.

Each pair is one chat-formatted sequence (system, user, assistant turn), tokenized with offsets
(:func:`encode`). The labels are the response tokens and the closing EOS; the word and phrase
spans (:mod:`.units`) cover the prompt's and the response's text, as in the paper.

:func:`teacher_cache` runs the teacher once over the training pairs and stores, per position with
a label, its top-k token ids and exact log-probabilities, and its hidden states at the key
layers; full-vocabulary logits are too big to cache. It is keyed by the teacher's weights, the
pairs and the layers, and written atomically.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from acl26 import checks, corpus, io, paths, problems
from acl26.papers.mta import units

SYSTEM = "Answer the request."
SOTU_PROMPT = "Continue this passage from a State of the Union address:\n\n"
#: bump when the pairs, their encoding or the cache layout change
DATA_VERSION = 1


@dataclass(frozen=True)
class Pair:
    source: str  # "sotu" or "chain_sum"
    prompt: str  # the user turn
    reference: str


@dataclass
class Encoded:
    """One tokenized pair: ids, the label mask (True on the response tokens and EOS), the content mask
    (True on the tokens of the prompt's and the response's text, not the chat template's) and its units."""

    pair: Pair
    ids: list[int]
    labels: list[bool]
    words: list[tuple[int, int]] = field(default_factory=list)
    phrases: list[tuple[int, int]] = field(default_factory=list)
    content: list[bool] | None = None  # None: every token


def _sotu_split(split: str):
    docs = corpus.source_documents("sotu")
    return [d for i, d in enumerate(docs) if corpus.split_of(i) == split]


def sotu_pairs(n: int, seed: int, split: str, *, prompt_words: int, response_words: int) -> list[Pair]:
    """``n`` continuation pairs from the addresses of one corpus split (one per draw of address and offset)."""
    checks.integer("n", n, 0)
    checks.integer("prompt_words", prompt_words, 1)
    checks.integer("response_words", response_words, 1)
    seed = checks.seed("seed", seed)
    need = prompt_words + response_words
    docs = [d for d in _sotu_split(split) if len(d.text.split()) > need]
    if not docs:
        raise ValueError(f"no State of the Union address in split {split!r} has more than prompt_words + "
                         f"response_words = {need} words")
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        words = rng.choice(docs).text.split()
        at = rng.randrange(0, len(words) - need)
        prompt = " ".join(words[at:at + prompt_words])
        ref = " ".join(words[at + prompt_words:at + need])
        out.append(Pair("sotu", SOTU_PROMPT + prompt, ref))
    return out


def gym_pairs(n: int, seed: int, *, exclude: Sequence[str] = ()) -> list[Pair]:
    """``n`` ``chain_sum`` pairs (2-4 terms of 1-2 digits): question -> worked solution."""
    checks.integer("n", n, 0)
    seed = checks.seed("seed", seed)
    if n == 0:
        return []
    seen = set(exclude)
    out: list[Pair] = []
    draw = 0
    while len(out) < n:
        for p in problems.reasoning_gym_problems("chain_sum", 2 * n, seed + 7919 * draw, min_terms=2, max_terms=4,
                                                 min_digits=1, max_digits=2):
            if p.question not in seen and p.solution is not None and len(out) < n:
                seen.add(p.question)
                out.append(Pair("chain_sum", p.question, problems.format_response(p, "cot")))
        draw += 1
        if draw > 20:
            raise ValueError(f"could not draw {n} distinct chain_sum problems")
    return out


def examples(params: dict) -> dict[str, list[Pair]]:
    """The training pool and the held-out pairs: ``{"train": [...], "heldout": [...]}``.

    ``params``: ``train_pairs``, ``eval_pairs``, ``gym_share``, ``prompt_words``, ``response_words``, ``seed``.
    """
    seed = params["seed"]
    out = {}
    train_gym = int(round(params["train_pairs"] * params["gym_share"]))
    eval_gym = int(round(params["eval_pairs"] * params["gym_share"]))
    kw = dict(prompt_words=params["prompt_words"], response_words=params["response_words"])
    train = sotu_pairs(params["train_pairs"] - train_gym, seed, "train", **kw) + gym_pairs(train_gym, seed)
    held = sotu_pairs(params["eval_pairs"] - eval_gym, seed + 1, "test", **kw) + \
        gym_pairs(eval_gym, seed + 5000, exclude=[p.prompt for p in train if p.source == "chain_sum"])
    random.Random(seed).shuffle(train)
    out["train"], out["heldout"] = train, held
    return out


def prompt_text(tokenizer, user: str) -> str:
    """The chat-formatted prompt (system, user, assistant header)."""
    return tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                                         tokenize=False, add_generation_prompt=True)


def encode(tokenizer, pairs: Sequence[Pair], *, max_len: int, with_units: bool = True,
           skip_unlabelled: bool = False) -> list[Encoded]:
    """Tokenize each pair (prompt + reference + EOS) with its units; pairs longer than ``max_len`` are cut
    at ``max_len`` tokens (the labels and units inside are kept). A pair whose cut leaves no response
    token raises ValueError, or with ``skip_unlabelled`` is left out (``Encoded.pair`` says which were kept)."""
    checks.integer("max_len", max_len, 8)
    out = []
    for p in pairs:
        head = prompt_text(tokenizer, p.prompt)
        text = head + p.reference + tokenizer.eos_token
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offs = enc["input_ids"][:max_len], enc["offset_mapping"][:max_len]
        resp_start = len(head)
        labels = [s >= resp_start and e > s for s, e in offs]
        if not any(labels):
            if skip_unlabelled:
                continue
            raise ValueError(f"max_len={max_len} leaves no response token of a pair whose prompt is "
                             f"{len(tokenizer(head, add_special_tokens=False)['input_ids'])} tokens long")
        user_at = head.rindex(p.prompt)
        spans_text = ((user_at, user_at + len(p.prompt)), (resp_start, resp_start + len(p.reference)))
        content = [e > s and any(s < b and e > a for a, b in spans_text) for s, e in offs]
        e = Encoded(p, list(ids), labels, content=content)
        if with_units:
            for field_, fn in (("words", units.word_char_spans), ("phrases", units.phrase_char_spans)):
                spans = [(s + user_at, t + user_at) for s, t in fn(p.prompt)] + \
                        [(s + resp_start, t + resp_start) for s, t in fn(p.reference)]
                setattr(e, field_, units.to_token_spans(spans, offs))
        out.append(e)
    return out


def pad_batch(items: Sequence[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ``ids``, ``attn``, ``labels`` and ``content`` (bool) tensors of equal length."""
    t = max(len(e.ids) for e in items)
    ids = torch.full((len(items), t), pad_id, dtype=torch.long)
    attn = torch.zeros((len(items), t), dtype=torch.bool)
    lab = torch.zeros((len(items), t), dtype=torch.bool)
    content = torch.zeros((len(items), t), dtype=torch.bool)
    for i, e in enumerate(items):
        ids[i, :len(e.ids)] = torch.tensor(e.ids)
        attn[i, :len(e.ids)] = True
        lab[i, :len(e.ids)] = torch.tensor(e.labels)
        content[i, :len(e.ids)] = torch.tensor(e.content) if e.content is not None else True
    return {"ids": ids, "attn": attn, "labels": lab, "content": content}


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def encoded_digest(items: Sequence[Encoded]) -> str:
    return digest([[e.ids, e.labels, e.words, e.phrases] for e in items])


def state_digest(model) -> str:
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if v.numel() else b"")
    return h.hexdigest()


class TeacherCache:
    """The teacher's outputs on the training pairs, memory-mapped: see :func:`teacher_cache`."""

    def __init__(self, folder: Path):
        from acl26.errors import cache_entry_error

        self.folder = Path(folder)
        self.meta = io.read_cached_json(self.folder / "meta.json", "MTA teacher cache")
        file = self.folder / "meta.json"
        try:
            m = self.meta
            n, t, k, d, layers = m["n"], m["max_len"], m["top_k"], m["hidden_size"], len(m["teacher_layers"])
            want = {"topk_idx.npy": (np.int32, (n, t, k)), "topk_logp.npy": (np.float32, (n, t, k)),
                    "hidden.npy": (np.float16, (n, t, layers, d))}
            arrays = {}
            for name, (dtype, shape) in want.items():  # a truncated or foreign file fails here, named
                file = self.folder / name
                arr = np.load(file, mmap_mode="r")
                if arr.dtype != dtype or arr.shape != tuple(shape):
                    raise ValueError(f"holds {arr.dtype} {arr.shape}, its meta.json says {np.dtype(dtype)} {tuple(shape)}")
                arrays[name] = arr
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise cache_entry_error(self.folder, exc, file=file, what="MTA teacher cache") from exc
        self.topk_idx = arrays["topk_idx.npy"]
        self.topk_logp = arrays["topk_logp.npy"]
        self.hidden = arrays["hidden.npy"]  # [N, T, L, d] float16

    @property
    def layers(self) -> list[int]:
        return list(self.meta["teacher_layers"])

    def batch(self, idx: Sequence[int], length: int) -> dict[str, torch.Tensor]:
        """Top-k ids/log-probs ``[B, length, k]`` (at the position *before* each label) and states
        ``[B, length, L, d]`` (float32) of the pairs ``idx``."""
        idx = np.asarray(idx)
        return {"topk_idx": torch.from_numpy(np.ascontiguousarray(self.topk_idx[idx, :length])).long(),
                "topk_logp": torch.from_numpy(np.ascontiguousarray(self.topk_logp[idx, :length])),
                "hidden": torch.from_numpy(np.ascontiguousarray(self.hidden[idx, :length])).float()}


def predict_mask(labels: torch.Tensor) -> torch.Tensor:
    """Positions whose *next* token has a label (where the logits are taken): ``labels`` shifted left."""
    out = torch.zeros_like(labels)
    out[:, :-1] = labels[:, 1:]
    return out


@torch.no_grad()
def teacher_cache(teacher, items: Sequence[Encoded], teacher_layers: Sequence[int], *, top_k: int, pad_id: int,
                  batch_size: int = 16, progress: bool = True) -> TeacherCache:
    """Run ``teacher`` over ``items`` once and cache its top-k and key-layer states (see the module docstring)."""
    from tqdm import tqdm

    checks.integer("top_k", top_k, 1)
    checks.integer("batch_size", batch_size, 1)
    n_layers = teacher.config.num_hidden_layers
    for layer in teacher_layers:
        try:
            checks.integer("teacher layer", layer, 0, n_layers)  # 2.5 is refused, never cut to 2
        except ValueError:
            raise ValueError(f"teacher layer {layer!r} is outside [0, {n_layers}] or not an integer") from None
    key = digest({"teacher": state_digest(teacher), "items": encoded_digest(items), "layers": list(teacher_layers),
                  "top_k": top_k, "v": DATA_VERSION})
    folder = paths.cache_dir() / "mta" / f"teacher-{key[:16]}"
    if (folder / "meta.json").is_file():
        return TeacherCache(folder)
    io.check_target(folder, kind="folder")  # before the teacher runs
    t_max = max(len(e.ids) for e in items)
    n, d = len(items), teacher.config.hidden_size
    was = teacher.training
    teacher.eval()
    with io.atomic_dir(folder) as tmp:
        idx_mm = np.lib.format.open_memmap(tmp / "topk_idx.npy", mode="w+", dtype=np.int32, shape=(n, t_max, top_k))
        lp_mm = np.lib.format.open_memmap(tmp / "topk_logp.npy", mode="w+", dtype=np.float32, shape=(n, t_max, top_k))
        hid_mm = np.lib.format.open_memmap(tmp / "hidden.npy", mode="w+", dtype=np.float16,
                                           shape=(n, t_max, len(teacher_layers), d))
        for lo in tqdm(range(0, n, batch_size), desc="teacher cache", unit="batch", disable=not progress):
            chunk = items[lo:lo + batch_size]
            b = pad_batch(chunk, pad_id)
            dev = next(teacher.parameters()).device
            out = teacher(input_ids=b["ids"].to(dev), attention_mask=b["attn"].long().to(dev), output_hidden_states=True)
            logp = torch.log_softmax(out.logits.float(), dim=-1).cpu()
            top = logp.topk(top_k, dim=-1)
            t = b["ids"].shape[1]
            idx_mm[lo:lo + len(chunk), :t] = top.indices.numpy().astype(np.int32)
            lp_mm[lo:lo + len(chunk), :t] = top.values.numpy()
            hid = torch.stack([out.hidden_states[layer].float().cpu() for layer in teacher_layers], dim=2)
            if hid.abs().max() >= torch.finfo(torch.float16).max:
                raise ValueError("the teacher's states overflow float16: they cannot be cached as they are")
            hid_mm[lo:lo + len(chunk), :t] = (hid * b["attn"][..., None, None]).half().numpy()
        for mm in (idx_mm, lp_mm, hid_mm):
            mm.flush()
        del idx_mm, lp_mm, hid_mm
        io.write_json(tmp / "meta.json", {"key": key, "teacher_layers": list(teacher_layers), "top_k": top_k,
                                          "n": n, "max_len": t_max, "hidden_size": d})
    teacher.train(was)
    return TeacherCache(folder)
