"""The MTA chapter's tables (acl26.papers.mta.tables): known small results give known rows, intervals and
metrics; the chapter's import rule (verdicts reads spec and tables only, tables never the runs); and the
benchmark's shape (bench.benchmarks, on tiny shapes: its structure, not its timings)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from acl26 import stats
from acl26.papers.mta import spec, tables
from cases import mta as mta_cases

CHAPTER_DIR = Path(__file__).resolve().parents[1] / "shared" / "papers" / "mta"


def _small() -> dict:
    """Two seeds, one base loss, two held-out pairs: figures small enough to check by hand."""
    runs = {"sfkl|base|0": {"rouge": [10.0, 10.0], "nll": [1.0, 1.0]},
            "sfkl|base|1": {"rouge": [12.0, 12.0], "nll": [2.0, 2.0]},
            "sfkl|MTA|0": {"rouge": [13.0, 13.0], "nll": [0.5, 0.5]},
            "sfkl|MTA|1": {"rouge": [15.0, 15.0], "nll": [1.5, 1.5]}}
    return {"runs": runs, "seeds": [0, 1], "ablation_seeds": [0, 1], "base_losses": ["sfkl"], "ablation_base": "sfkl",
            "kl": {}, "n_resamples": 199,
            "evals": {"teacher": {"rouge": [30.0, 40.0], "nll": [0.0, 2.0]}, "start": {"rouge": [5.0, 7.0], "nll": [3.0, 3.0]}},
            "timing": {"base": [1.0, 2.0, 4.0], "MTA": [2.0, 3.0, 5.0]},
            "logs": {"sfkl|base|0": {"seconds": 60.0, "step_s_median": 1.0, "from_cache": False, "base": [3.0, 2.0],
                                     "dsa": [None, None], "hid": [None, None]},
                     "sfkl|MTA|0": {"seconds": 120.0, "step_s_median": 2.0, "from_cache": True, "base": [3.0, 2.5],
                                    "dsa": [0.4, 0.3], "hid": [1.0, 0.9]},
                     "fkl|base|0": {"seconds": 30.0, "step_s_median": 0.5, "from_cache": False, "base": [9.0],
                                    "dsa": [None], "hid": [None]}}}


def test_run_key_avg_and_base_name():
    assert tables.run_key("sfkl", "+DSA only", 3) == "sfkl|+DSA only|3"
    r = _small()
    assert tables.avg(r, "sfkl", "base", "rouge").tolist() == [11.0, 11.0]
    assert tables.avg(r, "sfkl", "MTA", "nll").tolist() == [1.0, 1.0]
    assert tables.base_name("sfkl") == "skew forward KL (DistiLLM)"
    assert tables.mean_ppl([1.0, 3.0]) == pytest.approx(math.exp(2.0))


def test_seed_rows_and_the_main_frame_by_hand():
    r = _small()
    rows = {(x["condition"], x["seed"]): x for x in tables.seed_rows(r)}
    assert rows[("MTA", 1)]["ROUGE-L"] == 15.0 and rows[("base", 1)]["perplexity"] == pytest.approx(math.exp(2.0))
    f = tables.main_frame(r)
    assert list(f.index) == [("skew forward KL (DistiLLM)", "ROUGE-L"), ("skew forward KL (DistiLLM)", "log-perplexity")]
    row = f.loc[("skew forward KL (DistiLLM)", "ROUGE-L")]
    # MTA − base is 3 on both seeds: no spread, so the t-interval is the point
    assert row["MTA − base"] == pytest.approx(3.0) and row["lo"] == pytest.approx(3.0) and row["hi"] == pytest.approx(3.0)
    assert row["base"] == pytest.approx(11.0) and row["MTA"] == pytest.approx(14.0)
    assert row["base ±"] == pytest.approx(stats.seed_interval([10.0, 12.0]).hi - 11.0)
    assert row["seeds MTA better"] == 2
    ppl = f.loc[("skew forward KL (DistiLLM)", "log-perplexity")]
    assert ppl["MTA − base"] == pytest.approx(-0.5) and ppl["seeds MTA better"] == 2  # lower is better
    # with held-out KL, a third row per base loss
    r["kl"] = {k: [0.5, 0.5] if "MTA" in k else [0.7, 0.7] for k in r["runs"]}
    f = tables.main_frame(r)
    assert f.loc[("skew forward KL (DistiLLM)", "KL to the teacher"), "MTA − base"] == pytest.approx(-0.2)


def test_seed_intervals_reference_and_main_seed_frame():
    r = _small()
    r["runs"]["fkl|base|0"] = {"rouge": [1.0, 1.0], "nll": [1.0, 1.0]}  # not a main base loss: left out
    main = tables.main_seed_frame(r)
    assert set(main["base loss"]) == {"sfkl"} and len(main) == 4
    bars = tables.seed_intervals(r)
    b = bars[(bars["metric"] == "ROUGE-L") & (bars["condition"] == "base")].iloc[0]
    iv = stats.seed_interval([10.0, 12.0])
    assert (b["mean"], b["lo"], b["hi"]) == pytest.approx((iv.estimate, iv.lo, iv.hi))
    ref = tables.reference_frame(r)
    assert ref.loc["teacher", "ROUGE-L"] == pytest.approx(35.0)
    assert ref.loc["start student", "perplexity"] == pytest.approx(math.exp(3.0))


def test_ablation_frame_and_its_errorbars():
    r = mta_cases.synthetic()
    abl = tables.ablation_frame(r)
    assert list(abl.index) == ["base", "full MTA"] + list(spec.ABLATIONS)
    full = abl.loc["full MTA"]
    assert (full["− full MTA"], full["lo"], full["hi"]) == (0.0, 0.0, 0.0)
    assert full["paper ROUGE-L"] == spec.PAPER_ABLATIONS["full MTA"]
    want = stats.paired_bootstrap(tables.avg(r, "sfkl", "+Hid only", "rouge"), tables.avg(r, "sfkl", "MTA", "rouge"),
                                  "mean_diff", n_resamples=r["n_resamples"], unit="pairs")
    assert (abl.loc["+Hid only", "− full MTA"], abl.loc["+Hid only", "lo"]) == pytest.approx((want.estimate, want.lo))
    bars = tables.ablation_errorbars(abl)
    hid = bars[bars["condition"] == "+Hid only"].iloc[0]
    assert hid["below"] == pytest.approx(want.estimate - want.lo) and hid["above"] == pytest.approx(want.hi - want.estimate)
    assert (bars["below"] >= 0).all() and (bars["above"] >= 0).all()


def test_timing_rows_ratio_and_training_logs():
    r = _small()
    assert tables.step_ratios(r).tolist() == [2.0, 1.5, 1.25]
    t = tables.timing_frame(r)
    assert t.loc["ratio (per round)", "median s/step"] == pytest.approx(1.5)
    assert (t.loc["ratio (per round)", "min"], t.loc["ratio (per round)", "max"]) == pytest.approx((1.25, 2.0))
    assert t.loc["base", "median s/step"] == 2.0 and t.loc["base + MTA", "max"] == 5.0
    assert tables.paper_step_ratio() == pytest.approx(0.48 / 0.26)
    curves = tables.training_curves(r)  # the ablation base's runs only
    assert len(curves) == 4 and set(curves["condition"]) == {"base", "MTA"}
    assert curves[curves["condition"] == "MTA"]["DSA"].tolist() == [0.4, 0.3]
    assert tables.run_seconds(r).loc["sfkl|MTA|0", "from cache"]
    assert tables.training_minutes(r) == pytest.approx(3.5)


def test_metrics_are_the_tables_the_notebook_saved():
    r = mta_cases.synthetic()
    r.update(teacher_id="t", student_id="s", n_teacher=4, n_student=2, student_layer_map=[0, 3],
             key_layers={"word": [1], "phrase": [2]}, teacher_layers=[2, 4],
             pairs={"train": [1, 2, 3], "heldout": [1, 2]}, pairs_drawn={"train": 4, "heldout": 2})
    m = tables.metrics(r, {"steps": 5, "batch_size": 2})
    assert set(m) == {"main", "ablations", "seeds", "timing", "info", "teacher", "start"}
    assert m["main"] == tables.main_frame(r).reset_index().to_dict("records")
    # the base row has no paper figure (NaN, never equal to itself): compared as frames
    pd.testing.assert_frame_equal(pd.DataFrame(m["ablations"]), tables.ablation_frame(r).reset_index())
    assert m["seeds"] == tables.seed_rows(r) and m["timing"] is r["timing"]
    assert m["teacher"] == {"rouge": float(np.mean(r["evals"]["teacher"]["rouge"])),
                            "ppl": math.exp(np.mean(r["evals"]["teacher"]["nll"]))}
    info = m["info"]
    assert info["word key layer (student → teacher)"] == "1 → 2" and info["phrase key layers (student → teacher)"] == "2 → 4"
    assert info["training pairs (kept of drawn)"] == "3 of 4" and info["steps per run"] == 5
    assert info["runs"] == len(r["runs"])
    r["student_layer_map"] = None
    assert tables.setup_info(r, {"steps": 5, "batch_size": 2})["teacher layers kept"] == "— (local student)"
    r["recovery"] = None
    assert tables.recovery_frame(r, {"block_size": 32}) is None


def _chapter_imports(module: str) -> set[str]:
    """The ``acl26.papers.mta.*`` modules ``module`` imports anywhere (lazy imports included)."""
    tree = ast.parse((CHAPTER_DIR / f"{module}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "acl26.papers.mta":
                out |= {a.name for a in node.names}
            elif node.module.startswith("acl26.papers.mta."):
                out.add(node.module.split(".")[3])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[3] for a in node.names if a.name.startswith("acl26.papers.mta.")}
    return out


def test_verdicts_read_spec_and_tables_only_and_tables_never_the_runs():
    assert _chapter_imports("verdicts") <= {"spec", "tables"}
    assert not _chapter_imports("tables") & {"study", "bench", "verdicts"}
    # the chapter's one `benchmarks` is bench's
    for path in CHAPTER_DIR.glob("*.py"):
        defs = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
        assert ("benchmarks" in defs) == (path.name == "bench.py"), path.name


def test_the_benchmark_rows_and_goals_on_tiny_shapes(monkeypatch):
    from acl26 import registry
    from acl26.papers.mta import bench

    assert registry.get("mta").benchmarks is bench.benchmarks
    monkeypatch.setattr(bench, "QUICK_RUN", {**bench.QUICK_RUN, "length": 24, "response": 8, "rounds": 2})
    out = bench.benchmarks(quick=True)
    assert {"title", "rows", "goals", "model", "note"} <= set(out)
    assert len(out["rows"]) == 6 and len(out["goals"]) == 2
    for row in out["rows"]:
        assert {"step", "arm", "median", "min", "max", "unit", "rounds"} <= set(row)
        assert row["min"] <= row["median"] <= row["max"] and row["rounds"] == 2
    for goal in out["goals"]:
        assert set(goal) == {"goal", "target", "measured", "met", "unit"}
        assert goal["target"] == 1.85 and isinstance(goal["met"], bool)
        assert goal["met"] == (goal["measured"] <= goal["target"])


def test_synthetic_items_are_well_formed():
    from acl26.papers.mta import bench

    items = bench.synthetic_items(3, 40, 10, 100, seed=1)
    for e in items:
        assert len(e.ids) == len(e.labels) == len(e.content) == 40 and sum(e.labels) == 10
        for lo, hi in e.words + e.phrases:
            assert 0 <= lo < hi <= 40 and all(e.content[lo:hi])
    with pytest.raises(ValueError, match="no prompt"):
        bench.synthetic_items(1, 10, 8, 100)
