"""Smoke runs: every registered notebook executes end to end with its smoke profile (papermill)."""

import json

import pytest

from acl26 import claims, registry

pytestmark = [pytest.mark.notebook, pytest.mark.assets, pytest.mark.slow]


@pytest.mark.parametrize("pid", list(registry.CHAPTERS))
def test_notebook_runs_and_records_every_claim(smoke_book, pid):
    out, runs = smoke_book
    res = runs[pid]
    nb = json.loads(res.notebook.read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    data = json.loads(claims.result_path(pid, "smoke", out / "results").read_text())
    ids = [c.id for c in registry.get(pid).claims]
    assert [c["id"] for c in data["claims"]] == ids
    for c in data["claims"]:
        assert c["holds?"] in claims.VERDICTS
        assert c["ours"] and (c["holds?"] != claims.UNTESTED or c["note"])


def test_lopt_smoke_is_exact(smoke_book):
    out, _ = smoke_book
    data = json.loads(claims.result_path("lopt", "smoke", out / "results").read_text())
    exact = next(c for c in data["claims"] if c["id"] == "exact")
    assert exact["value"] == 1.0 and exact["holds?"] == claims.HOLDS
