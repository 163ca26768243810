"""Evaluation for the chapters that score language models: perplexity, generation, reasoning, ROUGE-L.

* :func:`perplexity` -- of a causal LM over one long token sequence, sliding window
  (``context_length``, ``stride``), batched. Every token with at least one token of context
  in its window is scored exactly once, with the longest context the window rule gives it
  (the HuggingFace "perplexity of fixed-length models" recipe); with ``stride <
  context_length`` that is every token but the first. Returns perplexity, the number of
  scored tokens and the summed NLL (nats), so bits per byte can be compared across tokenizers.
* :func:`generate` -- batched sampling with the KV cache through ``model.generate`` and one
  explicit ``GenerationConfig`` (temperature, top-p, top-k, max_new_tokens; greedy when
  ``temperature == 0``), left padding, ``n`` samples per prompt; texts and generated-token
  counts. Seeds make it deterministic: each batch draws from ``torch.manual_seed(seed + b)``
  inside a forked RNG, so the same call gives the same texts (on the same machine and torch).
* Reasoning metrics: Mean@k (mean accuracy over k
  rollouts), Pass@k (the unbiased estimator of Chen et al. 2021, ``1 - C(n-c, k)/C(n, k)`` in
  its numerically stable product form), Vote@k (majority vote over extracted answers; ties go
  to the answer seen first), Token #N (:func:`length_stats`) and Think #R (:func:`think_rate`,
  the fraction of responses containing ``</think>``). :func:`reasoning_metrics` computes all
  of them from the raw responses; answers are extracted with :func:`acl26.problems.extract_answer`.
* ROUGE-L for distillation, through Google's ``rouge-score`` package (not re-implemented), following the
  Super-NaturalInstructions ``compute_metrics`` that MiniLLM / DistiLLM reuse: Porter stemming,
  the best F-measure over the references of each example, mean over examples, times 100.
"""

from __future__ import annotations

import inspect
import math
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from acl26 import checks, problems

if TYPE_CHECKING:
    from transformers import GenerationConfig

THINK_END = "</think>"


# --------------------------------------------------------------------------------------------
# perplexity


@dataclass(frozen=True)
class Perplexity:
    """Perplexity ``exp(nll_sum / n_tokens)`` over ``n_tokens`` scored tokens (NLL in nats)."""

    ppl: float
    n_tokens: int
    nll_sum: float

    @property
    def mean_nll(self) -> float:
        return self.nll_sum / self.n_tokens

    def bits_per_byte(self, n_bytes: int) -> float:
        """Summed NLL in bits over ``n_bytes`` UTF-8 bytes of the scored text (tokenizer-independent)."""
        checks.integer("n_bytes", n_bytes, 1)
        return self.nll_sum / math.log(2) / n_bytes


def sliding_windows(n: int, context_length: int, stride: int) -> list[tuple[int, int, int]]:
    """The windows of :func:`perplexity`: ``(begin, end, first_target)`` with tokens
    ``first_target .. end-1`` scored from the context ``begin .. t-1``."""
    n = checks.integer("n", n)
    context_length = checks.integer("context_length", context_length)
    stride = checks.integer("stride", stride)
    if n < 2:
        raise ValueError(f"ids must hold at least 2 tokens, got {n}")
    if context_length < 2:
        raise ValueError(f"context_length must be >= 2, got {context_length}")
    if not 1 <= stride <= context_length:
        raise ValueError(f"stride must be in [1, context_length={context_length}], got {stride}")
    windows = []
    prev_end = 0
    begin = 0
    while True:
        end = min(begin + context_length, n)
        first = max(prev_end, begin + 1)
        if first < end:
            windows.append((begin, end, first))
        prev_end = end
        if end == n:
            break
        begin += stride
    return windows


def keeps_logits(model) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (transformers' causal LMs: the head then runs
    only at the positions asked for, an int for the last ones or a 1-D tensor of columns)."""
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # a forward without a signature
        return False


def _device(model) -> Any:
    return next(model.parameters()).device


def perplexity(model, ids: Sequence[int] | np.ndarray | Any, *, context_length: int, stride: int | None = None,
               batch_size: int = 8, progress: bool = False) -> Perplexity:
    """Perplexity of causal LM ``model`` over the 1-D token sequence ``ids`` (sliding window).

    ``stride`` defaults to ``context_length // 2``. Windows of equal length are batched
    ``batch_size`` at a time; only the logits of scored positions are computed where the model
    accepts ``logits_to_keep``. The sequence is taken as is: add a BOS id yourself if the model
    expects one. Runs under ``torch.inference_mode`` with the model in eval mode (restored after).
    """
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm

    seq = torch.as_tensor(np.asarray(ids) if not isinstance(ids, torch.Tensor) else ids)
    if seq.ndim != 1 or seq.dtype.is_floating_point or seq.dtype == torch.bool:
        raise ValueError("ids must be a 1-D sequence of integer token ids")
    checks.integer("batch_size", batch_size, 1)
    checks.integer("context_length", context_length, 2)
    stride = context_length // 2 if stride is None else stride
    windows = sliding_windows(int(seq.numel()), context_length, stride)
    vocab = model.get_input_embeddings().num_embeddings
    if int(seq.min()) < 0 or int(seq.max()) >= vocab:
        raise ValueError(f"ids must lie in [0, {vocab}) (the model's embedding table)")
    max_pos = getattr(model.config, "max_position_embeddings", None)
    if max_pos is not None and context_length > max_pos:
        raise ValueError(f"context_length {context_length} exceeds the model's max_position_embeddings {max_pos}")
    seq = seq.long()
    device = _device(model)
    keep_ok = keeps_logits(model)

    # group consecutive windows of equal length into batches
    batches: list[list[tuple[int, int, int]]] = []
    for w in windows:
        if batches and len(batches[-1]) < batch_size and (batches[-1][0][1] - batches[-1][0][0]) == (w[1] - w[0]):
            batches[-1].append(w)
        else:
            batches.append([w])

    nll_sum = 0.0
    n_tokens = 0
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for batch in tqdm(batches, desc="perplexity", unit="batch", disable=not progress):
                length = batch[0][1] - batch[0][0]
                x = torch.stack([seq[b:e] for b, e, _ in batch]).to(device)
                # position p (0-based in the window) predicts token p+1; the earliest scored
                # target in this batch needs the logits from position (first - begin - 1)
                earliest = min(first - b for b, _, first in batch) - 1
                keep = length - earliest
                kwargs = {"logits_to_keep": keep} if keep_ok else {}
                logits = model(input_ids=x, use_cache=False, **kwargs).logits
                if not keep_ok:
                    logits = logits[:, earliest:]
                offset = length - logits.shape[1]  # window position of logits[:, 0]
                for row, (b, e, first) in enumerate(batch):
                    lo = first - b - 1 - offset
                    hi = e - b - 1 - offset
                    targets = x[row, first - b:e - b]
                    nll = F.cross_entropy(logits[row, lo:hi].float(), targets, reduction="sum")
                    nll_sum += float(nll)
                    n_tokens += int(targets.numel())
    finally:
        model.train(was_training)
    return Perplexity(ppl=math.exp(nll_sum / n_tokens), n_tokens=n_tokens, nll_sum=nll_sum)


# --------------------------------------------------------------------------------------------
# generation


@dataclass
class Generations:
    """``texts[i][j]`` is sample ``j`` for prompt ``i``; ``n_tokens`` counts generated tokens up to and
    including the first end-of-sequence token; ``finished`` says whether one was produced."""

    texts: list[list[str]]
    n_tokens: list[list[int]]
    finished: list[list[bool]]
    prompt_tokens: list[int]
    seconds: float

    def flat_texts(self) -> list[str]:
        return [t for row in self.texts for t in row]

    def flat_n_tokens(self) -> list[int]:
        return [n for row in self.n_tokens for n in row]


def generation_config(*, max_new_tokens: int, temperature: float = 0.0, top_p: float | None = None,
                      top_k: int | None = None, pad_token_id: int, eos_token_id: int | list[int]) -> GenerationConfig:
    """The explicit ``GenerationConfig`` :func:`generate` uses (greedy when ``temperature == 0``).

    Every decoding control is set, so a model's own ``generation_config.json`` (a repetition
    penalty, a default top-k of 50, ...) cannot change the decoding behind our back.
    ``top_p=None`` and ``top_k=None`` mean no nucleus / no top-k truncation.
    """
    from transformers import GenerationConfig

    max_new_tokens = checks.integer("max_new_tokens", max_new_tokens, 1)
    temperature = checks.number("temperature", temperature, 0.0)
    top_p = None if top_p is None else checks.probability("top_p", top_p, lo_open=True)
    top_k = None if top_k is None else checks.integer("top_k", top_k, 1)
    common = dict(max_new_tokens=max_new_tokens, min_new_tokens=0, num_beams=1, num_return_sequences=1,
                  repetition_penalty=1.0, no_repeat_ngram_size=0, use_cache=True,
                  pad_token_id=pad_token_id, eos_token_id=eos_token_id)
    if temperature == 0:
        return GenerationConfig(do_sample=False, **common)
    return GenerationConfig(do_sample=True, temperature=float(temperature),
                            top_p=1.0 if top_p is None else float(top_p), top_k=0 if top_k is None else top_k,
                            typical_p=1.0, **common)


def generate(model, tokenizer, prompts: Sequence[str], *, max_new_tokens: int, temperature: float = 0.0,
             top_p: float | None = None, top_k: int | None = None, seed: int = 0, n: int = 1,
             batch_size: int = 8, chat: bool = False, system: str | None = None,
             skip_special_tokens: bool = True, eos_token_id: int | list[int] | None = None,
             progress: bool = False) -> Generations:
    """Sample ``n`` responses per prompt with ``model.generate`` (KV cache, left padding).

    ``chat``: wrap each prompt as a user turn (after ``system``, if given) with the tokenizer's
    chat template and the generation prompt; otherwise prompts are encoded as they are, with the
    tokenizer's own special tokens (e.g. BOS). ``eos_token_id`` defaults to the tokenizer's
    EOS together with the model's ``generation_config.eos_token_id``. Padding uses the
    tokenizer's pad token, or its EOS token when it has none (padded positions are masked).
    Prompts are expanded prompt-major (``n`` copies each) and cut into batches of
    ``batch_size``; batch ``b`` samples under ``seed + b``.
    """
    import torch
    from tqdm import tqdm

    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts \
            or not all(isinstance(p, str) for p in prompts):
        raise ValueError("prompts must be a non-empty sequence of strings")
    for name, v, lo in (("n", n, 1), ("batch_size", batch_size, 1), ("seed", seed, 0)):
        checks.integer(name, v, lo)
    if temperature == 0 and n > 1:
        raise ValueError("n > 1 with temperature == 0 would repeat the same greedy response; use n=1")
    if chat and getattr(tokenizer, "chat_template", None) is None:
        raise ValueError("chat=True but the tokenizer has no chat template")
    if system is not None and not chat:
        raise ValueError("system is only used with chat=True")

    eos = eos_ids(model, tokenizer, eos_token_id)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    gc = generation_config(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                           pad_token_id=pad, eos_token_id=eos if len(eos) > 1 else eos[0])

    if chat:
        def render(p: str) -> str:
            messages = ([{"role": "system", "content": system}] if system is not None else []) + \
                       [{"role": "user", "content": p}]
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        texts_in = [render(p) for p in prompts]
        add_special = False  # the template already holds the special tokens
    else:
        texts_in = list(prompts)
        add_special = True
    expanded = [t for t in texts_in for _ in range(n)]
    device = _device(model)

    out_texts: list[str] = []
    out_counts: list[int] = []
    out_finished: list[bool] = []
    prompt_tokens: list[int] = []
    eos_set = set(eos)
    old_side, old_pad = tokenizer.padding_side, tokenizer.pad_token_id
    was_training = model.training
    model.eval()
    start = time.perf_counter()
    try:
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token_id = pad
        starts = list(range(0, len(expanded), batch_size))
        for b, lo in enumerate(tqdm(starts, desc="generate", unit="batch", disable=not progress)):
            chunk = expanded[lo:lo + batch_size]
            enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=add_special)
            input_ids = enc["input_ids"].to(device)
            attention = enc["attention_mask"].to(device)
            with torch.random.fork_rng(devices=[]), torch.inference_mode():
                torch.manual_seed(seed + b)
                seqs = model.generate(input_ids=input_ids, attention_mask=attention, generation_config=gc)
            new = seqs[:, input_ids.shape[1]:].tolist()
            for row, toks in enumerate(new):
                stop = next((i for i, t in enumerate(toks) if t in eos_set), None)
                kept = toks if stop is None else toks[:stop + 1]
                out_counts.append(len(kept))
                out_finished.append(stop is not None)
                out_texts.append(tokenizer.decode(kept, skip_special_tokens=skip_special_tokens))
                prompt_tokens.append(int(attention[row].sum()))
    finally:
        tokenizer.padding_side = old_side
        if old_pad is None:
            tokenizer.pad_token_id = None
        model.train(was_training)
    seconds = time.perf_counter() - start

    def group(xs: list) -> list[list]:
        return [xs[i * n:(i + 1) * n] for i in range(len(prompts))]

    return Generations(texts=group(out_texts), n_tokens=group(out_counts), finished=group(out_finished),
                       prompt_tokens=prompt_tokens[::n], seconds=seconds)


def eos_ids(model, tokenizer, eos_token_id: int | list[int] | None) -> list[int]:
    """The ids that end a response: ``eos_token_id`` as given (one id or a non-empty list, checked), else the
    tokenizer's EOS together with the model's ``generation_config.eos_token_id`` (in that order, no repeats)."""
    if eos_token_id is not None:
        one = checks.is_number(eos_token_id) or checks.is_bool(eos_token_id) or isinstance(eos_token_id, (str, bytes))
        try:
            ids = [eos_token_id] if one else list(eos_token_id)
        except TypeError:
            ids = []
        if not ids:
            raise ValueError(f"eos_token_id must be a token id or a non-empty list of ids, got {eos_token_id!r}")
        return [checks.integer("eos_token_id", i, 0) for i in ids]
    ids: list[int] = []
    for cand in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        for i in ([cand] if isinstance(cand, int) else list(cand or [])):
            if i not in ids:
                ids.append(i)
    if not ids:
        raise ValueError("neither the tokenizer nor the model defines an EOS token; pass eos_token_id")
    return ids


# --------------------------------------------------------------------------------------------
# reasoning metrics


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased Pass@k from ``n`` samples of which ``c`` are correct (Chen et al. 2021).

    ``1 - C(n-c, k) / C(n, k)``, computed as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``.
    """
    n = checks.integer("n", n, 1)
    c = checks.integer("c", c, 0, n)
    k = checks.integer("k", k, 1, n)
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def _correct_matrix(correct: Sequence[Sequence[bool]] | np.ndarray) -> list[list[bool]]:
    rows = [list(map(bool, r)) for r in correct]
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("correct must have at least one problem and one sample per problem")
    return rows


def mean_at_k(correct: Sequence[Sequence[bool]] | np.ndarray, k: int | None = None) -> float:
    """Mean@k: accuracy averaged over the first ``k`` samples of every problem, then over problems."""
    rows = _correct_matrix(correct)
    fewest = min(len(r) for r in rows)
    k = _k(fewest if k is None else k, fewest)
    return float(np.mean([sum(r[:k]) / k for r in rows]))


def _k(k: Any, fewest: int) -> int:
    """``k`` as an int in [1, fewest samples per problem]."""
    try:
        return checks.integer("k", k, 1, fewest)
    except ValueError:
        raise ValueError(f"k must be an integer in [1, fewest samples per problem = {fewest}], got {k!r}") from None


def pass_at_k_mean(correct: Sequence[Sequence[bool]] | np.ndarray, k: int) -> float:
    """Pass@k averaged over problems, each from all of its samples (``n_i >= k``)."""
    rows = _correct_matrix(correct)
    k = _k(k, min(len(r) for r in rows))
    return float(np.mean([pass_at_k(len(r), sum(r), k) for r in rows]))


def majority_vote(answers: Sequence[str | None]) -> str | None:
    """The most frequent non-None answer; a tie goes to the tied answer that occurs first; None if none."""
    votes = [a for a in answers if a is not None]
    if not votes:
        return None
    counts = Counter(votes)
    top = max(counts.values())
    return next(a for a in votes if counts[a] == top)


def vote_at_k(answers: Sequence[Sequence[str | None]], golds: Sequence[str], k: int | None = None) -> float:
    """Vote@k: the fraction of problems whose majority answer over the first ``k`` samples is right.

    ``answers`` are already extracted (see :func:`acl26.problems.extract_answer`; None for no answer)
    and compared with ``normalize_answer(gold)``. Tie-breaking: :func:`majority_vote`.
    """
    if len(answers) != len(golds) or not golds:
        raise ValueError(f"answers and golds must be non-empty and of equal length, "
                         f"got {len(answers)} and {len(golds)}")
    fewest = min(len(a) for a in answers)
    k = _k(fewest if k is None else k, fewest)
    hits = [majority_vote(list(a)[:k]) == problems.normalize_answer(g) for a, g in zip(answers, golds)]
    return float(np.mean(hits))


def think_rate(texts: Sequence[str], marker: str = THINK_END) -> float:
    """Think #R: the fraction of responses that contain ``marker`` (``</think>``)."""
    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty sequence of strings")
    if not marker:
        raise ValueError("marker must be a non-empty string")
    return float(np.mean([marker in t for t in texts]))


def length_stats(n_tokens: Sequence[int] | np.ndarray) -> dict[str, float]:
    """Token #N and its spread: mean, std (population), median, p10, p90, min, max, count."""
    arr = np.asarray(n_tokens, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ValueError("n_tokens must not be empty")
    if (arr < 0).any():
        raise ValueError("n_tokens must be >= 0")
    return {"mean": float(arr.mean()), "std": float(arr.std()), "median": float(np.median(arr)),
            "p10": float(np.percentile(arr, 10)), "p90": float(np.percentile(arr, 90)),
            "min": float(arr.min()), "max": float(arr.max()), "count": int(arr.size)}


def reasoning_metrics(texts: Sequence[Sequence[str]], golds: Sequence[str], *, k: int | None = None,
                      n_tokens: Sequence[Sequence[int]] | None = None,
                      require_closed_think: bool = True) -> dict[str, float]:
    """Mean@k, Pass@k, Pass@1, Vote@k, Think #R and (with ``n_tokens``) Token #N from raw responses.

    ``texts[i]`` are the samples for problem ``i`` with reference answer ``golds[i]``; ``k``
    defaults to the fewest samples per problem. Mean@k and Vote@k use the first ``k`` samples,
    Pass@k and Pass@1 the unbiased estimator over all samples. Think #R and Token #N are over all
    samples.
    """
    if len(texts) != len(golds) or not golds:
        raise ValueError(f"texts and golds must be non-empty and of equal length, got {len(texts)} and {len(golds)}")
    answers = [[problems.extract_answer(t, require_closed_think=require_closed_think) for t in row] for row in texts]
    gold = [problems.normalize_answer(g) for g in golds]
    correct = [[a is not None and a == g for a in row] for row, g in zip(answers, gold)]
    k = min(len(r) for r in correct) if k is None else k
    out = {"problems": len(golds), "k": k, "mean@k": mean_at_k(correct, k), "pass@k": pass_at_k_mean(correct, k),
           "pass@1": pass_at_k_mean(correct, 1), "vote@k": vote_at_k(answers, golds, k),
           "think_rate": think_rate([t for row in texts for t in row])}
    if n_tokens is not None:
        if len(n_tokens) != len(texts) or any(len(a) != len(b) for a, b in zip(n_tokens, texts)):
            raise ValueError("n_tokens must have the same shape as texts")
        stats = length_stats([x for row in n_tokens for x in row])
        out["tokens"] = stats["mean"]
        out["tokens_median"] = stats["median"]
    return out


# --------------------------------------------------------------------------------------------
# ROUGE-L


def _rouge_scorer(use_stemmer: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=use_stemmer)


def rouge_l_scores(predictions: Sequence[str], references: Sequence[str | Sequence[str]], *,
                   use_stemmer: bool = True) -> list[float]:
    """Per example, the best ROUGE-L F-measure (in [0, 1]) of the prediction against its reference(s)."""
    if isinstance(predictions, str) or isinstance(references, str):
        raise ValueError("predictions and references must be sequences, not strings")
    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"predictions and references must be non-empty and of equal length, "
                         f"got {len(predictions)} and {len(references)}")
    scorer = _rouge_scorer(use_stemmer)
    out = []
    for pred, refs in zip(predictions, references):
        refs = [refs] if isinstance(refs, str) else list(refs)
        if not refs or not all(isinstance(r, str) for r in refs) or not isinstance(pred, str):
            raise ValueError("each prediction must be a string and each reference a string or a non-empty "
                             "list of strings")
        out.append(max(scorer.score(target=r, prediction=pred)["rougeL"].fmeasure for r in refs))
    return out


def rouge_l(predictions: Sequence[str], references: Sequence[str | Sequence[str]], *,
            use_stemmer: bool = True) -> float:
    """ROUGE-L as MiniLLM / DistiLLM report it: mean of :func:`rouge_l_scores`, times 100."""
    return 100.0 * statistics.fmean(rouge_l_scores(predictions, references, use_stemmer=use_stemmer))
