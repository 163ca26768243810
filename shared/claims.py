"""The claims ledger: each paper's claims as data, checked against what a notebook measured.

A :class:`Claim` holds what the paper says (value and where), and a :class:`Test` that decides
whether our measurement supports it: a threshold, a tolerance, or a named qualitative predicate.
A notebook records its measurements in a :class:`Ledger`, shows the chapter's table
(claim | paper | ours | holds?) and saves everything as JSON per paper and profile; the book's
ledger page gathers those files. A claim the notebook cannot test at our scale is recorded as
such, with the reason, rather than left out.

A noisy measurement is recorded with an :class:`acl26.stats.Interval` (seeds, a paired bootstrap
over evaluation blocks, the range over timing repeats): the claim **holds** when the whole interval
passes its test, **does not hold** when the whole interval fails it, and is **inconclusive**
otherwise. A point value (a bit count, an exact-match rate) is decided as it is.

A :class:`Claim` of kind ``"check"`` is one of our own sanity checks (the model learns, the kernel
agrees with its twin), not a claim of the paper: the tables show checks apart.
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acl26 import checks, io, machine, paths

HOLDS, FAILS, INCONCLUSIVE, UNTESTED = "yes", "no", "inconclusive", "not tested"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, UNTESTED)
KINDS = ("claim", "check")


@dataclass(frozen=True)
class Test:
    """Decides ``holds`` from a measured value; ``text`` says how, in words for the table."""

    text: str
    fn: Callable[[Any], bool]

    def __call__(self, value: Any) -> bool:
        return bool(self.fn(value))

    def decide(self, interval) -> str:
        """The verdict on an interval: every point passes, no point passes, or some do.

        The interval is probed at both ends and at 127 points between them, so a test whose passing
        values form one range (a threshold, a tolerance) is decided exactly at the ends.
        """
        lo, hi = float(interval.lo), float(interval.hi)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return INCONCLUSIVE
        grid = [lo] if lo == hi else [lo + (hi - lo) * i / 128 for i in range(129)]
        passed = [self(x) for x in grid]
        if all(passed):
            return HOLDS
        if not any(passed):
            return FAILS
        return INCONCLUSIVE


def at_least(x: float, unit: str = "") -> Test:
    x = checks.number("x", x)
    return Test(f"ours ≥ {x:g}{unit}", lambda v: v >= x)


def at_most(x: float, unit: str = "") -> Test:
    x = checks.number("x", x)
    return Test(f"ours ≤ {x:g}{unit}", lambda v: v <= x)


def within(x: float, rel: float) -> Test:
    x, rel = checks.number("x", x), checks.number("rel", rel, 0.0)
    return Test(f"within {rel:.0%} of {x:g}", lambda v: abs(v - x) <= rel * abs(x))


def equals(x: Any) -> Test:
    return Test(f"ours = {x}", lambda v: v == x)


def predicate(text: str, fn: Callable[[Any], bool]) -> Test:
    return Test(text, fn)


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    paper: str  # the paper's value or finding, as the paper states it
    source: str  # where in the paper (table, figure, section)
    test: Test
    #: "claim" (the paper's) or "check" (our own sanity check, shown apart)
    kind: str = "claim"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id!r}: kind must be one of {KINDS}, got {self.kind!r}")


@dataclass
class Entry:
    claim: Claim
    ours: Any = None
    shown: str = ""
    holds: str = UNTESTED
    note: str = ""
    interval: Any = None  # an acl26.stats.Interval, for a claim decided on one


class Ledger:
    """What one notebook run measured against its paper's claims."""

    def __init__(self, paper: str, profile: str, claims: list[Claim], params: dict | None = None):
        ids = [c.id for c in claims]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{paper}: duplicate claim ids in {ids}")
        self.paper = paper
        self.profile = profile
        self.params = dict(params or {})
        self.entries = {c.id: Entry(c) for c in claims}
        self.metrics: dict[str, Any] = {}
        self.started = time.time()

    def record(self, claim_id: str, value: Any, shown: str | None = None, note: str = "",
               interval=None) -> Entry:
        """Record a measured value; the claim's test decides whether it holds.

        With ``interval`` (an :class:`acl26.stats.Interval` around ``value``) the verdict is the
        interval's (:meth:`Test.decide`): holds, does not hold, or inconclusive.
        """
        entry = self._entry(claim_id)
        entry.ours = value
        entry.shown = shown if shown is not None else _fmt(value)
        entry.interval = interval
        if interval is not None:
            entry.holds = entry.claim.test.decide(interval)
        else:
            entry.holds = HOLDS if entry.claim.test(value) else FAILS
        entry.note = note
        return entry

    def untested(self, claim_id: str, reason: str, shown: str = "—") -> Entry:
        """Record that a claim cannot be tested here, and why."""
        if not reason:
            raise ValueError("untested() needs a reason")
        entry = self._entry(claim_id)
        entry.ours, entry.shown, entry.holds, entry.note = None, shown, UNTESTED, reason
        return entry

    def _entry(self, claim_id: str) -> Entry:
        if claim_id not in self.entries:
            raise KeyError(f"{self.paper}: unknown claim {claim_id!r}; known: {', '.join(self.entries)}")
        return self.entries[claim_id]

    def rows(self, kind: str | None = None) -> list[dict[str, str]]:
        """One row per entry (of ``kind`` "claim" or "check", or all)."""
        return [{
            "claim": e.claim.statement,
            "paper": e.claim.paper,
            "source": e.claim.source,
            "ours": e.shown or "—",
            "interval": e.interval.describe() if e.interval is not None else "—",
            "test": e.claim.test.text,
            "holds?": e.holds,
            "note": e.note,
        } for e in self.entries.values() if kind is None or e.claim.kind == kind]

    def table(self, kind: str = "claim"):
        """The chapter's claims table (or, with ``kind="check"``, its sanity checks) as a DataFrame."""
        import pandas as pd

        rows = self.rows(kind)
        if kind == "check":
            for r in rows:
                r["check"] = r.pop("claim")
                r.pop("paper")
                r.pop("source")
            return pd.DataFrame(rows).set_index("check") if rows else pd.DataFrame()
        return pd.DataFrame(rows).set_index("claim") if rows else pd.DataFrame()

    def checks_table(self):
        """Our own sanity checks, apart from the paper's claims."""
        return self.table("check")

    def missing(self) -> list[str]:
        return [cid for cid, e in self.entries.items() if e.shown == "" and e.holds == UNTESTED and not e.note]

    def save(self, metrics: dict | None = None) -> Path:
        """Write ``results/<paper>-<profile>.json`` atomically; every claim must be recorded."""
        missing = self.missing()
        if missing:
            raise RuntimeError(f"{self.paper}: claims not recorded: {', '.join(missing)}")
        if metrics:
            self.metrics.update(metrics)
        payload = {
            "paper": self.paper,
            "profile": self.profile,
            "params": self.params,
            "claims": [{"id": cid, **row, "value": self.entries[cid].ours, "kind": self.entries[cid].claim.kind,
                        "interval_values": (self.entries[cid].interval.as_dict()
                                            if self.entries[cid].interval is not None else None)}
                       for cid, row in zip(self.entries, self.rows())],
            "metrics": self.metrics,
            "started": _dt.datetime.fromtimestamp(self.started, _dt.timezone.utc).isoformat(timespec="seconds"),
            "wall_s": round(time.time() - self.started, 1),
            "machine": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": machine.cpu_count()},
        }
        return io.write_json(result_path(self.paper, self.profile), payload)


def result_path(paper: str, profile: str, root: Path | None = None) -> Path:
    base = root if root is not None else paths.results_dir()
    return Path(base) / f"{paper}-{profile}.json"


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)
