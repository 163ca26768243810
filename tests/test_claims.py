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
    assert list(table.columns) == ["paper", "source", "ours", "test", "holds?", "note"]


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
