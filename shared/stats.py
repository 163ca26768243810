"""Intervals for noisy verdicts: a paired bootstrap over evaluation blocks, a t-interval over seeds,
and the range over timing repeats.

Each returns an :class:`Interval` (estimate, lower and upper bound, level, how it was made, how
many units it rests on) that :meth:`acl26.claims.Ledger.record` decides a claim on: the claim
holds when the whole interval passes its test, does not hold when the whole interval fails it, and
is inconclusive otherwise. The bootstrap is ``scipy.stats.bootstrap`` (BCa, paired resampling of
the same blocks for both arms), not a reimplementation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from acl26 import checks, evidence


@evidence.keep  # results hold intervals: acl26 verify builds them again
@dataclass(frozen=True)
class Interval:
    estimate: float
    lo: float
    hi: float
    level: float  # e.g. 0.95; 1.0 for the full range over repeats
    method: str  # "paired bootstrap over blocks", "t over seeds", "range over repeats", ...
    n: int  # blocks, seeds or repeats

    def __post_init__(self):
        if not self.lo <= self.hi:
            raise ValueError(f"interval bounds out of order: {self.lo} > {self.hi}")

    def describe(self, fmt: str = "{:.3g}") -> str:
        """E.g. ``[0.97, 1.02] (95% paired bootstrap over 64 blocks)``."""
        level = "" if self.level >= 1 else f"{self.level:.0%} "
        return f"[{fmt.format(self.lo)}, {fmt.format(self.hi)}] ({level}{self.method}, n = {self.n})"

    def as_dict(self) -> dict:
        return asdict(self)


def _level(level: float) -> float:
    return checks.number("level", level, 0, 1, lo_open=True, hi_open=True)


def _statistic(name: str | Callable) -> Callable:
    """A paired statistic of the per-block values ``a`` and ``b`` (vectorised over resamples)."""
    if callable(name):
        return name
    if name == "mean_diff":
        return lambda a, b, axis=-1: np.mean(a, axis=axis) - np.mean(b, axis=axis)
    if name == "ppl_ratio":  # per-block mean NLLs -> exp(mean NLL a - mean NLL b): the ratio of perplexities
        return lambda a, b, axis=-1: np.exp(np.mean(a, axis=axis) - np.mean(b, axis=axis))
    if name == "ratio_of_means":
        return lambda a, b, axis=-1: np.mean(a, axis=axis) / np.mean(b, axis=axis)
    raise ValueError(f"statistic must be 'mean_diff', 'ppl_ratio', 'ratio_of_means' or a callable, got {name!r}")


def paired_bootstrap(a: Sequence[float], b: Sequence[float], statistic: str | Callable = "mean_diff", *,
                     level: float = 0.95, n_resamples: int = 4999, seed: int = 0, unit: str = "blocks") -> Interval:
    """A BCa bootstrap interval of ``statistic(a, b)`` resampling the same units (blocks) for both arms.

    ``a[i]`` and ``b[i]`` are measured on the same unit (e.g. the mean NLL of validation block ``i``
    under two models). ``statistic``: ``"mean_diff"``, ``"ppl_ratio"`` (``a`` and ``b`` are per-block
    mean NLLs in nats; the ratio of the two perplexities), ``"ratio_of_means"`` or a callable
    ``f(a, b, axis)``. ``unit`` names what was resampled in the interval's description (blocks,
    problems, ...).
    """
    from scipy import stats as sps

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size < 2:
        raise ValueError(f"a and b must be 1-D of the same length >= 2, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a and b must be finite")
    checks.integer("n_resamples", n_resamples, 99)
    seed = checks.seed("seed", seed)
    stat = _statistic(statistic)
    est = float(stat(a, b))
    if np.array_equal(a, b) or (np.ptp(a) == 0 and np.ptp(b) == 0):  # no spread: the interval is the point
        return Interval(est, est, est, _level(level), f"paired bootstrap over {unit}", int(a.size))
    res = sps.bootstrap((a, b), stat, paired=True, vectorized=True, confidence_level=_level(level),
                        n_resamples=n_resamples, method="BCa", rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):  # BCa can fail on degenerate data; fall back to percentile
        res = sps.bootstrap((a, b), stat, paired=True, vectorized=True, confidence_level=_level(level),
                            n_resamples=n_resamples, method="percentile", rng=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Interval(est, min(lo, est), max(hi, est), _level(level), f"paired bootstrap over {unit}", int(a.size))


def seed_interval(values: Sequence[float], *, level: float = 0.95) -> Interval:
    """Mean and Student-t interval over independent seeds (at least 2)."""
    from scipy import stats as sps

    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2 or not np.isfinite(x).all():
        raise ValueError(f"values must be at least 2 finite numbers (one per seed), got {list(values)!r}")
    mean = float(x.mean())
    half = float(sps.t.ppf(0.5 + _level(level) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Interval(mean, mean - half, mean + half, _level(level), "t over seeds", int(x.size))


def repeat_range(values: Sequence[float]) -> Interval:
    """Median and full range (min to max) over timing repeats: the conservative interval of a speed figure."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 1 or not np.isfinite(x).all():
        raise ValueError(f"values must be at least 1 finite number, got {list(values)!r}")
    return Interval(float(np.median(x)), float(x.min()), float(x.max()), 1.0, "range over repeats", int(x.size))


def two_level_bootstrap(per_seed: Sequence[tuple[Sequence[float], Sequence[float]]], *, level: float = 0.95,
                        n_resamples: int = 4999, seed: int = 0, unit: str = "units") -> Interval:
    """The mean over seeds of the mean paired difference ``a − b`` over units, with a two-level percentile
    bootstrap: seeds are resampled, then the units within each drawn seed.

    ``per_seed``: one ``(a, b)`` per training seed (at least 2), each two arms' per-unit values on the same
    units (held-out pairs, problems). The interval covers both the spread across seeds and the
    evaluation noise within each. With few seeds the outer level sees only their spread (3 seeds:
    10 distinct draws), as any bootstrap over few units does.
    """
    checks.integer("n_resamples", n_resamples, 99)
    rng = np.random.default_rng(checks.seed("seed", seed))
    if isinstance(per_seed, (str, bytes)):
        raise ValueError("per_seed must hold (a, b) per seed, not a string")
    per_seed = list(per_seed)
    if len(per_seed) < 2:
        raise ValueError(f"per_seed must hold (a, b) for at least 2 seeds, got {len(per_seed)}")
    diffs = []
    for i, arms in enumerate(per_seed):
        if len(arms) != 2:
            raise ValueError(f"per_seed[{i}] must be a pair (a, b)")
        a, b = (np.asarray(x, dtype=np.float64) for x in arms)
        if a.ndim != 1 or a.shape != b.shape or a.size < 1:
            raise ValueError(f"per_seed[{i}]: a and b must be 1-D of the same length >= 1, got {a.shape} and {b.shape}")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise ValueError(f"per_seed[{i}]: a and b must be finite")
        diffs.append(a - b)
    s = len(diffs)
    est = float(np.mean([d.mean() for d in diffs]))
    # inner level: for each seed, n_resamples * s bootstrap means of its units (one per outer draw slot)
    inner = np.stack([d[rng.integers(0, d.size, (n_resamples * s, d.size))].mean(axis=1) for d in diffs])
    outer = rng.integers(0, s, (n_resamples, s))  # the seeds each resample draws
    slots = np.arange(n_resamples * s).reshape(n_resamples, s)
    draws = inner[outer, slots].mean(axis=1)
    alpha = (1 - _level(level)) / 2
    lo, hi = (float(x) for x in np.quantile(draws, [alpha, 1 - alpha]))
    return Interval(est, min(lo, est), max(hi, est), _level(level),
                    f"two-level bootstrap: seeds, then {unit} within each", s)


def over_half_width(lead: Interval, half_width: float) -> tuple[float, Interval | None]:
    """``lead`` in units of ``half_width`` (a control's "the effect exceeds the noise"): ``(value, interval)``.
    With no noise at all (``half_width`` 0) any lead that excludes 0 is infinitely large and none is 0,
    with no interval."""
    h = checks.number("half_width", half_width, 0)
    if h == 0:
        return (math.inf if lead.lo > 0 else 0.0), None
    iv = Interval(lead.estimate / h, lead.lo / h, lead.hi / h, lead.level, f"{lead.method}, over the half-width", lead.n)
    return iv.estimate, iv


def noisy(per_seed: Sequence[float] | None = None, paired: tuple | None = None, point: float | None = None, *,
          statistic: str | Callable = "mean_diff", n_resamples: int = 4999, unit: str = "blocks",
          level: float = 0.95, nested: Sequence[tuple] | None = None) -> tuple[float | None, Interval | None, str]:
    """The one rule for deciding a noisy figure, with what was measured at hand: ``(value, interval, how)``.

    * ``nested``: per training seed (two or more), the two arms' per-unit values ``(a, b)``: the mean
      paired difference, on the hull of its two-level bootstrap (:func:`two_level_bootstrap`) and the
      t-interval over the per-seed mean differences (``statistic`` must be ``"mean_diff"``). With few
      seeds the bootstrap's outer level under-covers (it shrinks the seed variance by (s − 1)/s and has
      no t quantile: about 76% for a nominal 95% at 3 seeds), so the t-interval, which carries the
      within-seed noise in each seed's mean, bounds it; with many seeds the two agree;
    * two or more ``per_seed`` values (one per training seed, each the figure the claim is about):
      their mean and the t-interval over seeds;
    * else ``paired = (a, b)`` per-unit values of the two arms of one model (blocks, problems): the
      statistic and its paired bootstrap over those units, which covers evaluation noise only;
    * else the ``point`` value, with no interval;
    * else ``(None, None, why)``: nothing to decide on.

    ``how`` says which, in words for the claim's note.
    """
    if nested is not None and len(nested) >= 2:
        if statistic != "mean_diff":
            raise ValueError(f"nested values are decided on the mean difference only, not {statistic!r}")
        boot = two_level_bootstrap(nested, level=level, n_resamples=n_resamples, unit=unit)
        t = seed_interval([float(np.mean(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)))
                           for a, b in nested], level=level)
        iv = Interval(boot.estimate, min(boot.lo, t.lo), max(boot.hi, t.hi), boot.level,
                      f"two-level bootstrap (seeds, then {unit}) widened to the t over seeds", boot.n)
        wider = "the t-interval over seeds" if (t.hi - t.lo) > (boot.hi - boot.lo) else "the two-level bootstrap"
        return iv.estimate, iv, (f"the hull of a two-level bootstrap over {iv.n} seeds and the {unit} within each "
                                 f"({boot.lo:.3g}, {boot.hi:.3g}) and the t-interval over seeds ({t.lo:.3g}, {t.hi:.3g}); "
                                 f"{wider} is the wider")
    if per_seed is not None and len(per_seed) >= 2:
        iv = seed_interval(per_seed, level=level)
        return iv.estimate, iv, f"t-interval over {iv.n} seeds"
    if paired is not None and len(paired[0]) >= 2:
        iv = paired_bootstrap(paired[0], paired[1], statistic, level=level, n_resamples=n_resamples, unit=unit)
        return iv.estimate, iv, (f"one training seed: a paired bootstrap over {iv.n} {unit}, which covers "
                                 "evaluation noise, not the spread across seeds")
    if point is not None:
        return float(point), None, "one training seed and no per-unit values: a point, no interval"
    return None, None, "nothing measured to decide on"
