"""Plain-numpy twin of acl26.kernels.tokmerge (stumpy-style): slow, obvious, and the oracle."""

from __future__ import annotations

import numpy as np


def find_cut(left: np.ndarray, right: np.ndarray, center: int, min_run: int, rule: str, overlap=None):
    """Brute force over every pair of token indices; same contract as acl26.kernels.tokmerge.find_cut."""
    if rule == "paper":
        return _port(left, right, min_run, overlap)
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if left.shape[1] == 3:
        left = np.hstack([left, np.zeros((len(left), 1), np.int64)])
    if right.shape[1] == 3:
        right = np.hstack([right, np.zeros((len(right), 1), np.int64)])
    cols = 3 if rule == "longest" else 4
    eq = np.array([[np.array_equal(left[i, :cols], right[j, :cols]) for j in range(len(right))]
                   for i in range(len(left))], dtype=bool).reshape(len(left), len(right))
    candidates = []  # (-run length, distance, ia, ib, pos)
    for i in range(len(left)):
        for j in range(len(right)):
            if not eq[i, j] or (i > 0 and j > 0 and eq[i - 1, j - 1]):
                continue
            length = 0
            while i + length < len(left) and j + length < len(right) and eq[i + length, j + length]:
                length += 1
            if length < min_run:
                continue
            flags = left[i:i + length, 3]
            pieces = np.flatnonzero(flags == 1)
            if rule == "longest":
                ks = [length]
            else:
                ks = [k for k in range(1, length) if flags[k] == 1 and pieces.size and pieces.min() < k < pieces.max()]
            for k in ks:
                pos = int(left[i + k - 1, 1]) if rule == "longest" else int(left[i + k, 0])
                candidates.append((-length, abs(pos - center), i + k, j + k, pos))
    if not candidates:
        return (-1, -1, 0, -1)
    best = min(candidates)
    return (best[2], best[3], -best[0], best[4])


def _port(left, right, min_run, overlap):
    """The vllm-ascend port's rule, written from its description (tokmerge's docstring): every maximal
    diagonal of equal (start, end, id) tokens wholly inside the overlap, ranked, an exact tie rejected."""
    left = np.asarray(left, dtype=np.int64)[:, :3]
    right = np.asarray(right, dtype=np.int64)[:, :3]
    if overlap is None:
        starts = [int(x[:, 0].min()) for x in (left, right) if len(x)]
        ends = [int(x[:, 1].max()) for x in (left, right) if len(x)]
        lo, hi = (min(starts), max(ends)) if starts else (0, 0)
    else:
        lo, hi = overlap

    def ok(i, j):
        s, e = int(left[i, 0]), int(left[i, 1])
        return bool(np.array_equal(left[i], right[j])) and lo <= s and e <= hi and e > s

    ranked = []  # (rank, ia, ib, length, end)
    for i in range(len(left)):
        for j in range(len(right)):
            if not ok(i, j) or (i > 0 and j > 0 and ok(i - 1, j - 1)):
                continue
            n = 0
            while i + n < len(left) and j + n < len(right) and ok(i + n, j + n):
                n += 1
            if n < min_run:
                continue
            s = int(left[i, 0])
            e = int(left[i:i + n, 1].max())
            ranked.append(((n, min(s - lo, hi - e), e - s), i + n, j + n, n, e))
    if not ranked:
        return (-1, -1, 0, -1)
    top = max(r[0] for r in ranked)
    best = [r for r in ranked if r[0] == top]
    if len(best) > 1:
        return (-1, -1, 0, -1)
    _, ia, ib, n, e = best[0]
    return (ia, ib, n, e)
