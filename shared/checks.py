"""One argument checker for the whole package: integers and floats, with bounds, failing fast.

Every public function that takes a count, a size or a rate validates it here, so a bad value
raises a ``ValueError`` whose message names the argument, the bound and the value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def integer(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an ``int`` (numpy integers accepted, bool refused), within ``[lo, hi]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer{_bounds(lo, hi)}, got {value!r}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{name} must be an integer{_bounds(lo, hi)}, got {value!r}")
    return value


def number(name: str, value: Any, lo: float | None = None, hi: float | None = None, *,
           lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a finite ``float`` (ints accepted, bool refused), within the given bounds.

    ``lo_open`` / ``hi_open`` make a bound strict (``value > lo`` rather than ``>=``).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number{_bounds(lo, hi, lo_open, hi_open)}, got {value!r}")
    value = float(value)
    bad = not math.isfinite(value)
    if lo is not None:
        bad |= value <= lo if lo_open else value < lo
    if hi is not None:
        bad |= value >= hi if hi_open else value > hi
    if bad:
        raise ValueError(f"{name} must be a finite number{_bounds(lo, hi, lo_open, hi_open)}, got {value!r}")
    return value


def _bounds(lo, hi, lo_open: bool = False, hi_open: bool = False) -> str:
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo:g}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi:g}")
    return (" " + " and ".join(parts)) if parts else ""
