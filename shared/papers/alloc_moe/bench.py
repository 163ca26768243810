"""Benchmarks of Alloc-MoE's layer allocation (``acl26 bench alloc_moe`` and the Performance page).

:func:`acl26.kernels.dp_alloc.allocate` against a pure-Python DP (lists and loops, the same
recurrence and back-trace) and against ``scipy.optimize.milp`` (the same problem as a 0/1
integer programme: one-hot choice of k per layer, Σ k ≤ budget), on the same random instances at
L = 64, K = 16, budget = 384, in rounds whose order rotates; ratios are per round. A brute-force
check on small random instances comes first.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from acl26 import timing
from acl26.kernels import dp_alloc


def python_dp(cost: list[list[float]], budget: int) -> list[int]:
    """The DP in pure Python (no numpy), with its back-trace."""
    L, K = len(cost), len(cost[0])
    budget = min(budget, L * K)
    inf = float("inf")
    best = [[inf] * (budget + 1) for _ in range(L)]
    choice = [[0] * (budget + 1) for _ in range(L)]
    for k in range(1, min(K, budget) + 1):
        best[0][k], choice[0][k] = cost[0][k - 1], k
    for i in range(1, L):
        prev, row, ch, ci = best[i - 1], best[i], choice[i], cost[i]
        for b in range(i + 1, min(budget, (i + 1) * K) + 1):
            v, a = inf, 0
            for k in range(1, min(K, b - i) + 1):
                c = prev[b - k] + ci[k - 1]
                if c < v:
                    v, a = c, k
            row[b], ch[b] = v, a
    b = min(range(L, budget + 1), key=lambda x: (best[L - 1][x], x))
    ks = [0] * L
    for i in range(L - 1, -1, -1):
        ks[i] = choice[i][b]
        b -= ks[i]
    return ks


def milp_alloc(cost: np.ndarray, budget: int) -> np.ndarray:
    from scipy.optimize import Bounds, LinearConstraint, milp

    L, K = cost.shape
    one_hot = np.kron(np.eye(L), np.ones(K))
    spend = np.tile(np.arange(1, K + 1), L)[None]
    res = milp(cost.ravel(), constraints=[LinearConstraint(one_hot, 1, 1), LinearConstraint(spend, -np.inf, budget)],
               integrality=np.ones(L * K), bounds=Bounds(0, 1))
    if not res.success:
        raise RuntimeError(f"milp failed: {res.message}")
    return res.x.reshape(L, K).argmax(1) + 1


def brute_force_agrees(n: int = 300, seed: int = 0) -> tuple[int, int]:
    """(agreeing instances, instances): least summed cost of ``allocate`` vs exhaustive search."""
    rng = np.random.default_rng(seed)
    ok = 0
    for _ in range(n):
        L, K = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        cost = rng.integers(0, 5, (L, K)).astype(float) if rng.random() < 0.5 else rng.random((L, K))
        budget = int(rng.integers(L, L * K + 2))
        ks = dp_alloc.allocate(cost, budget)
        got = float(cost[np.arange(L), ks - 1].sum())
        best = min(sum(float(cost[i, k - 1]) for i, k in enumerate(c))
                   for c in itertools.product(range(1, K + 1), repeat=L) if sum(c) <= budget)
        ok += int(np.isclose(got, best) and ks.sum() <= budget and ks.min() >= 1 and ks.max() <= K)
    return ok, n


def benchmarks(quick: bool = False) -> dict:
    L, K, B = 64, 16, 384
    rng = np.random.default_rng(0)
    costs = [np.sort(rng.random((L, K)), axis=1)[:, ::-1].copy() for _ in range(5)]
    dp_alloc.allocate(costs[0], B)  # compile / load from the numba cache
    agree, n = brute_force_agrees(60 if quick else 300)
    rounds = 2 if quick else 7
    it = {"i": 0}

    def nxt():
        it["i"] += 1
        return costs[it["i"] % len(costs)]

    cands = {"numba DP": lambda: dp_alloc.allocate(nxt(), B), "pure-Python DP": lambda: python_dp(nxt().tolist(), B),
             "scipy milp": lambda: milp_alloc(nxt(), B)}
    calls = {"numba DP": 50, "pure-Python DP": 1, "scipy milp": 1}
    times: dict[str, list[float]] = {k: [] for k in cands}
    for order in timing.rotations(list(cands), rounds):
        for name in order:
            cands[name]()
            ts = []
            for _ in range(calls[name]):
                t0 = time.perf_counter()
                cands[name]()
                ts.append(time.perf_counter() - t0)
            times[name].append(float(np.median(ts)))
    same = all(np.isclose(c[np.arange(L), dp_alloc.allocate(c, B) - 1].sum(),
                          c[np.arange(L), milp_alloc(c, B) - 1].sum()) for c in costs)
    med = {k: timing.median(v) for k, v in times.items()}
    rows = [dict(benchmark=f"allocate: {k}", shape=f"L={L}, K={K}, budget={B}", median_s=med[k], min_s=min(v),
                 max_s=max(v), ratio=med[k] / med["numba DP"]) for k, v in times.items()]
    r_py = [p / q for p, q in zip(times["pure-Python DP"], times["numba DP"])]
    r_mi = [p / q for p, q in zip(times["scipy milp"], times["numba DP"])]
    goals = [
        dict(goal="allocate matches brute force on random small instances", target="all agree",
             measured=f"{agree}/{n}", met=agree == n),
        dict(goal=f"allocate at L={L}, K={K}, budget={B}", target="≤ 0.3 ms (median)",
             measured=f"{med['numba DP'] * 1e3:.3f} ms [{min(times['numba DP']) * 1e3:.3f}, {max(times['numba DP']) * 1e3:.3f}]",
             met=None if quick else med["numba DP"] <= 3e-4),
        dict(goal="allocate vs pure-Python DP (same rounds)", target="≥ 50×",
             measured=f"{np.median(r_py):.0f}× [{min(r_py):.0f}, {max(r_py):.0f}]", met=None if quick else np.median(r_py) >= 50),
        dict(goal="allocate vs scipy.optimize.milp (same rounds, same optimum)", target="≥ 10×",
             measured=f"{np.median(r_mi):.0f}× [{min(r_mi):.0f}, {max(r_mi):.0f}]; same optimum: {same}",
             met=None if quick else bool(np.median(r_mi) >= 10 and same)),
    ]
    return {"title": "Alloc-MoE: layer allocation DP", "rows": rows, "goals": goals,
            "note": f"{rounds} rounds in rotating order; numba: median of 50 calls per round. Speed of the MoE layer "
                    "at DeepSeek-V2-Lite shapes is in the chapter (it needs 2.3 GB of random weights)."}
