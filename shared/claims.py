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

Four kinds of row, shown apart; only the first counts as reproduced:

* ``"claim"``: a paper's claim, decided by measurement;
* ``"fact"``: a fact by construction (a bit count, layout arithmetic): true by how we built it;
* ``"check"``: one of our own sanity checks (the model learns, the kernel agrees with its twin);
* ``"control"``: a measured condition showing that our setup can detect an effect of the size a
  claim's test needs (the subject responds, the interval is narrower than the margin).

A claim names its controls (``controls=("experts_matter",)``). A control is decided first, on its
own interval; where it does not hold (fails, is inconclusive, or could not be measured) the claim's
verdict is **not testable here**, with the control's figure as the reason, whatever the claim's
own measurement says. "Not testable here" is counted apart from "inconclusive": the first says the
setup could not have shown the effect, the second that it could have and the data did not decide.

A row decided on an interval also shows the interval's half-width beside the *margin*: the distance
from the estimate to the nearest boundary of its test (``at_least(x)``: ``x``; ``within(x, r)``:
``x ± r|x|``). An interval wider than its margin cannot decide the claim.

A claim can also name the *resolution* it needs (``Claim.needs``, a rule in words fixed before any run,
e.g. "the paper's gap, scaled to our level"): the size of effect its test must be able to tell from
none. The verdicts code turns the rule into a number and passes it to :meth:`Ledger.record`
(``needs=``). It is a power rule: it explains an *inconclusive* interval and never erases a decisive
one. Where the interval holds a boundary of the test (inconclusive) and its half-width exceeds the
resolution, the setup could not have shown an effect of that size: the verdict is **not testable
here: under-powered**, with both figures and :meth:`Entry.power_up` as the reason. An interval that
excludes the boundary decides (holds, or does not hold), however wide it is. A half-width equal to the
effect is the least that can do: a true effect of exactly that size would be decided about half the time.

Wherever a row reads "not testable here", the tables show the claim's own measured verdict beside it
(:func:`shown_verdict`), e.g. ``not testable here (measured: no, [-0.7, -0.16])``.
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
NOT_TESTABLE = "not testable here"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE, UNTESTED)
KINDS = ("claim", "fact", "check", "control")


@dataclass(frozen=True)
class Test:
    """Decides ``holds`` from a measured value; ``text`` says how, in words for the table.

    ``boundaries``: the values where the verdict changes (a threshold, a tolerance band's two ends),
    for :meth:`margin`; empty where the test has none (an equality, a free predicate)."""

    text: str
    fn: Callable[[Any], bool]
    boundaries: tuple[float, ...] = ()

    def __call__(self, value: Any) -> bool:
        return bool(self.fn(value))

    def margin(self, estimate: Any) -> float | None:
        """The distance from ``estimate`` to the nearest boundary (None: no boundary, or no number)."""
        if not self.boundaries or not isinstance(estimate, (int, float)) or isinstance(estimate, bool):
            return None
        if not math.isfinite(float(estimate)):
            return None
        return min(abs(float(estimate) - b) for b in self.boundaries)

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
    return Test(f"ours ≥ {x:g}{unit}", lambda v: v >= x, (x,))


def at_most(x: float, unit: str = "") -> Test:
    x = checks.number("x", x)
    return Test(f"ours ≤ {x:g}{unit}", lambda v: v <= x, (x,))


def within(x: float, rel: float) -> Test:
    x, rel = checks.number("x", x), checks.number("rel", rel, 0.0)
    return Test(f"within {rel:.0%} of {x:g}", lambda v: abs(v - x) <= rel * abs(x),
                (x - rel * abs(x), x + rel * abs(x)))


def equals(x: Any) -> Test:
    return Test(f"ours = {x}", lambda v: v == x)


def predicate(text: str, fn: Callable[[Any], bool], boundaries: tuple[float, ...] = ()) -> Test:
    """A test in words; ``boundaries`` (where its verdict changes) give it a margin, if it has them."""
    return Test(text, fn, tuple(checks.number("boundary", b) for b in boundaries))


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    paper: str  # the paper's value or finding, as the paper states it
    source: str  # where in the paper (table, figure, section)
    test: Test
    #: "claim" (the paper's), "fact" (by construction), "check" (our own) or "control" (see the module docstring)
    kind: str = "claim"
    #: the ids of the controls (rows of kind "control" in the same chapter) this claim's verdict needs
    controls: tuple[str, ...] = ()
    #: where our measurement only bounds the claimed figure from one side, the one verdict it can
    #: decide: e.g. FAILS for a speed-up of the MoE layers alone (an upper bound of the whole model's)
    #: tested with ``at_least``; the other verdict is then recorded as inconclusive, with the reason
    one_sided: str | None = None
    #: the resolution the test needs, as a rule in words fixed before any run (see the module
    #: docstring): where it is set, a verdict on an interval must be recorded with ``needs=`` (the rule's
    #: number for this run), and an interval whose half-width exceeds it reads "not testable here"
    needs: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if isinstance(self.controls, str):
            raise ValueError(f"claim {self.id!r}: controls must be a tuple of ids, got the string {self.controls!r}")
        if self.controls and self.kind == "control":
            raise ValueError(f"claim {self.id!r}: a control names no controls of its own")
        if not isinstance(self.needs, str):
            raise ValueError(f"claim {self.id!r}: needs must be a rule in words (a string), got {self.needs!r}")
        if self.one_sided not in (None, HOLDS, FAILS):
            raise ValueError(f"claim {self.id!r}: one_sided must be {HOLDS!r} or {FAILS!r}, got {self.one_sided!r}")


@dataclass
class Entry:
    claim: Claim
    ours: Any = None
    shown: str = ""
    holds: str = UNTESTED
    note: str = ""
    interval: Any = None  # an acl26.stats.Interval, for a claim decided on one
    #: the claim's own verdict before its controls were applied (equal to ``holds`` unless not testable)
    measured: str = UNTESTED
    #: the resolution the test needs in this run (``Claim.needs`` as a number), or None
    needs: float | None = None

    @property
    def recorded(self) -> bool:
        return not (self.shown == "" and self.holds == UNTESTED and not self.note)

    @property
    def half_width(self) -> float | None:
        if self.interval is None:
            return None
        return (float(self.interval.hi) - float(self.interval.lo)) / 2

    @property
    def margin(self) -> float | None:
        estimate = self.interval.estimate if self.interval is not None else self.ours
        return self.claim.test.margin(estimate)

    @property
    def too_coarse(self) -> bool:
        """The interval is wider than the resolution the claim's test needs (``Entry.needs``)."""
        return self.needs is not None and self.half_width is not None and self.half_width > self.needs

    @property
    def underpowered(self) -> bool:
        """The interval did not decide (its own verdict is inconclusive: it holds a boundary of the test) and is
        wider than the resolution the test needs: the setup could not have shown an effect of that size, so
        the verdict is not testable here. A decisive interval is never under-powered, however wide."""
        return self.too_coarse and self.interval is not None and self.claim.test.decide(self.interval) == INCONCLUSIVE

    def power_up(self) -> float | None:
        """About how many times the samples (evaluation units or seeds) an under-powered interval would need to
        shrink to the resolution its test needs: (half-width / needs)², since a half-width falls as 1/√n;
        None where it is not under-powered."""
        if not self.underpowered:
            return None
        return math.inf if self.needs == 0 else (self.half_width / self.needs) ** 2

    @property
    def straddles(self) -> bool | None:
        """The interval holds one of its test's boundaries inside it, so it cannot decide (None: no interval,
        or a test without boundaries). An interval need not be symmetric: one wider than the margin on the
        far side of its estimate still decides."""
        if self.interval is None or not self.claim.test.boundaries:
            return None
        lo, hi = float(self.interval.lo), float(self.interval.hi)
        return any(lo < b < hi for b in self.claim.test.boundaries)


def check_controls(claims: list[Claim]) -> None:
    """Every control a claim names is a row of kind "control" among ``claims`` (ValueError otherwise)."""
    kinds = {c.id: c.kind for c in claims}
    for c in claims:
        for ctl in c.controls:
            if kinds.get(ctl) != "control":
                raise ValueError(f"claim {c.id!r} names the control {ctl!r}, which is not a control of this chapter "
                                 f"(controls: {sorted(k for k, v in kinds.items() if v == 'control') or 'none'})")


class Ledger:
    """What one notebook run measured against its paper's claims.

    ``record_claims``: the chapter's ``record_claims`` (:attr:`acl26.chapter.Chapter.record_claims`), which
    :meth:`save` runs on a scratch ledger to keep only the part of the evidence it reads;
    :func:`acl26.notebook.setup` passes it. Without it :meth:`save` stores the evidence whole. The ledger
    does not look the chapter up itself: the registry imports the chapters, which import this module."""

    def __init__(self, paper: str, profile: str, claims: list[Claim], params: dict | None = None,
                 record_claims: Callable[[Ledger, Any], None] | None = None):
        ids = [c.id for c in claims]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{paper}: duplicate claim ids in {ids}")
        check_controls(list(claims))
        self.paper = paper
        self.profile = profile
        self.params = dict(params or {})
        self.record_claims = record_claims
        self.entries = {c.id: Entry(c) for c in claims}
        self.metrics: dict[str, Any] = {}
        self.started = time.time()

    def record(self, claim_id: str, value: Any, shown: str | None = None, note: str = "",
               interval=None, needs: float | None = None) -> Entry:
        """Record a measured value; the claim's test decides whether it holds.

        With ``interval`` (an :class:`acl26.stats.Interval` around ``value``) the verdict is the
        interval's (:meth:`Test.decide`): holds, does not hold, or inconclusive. A claim that names
        controls needs them recorded first; unless every one holds, its verdict is
        :data:`NOT_TESTABLE`, with the failing control's figure in its note (its own measurement is
        still shown, and kept as ``Entry.measured``).

        ``needs``: the resolution the test needs (``Claim.needs``'s rule as a number, ≥ 0), required
        with an interval for a claim that sets ``Claim.needs`` and refused for one that does not. An
        inconclusive interval (one holding a boundary of the test) whose half-width exceeds it makes the
        verdict :data:`NOT_TESTABLE` (under-powered, :attr:`Entry.underpowered`); an interval that excludes
        the boundary decides, however wide. ``Entry.measured`` keeps the interval's own verdict.
        """
        entry = self._entry(claim_id)
        controls = [self._entry(c) for c in entry.claim.controls]
        unrecorded = [c.claim.id for c in controls if not c.recorded]
        if unrecorded:
            raise RuntimeError(f"{self.paper}: decide the control(s) {', '.join(unrecorded)} before the claim "
                               f"{claim_id!r}")
        if needs is not None:
            if not entry.claim.needs:
                raise ValueError(f"{self.paper}: claim {claim_id!r} names no resolution rule (Claim.needs), so "
                                 "needs= has no meaning for it")
            needs = checks.number("needs", needs, 0.0)
        elif entry.claim.needs and interval is not None:
            raise ValueError(f"{self.paper}: claim {claim_id!r} is decided on an interval and needs a resolution "
                             f"(needs=): {entry.claim.needs}")
        entry.needs = needs if interval is not None else None
        entry.ours = value
        entry.shown = shown if shown is not None else _fmt(value)
        entry.interval = interval
        if interval is not None:
            entry.measured = entry.claim.test.decide(interval)
        else:
            entry.measured = HOLDS if entry.claim.test(value) else FAILS
        entry.holds = entry.measured
        entry.note = note
        side = entry.claim.one_sided
        if side is not None and entry.measured in (HOLDS, FAILS) and entry.measured != side:
            entry.holds = INCONCLUSIVE
            can = "does not hold" if side == FAILS else "holds"
            entry.note = (f"our figure bounds the claimed one from one side, so it can only show that the claim {can}"
                          + (f". {note}" if note else ""))
        failed = [c for c in controls if c.holds != HOLDS]
        if failed:
            entry.holds = NOT_TESTABLE
            why = "; ".join(f"control {c.claim.id} ({c.claim.statement}): {c.shown}"
                            + (f" {c.interval.describe()}" if c.interval is not None else "") + f", {c.holds}"
                            for c in failed)
            entry.note = f"not testable here: {why}" + (f". {note}" if note else "")
        if entry.underpowered:
            entry.holds = NOT_TESTABLE
            why = (f"under-powered: the interval is inconclusive and its half-width ±{entry.half_width:.3g} exceeds "
                   f"the {entry.needs:.3g} the test must resolve ({entry.claim.needs}); about "
                   f"{entry.power_up():.3g}× the samples would resolve it")
            entry.note = (f"not testable here: {why}" + (f". {note}" if note else "") if not failed else
                          f"{entry.note.replace('not testable here: ', f'not testable here: {why}; ', 1)}")
        return entry

    def record_noisy(self, claim_id: str, *, per_seed: list[float] | None = None, paired: tuple | None = None,
                     point: float | None = None, statistic: str = "mean_diff", n_resamples: int = 4999,
                     unit: str = "blocks", shown: str | None = None, note: str = "",
                     nested: list[tuple] | None = None, needs: float | None = None) -> Entry:
        """Decide a noisy claim by the one rule, :func:`acl26.stats.noisy`: a two-level bootstrap when
        per-unit values of two or more seeds are given (``nested``), else the t-interval over seeds when
        there are two or more, else a paired bootstrap over evaluation units, else a point; the note says
        which (after ``note``). Untested when nothing was measured. ``needs``: as :meth:`record`'s (for a point,
        with no interval, it is not used)."""
        from acl26 import stats

        value, iv, how = stats.noisy(per_seed, paired, point, statistic=statistic, n_resamples=n_resamples, unit=unit,
                                     nested=nested)
        if value is None:
            return self.untested(claim_id, how)
        return self.record(claim_id, value, shown=shown, interval=iv, note=f"{note}; {how}" if note else how,
                           needs=needs if iv is not None else None)

    def untested(self, claim_id: str, reason: str, shown: str = "—") -> Entry:
        """Record that a claim cannot be tested here, and why."""
        if not reason:
            raise ValueError("untested() needs a reason")
        entry = self._entry(claim_id)
        entry.ours, entry.shown, entry.holds, entry.note = None, shown, UNTESTED, reason
        entry.interval, entry.needs, entry.measured = None, None, UNTESTED
        return entry

    def not_testable(self, claim_id: str, reason: str, shown: str = "—") -> Entry:
        """Record that this machine cannot test a claim at all (e.g. a many-core figure on 2 cores): the verdict is
        :data:`NOT_TESTABLE`, with nothing measured against it; ``reason`` says why, and what would test it."""
        if not reason:
            raise ValueError("not_testable() needs a reason")
        entry = self.untested(claim_id, reason, shown)
        entry.holds = NOT_TESTABLE
        entry.note = reason if reason.startswith("not testable here") else f"not testable here: {reason}"
        return entry

    def _entry(self, claim_id: str) -> Entry:
        if claim_id not in self.entries:
            raise KeyError(f"{self.paper}: unknown claim {claim_id!r}; known: {', '.join(self.entries)}")
        return self.entries[claim_id]

    def rows(self, kind: str | None = None) -> list[dict[str, str]]:
        """One row per entry (of ``kind``: "claim", "fact", "check" or "control"; or all)."""
        return [{
            "claim": e.claim.statement,
            "paper": e.claim.paper,
            "source": e.claim.source,
            "ours": e.shown or "—",
            "interval": e.interval.describe() if e.interval is not None else "—",
            "half-width / margin": power(e.half_width, e.margin, e.straddles, e.needs),
            "test": e.claim.test.text,
            "holds?": e.holds,
            "note": e.note,
        } for e in self.entries.values() if kind is None or e.claim.kind == kind]

    def table(self, kind: str = "claim"):
        """The chapter's table of ``kind`` (paper claims by default; "fact", "check", "control") as a DataFrame;
        a row not testable here shows its measured verdict beside it (:func:`shown_verdict`)."""
        import pandas as pd

        rows = self.rows(kind)
        shown = [shown_verdict(e.holds, e.measured, e.interval.describe() if e.interval is not None else None)
                 for e in self.entries.values() if e.claim.kind == kind]
        for r, v in zip(rows, shown):
            r["holds?"] = v
        if kind in ("check", "control"):  # ours, not the paper's: no paper column
            for r in rows:
                r[kind] = r.pop("claim")
                r.pop("paper")
                r.pop("source")
            return pd.DataFrame(rows).set_index(kind) if rows else pd.DataFrame()
        return pd.DataFrame(rows).set_index("claim") if rows else pd.DataFrame()

    def checks_table(self):
        """Our own sanity checks, apart from the paper's claims."""
        return self.table("check")

    def missing(self) -> list[str]:
        return [cid for cid, e in self.entries.items() if not e.recorded]

    def save(self, metrics: dict | None = None, evidence: Any = None) -> Path:
        """Write ``results/<paper>-<profile>.json`` atomically; every claim must be recorded.

        ``evidence``: what ``record_claims`` decided the verdicts from (the study's results); the part
        of it the ledger's ``record_claims`` reads (:func:`acl26.evidence.read_by`) is stored, so that
        ``acl26 verify`` can decide the verdicts again (:mod:`acl26.evidence`). Evidence that is not a
        dict, or a ledger made without ``record_claims``, stores the evidence whole."""
        missing = self.missing()
        if missing:
            raise RuntimeError(f"{self.paper}: claims not recorded: {', '.join(missing)}")
        if metrics:
            self.metrics.update(metrics)
        payload = {
            "paper": self.paper,
            "profile": self.profile,
            "params": self.params,
            "claims": [{"id": cid, **row, "value": e.ours, "kind": e.claim.kind, "controls": list(e.claim.controls),
                        "measured": e.measured, "half_width": e.half_width, "margin": e.margin, "needs": e.needs,
                        "interval_values": e.interval.as_dict() if e.interval is not None else None}
                       for (cid, e), row in zip(self.entries.items(), self.rows())],
            "metrics": self.metrics,
            "started": _dt.datetime.fromtimestamp(self.started, _dt.timezone.utc).isoformat(timespec="seconds"),
            "wall_s": round(time.time() - self.started, 1),
            "machine": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": machine.cpu_count()},
        }
        if evidence is not None:
            from acl26 import evidence as codec

            if isinstance(evidence, dict) and self.record_claims is not None:
                scratch = Ledger(self.paper, self.profile, [e.claim for e in self.entries.values()], self.params)
                evidence = codec.read_by(self.record_claims, scratch, evidence)
            # last, on one line: the file stays readable above it, and numbers do not take a line each
            payload["evidence"] = codec.encode(evidence)
            import json

            body = json.dumps({k: v for k, v in payload.items() if k != "evidence"}, indent=2,
                              default=io.json_default)
            text = (body[:body.rindex("}")].rstrip() + ',\n  "evidence": '
                    + json.dumps(payload["evidence"], separators=(",", ":"), default=io.json_default) + "\n}\n")
            return io.write_text(result_path(self.paper, self.profile), text)
        return io.write_json(result_path(self.paper, self.profile), payload)


def deciding(parts: dict[str, Any], test: Test, needs: dict[str, float] | None = None) -> str:
    """The part that decides a claim that holds only where every part holds (an intersection-union test:
    "against every baseline", "on every tokenizer", "accurate *and* fewer tokens"): ``parts`` {name: interval},
    each decided by ``test``; ``needs`` {name: the resolution that part's test needs} where they differ.

    A part that does not hold decides (the one farthest past the boundary); else an inconclusive part (the
    coarsest for its resolution, so that the claim is under-powered where any open part is); else, every part
    holding, the least favourable one (the interval end nearest the boundary). Recording the deciding part's
    interval gives the claim the verdict of the whole: no if any part is no, yes only if every part is yes."""
    if not parts:
        raise ValueError("deciding: no parts")
    verdict = {n: test.decide(iv) for n, iv in parts.items()}
    failed = [n for n, v in verdict.items() if v == FAILS]
    if failed:
        return max(failed, key=lambda n: test.margin(parts[n].estimate) or 0.0)
    open_ = [n for n, v in verdict.items() if v == INCONCLUSIVE]
    if open_:
        def coarseness(n):
            need = (needs or {}).get(n)
            width = (float(parts[n].hi) - float(parts[n].lo)) / 2
            return width / need if need else width
        return max(open_, key=coarseness)

    def nearest(n):
        ends = (float(parts[n].lo), float(parts[n].hi))
        return min((abs(e - b) for e in ends for b in test.boundaries), default=0.0)
    return min(parts, key=nearest)


def shown_verdict(holds: str, measured: str | None = None, interval: str | None = None) -> str:
    """The verdict as the tables show it: a row not testable here (a control failed, or under-powered) with
    the claim's own measured verdict, and its interval, beside it, e.g. ``not testable here (measured: no,
    [-0.7, -0.16] (95% paired bootstrap ...))``; any other verdict as it is."""
    if holds != NOT_TESTABLE or measured in (None, "", UNTESTED, NOT_TESTABLE):
        return holds
    return f"{holds} (measured: {measured}" + (f", {interval}" if interval and interval != "—" else "") + ")"


def power(half_width: float | None, margin: float | None, straddles: bool | None = None,
          needs: float | None = None) -> str:
    """``±h / m``: an interval's half-width beside its test's margin ("—" where either is missing), flagged
    "too wide" when the interval cannot decide the test: it holds a boundary of the test (``straddles``),
    or, where that is not given, its half-width exceeds the margin.

    With ``needs`` (the resolution the claim's test needs) the row adds "needs ±n" and is flagged "too
    wide" only where the half-width exceeds it and the interval holds a boundary (it is under-powered): an
    interval narrow enough to resolve the effect, that still holds a boundary, is an honest "inconclusive"
    (the effect is smaller than the one resolved), and one that excludes the boundary decides."""
    if half_width is None or margin is None:
        return "—"
    text = f"±{half_width:.3g} / {margin:.3g}"
    if needs is not None:
        text += f"; needs ±{needs:.3g}"
        wide = half_width > needs and straddles is not False
    else:
        wide = straddles if straddles is not None else half_width > margin
    return text + " (too wide)" if wide else text


def result_path(paper: str, profile: str, root: Path | None = None) -> Path:
    base = root if root is not None else paths.results_dir()
    return Path(base) / f"{paper}-{profile}.json"


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)
