"""The claims ledger decides 'holds' from measured values and refuses to save an incomplete record."""

import json

import pytest

from acl26 import claims as C

CLAIMS = [
    C.Claim("a", "A is at least 2", "2", "Table 1", C.at_least(2)),
    C.Claim("b", "B is about 10", "10", "Fig. 2", C.within(10, 0.1)),
    C.Claim("c", "C is lossy", "lossy", "§2", C.predicate("rate > 0", lambda v: v > 0)),
]


def test_holds_fails_and_untested(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_OUT", str(tmp_path))
    ledger = C.Ledger("demo", "smoke", CLAIMS, params={"x": 1})
    assert ledger.record("a", 3).holds == C.HOLDS
    assert ledger.record("b", 12.0).holds == C.FAILS
    with pytest.raises(RuntimeError, match="claims not recorded: c"):
        ledger.save()
    with pytest.raises(ValueError, match="reason"):
        ledger.untested("c", "")
    ledger.untested("c", "needs a GPU")
    path = ledger.save(metrics={"m": 1.5})
    data = json.loads(path.read_text())
    assert path.name == "demo-smoke.json"
    assert [c["holds?"] for c in data["claims"]] == ["yes", "no", "not tested"]
    assert data["claims"][2]["note"] == "needs a GPU" and data["metrics"] == {"m": 1.5}
    table = ledger.table()
    assert list(table.columns) == ["paper", "source", "ours", "interval", "half-width / margin", "test", "holds?",
                                   "note"]


def test_unknown_and_duplicate_claims():
    ledger = C.Ledger("demo", "smoke", CLAIMS)
    with pytest.raises(KeyError, match="unknown claim"):
        ledger.record("z", 1)
    with pytest.raises(ValueError, match="duplicate"):
        C.Ledger("demo", "smoke", CLAIMS + CLAIMS[:1])


def test_tests_describe_themselves():
    assert C.at_least(1.9).text == "ours ≥ 1.9"
    assert C.within(22.4, 0.1)(23.0) and not C.within(22.4, 0.1)(30)
    assert C.equals(1.0)(1.0) and not C.equals(1.0)(0.999)


def test_interval_verdicts_hold_fail_or_are_inconclusive():
    from acl26.stats import Interval

    def iv(lo, hi):
        return Interval((lo + hi) / 2, lo, hi, 0.95, "test", 10)

    ledger = C.Ledger("demo", "smoke", CLAIMS)
    assert ledger.record("a", 3, interval=iv(2.1, 3.9)).holds == C.HOLDS
    assert ledger.record("a", 1, interval=iv(0.5, 1.9)).holds == C.FAILS
    assert ledger.record("a", 2.5, interval=iv(1.5, 3.5)).holds == C.INCONCLUSIVE
    # a tolerance: the whole interval inside it holds; one that contains the tolerance is inconclusive
    assert ledger.record("b", 10, interval=iv(9.5, 10.5)).holds == C.HOLDS
    assert ledger.record("b", 10, interval=iv(5.0, 15.0)).holds == C.INCONCLUSIVE
    assert ledger.record("b", 20, interval=iv(15.0, 25.0)).holds == C.FAILS
    entry = ledger.record("a", 3, interval=iv(2.1, 3.9))
    assert "[2.1, 3.9]" in ledger.rows()[0]["interval"] and entry.interval.n == 10
    assert ledger.record("a", 3).interval is None  # a point value is decided as it is


def test_checks_are_shown_apart_from_claims():
    mixed = CLAIMS[:1] + [C.Claim("k", "the model learns", "—", "ours", C.at_most(0.5), kind="check")]
    ledger = C.Ledger("demo", "smoke", mixed)
    ledger.record("a", 3)
    ledger.record("k", 0.3)
    assert list(ledger.table().index) == ["A is at least 2"]
    assert list(ledger.checks_table().index) == ["the model learns"]
    with pytest.raises(ValueError, match="kind"):
        C.Claim("x", "x", "x", "x", C.at_least(1), kind="opinion")


def test_paired_bootstrap_and_seed_interval():
    import numpy as np

    from acl26 import stats

    rng = np.random.default_rng(0)
    base = rng.normal(5.0, 0.3, 200)
    better = base - 0.05 + rng.normal(0, 0.01, 200)  # paired: the same blocks, a small consistent gain
    iv = stats.paired_bootstrap(better, base, "mean_diff")
    assert iv.hi < 0 and iv.lo < iv.estimate < iv.hi and iv.n == 200
    ratio = stats.paired_bootstrap(better, base, "ppl_ratio")
    assert ratio.hi < 1 and abs(ratio.estimate - np.exp(better.mean() - base.mean())) < 1e-12
    same = stats.paired_bootstrap(base, base)
    assert same.lo == same.hi == 0.0
    s = stats.seed_interval([1.0, 1.2, 0.8])
    assert s.lo < 1.0 < s.hi and s.method == "t over seeds"
    with pytest.raises(ValueError, match="at least 2"):
        stats.seed_interval([1.0])
    r = stats.repeat_range([2.0, 1.8, 2.1])
    assert (r.estimate, r.lo, r.hi) == (2.0, 1.8, 2.1)


# ---- controls: a claim whose setup cannot show the effect is "not testable here"

CONTROLLED = [
    C.Claim("responds", "the subject responds: top-1 costs > 10% perplexity", "", "", C.at_least(1.10), kind="control"),
    C.Claim("better", "the method beats uniform", "< 1", "Table 2", C.at_most(1.0), controls=("responds",)),
    C.Claim("barely", "calibration barely matters", "±1%", "§5", C.within(1.0, 0.01), controls=("responds",)),
    C.Claim("bits", "1.25 bits per weight", "1.25", "§3", C.equals(1.25), kind="fact"),
]


def _iv(lo, hi, est=None):
    from acl26.stats import Interval

    return Interval((lo + hi) / 2 if est is None else est, lo, hi, 0.95, "t over seeds", 3)


@pytest.mark.parametrize("control_iv,expected", [
    ((1.20, 1.40), None),                      # the control holds: the claims are decided on their own
    ((0.95, 1.05), C.NOT_TESTABLE),            # the control fails
    ((0.86, 1.46), C.NOT_TESTABLE),            # the control is inconclusive: the setup's power is not shown
])
def test_a_failing_control_makes_its_claims_not_testable(control_iv, expected):
    ledger = C.Ledger("demo", "book", CONTROLLED)
    ledger.record("responds", sum(control_iv) / 2, interval=_iv(*control_iv))
    better = ledger.record("better", 0.97, interval=_iv(0.96, 0.98))
    barely = ledger.record("barely", 1.002, interval=_iv(0.999, 1.005))
    for entry in (better, barely):
        assert entry.measured == C.HOLDS  # what the measurement alone says is kept
        assert entry.holds == (expected or C.HOLDS)
        if expected:
            assert entry.note.startswith("not testable here: control responds") and "[" in entry.note


def test_an_untested_control_makes_its_claims_not_testable():
    ledger = C.Ledger("demo", "book", CONTROLLED)
    ledger.untested("responds", "the subject has no experts to drop")
    assert ledger.record("better", 0.5).holds == C.NOT_TESTABLE


def test_a_control_is_decided_first_and_must_exist():
    ledger = C.Ledger("demo", "book", CONTROLLED)
    with pytest.raises(RuntimeError, match="decide the control"):
        ledger.record("better", 0.5)
    with pytest.raises(ValueError, match="not a control"):
        C.Ledger("demo", "book", [C.Claim("x", "x", "", "", C.at_least(1), controls=("nope",))])
    with pytest.raises(ValueError, match="not a control"):
        C.Ledger("demo", "book", CONTROLLED[1:])  # the control row itself is missing
    with pytest.raises(ValueError, match="tuple"):
        C.Claim("x", "x", "", "", C.at_least(1), controls="responds")


def test_half_width_against_margin():
    ledger = C.Ledger("demo", "book", CONTROLLED)
    ledger.record("responds", 1.3, interval=_iv(1.2, 1.4))
    row = {r["claim"]: r for r in ledger.rows()}
    assert row["the subject responds: top-1 costs > 10% perplexity"]["half-width / margin"] == "±0.1 / 0.2"
    e = ledger.record("barely", 1.0, interval=_iv(0.85, 1.15))  # ±0.15 against a band of ±0.01
    assert e.half_width == pytest.approx(0.15) and e.margin == pytest.approx(0.01)
    assert C.power(e.half_width, e.margin).endswith("(too wide)") and e.holds == C.INCONCLUSIVE
    assert C.equals(3).margin(3) is None and C.power(None, 1.0) == "—"
    assert e.straddles is True and C.power(e.half_width, e.margin, e.straddles).endswith("(too wide)")
    # an asymmetric interval wider than the margin on its far side still decides: not flagged
    e = ledger.record("responds", 1.12, interval=_iv(1.101, 1.3, est=1.12))
    assert e.half_width > e.margin and e.straddles is False and e.holds == C.HOLDS
    row = {r["claim"]: r for r in ledger.rows()}["the subject responds: top-1 costs > 10% perplexity"]
    assert not row["half-width / margin"].endswith("(too wide)")


def test_facts_and_controls_are_kept_apart_in_the_saved_results(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_OUT", str(tmp_path))
    ledger = C.Ledger("demo", "book", CONTROLLED)
    ledger.record("responds", 1.0, interval=_iv(0.9, 1.1))
    ledger.record("better", 0.5)
    ledger.record("barely", 1.0)
    ledger.record("bits", 1.25)
    data = json.loads(ledger.save().read_text())
    kinds = {c["id"]: (c["kind"], c["holds?"], c["controls"]) for c in data["claims"]}
    assert kinds == {"responds": ("control", C.INCONCLUSIVE, []), "better": ("claim", C.NOT_TESTABLE, ["responds"]),
                     "barely": ("claim", C.NOT_TESTABLE, ["responds"]), "bits": ("fact", C.HOLDS, [])}
    assert list(ledger.table("control").index) == ["the subject responds: top-1 costs > 10% perplexity"]


def test_one_rule_for_noisy_verdicts():
    from acl26 import stats

    ledger = C.Ledger("demo", "book", CLAIMS)
    e = ledger.record_noisy("a", per_seed=[2.5, 2.7, 2.6], paired=([1.0, 2.0], [0.0, 1.0]), point=9.0)
    assert e.interval.method == "t over seeds" and e.holds == C.HOLDS and "t-interval over 3 seeds" in e.note
    e = ledger.record_noisy("a", per_seed=[2.5], paired=([3.0, 2.5, 2.8, 3.2], [0.5, 0.7, 0.4, 0.9]), note="x")
    assert e.interval.method == "paired bootstrap over blocks" and e.note.startswith("x; one training seed")
    e = ledger.record_noisy("a", point=1.5)
    assert e.interval is None and e.holds == C.FAILS and "no interval" in e.note
    assert ledger.record_noisy("a").holds == C.UNTESTED
    v, iv, how = stats.noisy([1.0, 1.2, 0.8])
    assert iv.n == 3 and v == pytest.approx(1.0)


def test_a_one_sided_measurement_decides_only_one_way():
    """A speed-up of the MoE layers alone bounds the whole model's from above: below the paper's figure it
    shows the claim does not hold; above it, it shows nothing."""
    claim = C.Claim("speed", "1.15× faster", "1.15×", "Table 3", C.at_least(1.15), one_sided=C.FAILS)
    ledger = C.Ledger("demo", "book", [claim])
    assert ledger.record("speed", 1.05).holds == C.FAILS
    e = ledger.record("speed", 1.40)
    assert e.holds == C.INCONCLUSIVE and e.measured == C.HOLDS and "only show that the claim does not hold" in e.note
    with pytest.raises(ValueError, match="one_sided"):
        C.Claim("x", "x", "", "", C.at_least(1), one_sided="maybe")


RESOLVED = [
    C.Claim("responds", "the subject responds", "", "", C.at_least(1.10), kind="control"),
    C.Claim("gain", "the method gains", "+1.2", "Table 1", C.at_least(0.0), controls=("responds",),
            needs="the paper's gain at our scale"),
    C.Claim("plain", "no resolution rule", "", "", C.at_least(0.0)),
]


@pytest.mark.parametrize("iv,needs,expected", [
    ((0.2, 0.6), 0.5, C.HOLDS),             # ±0.2 resolves 0.5: decided on its own
    ((-0.1, 0.3), 0.5, C.INCONCLUSIVE),     # resolves it, and holds 0: an honest inconclusive
    ((-0.4, 1.6), 0.5, C.NOT_TESTABLE),     # ±1.0 holds 0 and cannot tell 0.5 from none: under-powered
    ((-0.4, 0.6), 0.0, C.NOT_TESTABLE),     # a resolution of 0: any inconclusive width is under-powered
    ((0.5, 2.5), 0.3, C.HOLDS),             # wider than needs, but every point passes: a decisive result stands
    ((-0.8, -0.2), 0.3, C.FAILS),           # wider than needs, every point fails: it stands too
])
def test_the_resolution_explains_an_inconclusive_interval_and_never_erases_a_decisive_one(iv, needs, expected):
    ledger = C.Ledger("demo", "book", RESOLVED)
    ledger.record("responds", 1.3, interval=_iv(1.2, 1.4))
    e = ledger.record("gain", sum(iv) / 2, interval=_iv(*iv), needs=needs)
    assert e.holds == expected and e.needs == needs
    assert e.underpowered is (expected == C.NOT_TESTABLE)
    assert e.measured == (C.INCONCLUSIVE if expected == C.NOT_TESTABLE else expected)
    row = {r["claim"]: r for r in ledger.rows()}["the method gains"]
    assert f"needs ±{needs:.3g}" in row["half-width / margin"]
    assert row["half-width / margin"].endswith("(too wide)") is e.underpowered
    if e.underpowered:
        assert "under-powered" in e.note and "the paper's gain at our scale" in e.note
        assert e.power_up() == (pytest.approx(((iv[1] - iv[0]) / 2 / needs) ** 2) if needs else float("inf"))
    else:
        assert e.power_up() is None and "under-powered" not in e.note


def test_resolution_and_a_failing_control_both_give_their_reason():
    ledger = C.Ledger("demo", "book", RESOLVED)
    ledger.record("responds", 1.0, interval=_iv(0.9, 1.1))  # fails
    e = ledger.record("gain", 0.6, interval=_iv(-0.4, 1.6), needs=0.5)
    assert e.holds == C.NOT_TESTABLE and e.note.startswith("not testable here: under-powered: the interval is")
    assert "control responds" in e.note and e.measured == C.INCONCLUSIVE


def test_a_not_testable_row_shows_its_measured_verdict_beside_it():
    ledger = C.Ledger("demo", "book", RESOLVED)
    ledger.record("responds", 1.0, interval=_iv(0.9, 1.1))  # fails: the claim is not testable here
    e = ledger.record("gain", -0.43, interval=_iv(-0.70, -0.16), needs=0.3)
    assert e.holds == C.NOT_TESTABLE and e.measured == C.FAILS
    shown = ledger.table().loc["the method gains", "holds?"]
    assert shown.startswith("not testable here (measured: no, [-0.7, -0.16]")
    assert ledger.rows()[1]["holds?"] == C.NOT_TESTABLE  # the data keeps the verdict word (verify compares it)
    assert C.shown_verdict(C.HOLDS, C.HOLDS, "[1, 2]") == C.HOLDS
    assert C.shown_verdict(C.NOT_TESTABLE, C.UNTESTED) == C.NOT_TESTABLE


def test_the_resolution_is_required_where_the_claim_names_one_and_refused_elsewhere():
    ledger = C.Ledger("demo", "book", RESOLVED)
    ledger.record("responds", 1.3, interval=_iv(1.2, 1.4))
    with pytest.raises(ValueError, match="needs a resolution"):
        ledger.record("gain", 0.4, interval=_iv(0.2, 0.6))
    with pytest.raises(ValueError, match="names no resolution rule"):
        ledger.record("plain", 0.4, interval=_iv(0.2, 0.6), needs=0.5)
    for bad in (-0.1, float("nan"), "0.5", True):
        with pytest.raises(ValueError, match="needs"):
            ledger.record("gain", 0.4, interval=_iv(0.2, 0.6), needs=bad)
    assert ledger.record("gain", 0.4).holds == C.HOLDS  # a point: nothing to resolve
    with pytest.raises(ValueError, match="rule in words"):
        C.Claim("x", "x", "", "", C.at_least(0), needs=0.5)


def test_not_testable_records_a_claim_this_machine_cannot_test():
    led = C.Ledger("x", "book", [C.Claim("a", "s", "p", "src", C.at_least(4.0))])
    e = led.not_testable("a", "2 workers; the paper's figure is on many cores")
    assert e.holds == C.NOT_TESTABLE and e.measured == C.UNTESTED and e.ours is None and e.interval is None
    assert e.note == "not testable here: 2 workers; the paper's figure is on many cores" and not led.missing()
    assert led.rows()[0]["holds?"] == C.NOT_TESTABLE
    with pytest.raises(ValueError, match="reason"):
        led.not_testable("a", "")
