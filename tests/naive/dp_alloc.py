"""numpy twin of acl26.kernels.dp_alloc: the same dynamic programme, vectorised over k."""

import numpy as np


def allocate(cost, budget):
    cost = np.asarray(cost, dtype=np.float64)
    L, K = cost.shape
    budget = min(int(budget), L * K)
    best = np.full((L, budget + 1), np.inf)
    choice = np.zeros((L, budget + 1), dtype=np.int64)
    top = min(K, budget)
    best[0, 1:top + 1] = cost[0, :top]
    choice[0, 1:top + 1] = np.arange(1, top + 1)
    for i in range(1, L):
        for b in range(i + 1, min(budget, (i + 1) * K) + 1):
            ks = np.arange(1, min(K, b - i) + 1)
            cand = best[i - 1, b - ks] + cost[i, ks - 1]
            j = int(np.argmin(cand))  # the first (smallest k) minimum
            best[i, b], choice[i, b] = cand[j], ks[j]
    b = L + int(np.argmin(best[L - 1, L:]))  # the smallest total among the least costs
    out = np.zeros(L, dtype=np.int64)
    for i in range(L - 1, -1, -1):
        out[i] = choice[i, b]
        b -= out[i]
    return out
