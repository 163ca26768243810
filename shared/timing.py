"""Timing on a noisy machine: medians, interleaved rounds whose order rotates, thread counts.

* :func:`median` -- the median of a list of seconds (NaN for none).
* :func:`interleaved` -- time several candidates in rounds: each round runs every candidate in
  turn, and the order rotates by one every round, so no candidate always runs first or last
  (after a sleeping thread pool, or always right after the heaviest one). Ratios between
  candidates then compare runs made under the same machine load.
* :func:`threads` -- a context manager that sets the torch and numba thread counts and restores
  the caller's afterwards.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Mapping


def median(xs) -> float:
    """The median of ``xs`` (NaN when empty)."""
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")


def spread(xs) -> dict[str, float]:
    """``{"median", "min", "max", "n"}`` of ``xs`` (NaN when empty): what a benchmark row reports."""
    xs = list(xs)
    if not xs:
        nan = float("nan")
        return {"median": nan, "min": nan, "max": nan, "n": 0}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def rotations(names, rounds: int) -> list[list]:
    """The order of each round: ``names`` rotated left by the round number."""
    from acl26 import checks

    rounds = checks.integer("rounds", rounds, 0)
    names = list(names)
    n = len(names)
    return [names[r % n:] + names[:r % n] if n else [] for r in range(rounds)]


def interleaved(cands: Mapping[str, Callable[[], object]], rounds: int, calls: int = 5,
                warm_s: float = 0.003) -> dict[str, list[float]]:
    """Seconds per call of each candidate, every call of every round (see the module docstring).

    Within a round a candidate first runs untimed for ``warm_s`` (at least once), then ``calls``
    times timed back to back: thread pools that fell asleep while the others ran are running
    again, as they are in a loop where one call follows another.
    """
    from acl26 import checks

    rounds = checks.integer("rounds", rounds, 1)
    calls = checks.integer("calls", calls, 1)
    warm_s = checks.number("warm_s", warm_s, 0.0)  # inf would warm up forever
    times: dict[str, list[float]] = {k: [] for k in cands}
    for order in rotations(cands, rounds):
        for k in order:
            f = cands[k]
            t_end = time.perf_counter() + warm_s
            f()
            while time.perf_counter() < t_end:
                f()
            for _ in range(calls):
                t0 = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t0)
    return times


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Torch and numba on ``n`` threads (numba at most its pool size) for the block; restored after."""
    import numba
    import torch

    from acl26 import checks

    checks.integer("n", n, 1)
    old_numba, old_torch = numba.get_num_threads(), torch.get_num_threads()
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    torch.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old_numba)
        torch.set_num_threads(old_torch)
