"""The papermill runner: validated up front, atomic on success, nothing half-written on failure."""

import json
from pathlib import Path

import nbformat
import pytest

import fakepaper
from acl26 import params, registry, runner

pytestmark = pytest.mark.notebook


@pytest.fixture()
def fake_repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    nbformat.write(nbformat.from_dict(fakepaper.notebook()), root / "notebooks" / "fake.ipynb")
    monkeypatch.setitem(registry.PAPERS, "fake", registry.Paper("fake", "Fake: a test paper", "0000.00000", "none",
                                                                "fakepaper"))
    tests_dir = str(Path(fakepaper.__file__).parent)
    monkeypatch.setenv("PYTHONPATH", tests_dir)
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    return root


def test_success_moves_notebook_and_results_into_place(fake_repo, tmp_path):
    out = tmp_path / "out"
    res = runner.run("fake", "smoke", {"value": 5}, root=fake_repo, out_dir=out, progress=False)
    assert res.notebook == out / "fake.ipynb" and res.notebook.is_file()
    data = json.loads((out / "results" / "fake-smoke.json").read_text())
    assert data["claims"][0]["value"] == 5 and data["claims"][0]["holds?"] == "yes"
    assert json.loads((out / "runs" / "fake.json").read_text())["params"]["value"] == 5
    assert not list(out.glob(".*.run")), "staging folder left behind"


def test_failure_leaves_nothing_half_written(fake_repo, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(runner.RunError, match=r"fake \(smoke\) failed in cell .*RuntimeError: boom after saving") as err:
        runner.run("fake", "smoke", {"fail": True}, root=fake_repo, out_dir=out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [], "the output folder must stay untouched"
    kept = Path(str(err.value).split("kept at ")[1].rstrip(")"))
    assert kept.is_file() and kept.parent == tmp_path / "cache" / "failed"


def test_bad_parameters_fail_before_anything_is_written(fake_repo, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(params.ParamError, match="'value'.*below the minimum"):
        runner.run("fake", "smoke", {"value": -1}, root=fake_repo, out_dir=out, progress=False)
    with pytest.raises(params.ParamError, match="unknown parameter 'nope'"):
        runner.run("fake", "smoke", {"nope": 1}, root=fake_repo, out_dir=out, progress=False)
    assert not out.exists()


def test_unknown_paper():
    with pytest.raises(KeyError, match="unknown paper 'nope'"):
        runner.run("nope")
