"""The three stages along λ: the transition band read from the Think #R curve, and the λ values the study
places by it (the fine grid inside the band, the compared λ and the ablations' λ past it, the decoding grid's λ
at its lower end). Pure functions of the curve, fixed by Think #R alone, never by accuracy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from acl26 import checks

#: Think #R thresholds that delimit the transition band (stage 2)
BAND_LOW, BAND_HIGH = 0.1, 0.9


def band(lams: Sequence[float], think: Sequence[float], low: float = BAND_LOW, high: float = BAND_HIGH):
    """The transition band ``(lo, hi)``: ``hi`` the smallest λ with Think #R ≥ ``high``, ``lo`` the largest
    λ below it with Think #R ≤ ``low``; None when the curve never gets there."""
    order = np.argsort(lams)
    lam = np.asarray(lams, dtype=float)[order]
    rate = np.asarray(think, dtype=float)[order]
    above = np.nonzero(rate >= high)[0]
    if not len(above):
        return None
    hi = int(above[0])
    below = np.nonzero(rate[:hi] <= low)[0]
    if not len(below):
        return None
    return float(lam[int(below[-1])]), float(lam[hi])


def fine_grid(lams: Sequence[float], think: Sequence[float], n: int) -> list[float]:
    """``n`` evenly spaced λ values between the grid points where Think #R crosses 1/2 (none if it never does)."""
    n = checks.integer("n", n, 0)
    order = np.argsort(lams)
    lam = np.asarray(lams, dtype=float)[order]
    rate = np.asarray(think, dtype=float)[order]
    idx = np.nonzero(rate >= 0.5)[0]
    if n == 0 or not len(idx) or idx[0] == 0:
        return []
    a, b = lam[idx[0] - 1], lam[idx[0]]
    return [round(float(a + (b - a) * (i + 1) / (n + 1)), 4) for i in range(n)]


def ablation_lambda(band_: tuple[float, float] | None, offset: float) -> float | None:
    """Where the verdicts' ablations run: the band's upper end + ``offset``, as the paper does (band 0.4 → 0.6,
    MI-0.8 and its ablations at 0.8); accuracy-blind. None without a band, or where that lies past λ = 1.
    The λ compared with Thinking and the baselines is the same point when it lies below 1 (:func:`best_lambda`)."""
    offset = checks.number("offset", offset, 0.0)
    if band_ is None:
        return None
    at = round(float(band_[1]) + offset, 6)
    return at if at <= 1.0 else None


def best_lambda(band_: tuple[float, float] | None, offset: float) -> float | None:
    """The λ < 1 compared with Thinking and the baselines: the band's upper end + ``offset`` (the paper's MI-0.8:
    band 0.4 → 0.6, + 0.2), fixed by the Think #R curve alone, never by accuracy. None without a band, or where
    that point is λ = 1 (Thinking itself) or past it."""
    at = ablation_lambda(band_, offset)
    return at if at is not None and at < 1.0 else None


def grid_lambda(lams: Sequence[float], think: Sequence[float]) -> float | None:
    """The decoding grid's λ: the largest λ of the curve below its first Think #R ≥ 90% with Think #R ≤ 10%
    (the band's lower end: the last stage-1 point, the analogue of the paper's MI-0.4); None without a band."""
    b = band(lams, think)
    return None if b is None else b[0]
