"""Plain-numpy twin of acl26.kernels.tokmerge (stumpy-style): slow, obvious, and the oracle."""

from __future__ import annotations

import numpy as np


def find_cut(left: np.ndarray, right: np.ndarray, center: int, min_run: int, rule: str):
    """Brute force over every pair of token indices; same contract as acl26.kernels.tokmerge.find_cut."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if left.shape[1] == 3:
        left = np.hstack([left, np.zeros((len(left), 1), np.int64)])
    if right.shape[1] == 3:
        right = np.hstack([right, np.zeros((len(right), 1), np.int64)])
    cols = 3 if rule == "paper" else 4
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
            if rule == "paper":
                ks = [length]
            else:
                ks = [k for k in range(1, length) if flags[k] == 1 and pieces.size and pieces.min() < k < pieces.max()]
            for k in ks:
                pos = int(left[i + k - 1, 1]) if rule == "paper" else int(left[i + k, 0])
                candidates.append((-length, abs(pos - center), i + k, j + k, pos))
    if not candidates:
        return (-1, -1, 0, -1)
    best = min(candidates)
    return (best[2], best[3], -best[0], best[4])
