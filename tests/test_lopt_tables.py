"""LoPT's tables (acl26.papers.lopt.tables): known small results give known rows, intervals and metrics."""

from __future__ import annotations

import pytest

from acl26.papers.lopt import inputs, tables


def _speed(reps=((6.0, 3.0, 1.5, 4.0), (6.2, 3.2, 1.6, 4.4), (5.8, 2.8, 1.4, 3.6)), n=10_000_000, tok="t"):
    rows = []
    for rep, (seq, one, two, bk) in enumerate(reps):
        base = dict(tokenizer=tok, n_chars=n, repeat=rep, split=0.0, merge=0.0, same=True)
        rows += [dict(base, method="sequential", workers=1, total=seq, encode=seq),
                 dict(base, method="backend", workers=1, total=bk, encode=bk),
                 dict(base, method="lopt", workers=1, total=one, encode=one, match=0.0, assemble=0.0),
                 dict(base, method="lopt", workers=2, total=two, encode=two - 0.02, merge=0.02, match=0.01 * two,
                      assemble=0.005 * two)]
    return rows


def test_in_regime_is_strictly_longer_than_the_longest_piece():
    assert tables.in_regime(dict(overlap_chars=41, longest_piece=40))
    assert not tables.in_regime(dict(overlap_chars=40, longest_piece=40))  # equal: outside ("longer than")
    assert not tables.in_regime(dict(overlap_chars=512, longest_piece=None))  # not measured: never inside
    assert tables.regime_of(dict(overlap_chars=40, longest_piece=40)) == tables.REGIMES[2][1]
    assert tables.regime_of(dict(overlap_chars=4, longest_piece=40)) == tables.REGIMES[0][1]
    assert tables.regime_of(dict(overlap_chars=12, longest_piece=40)) == tables.REGIMES[1][1]
    assert tables.regime_of(dict(overlap_chars=64, longest_piece=40)) == tables.PAPER_REGIME_LABEL


def test_paper_rule_rows_take_the_rule_from_both_studies():
    res = {"exactness": [dict(method="lopt-paper-rule", n=1), dict(method="lopt", n=2)],
           "sweep": [dict(rule="paper", n=3), dict(rule="piece", n=4)], "speed": []}
    assert [r["n"] for r in tables.paper_rule_rows(res)] == [1, 3]


def test_parallel_factors_pair_runs_of_the_same_repeat():
    rows = _speed() + _speed(n=1000)  # a shorter length: ignored, the longest decides
    (f,) = tables.parallel_factors(rows).values()
    assert f["n_chars"] == 10_000_000 and f["workers"] == 2
    par = f["parallel"]
    assert (par.estimate, par.lo, par.hi, par.n) == pytest.approx((2.0, 2.0, 2.0, 3))
    assert f["faster_2"].estimate == pytest.approx(4.0) and f["faster_2"].lo == pytest.approx(6.2 / 1.6)
    assert f["faster_2"].hi == pytest.approx(5.8 / 1.4)
    assert f["speedup_backend"].estimate == pytest.approx(4.0 / 1.5)
    assert f["match_share"].estimate == pytest.approx(0.01) and f["assemble_share"].estimate == pytest.approx(0.005)
    assert tables.parallel_factors([]) == {}


def test_parallel_factors_leave_what_was_not_timed_none():
    rows = [r for r in _speed() if r["method"] != "backend"]
    (f,) = tables.parallel_factors(rows).values()
    assert f["speedup_backend"] is None and f["speedup"] is not None
    table = tables.factor_table(rows)
    assert table.loc["t", "over backend encode"] == "—"
    assert table.loc["t", "parallel factor (1 → max workers)"] == "2.00× [2.00, 2.00], n = 3"


def test_speed_summary_medians_and_phases():
    summary = tables.speed_summary(_speed())
    two = next(r for r in summary if r["method"] == "lopt" and r["workers"] == 2)
    assert two["total"] == 1.5 and two["speed-up"] == pytest.approx(4.0)
    assert two["speed-up over backend"] == pytest.approx(4.0 / 1.5)
    assert two["label"] == "LoPT, 2 worker(s)" and two["merge share"] == pytest.approx(0.02 / 1.5)
    phases = tables.phase_rows(summary)
    assert set(phases.phase) == {"split", "encode", "merge"} and len(phases) == 6
    assert set(phases.run) == {"t, 1 worker(s)", "t, 2 worker(s)"}


def test_mismatch_cases_pick_the_shortest_failing_inputs():
    rows = [dict(method="naive", exact=False, tokenizer="gpt2", text="sotu", setting="default", chunk_chars=100,
                 overlap_chars=0, n_chars=5000, sample=None),
            dict(method="naive", exact=False, tokenizer="gpt2", text="hostile", setting="adversarial", chunk_chars=7,
                 overlap_chars=3, n_chars=20, sample="a\u0301 b"),
            dict(method="naive", exact=True, tokenizer="gpt2", text="sotu", setting="random", chunk_chars=9,
                 overlap_chars=2, n_chars=10, sample=None),
            dict(method="lopt", exact=True, tokenizer="gpt2", text="sotu", setting="default", chunk_chars=100,
                 overlap_chars=16, n_chars=5000, sample=None),
            dict(method="delimiter", exact=True, tokenizer="gpt2", text="sotu", setting="default", chunk_chars=100,
                 overlap_chars=16, n_chars=5000, sample=None)]
    cases = tables.mismatch_cases(rows, dict(methods=["lopt", "naive", "delimiter"], full_chars=0, sweep_chars=300))
    assert list(cases) == ["naive", "delimiter"] and cases["delimiter"] == []
    first, second = cases["naive"]
    assert first == dict(tokenizer="gpt2", text_name="hostile", method="naive", chunk_chars=7, overlap_chars=3,
                         n_chars=300, text="a\u0301 b")
    assert second["text"] is None and second["n_chars"] is None  # full_chars 0: the whole text


def test_metrics_are_the_saved_summaries():
    ex = [dict(setting="default", method="lopt", exact=True), dict(setting="default", method="lopt", exact=False),
          dict(setting="random", method="naive", exact=False)]
    sw = [dict(rule="piece", overlap_chars=8, failed_rate=0.5, retries=1, fallback=False, exact=True),
          dict(rule="piece", overlap_chars=8, failed_rate=0.25, retries=0, fallback=False, exact=True)]
    m = tables.metrics({"exactness": ex, "speed": _speed(), "sweep": sw})
    assert set(m) == {"exact_summary", "speed", "sweep"}
    assert m["exact_summary"] == [dict(setting="default", method="lopt", **{"exact-match rate": 0.5, "runs": 2}),
                                  dict(setting="random", method="naive", **{"exact-match rate": 0.0, "runs": 1})]
    assert m["sweep"] == [dict(rule="piece", overlap_chars=8, failed_rate=0.375)]
    assert len(m["speed"]) == 4 and all("label" not in r and "speed-up" in r for r in m["speed"])
    assert tables.sweep_table(sw).loc[("piece", 8)].to_dict() == dict(failed_rate=0.375, retries=1, fallback=0,
                                                                      exact=1.0)


def test_text_of_length_cuts_or_repeats():
    assert inputs.text_of_length("abc", 2) == "ab"
    assert inputs.text_of_length("abc", 7) == "abcabca"
