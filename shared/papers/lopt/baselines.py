"""LoPT's baselines (ACL 2026, arXiv 2511.04952): the splitting schemes the paper says are lossy.

Implemented as the paper describes them, to measure what they get wrong; none is lossless in
general. :func:`encode_naive` splits with no overlap, :func:`encode_overlap_ids` stitches
overlapping chunks at the longest common run of ids (sglang's approach), :func:`encode_delimiter`
splits at natural delimiters (vLLM's approach).
"""

from __future__ import annotations

import numpy as np

from acl26 import checks
from acl26.kernels import tokmerge
from acl26.papers.lopt.method import (DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS, chunk_spans, default_workers,
                                      piece_mode, prepared_backend, run_jobs, validate_settings)

def _encode_texts(bk, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in bk.encode_batch(texts, add_special_tokens=False)]


def encode_naive(tokenizer, text: str, *, chunk_chars: int = DEFAULT_CHUNK_CHARS) -> list[int]:
    """Split at every ``chunk_chars`` characters with no overlap; concatenate the chunk encodings."""
    chunk_chars = checks.integer("chunk_chars", chunk_chars, 1)
    bk, _ = prepared_backend(tokenizer)
    cuts = list(range(0, len(text), chunk_chars)) + [len(text)]
    ids: list[int] = []
    for part in _encode_texts(bk, [text[a:b] for a, b in zip(cuts, cuts[1:])]):
        ids.extend(part)
    return ids


def encode_overlap_ids(tokenizer, text: str, *, chunk_chars: int = DEFAULT_CHUNK_CHARS,
                       overlap_chars: int = DEFAULT_OVERLAP_CHARS, min_run: int = 2) -> list[int]:
    """Overlapping chunks stitched at the longest common run of *ids* (the sglang approach).

    It uses the same chunks and the same overlap windows as :func:`encode` (so it is given the
    right tokens to compare), but matches ids only: positions are erased before calling the same
    kernel, which then finds the longest common run of ids and cuts at its end. Without an id run
    it cuts both chunks at the nominal boundary. The settings are checked as :func:`encode` checks them.
    """
    validate_settings(chunk_chars, overlap_chars, min_run)
    bk, _ = prepared_backend(tokenizer)
    n = len(text)
    if n < 2 * chunk_chars:
        return bk.encode(text, add_special_tokens=False).ids
    trivial, hard = piece_mode(bk)
    bounds, h = chunk_spans(n, chunk_chars, overlap_chars)
    jobs = []
    for g in range(len(bounds) - 1):
        s, e = max(0, bounds[g] - h), min(n, bounds[g + 1] + h)
        head_until = bounds[g] + h if g > 0 else s
        tail_from = bounds[g + 1] - h if g + 1 < len(bounds) - 1 else e
        jobs.append((s, e, head_until, tail_from))
    encs = run_jobs(bk, text, jobs, default_workers(), "threads", trivial, hard, False)
    ids: list[int] = []
    begin = 0
    for g, enc in enumerate(encs):
        if g + 1 < len(encs):
            tail, head = enc.tail.copy(), encs[g + 1].head.copy()
            for arr in (tail, head):
                arr[:, 0] = 0
                arr[:, 1] = 0
            cut = tokmerge.find_cut(tail, head, center=0, min_run=min_run, rule="longest")
            if cut.found:
                stop, nxt = len(enc.ids) - len(enc.tail) + cut.ia, cut.ib
            else:  # no common id run: cut both at the nominal boundary
                b = bounds[g + 1]
                stop = len(enc.ids) - len(enc.tail) + int(np.searchsorted(enc.tail[:, 0], b))
                nxt = int(np.searchsorted(encs[g + 1].head[:, 0], b))
        else:
            stop, nxt = len(enc.ids), 0
        ids.extend(enc.ids[begin:stop])
        begin = nxt
    return ids


_DELIMITERS = ("\n\n", "\n", ". ", " ")


def encode_delimiter(tokenizer, text: str, *, chunk_chars: int = DEFAULT_CHUNK_CHARS) -> list[int]:
    """Split near every ``chunk_chars`` at the last delimiter before it (a blank line, a newline,
    a sentence end, a space -- in that order of preference, within half a chunk), the delimiter
    starting the next chunk; encode the pieces independently and concatenate (the vLLM approach).
    """
    chunk_chars = checks.integer("chunk_chars", chunk_chars, 1)
    bk, _ = prepared_backend(tokenizer)
    n = len(text)
    cuts = [0]
    for b in range(chunk_chars, n, chunk_chars):
        lo = max(cuts[-1] + 1, b - chunk_chars // 2)
        at = b
        for delim in _DELIMITERS:
            k = text.rfind(delim, lo, b)
            if k > cuts[-1]:
                at = k + (1 if delim == ". " else 0)
                break
        if at > cuts[-1]:
            cuts.append(at)
    cuts.append(n)
    ids: list[int] = []
    for part in _encode_texts(bk, [text[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]):
        ids.extend(part)
    return ids
