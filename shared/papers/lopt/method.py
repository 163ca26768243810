"""LoPT: Lossless Parallel Tokenization (ACL 2026, arXiv 2511.04952) -- the method.

:func:`encode` is a drop-in for ``tokenizer.encode(text, add_special_tokens=...)`` on long texts:
it splits the text into overlapping chunks, encodes them in parallel, and stitches the chunk
encodings at cuts found by :func:`acl26.kernels.tokmerge.find_cut`. Its result is identical to the
sequential encoding: where the chunks never agree on a cut it grows the chunks (doubling their
length at that boundary) and finally falls back to sequential encoding; both are counted in the
returned :class:`Stats`.

The baselines it is compared with are in :mod:`acl26.papers.lopt.baselines`.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from acl26 import checks, machine, tokenization
from acl26.kernels import tokmerge

DEFAULT_CHUNK_CHARS = 32_768
DEFAULT_OVERLAP_CHARS = 512
EXECUTORS = ("threads", "processes")


# --------------------------------------------------------------------------------------------
# statistics


@dataclass
class Stats:
    """What one :func:`encode` call did. Times are wall seconds."""

    n_chars: int = 0
    n_tokens: int = 0
    n_chunks: int = 0
    workers: int = 1
    executor: str = ""
    chunk_chars: int = 0
    overlap_chars: int = 0
    rule: str = "piece"
    sequential: bool = False  # encoded in one piece (short text or fallback)
    short: bool = False  # too short to split
    fallback: bool = False  # no agreeing cut even after growing: sequential fallback
    reason: str = ""  # why the text went sequential
    boundaries: int = 0  # chunk boundaries in the first round
    failed_boundaries: int = 0  # boundaries with no agreeing cut in the first round
    retries: int = 0  # boundaries re-tried with a doubled chunk (all rounds)
    rounds: int = 0  # encode rounds (1 + growing rounds)
    time_split: float = 0.0
    time_encode: float = 0.0
    time_merge: float = 0.0  # time_match + time_assemble
    #: the merge proper, finding every cut (added-token guard and the kernel), timed apart from assembling the
    #: output ids from the chunks' kept parts, which any chunked encoding does
    time_match: float = 0.0
    time_assemble: float = 0.0
    time_total: float = 0.0
    #: summed over the chunks encoded: seconds inside the backend's encode (the GIL released) and in
    #: Python around it (ids, edge tokens, offsets: the GIL held), and each worker thread's busy seconds
    time_backend: float = 0.0
    time_python: float = 0.0
    busy: dict = field(default_factory=dict)
    cuts: list[int] = field(default_factory=list)  # global character positions of the cuts

    @property
    def imbalance(self) -> float:
        """The busiest worker's seconds over the mean worker's (1.0: balanced; NaN without chunks)."""
        v = list(self.busy.values())
        return max(v) / (sum(v) / len(v)) if v and sum(v) > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("cuts")
        d.pop("busy")
        d["n_cuts"] = len(self.cuts)
        d["imbalance"] = self.imbalance
        return d


# --------------------------------------------------------------------------------------------
# tokenizer plumbing


backend = tokenization.backend  # the one tokenizer-backend accessor of the package


def prepared_backend(tokenizer):
    """Return the backend configured exactly as ``tokenizer.encode`` would use it, and a note.

    transformers' ``encode`` switches truncation and padding off and sets
    ``encode_special_tokens`` from ``split_special_tokens`` on every call; we do the same. A raw
    ``tokenizers.Tokenizer`` is used as configured: with truncation or padding on, the
    sequential result depends on the whole length, so it is encoded sequentially (``note``).
    """
    bk = backend(tokenizer)
    if not _is_transformers(tokenizer):  # a tokenizers.Tokenizer or a tokenizers.implementations wrapper
        note = ""
        if bk.truncation is not None or bk.padding is not None:
            note = "truncation or padding configured on the tokenizer"
        return bk, note
    if bk.truncation is not None:
        bk.no_truncation()
    if bk.padding is not None:
        bk.no_padding()
    split = bool(getattr(tokenizer, "split_special_tokens", False))
    if bk.encode_special_tokens != split:
        bk.encode_special_tokens = split
    return bk, ""


def sequential_ids(tokenizer, text: str, add_special_tokens: bool = False) -> list[int]:
    """The reference: what ``tokenizer.encode(text, add_special_tokens=...)`` returns."""
    if not _is_transformers(tokenizer):
        return tokenizer.encode(text, add_special_tokens=add_special_tokens).ids
    return tokenizer.encode(text, add_special_tokens=add_special_tokens)


def _is_transformers(tokenizer) -> bool:
    """A transformers tokenizer (its ``encode`` returns ids), not a ``tokenizers`` object (an Encoding)."""
    return hasattr(tokenizer, "backend_tokenizer")


def _special_affixes(bk, add_special_tokens: bool) -> tuple[list[int], list[int]] | None:
    """Prefix and suffix ids the post-processor adds to a single sequence (None if unclear)."""
    if not add_special_tokens:
        return [], []
    probe = "a"
    core = bk.encode(probe, add_special_tokens=False).ids
    full = bk.encode(probe, add_special_tokens=True).ids
    n = len(core)
    for i in range(len(full) - n + 1):
        if full[i:i + n] == core:
            prefix, suffix = full[:i], full[i + n:]
            # the post-processor must act the same on another text; check one more probe
            other = "b c"
            oc = bk.encode(other, add_special_tokens=False).ids
            if bk.encode(other, add_special_tokens=True).ids == prefix + oc + suffix:
                return prefix, suffix
            return None
    return None


# --------------------------------------------------------------------------------------------
# chunk encoding: threads (tokenizers releases the GIL in encode_batch) or worker processes


class _Encoded:
    """A chunk's encoding reduced to what the merge needs: ids and the tokens at both edges."""

    __slots__ = ("start", "end", "ids", "head", "tail", "offsets", "t_backend", "t_python", "worker")

    def __init__(self, start, end, ids, head, tail, offsets, t_backend=0.0, t_python=0.0, worker=""):
        self.start, self.end, self.ids, self.head, self.tail, self.offsets = start, end, ids, head, tail, offsets
        self.t_backend, self.t_python, self.worker = t_backend, t_python, worker


def _edge_tokens(enc, shift: int, head_until: int, tail_from: int, trivial_words: bool, hard: "_HardBoundaries | None"):
    """The chunk's ids and ``(n, 4)`` arrays of its first tokens (start < head_until) and its last
    tokens (start >= tail_from), in the layout of :mod:`acl26.kernels.tokmerge`.

    Positions are global (``shift`` added). PIECE is 1 where a piece starts at the token according
    to this chunk: a new pre-tokenizer word, or (no pre-tokenizer) a hard vocabulary boundary. It
    is never set on the chunk's first token, whose left context is cut off.
    """
    tid = enc.ids
    n = len(tid)

    def span(t):
        sp = enc.token_to_chars(t)
        if sp is None:
            raise RuntimeError(f"token {t} has no character span; cannot place it in the text")
        return sp

    def rows(indices):
        out = np.empty((len(indices), 4), dtype=np.int64)
        for r, t in enumerate(indices):
            s, e = span(t)
            out[r, 0] = s + shift
            out[r, 1] = e + shift
            out[r, 2] = tid[t]
            if t == 0:
                out[r, 3] = 0
            elif trivial_words:
                out[r, 3] = 1 if hard is not None and hard.between(tid[t - 1], tid[t]) else 0
            else:
                w, wp = enc.token_to_word(t), enc.token_to_word(t - 1)
                out[r, 3] = 1 if (w is None or wp is None or w != wp) else 0
        return out

    head_idx = []
    t = 0
    while t < n and span(t)[0] + shift < head_until:
        head_idx.append(t)
        t += 1
    tail_idx = []
    t = n - 1
    while t >= 0 and span(t)[0] + shift >= tail_from:
        tail_idx.append(t)
        t -= 1
    tail_idx.reverse()
    return rows(head_idx), rows(tail_idx), tid


class _HardBoundaries:
    """Token pairs no vocabulary entry can straddle: exact piece boundaries for BPE models whose
    pre-tokenizer does not split (SentencePiece-style LLaMA-2, Mistral, Phi-3).

    A merge covering the junction of tokens x and y would contain the last symbol of x followed by
    the first symbol of y; if no vocabulary entry contains that symbol pair, the junction is a
    boundary of every encoding of every text, so the left and right sides are encoded
    independently. Not used for Unigram models: no piece crosses such a junction either, but
    Viterbi compares float sums that include the score of everything before it, so segmentations
    of equal score (``▁`` + ``▁▁▁▁▁`` against ``▁▁▁▁▁`` + ``▁``) are decided by rounding that
    depends on where the encoded string starts; a chunk can then differ from the whole text.
    """

    def __init__(self, bk):
        vocab = bk.get_vocab(with_added_tokens=False)
        self.first: dict[int, str] = {}
        self.last: dict[int, str] = {}
        pairs: set[str] = set()
        for tok, idx in vocab.items():
            if not tok:
                continue
            if _BYTE_TOKEN.fullmatch(tok):
                continue  # byte-fallback tokens are never merged with anything
            self.first[idx] = tok[0]
            self.last[idx] = tok[-1]
            for a, b in zip(tok, tok[1:]):
                pairs.add(a + b)
        self.pairs = frozenset(pairs)

    def between(self, left_id: int, right_id: int) -> bool:
        a = self.last.get(left_id)
        b = self.first.get(right_id)
        if a is None or b is None:  # byte-fallback or added token on either side
            return True
        return (a + b) not in self.pairs


_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


class _AddedTokenGuard:
    """Where an added token (``<|begin_of_text|>``, ``</s>``, ...) may lie across the overlap.

    Added tokens are matched on the whole input before pre-tokenization. One longer than the
    overlap can cover it entirely: then neither chunk sees it, both tokenize its inside as
    ordinary text, and they agree -- wrongly. So no cut may fall strictly inside an occurrence of
    such a token's text (extended over adjacent whitespace for ``lstrip``/``rstrip`` tokens). Every
    occurrence is excluded, matched or not, which is a superset of what the tokenizer matches;
    tokens marked ``normalized`` are searched case-insensitively (a normalizer that rewrites
    them in other ways is not covered).
    """

    def __init__(self, bk, overlap: int):
        # only an occurrence longer than the overlap (2h) can hide from both chunks: a shorter one
        # is seen whole by one of them, which then has no token starting inside it to agree on.
        # Whitespace-absorbing tokens can grow without bound, so they always count.
        toks = [t for t in bk.get_added_tokens_decoder().values()
                if t.content and not (t.special and bk.encode_special_tokens)
                and (len(t.content) > overlap or t.lstrip or t.rstrip)]
        self.maxlen = max((len(t.content) for t in toks), default=0)
        self.lstrip = any(t.lstrip for t in toks)
        self.rstrip = any(t.rstrip for t in toks)
        self.regex = None
        if toks:
            contents = sorted({t.content for t in toks}, key=len, reverse=True)
            flags = re.IGNORECASE if any(t.normalized for t in toks) else 0
            # candidates are the positions of a possible first character (a fast scan); at each,
            # the longest token text that starts there. Overlapping occurrences are all found.
            firsts = sorted({c[0] for c in contents} | ({c[0].swapcase() for c in contents} if flags else set()))
            self.first = re.compile("[" + "".join(re.escape(c) for c in firsts) + "]")
            self.regex = re.compile("|".join(map(re.escape, contents)), flags)

    def intervals(self, text: str, lo: int, hi: int) -> list[tuple[int, int]]:
        """Occurrences ``(start, end)`` that reach into ``[lo, hi)``."""
        if self.regex is None:
            return []
        n = len(text)
        a, b = lo, hi
        if self.rstrip:  # a token before a whitespace run may extend over it into the window
            while a > 0 and text[a - 1].isspace():
                a -= 1
        if self.lstrip:
            while b < n and text[b].isspace():
                b += 1
        out = []
        end = min(n, b + self.maxlen)
        for c in self.first.finditer(text, max(0, a - self.maxlen), end):
            m = self.regex.match(text, c.start(), end)
            if m is None:
                continue
            s, e = m.start(), m.end()
            if self.lstrip:
                while s > 0 and text[s - 1].isspace():
                    s -= 1
            if self.rstrip:
                while e < n and text[e].isspace():
                    e += 1
            if e > lo and s < hi:
                out.append((s, e))
        return out

    @staticmethod
    def mask(tokens: np.ndarray, intervals: list[tuple[int, int]]) -> np.ndarray:
        """A copy of ``tokens`` with PIECE cleared on tokens starting strictly inside an interval."""
        if not intervals or not len(tokens):
            return tokens
        out = tokens.copy()
        starts = out[:, tokmerge.START]
        for s, e in intervals:
            out[(starts > s) & (starts < e), tokmerge.PIECE] = 0
        return out


_GUARDS: dict[tuple[int, int], tuple[Any, _AddedTokenGuard, tuple]] = {}


def _guard(bk, overlap: int) -> _AddedTokenGuard:
    key = (bk.get_vocab_size(with_added_tokens=True), bk.encode_special_tokens)
    hit = _GUARDS.get((id(bk), overlap))
    if hit is None or hit[0] is not bk or hit[2] != key:
        hit = (bk, _AddedTokenGuard(bk, overlap), key)
        _GUARDS[(id(bk), overlap)] = hit
    return hit[1]


_SPLIT_PROBE = "Hello world, 123 foo\nbar. Über-naïve\tx"


def pre_tokenizer_splits(bk) -> bool:
    """Whether the pre-tokenizer cuts text into pieces (Metaspace with split=False, say, does not)."""
    if bk.pre_tokenizer is None:
        return False
    return len(bk.pre_tokenizer.pre_tokenize_str(_SPLIT_PROBE)) > 1


def piece_mode(bk) -> tuple[bool, "_HardBoundaries | None"]:
    """How PIECE flags are derived: from pre-tokenizer word ids, or from hard vocabulary boundaries.

    Returns ``(trivial, hard)``: ``trivial`` is True when the pre-tokenizer does not split (every
    token has word id 0), and ``hard`` then gives the exact junctions of a BPE model (or is None).
    """
    if pre_tokenizer_splits(bk):
        return False, None
    model = type(bk.model).__name__
    if model == "BPE":
        return True, _hard_cache(bk)
    return True, None  # Unigram, WordPiece, WordLevel without pre-tokenizer: no provable boundary


_HARD: dict[int, tuple[Any, _HardBoundaries, int]] = {}


def _hard_cache(bk) -> _HardBoundaries:
    key = id(bk)
    size = bk.get_vocab_size(with_added_tokens=False)
    hit = _HARD.get(key)
    if hit is None or hit[0] is not bk or hit[2] != size:
        hit = (bk, _HardBoundaries(bk), size)
        _HARD[key] = hit
    return hit[1]


def _encode_chunk_local(bk, text, start, end, head_until, tail_from, trivial, hard, want_offsets):
    t0 = time.perf_counter()
    enc = bk.encode_batch([text[start:end]], add_special_tokens=False)[0]
    t1 = time.perf_counter()
    head, tail, ids = _edge_tokens(enc, start, head_until, tail_from, trivial, hard)
    offsets = None
    if want_offsets:
        offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2) + start
    return _Encoded(start, end, ids, head, tail, offsets, t1 - t0, time.perf_counter() - t1,
                    threading.current_thread().name)


# process workers keep their own copy of the tokenizer
_WORKER: dict[str, Any] = {}


def _worker_init(tokenizer_json: str, encode_special_tokens: bool):
    from tokenizers import Tokenizer

    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    bk = Tokenizer.from_str(tokenizer_json)
    bk.encode_special_tokens = encode_special_tokens
    _WORKER["bk"] = bk
    _WORKER["mode"] = piece_mode(bk)


def _worker_encode(job):
    chunk, start, head_until, tail_from, want_offsets = job
    bk = _WORKER["bk"]
    trivial, hard = _WORKER["mode"]
    t0 = time.perf_counter()
    enc = bk.encode(chunk, add_special_tokens=False)
    t1 = time.perf_counter()
    head, tail, ids = _edge_tokens(enc, start, head_until, tail_from, trivial, hard)
    offsets = None
    if want_offsets:
        offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2) + start
    ids = np.asarray(ids, dtype=np.int64)
    return ids, head, tail, offsets, t1 - t0, time.perf_counter() - t1, f"pid {os.getpid()}"


class _Pools:
    """Long-lived worker pools, one per (tokenizer, workers); started on first use."""

    def __init__(self):
        self._threads: dict[int, cf.ThreadPoolExecutor] = {}
        self._procs: dict[tuple[int, int], tuple[cf.ProcessPoolExecutor, Any, tuple]] = {}
        atexit.register(self.shutdown)

    def threads(self, workers: int) -> cf.ThreadPoolExecutor:
        pool = self._threads.get(workers)
        if pool is None:
            pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lopt")
            self._threads[workers] = pool
        return pool

    def processes(self, bk, workers: int) -> cf.ProcessPoolExecutor:
        key = (id(bk), workers)
        hit = self._procs.get(key)
        # the pool holds bk, so its id cannot be reused meanwhile; a changed pipeline needs new workers
        if hit is not None and (hit[1] is not bk or hit[2] != _fingerprint(bk)):
            hit[0].shutdown(wait=False, cancel_futures=True)
            hit = None
        if hit is None:
            import multiprocessing as mp

            pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                          initializer=_worker_init, initargs=(bk.to_str(), bk.encode_special_tokens))
            hit = (pool, bk, _fingerprint(bk))
            self._procs[key] = hit
        return hit[0]

    def shutdown(self):
        for pool in self._threads.values():
            pool.shutdown(wait=False, cancel_futures=True)
        for pool, *_ in self._procs.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self._threads.clear()
        self._procs.clear()


def _fingerprint(bk) -> tuple:
    """A cheap summary of the pipeline a worker process copied (see ``_Pools.processes``)."""
    return (str(bk.normalizer), str(bk.pre_tokenizer), str(bk.post_processor), str(bk.model),
            bk.get_vocab_size(with_added_tokens=True), bk.encode_special_tokens)


POOLS = _Pools()


def default_workers() -> int:
    """The CPUs this process may use (:func:`acl26.machine.cpu_count`)."""
    return machine.cpu_count()


# --------------------------------------------------------------------------------------------
# the method


def chunk_spans(n: int, chunk_chars: int, overlap_chars: int) -> tuple[list[int], int]:
    """Nominal boundaries ``[0, b1, ..., n]`` (multiples of ``chunk_chars``) and the half overlap.

    Chunk k covers ``[b_k - h, b_{k+1} + h)`` clipped to the text, so neighbours share the
    ``2h`` characters centred on their boundary. The last chunk absorbs the remainder (it has
    between ``chunk_chars`` and ``2 * chunk_chars - 1`` characters).
    """
    n = checks.integer("n", n, 0)
    chunk_chars = checks.integer("chunk_chars", chunk_chars, 1)
    overlap_chars = checks.integer("overlap_chars", overlap_chars, 0)
    k = max(1, n // chunk_chars)
    bounds = [i * chunk_chars for i in range(k)] + [n]
    return bounds, overlap_chars // 2


def validate_settings(chunk_chars: int, overlap_chars: int, min_run: int = 2, max_retries: int = 3,
                      rule: str = "piece", workers: int | None = None, executor: str = "threads") -> None:
    """Raise ``ValueError`` naming the first bad setting (the counts are integers: a float or a bool is
    refused, never truncated)."""
    chunk_chars = checks.integer("chunk_chars", chunk_chars)
    overlap_chars = checks.integer("overlap_chars", overlap_chars, 2)
    if chunk_chars <= overlap_chars:
        raise ValueError(f"chunk_chars ({chunk_chars}) must exceed overlap_chars ({overlap_chars})")
    checks.integer("min_run", min_run, 1)
    checks.integer("max_retries", max_retries, 0)
    if rule not in tokmerge.RULES:
        raise ValueError(f"rule must be one of {sorted(tokmerge.RULES)}, got {rule!r}")
    if workers is not None:
        checks.integer("workers", workers, 1)
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")


def encode(tokenizer, text: str, *, add_special_tokens: bool = False, workers: int | None = None,
           chunk_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS,
           min_run: int = 2, max_retries: int = 3, rule: str = "piece", executor: str = "threads",
           return_stats: bool = False, return_offsets: bool = False):
    """Encode ``text`` like ``tokenizer.encode(text, add_special_tokens=...)``, in parallel chunks.

    Parameters
    ----------
    tokenizer : a ``transformers`` fast tokenizer or a ``tokenizers.Tokenizer``.
    text : the text; texts shorter than two chunks are encoded sequentially.
    workers : parallel encoders (default: the CPUs this process may use). ``1`` encodes the chunks
        one after another (useful to separate the chunking gain from the parallel gain).
    chunk_chars, overlap_chars : nominal chunk length and the overlap shared by neighbours.
    min_run : minimum matched run of (start, end, id) tokens for a cut.
    max_retries : growing rounds (the failing boundary's chunks are fused, doubling their length)
        before falling back to sequential encoding.
    rule : ``"piece"`` (default; cut only at a pre-tokenizer piece boundary both chunks agree on)
        or ``"paper"`` (the vllm-ascend port's rule: the best-ranked matched run wholly inside the
        overlap, an exact tie rejected, cut at its end; :mod:`acl26.kernels.tokmerge`).
    executor : ``"threads"`` (tokenizers releases the GIL in ``encode_batch``) or ``"processes"``
        (a pool of spawned workers, each with a copy of the tokenizer, kept for later calls and
        restarted when the tokenizer's pipeline, vocabulary size or special-token splitting
        changes; as with any spawned pool, a script using it needs an ``if __name__ == "__main__"``
        guard).
    return_stats : also return a :class:`Stats`.
    return_offsets : also return the ``(n, 2)`` array of global character offsets per token,
        identical to the sequential encoding's offsets.

    Returns ``ids`` or a tuple ``(ids, [offsets], [stats])`` in that order.
    """
    t0 = time.perf_counter()
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    validate_settings(chunk_chars, overlap_chars, min_run, max_retries, rule, workers, executor)
    workers = default_workers() if workers is None else int(workers)
    bk, note = prepared_backend(tokenizer)
    stats = Stats(n_chars=len(text), workers=workers, executor=executor, chunk_chars=chunk_chars,
                  overlap_chars=overlap_chars, rule=rule)
    affixes = _special_affixes(bk, add_special_tokens)
    n = len(text)
    if note or affixes is None or n < 2 * chunk_chars:
        stats.short = n < 2 * chunk_chars
        stats.reason = note or ("post-processor adds more than a fixed prefix/suffix" if affixes is None
                                else "text shorter than two chunks")
        return _sequential(bk, text, add_special_tokens, stats, t0, return_offsets, return_stats)
    prefix, suffix = affixes

    trivial, hard = piece_mode(bk)
    if rule == "piece" and trivial and hard is None:
        stats.reason = "no provable piece boundary: the pre-tokenizer does not split and the model is not BPE"
        return _sequential(bk, text, add_special_tokens, stats, t0, return_offsets, return_stats)
    bounds, h = chunk_spans(n, chunk_chars, overlap_chars)
    guard = _guard(bk, 2 * h) if rule == "piece" else None
    # a "group" is a run of nominal segments encoded as one chunk; growing fuses neighbours
    groups = [(k, k + 1) for k in range(len(bounds) - 1)]  # segment index ranges [g0, g1)
    stats.boundaries = len(groups) - 1
    cache: dict[tuple[int, int], _Encoded] = {}
    cuts: dict[tuple[int, int, int], tokmerge.Cut] = {}
    stats.time_split = time.perf_counter() - t0

    for round_ in range(max_retries + 1):
        stats.rounds = round_ + 1
        # encode every group not encoded yet
        t1 = time.perf_counter()
        todo = [g for g in groups if g not in cache]
        jobs = []
        for g0, g1 in todo:
            s = max(0, bounds[g0] - h)
            e = min(n, bounds[g1] + h)
            head_until = bounds[g0] + h if g0 > 0 else s
            tail_from = bounds[g1] - h if g1 < len(bounds) - 1 else e
            jobs.append((s, e, head_until, tail_from))
        for g, enc in zip(todo, run_jobs(bk, text, jobs, workers, executor, trivial, hard, return_offsets)):
            cache[g] = enc
            stats.time_backend += enc.t_backend
            stats.time_python += enc.t_python
            stats.busy[enc.worker] = stats.busy.get(enc.worker, 0.0) + enc.t_backend + enc.t_python
        stats.time_encode += time.perf_counter() - t1

        t2 = time.perf_counter()
        failed = []
        for left, right in zip(groups, groups[1:]):
            key = (left[0], left[1], right[1])
            if key not in cuts:
                center = bounds[left[1]]
                tail, head = cache[left].tail, cache[right].head
                if guard is not None and guard.regex is not None:
                    spans = guard.intervals(text, center - h, center + h)
                    tail, head = guard.mask(tail, spans), guard.mask(head, spans)
                # the overlap both chunks cover: the right chunk's start to the left chunk's end
                span = (max(0, bounds[left[1]] - h), min(n, bounds[left[1]] + h))
                cuts[key] = tokmerge.find_cut(tail, head, center=center, min_run=min_run, rule=rule, overlap=span)
            if not cuts[key].found:
                failed.append(left[1])
        if round_ == 0:
            stats.failed_boundaries = len(failed)
        stats.time_match += time.perf_counter() - t2
        if not failed:
            break
        if round_ == max_retries:
            stats.fallback = True
            stats.reason = f"no agreeing cut at {len(failed)} boundar{'y' if len(failed) == 1 else 'ies'} after {max_retries} growing rounds"
            return _sequential(bk, text, add_special_tokens, stats, t0, return_offsets, return_stats)
        # dynamic chunk length: fuse the two groups at each failed boundary, doubling the chunk
        # there; a group takes part in one fusion per round
        stats.retries += len(failed)
        fail = set(failed)
        fused, i = [], 0
        while i < len(groups):
            if i + 1 < len(groups) and groups[i][1] in fail:
                fused.append((groups[i][0], groups[i + 1][1]))
                i += 2
            else:
                fused.append(groups[i])
                i += 1
        groups = fused
        if len(groups) == 1:  # grown into one chunk: that is sequential encoding
            stats.fallback = True
            stats.reason = "growing fused every chunk into one"
            return _sequential(bk, text, add_special_tokens, stats, t0, return_offsets, return_stats)

    t3 = time.perf_counter()
    ids: list[int] = list(prefix)
    offs = []
    stats.cuts = []
    begin = 0  # index into the current group's token list where its kept part begins
    for idx, g in enumerate(groups):
        enc = cache[g]
        if idx + 1 < len(groups):
            cut = cuts[(g[0], g[1], groups[idx + 1][1])]
            stop = len(enc.ids) - len(enc.tail) + cut.ia
            nxt = cut.ib
            stats.cuts.append(cut.pos)
        else:
            stop, nxt = len(enc.ids), 0
        ids.extend(enc.ids[begin:stop])
        if return_offsets:
            offs.append(enc.offsets[begin:stop])
        begin = nxt
    ids.extend(suffix)
    stats.time_assemble = time.perf_counter() - t3
    stats.time_merge = stats.time_match + stats.time_assemble
    stats.n_chunks = len(groups)
    stats.n_tokens = len(ids)
    stats.time_total = time.perf_counter() - t0
    return _pack(ids, _affix_offsets(offs, prefix, suffix, n) if return_offsets else None, stats,
                 return_offsets, return_stats)


def _affix_offsets(parts, prefix, suffix, n):
    arr = np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)
    if prefix or suffix:
        arr = np.concatenate([np.zeros((len(prefix), 2), dtype=np.int64), arr,
                              np.zeros((len(suffix), 2), dtype=np.int64)])
    return arr


def run_jobs(bk, text, jobs, workers, executor, trivial, hard, want_offsets):
    """Encode each job (a chunk span of ``text``) on ``workers`` threads or processes (``executor``): one
    encoded chunk per job, in order; ``trivial`` and ``hard`` are :func:`piece_mode`'s answer for ``bk``."""
    # one worker still runs off the main thread, so 1 vs. w workers differ only in the thread count
    if len(jobs) == 1:
        return [_encode_chunk_local(bk, text, s, e, hu, tf, trivial, hard, want_offsets) for s, e, hu, tf in jobs]
    if executor == "threads":
        pool = POOLS.threads(workers)
        futs = [pool.submit(_encode_chunk_local, bk, text, s, e, hu, tf, trivial, hard, want_offsets)
                for s, e, hu, tf in jobs]
        return [f.result() for f in futs]
    pool = POOLS.processes(bk, workers)
    payload = [(text[s:e], s, hu, tf, want_offsets) for s, e, hu, tf in jobs]
    out = []
    for (s, e, _, _), (ids, head, tail, offsets, tb, tp, who) in zip(
            jobs, pool.map(_worker_encode, payload, chunksize=max(1, len(payload) // (4 * workers)))):
        out.append(_Encoded(s, e, ids.tolist(), head, tail, offsets, tb, tp, who))
    return out


def _sequential(bk, text, add_special_tokens, stats, t0, return_offsets, return_stats):
    t1 = time.perf_counter()
    enc = bk.encode_batch([text], add_special_tokens=add_special_tokens)[0]
    ids = enc.ids
    offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2) if return_offsets else None
    stats.sequential = True
    stats.n_chunks = 1
    stats.n_tokens = len(ids)
    stats.time_encode += time.perf_counter() - t1
    stats.time_merge = stats.time_match + stats.time_assemble
    stats.time_total = time.perf_counter() - t0
    return _pack(ids, offsets, stats, return_offsets, return_stats)


def _pack(ids, offsets, stats, return_offsets, return_stats):
    if not return_offsets and not return_stats:
        return ids
    out = [ids]
    if return_offsets:
        out.append(offsets)
    if return_stats:
        out.append(stats)
    return tuple(out)
