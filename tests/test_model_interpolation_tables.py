"""Model-interpolation chapter: :mod:`.tables` (results → rows, intervals, metrics) on small known inputs, and the
chapter's import rule (verdicts read only spec and tables; tables never reaches the experiments)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from acl26.papers.model_interpolation import spec, tables
from cases.model_interpolation import synthetic as _synthetic

_CHAPTER = Path(tables.__file__).parent


def test_per_problem_and_summary_of_a_known_record():
    rec = {"k": 2, "correct": [[True, False], [True, True]], "think": [[True, True], [False, False]],
           "tokens": [[10, 20], [30, 50]], "answers": [["1", "2"], ["3", "3"]], "golds": ["1", "3"],
           "finished": [[True, False], [True, True]], "seconds": 0.0, "examples": []}
    pp = tables.per_problem(rec)
    assert pp["mean@k"].tolist() == [0.5, 1.0] and pp["pass@k"].tolist() == [1.0, 1.0]
    assert pp["think"].tolist() == [1.0, 0.0] and pp["tokens"].tolist() == [15.0, 40.0]
    assert pp["cut"].tolist() == [0.5, 0.0]
    s = tables.summary(rec)
    assert s["mean@k"] == 0.75 and s["pass@k"] == 1.0 and s["tokens"] == 27.5 and s["think"] == 0.5
    assert s["finished"] == 0.75


def test_mean_interval_brackets_the_mean():
    v = np.array([0.0, 1.0] * 20)
    iv = tables.mean_interval(v, 499)
    assert iv.estimate == pytest.approx(0.5) and iv.lo < 0.5 < iv.hi and iv.n == 40
    assert tables.mean_interval(v, 499) == iv  # deterministic


def test_band_width_of_a_known_curve():
    lams = [0.0, 0.5, 1.0]
    # mean Think #R 0, 0.5, 1: 10% at 0.1, 90% at 0.9
    assert tables.band_width(lams, np.array([[0.0, 0.5, 1.0]])) == pytest.approx(0.8)
    assert tables.crossing(np.array([0.0, 1.0]), np.array([0.0, 0.4]), 0.5) == float("inf")


def test_curve_intervals_one_row_per_lambda_and_metric():
    res = _synthetic(n=20)
    cdf = tables.curve_intervals(res)
    assert len(cdf) == 4 * len(res["sweep"])
    assert set(cdf["metric"]) == {"Mean@k", "Pass@k", "Think #R", "Token #N"}
    assert (cdf["lo"] <= cdf["value"] + 1e-9).all() and (cdf["value"] <= cdf["hi"] + 1e-9).all()
    row = cdf[(cdf["λ"] == 0.0) & (cdf["metric"] == "Mean@k")].iloc[0]
    assert row["value"] == pytest.approx(100 * tables.summary(res["sweep"][0.0])["mean@k"])
    tok = cdf[(cdf["λ"] == 0.0) & (cdf["metric"] == "Token #N")].iloc[0]
    assert tok["value"] == pytest.approx(tables.summary(res["sweep"][0.0])["tokens"])  # tokens are not scaled


def test_comparison_frame_beside_the_papers_table():
    res = _synthetic(n=20)
    df = tables.comparison_frame(res)
    assert list(df.index) == ["Instruct", "Thinking", "TA", "TIES", "MI-0.4", "MI-0.5", "MI-0.6", "MI-0.8"]
    assert df.loc["MI-0.8", "paper Mean@64"] == spec.PAPER_TABLE2["MI-0.8"][0]
    assert df.loc["TIES", "ours Mean@k"] == pytest.approx(100 * tables.summary(res["variants"][spec.ties_name(0.2)])["mean@k"])
    assert (df["Mean@k lo"] <= df["ours Mean@k"] + 1e-9).all() and (df["ours Mean@k"] <= df["Mean@k hi"] + 1e-9).all()


def test_variants_ablation_and_grid_frames():
    res = _synthetic(n=20)
    res["n_layers"] = 3
    v = tables.variants_frame(res)
    assert list(v.index) == list(res["variants"]) and (v["problems"] == 20).all()
    assert v.loc["TA", "Mean@k"] == pytest.approx(tables.summary(res["variants"]["TA"])["mean@k"])
    ab = tables.ablation_frame(res, [0.8, 0.6])
    assert list(ab["λ"].unique()) == ["0.8 (verdicts)", "0.6 (shown apart)"]
    verdict_rows = ab[ab["λ"] == "0.8 (verdicts)"]
    assert list(verdict_rows["merge"]) == ["every tensor (the full merge)", spec.SKIP_ATTN, spec.SKIP_MLP,
                                           spec.ONLY_FIRST, spec.ONLY_LATE]
    assert verdict_rows.set_index("merge").loc[spec.SKIP_MLP, "Think #R"] == 0.0
    # no tagged ablation ran at 0.6: only its full merge (a sweep point) is shown
    assert list(ab[ab["λ"] == "0.6 (shown apart)"]["merge"]) == ["every tensor (the full merge)"]
    g = tables.grid_frame(res)
    assert sorted(zip(g["temperature"], g["top-p"])) == [(0.6, 0.8), (0.6, 0.95), (0.7, 0.8), (0.7, 0.95)]
    assert tables.variants_frame({**res, "variants": {}}).empty


def test_gsm8k_frame_and_metrics():
    res = _synthetic(n=20)
    res.update(pair={"instruct": {"w": torch.zeros(3, 4), "lm_head.weight": torch.zeros(5)}}, items=list(range(20)),
               source="synthetic", n_layers=3)
    g = tables.gsm8k_frame(res)
    assert list(g.index) == [0.0, 0.8, 1.0] and (g["questions"] == 20).all()
    assert tables.gsm8k_frame({**res, "gsm8k": {}}).empty
    P = {"eval_problems": 10, "k": 4, "max_new_tokens": 64}
    m = tables.metrics(res, P)
    assert list(m) == ["curve", "band", "grid_lambda", "best_lambda", "variants", "table2", "gsm8k", "sigma",
                       "sigma_pooled", "info"]
    assert m["info"]["parameters"] == 12 and m["info"]["held-out problems (verdicts)"] == 20  # the head left out
    assert [r["λ"] for r in m["curve"]] == list(res["sweep"]) and m["gsm8k"]["0.8"] == tables.summary(res["gsm8k"][0.8])
    assert m == tables.metrics(res, P)  # deterministic


def _chapter_imports(module: str) -> set[str]:
    """The chapter modules that ``module`` imports anywhere (lazy imports too)."""
    tree = ast.parse((_CHAPTER / f"{module}.py").read_text())
    pkg = "acl26.papers.model_interpolation"
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                out.add((node.module or "").split(".")[0] or "<package>")
            elif node.module == pkg:
                out.update(a.name for a in node.names)
            elif node.module and node.module.startswith(pkg + "."):
                out.add(node.module[len(pkg) + 1:].split(".")[0])
        elif isinstance(node, ast.Import):
            out.update(a.name[len(pkg) + 1:].split(".")[0] for a in node.names if a.name.startswith(pkg + "."))
    return out


def test_verdicts_read_only_spec_and_tables():
    assert _chapter_imports("verdicts") <= {"spec", "tables"}
    assert not _chapter_imports("tables") & {"study", "bench", "verdicts"}
