"""Provenance a reader can check: the results keep what the verdicts read (and read back equal), the run
command repeats the run, and `acl26 verify` passes on an untouched book and names any tampering."""

import copy
import json
import shlex

import numpy as np
import pandas as pd
import pytest

from acl26 import claims as C
from acl26 import cli, evidence, io, params, provenance, registry, stats

from cases import all_cases

CASES = all_cases()


def _verdicts(cid, results):
    ch = registry.get(cid)
    ledger = C.Ledger(ch.id, "book", list(ch.claims))
    ch.record_claims(ledger, results)
    return {k: e.holds for k, e in ledger.entries.items()}


@pytest.mark.parametrize("cid", list(CASES))
def test_every_chapters_results_read_back_to_the_same_verdicts(cid):
    good, fail = CASES[cid]
    for name, change in [(None, None), *list(fail.items())[:3]]:
        r = copy.deepcopy(good())
        if change is not None:
            change(r)
        back = evidence.decode(json.loads(json.dumps(evidence.encode(r))))
        assert _verdicts(cid, back) == _verdicts(cid, r), (cid, name)


def test_the_codec_keeps_types_json_cannot_hold():
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, float("nan")]}, index=pd.Index(["x", "y"], name="k"))
    obj = {0: {1: (1, 2.5)}, "arr": np.arange(6, dtype=np.int16).reshape(2, 3), "f": np.float32(0.25),
           "inf": float("inf"), "df": df, "s": df["b"], "iv": stats.Interval(1.0, 0.5, 1.5, 0.95, "t over seeds", 3),
           "set": {3, 1}, "none": None, "nested": [[1, {"x": np.bool_(True)}]]}
    back = evidence.decode(json.loads(json.dumps(evidence.encode(obj))))
    assert back[0] == {1: (1, 2.5)} and back["arr"].dtype == np.int16 and (back["arr"] == obj["arr"]).all()
    assert type(back["f"]) is np.float32 and back["inf"] == float("inf") and back["set"] == {1, 3}
    pd.testing.assert_frame_equal(back["df"], df)
    pd.testing.assert_series_equal(back["s"], df["b"])
    assert back["iv"] == obj["iv"] and back["nested"][0][1]["x"] is np.True_


def test_what_cannot_be_kept_fails_loudly_when_a_verdict_reads_it():
    back = evidence.decode(json.loads(json.dumps(evidence.encode({"model": object()}))))
    with pytest.raises(evidence.EvidenceError, match=r"res\['model'\].*could not keep"):
        back["model"] + 1
    with pytest.raises(evidence.EvidenceError, match="not a type evidence may hold"):
        evidence.decode({evidence.TAG: "dataclass", "type": "os:system", "fields": {}})


def test_only_what_record_claims_reads_is_kept():
    good, _ = CASES["sherry"]
    r = {**good(), "model": object(), "huge": np.zeros(10)}
    ch = registry.get("sherry")
    kept = evidence.read_by(ch.record_claims, C.Ledger("sherry", "book", list(ch.claims)), r)
    assert "model" not in kept and "huge" not in kept and "speed" in kept and "qat_seeds" in kept
    assert _verdicts("sherry", kept) == _verdicts("sherry", r)


def test_a_ledger_from_notebook_setup_stores_what_its_record_claims_reads(tmp_path, monkeypatch):
    """notebook.setup hands the chapter's record_claims to the ledger (the ledger looks up no chapter:
    issue 42, point 2); a ledger made without it stores the evidence whole."""
    from acl26 import notebook

    monkeypatch.setenv("ACL26_OUT", str(tmp_path))
    good, _ = CASES["sherry"]
    r = {**good(), "huge": np.zeros(10)}
    ch = registry.get("sherry")
    _, ledger = notebook.setup("sherry", {"profile": "book"})
    assert ledger.record_claims is ch.record_claims
    ch.record_claims(ledger, r)
    saved = json.loads(ledger.save(evidence=r).read_text())["evidence"]
    kept = evidence.read_by(ch.record_claims, C.Ledger("sherry", "book", list(ch.claims)), r)
    assert saved == json.loads(json.dumps(evidence.encode(kept))) and "huge" not in saved

    bare = C.Ledger("sherry", "book", list(ch.claims))
    ch.record_claims(bare, r)
    whole = json.loads(bare.save(evidence=r).read_text())["evidence"]
    assert whole == json.loads(json.dumps(evidence.encode(r))) and "huge" in whole


def test_the_run_command_gives_back_every_parameter():
    spec = registry.get("lopt").spec
    resolved = spec.resolve("smoke", {"texts": ["hard"], "seed": 3})
    cmd = provenance.command("lopt", "smoke", resolved, sep=" \\\n  ")
    words = [w for w in shlex.split(cmd.replace("\\\n", "")) if w.strip()]
    assert words[:5] == ["acl26", "run", "lopt", "--profile", "smoke"]
    assigned = params.parse_assignments([w for w in words[5:] if w != "-p"])
    assert spec.resolve("smoke", assigned) == resolved


@pytest.fixture()
def executed(tmp_path, monkeypatch):
    """A tiny executed book: LoPT's and Sherry's (synthetic) results saved with their evidence."""
    monkeypatch.setenv("ACL26_OUT", str(tmp_path))
    for cid in ("lopt", "sherry"):
        ch = registry.get(cid)
        ledger = C.Ledger(ch.id, "book", list(ch.claims), record_claims=ch.record_claims)
        res = CASES[cid][0]()
        ch.record_claims(ledger, res)
        ledger.save(evidence=res)
    io.write_text(tmp_path / "lopt.ipynb", "{}")
    provenance.write_manifest(tmp_path)
    return tmp_path


def test_verify_passes_on_an_untouched_book(executed, capsys):
    assert cli.main(["verify", str(executed)]) == 0
    out = capsys.readouterr().out
    n = len(registry.get("lopt").claims) + len(registry.get("sherry").claims)
    assert f"{n} verdicts decided again" in out and "3 files match the manifest" in out


def _tamper(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def test_verify_names_a_changed_file(executed, capsys):
    _tamper(executed / "results" / "lopt-book.json", lambda d: d["metrics"].update(x=1))
    assert cli.main(["verify", str(executed)]) == 2
    err = capsys.readouterr().err
    assert "lopt-book.json: sha256 differs from the manifest's" in err and err.count("\n") == 1


def test_verify_names_a_verdict_that_its_evidence_does_not_give_even_with_the_manifest_rewritten(executed, capsys):
    def flip(d):
        row = next(c for c in d["claims"] if c["id"] == "size")
        row["holds?"] = "no"
    _tamper(executed / "results" / "sherry-book.json", flip)
    provenance.write_manifest(executed, overwrite=True)
    assert cli.main(["verify", str(executed)]) == 2
    assert "claim 'size': saved verdict 'no', decided again from the evidence 'yes'" in capsys.readouterr().err
    # the figures behind a verdict changed instead: the verdict no longer follows from them
    _tamper(executed / "results" / "sherry-book.json", lambda d: next(c for c in d["claims"] if c["id"] == "size")
            .update({"holds?": "yes"}))
    _tamper(executed / "results" / "sherry-book.json",
            lambda d: d["evidence"]["paper_file"]["bytes"].update(sherry=250_000_000))
    provenance.write_manifest(executed, overwrite=True)
    assert cli.main(["verify", str(executed)]) == 2
    assert "claim 'size': saved verdict 'yes', decided again from the evidence 'no'" in capsys.readouterr().err


def test_verify_reports_missing_added_and_evidence_free_files(executed, capsys):
    (executed / "lopt.ipynb").unlink()
    (executed / "runs").mkdir()
    (executed / "runs" / "x.json").write_text("{}")
    _tamper(executed / "results" / "lopt-book.json", lambda d: d.pop("evidence"))
    assert cli.main(["verify", str(executed)]) == 2
    cap = capsys.readouterr()
    assert "lopt.ipynb: listed in the manifest, missing" in cap.out
    assert "x.json: not in the manifest" in cap.out and "holds no evidence" in cap.out
    assert "problems in" in cap.err and cap.err.count("\n") == 1
    assert cli.main(["verify", str(executed / "nothing")]) == 2
    assert "no usable manifest" in capsys.readouterr().err


def test_the_run_box_before_any_run_says_how_to_run_it(tmp_path):
    text = provenance.run_box("lopt", tmp_path)
    assert text.startswith(":::{admonition} Run this yourself") and "`acl26 run lopt`" in text


def test_verify_names_a_value_its_evidence_does_not_give_and_a_record_claims_that_fails(executed, capsys):
    def change_value(d):
        next(c for c in d["claims"] if c["id"] == "bits")["value"] = 1.3
    _tamper(executed / "results" / "sherry-book.json", change_value)
    provenance.write_manifest(executed, overwrite=True)
    assert cli.main(["verify", str(executed)]) == 2
    assert "claim 'bits': saved value 1.3, decided again from the evidence 1.25" in capsys.readouterr().err
    _tamper(executed / "results" / "sherry-book.json", lambda d: d["evidence"].update(qat_seeds=1))
    provenance.write_manifest(executed, overwrite=True)
    assert cli.main(["verify", str(executed)]) == 2  # a problem named, not a crash
    err = capsys.readouterr().err
    assert "sherry-book.json: the current record_claims fails on its evidence" in err and "internal" not in err


def test_evidence_reads_back_numpy_dates_complex_and_frozensets_and_omits_long_doubles():
    obj = {"dt": np.array(["2020-01-01", "2021-02-03"], dtype="datetime64[D]"), "c": np.array([1 + 2j]),
           "keys": {frozenset({1}): 2}, "ld": np.longdouble(1.5), "models": np.array([object(), 1], dtype=object)}
    back = evidence.decode(json.loads(json.dumps(evidence.encode(obj))))
    assert (back["dt"] == obj["dt"]).all() and back["dt"].dtype == obj["dt"].dtype
    assert back["c"][0] == 1 + 2j and back["keys"] == {frozenset({1}): 2}
    assert isinstance(back["ld"], evidence.Omitted) and isinstance(back["models"][0], evidence.Omitted)
    copy.deepcopy(back)  # a placeholder nobody reads is harmless
