"""Alloc-MoE's layer-level allocation: how many experts each MoE layer gets under a total budget.

Alloc-MoE (ACL 2026, arXiv 2604.08133) profiles, for every MoE layer ``i`` and every expert count
``k``, the cost (e.g. the calibration perplexity) of running layer ``i`` with ``k`` experts per
token, and then picks one ``k_i`` per layer. :func:`allocate` solves that choice exactly::

    minimise   sum_i cost[i, k_i - 1]
    subject to 1 <= k_i <= K for every layer, and sum_i k_i <= budget

by dynamic programming over layers and the number of experts spent so far: ``best[i, b]`` is the
least cost of layers ``0..i`` spending exactly ``b`` experts, ``best[i, b] = min_k best[i-1, b-k]
+ cost[i, k-1]``, and the answer is the least ``best[L-1, b]`` over ``b <= budget``. It takes
O(L * B * K) steps for ``B = min(budget, L * K)`` (``acl26 bench alloc_moe`` times it at L=64, K=16, budget=384).

Ties. Costs are summed layer by layer from the first (the order ``sum`` uses), in float64, and
compared exactly. Among allocations of equal cost the one that spends the fewest experts in total
wins; among those, the one with the smallest ``k`` in the last layer, then in the layer before, and
so on (the DP keeps each state's least cost; the back-trace, from the last layer to the first, takes
the smallest ``k`` whose term reproduces that least cost: the same float expression, so the
comparison is exact). So the answer is one well-defined allocation, the
same on every machine.

The public wrapper validates its input (a 2-D array of finite numbers with at least one layer and
one expert count, an integer budget of at least one expert per layer) and calls a private
``@njit(cache=True)`` core; ``tests/naive/dp_alloc.py`` is its numpy twin.
"""

from __future__ import annotations

import numpy as np

from acl26 import checks
from acl26.kernels._jit import njit


def allocate(cost, budget) -> np.ndarray:
    """The expert count ``k_i`` (1..K) of every layer that minimises the summed cost with
    ``sum(k) <= budget``; ``cost`` has shape (L, K) and ``cost[i, k-1]`` is the cost of giving
    layer ``i`` ``k`` experts. Returns an int64 array of length L.

    Raises ValueError for a cost that is not a 2-D array of finite real numbers with L, K >= 1,
    and for a budget that is not an integer or is below L (every layer needs one expert)."""
    c = _check_cost(cost)
    b = _check_budget(budget, c.shape[0])
    return _allocate(c, min(b, c.shape[0] * c.shape[1]))


def _check_cost(cost) -> np.ndarray:
    if isinstance(cost, (str, bytes)) or cost is None:
        raise ValueError(f"cost must be a 2-D array of shape (layers, K), got {type(cost).__name__}")
    try:
        arr = np.asarray(cost)
    except Exception as exc:  # ragged nested lists
        raise ValueError(f"cost must be a 2-D array of shape (layers, K): {exc}") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"cost must hold real numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError("cost must hold real numbers, got complex values")
    if arr.ndim != 2:
        raise ValueError(f"cost must be 2-D (layers, K), got shape {arr.shape}")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"cost must have at least one layer and one expert count, got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        i, k = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"cost must be finite; cost[{i}, {k}] (layer {i}, {k + 1} experts) is {arr[i, k]}")
    with np.errstate(over="ignore"):
        overflow = not np.isfinite(np.abs(arr).max(axis=1).sum())
    if overflow:
        raise ValueError("cost is too large: its sums over layers overflow float64")
    return arr


def _check_budget(budget, layers: int) -> int:
    if checks.is_number(budget) and isinstance(np.asarray(budget)[()], np.floating | float) \
            and float(budget).is_integer():
        budget = int(budget)  # an integral float (6.0) is taken, as documented and tested; 6.5 is refused
    budget = checks.integer("budget", budget)  # an int or numpy integer; a bool, 6.5 or inf is refused
    if budget < layers:
        raise ValueError(f"budget ({budget}) must be at least the number of layers ({layers}): every layer "
                         f"keeps at least one expert")
    return budget


@njit(cache=True)
def _allocate(cost, budget):
    L, K = cost.shape
    inf = np.inf
    best = np.full((L, budget + 1), inf)
    for k in range(1, min(K, budget) + 1):
        best[0, k] = cost[0, k - 1]
    for i in range(1, L):
        lo = i + 1  # at least one expert per layer so far
        hi = min(budget - (L - 1 - i), (i + 1) * K)  # and one left for every later layer
        prev = best[i - 1]
        cur = best[i]
        # k outer, b inner: each pass is a running minimum over b with no dependence between the b's.
        # The pass runs over two slices with a non-negative index, so numba emits no wrap-around
        # check for negative indices and LLVM vectorises it (about 4x faster than indexing prev[b - k]
        # directly); which k reached the minimum is recovered in the back-trace
        for k in range(1, K + 1):
            ck = cost[i, k - 1]
            b_lo = max(lo, i + k)
            b_hi = min(hi, i * K + k)
            n = b_hi - b_lo + 1
            if n > 0:
                src = prev[b_lo - k: b_hi - k + 1]
                dst = cur[b_lo: b_hi + 1]
                for j in range(n):
                    c = src[j] + ck
                    if c < dst[j]:
                        dst[j] = c
    # the least cost over totals <= budget; the smallest total on ties
    b_star, v_star = L, inf
    for b in range(L, budget + 1):
        if best[L - 1, b] < v_star:
            v_star, b_star = best[L - 1, b], b
    ks = np.zeros(L, dtype=np.int64)
    b = b_star
    for i in range(L - 1, 0, -1):
        # the smallest k whose term reproduces the optimum (the same float expression, so exactly equal)
        target = best[i, b]
        for k in range(max(1, b - i * K), min(K, b - i) + 1):
            if best[i - 1, b - k] + cost[i, k - 1] == target:
                ks[i] = k
                break
        b -= ks[i]
    ks[0] = b
    return ks
