"""LoPT merge kernel: find where to cut two overlapping token streams so the result is lossless.

LoPT (ACL 2026, arXiv 2511.04952) tokenizes a long text in overlapping chunks and stitches the
chunk encodings together. This module finds the stitch: given the tokens of the left chunk and
of the right chunk that fall inside their shared overlap, it returns indices ``(ia, ib)`` so that
``left[:ia] + right[ib:]`` is the tokenization of the union, identical to encoding it in one go.

Token arrays
------------
Each chunk's tokens are an ``int64`` array of shape ``(n, 4)``; one row per token::

    column 0  START  global character offset where the token's text begins
    column 1  END    global character offset where it ends (exclusive)
    column 2  ID     vocabulary id
    column 3  PIECE  1 if a pre-tokenizer piece (a "word") starts at this token and the chunk
                     agrees on that from its own context, else 0

Rows are in the chunk's token order, so START is non-decreasing. Several tokens may share the same
(START, END): byte-level BPE spends two to four byte tokens on one emoji or CJK character.

Why positions, not ids
----------------------
Near its edges a chunk is tokenized wrongly: the right chunk starts mid-word (or mid-run of
spaces, mid-number), and the left chunk ends mid-word. Deeper inside the overlap both chunks see
enough context and produce the tokens the whole text would get. Matching ids alone cannot tell
these apart: ``" the"`` recurs every few words, so an id match can pair token *k* of one chunk with
a *different* occurrence in the other, and cutting there duplicates or drops text. Matching
(START, END, ID) means both chunks put the *same* token on the *same* characters; a run of such
tokens is a stretch where the two contexts have converged.

Convergence of tokens is a symptom, not a proof: inside one long pre-tokenizer piece (a long
word, a run of digits or spaces) two differently truncated copies can coincide on a few tokens
and still both differ from the full text. What is exact is this: a tokenizer splits the text
into pieces (regex pre-tokenizer, or positions no vocabulary entry can straddle) and encodes each
piece on its own, so a piece boundary on which the left chunk (synchronised from its start) and
the right chunk (synchronised from there on) both agree is a boundary of the sequential encoding,
and everything left of it comes from the left chunk, everything right of it from the right chunk.
The default rule (``rule="piece"``) therefore cuts only at a piece start that both chunks agree
on, with the whole piece before it and the whole piece after it inside the matched run.

``rule="paper"`` is the vllm-ascend port's rule (``vllm_ascend/tokenization/lopt_tokenizer.py``,
``_find_position_overlap``; the paper's text does not state one): only tokens wholly inside the
overlap ``[lo, hi)`` take part (``lo <= START``, ``END <= hi``, ``END > START``); every maximal run of
at least ``min_run`` equal (START, END, ID) tokens is a candidate, ranked by (run length, distance
from both overlap edges ``min(run start - lo, hi - run end)``, span ``run end - run start``), higher
first; an exact tie between the best candidates is rejected (no cut), and the cut is at the best
run's end. ``rule="longest"`` is the id-matching baseline's (sglang's approach; positions erased by
the caller): the longest run, then the cut closest to ``center``, then the smallest ``ia``, ``ib``.

Choice among candidates of ``rule="piece"``: the longest run first, then the cut closest to ``center``
(the middle of the overlap, furthest from both chunks' edges), then the smallest ``ia``, then the
smallest ``ib``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from acl26 import checks
from acl26.kernels._jit import njit

START, END, ID, PIECE = 0, 1, 2, 3
RULES = {"longest": 0, "piece": 1, "paper": 2}


class Cut(NamedTuple):
    """``left[:ia] + right[ib:]``; ``ia == ib == -1`` when the chunks never agree."""

    ia: int
    ib: int
    run: int  # length of the matched run the cut lies in (tokens)
    pos: int  # global character position of the cut

    @property
    def found(self) -> bool:
        return self.ia >= 0


def find_cut(left: np.ndarray, right: np.ndarray, *, center: int, min_run: int = 2,
             rule: str = "piece", overlap: tuple[int, int] | None = None) -> Cut:
    """Find the cut between two overlapping chunks' token arrays (see the module docstring).

    ``left`` and ``right`` are ``(n, 4)`` integer arrays (``(n, 3)`` is accepted for
    ``rule="paper"`` and ``rule="longest"``, which ignore PIECE). Only the tokens inside the overlap
    need be passed; the returned indices refer to the arrays as given. ``overlap``: the characters
    ``(lo, hi)`` both chunks cover, for ``rule="paper"`` (default: from the smallest START to the
    largest END given); the other rules ignore it.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {sorted(RULES)}, got {rule!r}")
    center = checks.integer("center", center)
    min_run = checks.integer("min_run", min_run, 1)  # 2.9 is refused, never cut to 2
    need = 4 if rule == "piece" else 3
    arrays = []
    for name, arr in (("left", left), ("right", right)):
        arr = np.asarray(arr)
        if arr.ndim != 2 or arr.shape[1] < need or arr.shape[1] > 4:
            raise ValueError(f"{name} must have shape (n, 4) (or (n, 3) for rule='paper' or 'longest'), got {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
        if arr.shape[1] == 3:
            arr = np.concatenate([arr, np.zeros((arr.shape[0], 1), dtype=arr.dtype)], axis=1)
        arr = np.ascontiguousarray(arr, dtype=np.int64)
        if arr.shape[0] and (np.any(arr[:, END] < arr[:, START]) or np.any(np.diff(arr[:, START]) < 0)):
            raise ValueError(f"{name}: tokens must have START <= END and non-decreasing START")
        arrays.append(arr)
    if overlap is None:
        both = [a for a in arrays if a.shape[0]]
        lo = min((int(a[:, START].min()) for a in both), default=0)
        hi = max((int(a[:, END].max()) for a in both), default=0)
    else:
        if len(overlap) != 2:
            raise ValueError(f"overlap must be a pair (lo, hi), got {overlap!r}")
        lo, hi = checks.integer("overlap lo", overlap[0]), checks.integer("overlap hi", overlap[1])
        if hi < lo:
            raise ValueError(f"overlap must have lo <= hi, got {overlap!r}")
    if rule == "paper":
        ia, ib, run, pos = _find_cut_port(arrays[0], arrays[1], np.int64(lo), np.int64(hi), np.int64(min_run))
    else:
        ia, ib, run, pos = _find_cut(arrays[0], arrays[1], np.int64(center), np.int64(min_run), RULES[rule])
    return Cut(int(ia), int(ib), int(run), int(pos))


@njit(cache=True, nogil=True)
def _same(a, i, b, j, ncols):
    for c in range(ncols):
        if a[i, c] != b[j, c]:
            return False
    return True


@njit(cache=True, nogil=True)
def _find_cut(a, b, center, min_run, rule):
    na = a.shape[0]
    nb = b.shape[0]
    ncols = 3 if rule == 0 else 4
    best_len = -1
    best_d = 0
    best_ia = -1
    best_ib = -1
    best_pos = -1
    jlo = 0
    for i in range(na):
        s = a[i, START]
        while jlo < nb and b[jlo, START] < s:
            jlo += 1
        j = jlo
        while j < nb and b[j, START] == s:
            # a maximal run starts at (i, j): equal here, not equal (or absent) just before
            if _same(a, i, b, j, ncols) and not (i > 0 and j > 0 and _same(a, i - 1, b, j - 1, ncols)):
                length = 1
                while i + length < na and j + length < nb and _same(a, i + length, b, j + length, ncols):
                    length += 1
                if length >= min_run and length >= best_len:
                    if rule == 0:
                        k_lo = length
                        k_hi = length
                    else:
                        k_lo = 1
                        k_hi = length - 1
                    first_piece = -1  # first k in the run with PIECE set
                    last_piece = -1   # last k in the run with PIECE set
                    if rule == 1:
                        for k in range(length):
                            if a[i + k, PIECE] == 1:
                                if first_piece < 0:
                                    first_piece = k
                                last_piece = k
                    for k in range(k_lo, k_hi + 1):
                        if rule == 1:
                            # a piece starts at k, a whole piece precedes it and one follows it
                            if a[i + k, PIECE] != 1 or not (first_piece < k < last_piece):
                                continue
                            pos = a[i + k, START]
                        else:
                            pos = a[i + k - 1, END]
                        d = pos - center
                        if d < 0:
                            d = -d
                        ia = i + k
                        ib = j + k
                        better = False
                        if length > best_len:
                            better = True
                        elif d < best_d:
                            better = True
                        elif d == best_d and (ia < best_ia or (ia == best_ia and ib < best_ib)):
                            better = True
                        if better:
                            best_len = length
                            best_d = d
                            best_ia = ia
                            best_ib = ib
                            best_pos = pos
            j += 1
    if best_ia < 0:
        return -1, -1, 0, -1
    return best_ia, best_ib, best_len, best_pos


@njit(cache=True, nogil=True)
def _inside(a, i, lo, hi):
    return a[i, START] >= lo and a[i, END] <= hi and a[i, END] > a[i, START]


@njit(cache=True, nogil=True)
def _find_cut_port(a, b, lo, hi, min_run):
    """The vllm-ascend port's rule (module docstring): maximal runs of equal (START, END, ID) tokens wholly
    inside ``[lo, hi)``, ranked by (length, min(start - lo, hi - end), end - start); an exact tie of the
    best rank is no cut."""
    na = a.shape[0]
    nb = b.shape[0]
    best_len = -1
    best_margin = 0
    best_span = 0
    best_ia = -1
    best_ib = -1
    best_pos = -1
    tie = False
    jlo = 0
    for i in range(na):
        s = a[i, START]
        while jlo < nb and b[jlo, START] < s:
            jlo += 1
        if not _inside(a, i, lo, hi):
            continue
        j = jlo
        while j < nb and b[j, START] == s:
            # a maximal run starts at (i, j): equal and inside here, not so just before
            if _same(a, i, b, j, 3) and not (i > 0 and j > 0 and _same(a, i - 1, b, j - 1, 3)
                                             and _inside(a, i - 1, lo, hi)):
                length = 1
                end = a[i, END]
                while (i + length < na and j + length < nb and _same(a, i + length, b, j + length, 3)
                       and _inside(a, i + length, lo, hi)):
                    if a[i + length, END] > end:
                        end = a[i + length, END]
                    length += 1
                if length >= min_run:
                    margin = s - lo
                    if hi - end < margin:
                        margin = hi - end
                    span = end - s
                    if (length > best_len or (length == best_len and (margin > best_margin or (
                            margin == best_margin and span > best_span)))):
                        best_len = length
                        best_margin = margin
                        best_span = span
                        best_ia = i + length
                        best_ib = j + length
                        best_pos = end
                        tie = False
                    elif length == best_len and margin == best_margin and span == best_span:
                        tie = True
            j += 1
    if best_ia < 0 or tie:
        return -1, -1, 0, -1
    return best_ia, best_ib, best_len, best_pos
