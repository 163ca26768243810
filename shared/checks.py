"""One argument checker for the whole package: integers, floats and probabilities, with bounds, failing fast.

Every public function that takes a count, a size, a rate or a seed validates it here, and so does
every notebook parameter (:mod:`acl26.params`), so a bad value raises a ``ValueError`` whose
message names the argument, the bound and the value. The rules, the same everywhere:

* **no silent truncation**: an integer argument takes an int or a numpy integer of any width; a
  float is refused (``4.5`` is never cut to 4, and ``4.0`` is refused too, so the rule is simple);
* **bool is not a number**: ``True`` is refused where a number is due (Python and numpy bools);
* **numpy scalars of any width are accepted** (``np.int8`` … ``np.uint64``, ``np.float16`` …
  ``np.float64``), and so are 0-d arrays holding one;
* **finite unless allowed**: a float argument refuses NaN and ±inf unless ``allow_nonfinite``.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

#: seeds: what numpy's legacy ``RandomState`` and ``torch.manual_seed`` both take
SEED_MAX = 2**32 - 1


def _unwrap(value: Any) -> Any:
    """A 0-d numpy array as its scalar; anything else as it is."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    return value


def is_bool(value: Any) -> bool:
    return isinstance(_unwrap(value), (bool, np.bool_))


def is_number(value: Any) -> bool:
    """Whether ``value`` is a real number (int, float, numpy scalar of any width), bool excluded."""
    value = _unwrap(value)
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))


def integer(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an ``int`` within ``[lo, hi]``: an int or a numpy integer (no float, no bool)."""
    v = _unwrap(value)
    what = f"{name} must be an integer{_bounds(lo, hi)}, got {value!r}"
    if not is_number(v) or isinstance(v, (float, np.floating)):
        raise ValueError(what)  # 2.9 is never cut to 2
    v = operator.index(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(what)
    return int(v)


def number(name: str, value: Any, lo: float | None = None, hi: float | None = None, *,
           lo_open: bool = False, hi_open: bool = False, allow_nonfinite: bool = False) -> float:
    """``value`` as a ``float`` (ints and numpy scalars accepted, bool refused), within the given bounds.

    ``lo_open`` / ``hi_open`` make a bound strict (``value > lo`` rather than ``>=``). NaN and ±inf
    are refused unless ``allow_nonfinite`` (then NaN passes, and ±inf passes the bounds it lies within).
    """
    v = _unwrap(value)
    bounds = _bounds(lo, hi, lo_open, hi_open)
    if not is_number(v):
        raise ValueError(f"{name} must be a number{bounds}, got {value!r}")
    try:
        f = float(v)
    except OverflowError:  # an int too large for a float
        raise ValueError(f"{name} must be a finite number{bounds}, got {value!r}") from None
    if math.isnan(f):
        if allow_nonfinite:
            return f
        raise ValueError(f"{name} must be a finite number{bounds}, got {value!r}")
    bad = not allow_nonfinite and not math.isfinite(f)
    if lo is not None:
        bad |= f <= lo if lo_open else f < lo
    if hi is not None:
        bad |= f >= hi if hi_open else f > hi
    if bad:
        kind = "a number" if allow_nonfinite else "a finite number"
        raise ValueError(f"{name} must be {kind}{bounds}, got {value!r}")
    return f


def probability(name: str, value: Any, *, lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a ``float`` in ``[0, 1]`` (``lo_open`` / ``hi_open``: exclude 0 / 1)."""
    return number(name, value, 0.0, 1.0, lo_open=lo_open, hi_open=hi_open)


def seed(name: str, value: Any) -> int:
    """A random seed: an integer in ``[0, 2**32 - 1]`` (numpy's ``RandomState`` and torch both take it)."""
    return integer(name, value, 0, SEED_MAX)


def layer_indices(name: str, value: Any, n: int) -> list[int]:
    """``value`` as sorted, distinct decoder-layer indices in ``0 … n-1``: a non-empty sequence of integers
    (a string or a bare number is refused), each named in the one-line error by ``name``."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError(f"{name} must be a sequence of layer indices, got {value!r}")
    out = [integer(name, i, 0, n - 1) for i in value]
    if not out:
        raise ValueError(f"{name} must name at least one layer, got an empty sequence")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} must not repeat a layer, got {list(value)}")
    return sorted(out)


def layer_span(indices) -> str:
    """Layer indices as a reader writes them: ``"10–19"`` for a run of three or more, else ``"3, 5"``."""
    ix = sorted(indices)
    return f"{ix[0]}–{ix[-1]}" if ix == list(range(ix[0], ix[-1] + 1)) and len(ix) > 2 else ", ".join(map(str, ix))


def _bounds(lo, hi, lo_open: bool = False, hi_open: bool = False) -> str:
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo:g}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi:g}")
    return (" " + " and ".join(parts)) if parts else ""
