"""Alloc-MoE's tables (acl26.papers.alloc_moe.tables): known small results give known rows, intervals and
metrics, and the chapter's import rule (verdicts reads spec and tables only; tables never the study)."""

import ast
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from acl26.papers.alloc_moe import allocation, tables

CHAPTER_DIR = Path(__file__).resolve().parents[1] / "shared" / "papers" / "alloc_moe"


def tiny_grid():
    """Two layers at native top-2, budgets k = 1 and 2, constant per-block NLLs (so every paired interval is
    its point): each method's NLL is uniform's plus a known offset."""
    u = {1: 2.0, 2: 1.5}
    off = {"uniform": 0.0, "lexi": 0.1, "top-p": 0.05, "skip": 0.2, "alloc-l": -0.1, "alloc-t": -0.05, "alloc-l+t": -0.2}
    nll = {(k, m): np.full(4, u[k] + o) for k in (1, 2) for m, o in off.items()}
    return {"native": [2, 2], "full_nll": np.full(4, 1.0), "full_budget": 4.0, "nll": nll, "half": 1,
            "budget": {(k, m): 2.0 * k for k in (1, 2) for m in off},
            "load_sim": {(k, m): 0.5 for k in (1, 2) for m in off},
            "alloc": {(1, "alloc-l"): [2, 0], (1, "lexi"): [1, 1], (2, "alloc-l"): [2, 2], (2, "uniform"): [2, 2]},
            "thresholds": {1: {"top-p": 0.3, "skip": 0.6}, 2: {"top-p": 0.7, "skip": 0.2}},
            "k_base": {0: np.full(4, 2.3), 1: np.full(4, 2.0)},
            "alloc_main": [2, 0], "alloc_alt": [1, 1], "nll_alt": np.full(4, 1.9 + math.log(2)),
            "alloc_rand": [0, 2], "nll_rand": np.full(4, 1.9 + math.log(3)),
            "token_alloc": {1: [{"layer": 0, "spearman": 1.0, "mean k": 1.5, "min k": 1, "max k": 2,
                                 "_counts": np.array([1, 2]), "_entropy": np.array([0.1, 0.9])}]},
            "S": np.ones((2, 2)), "S_rand": np.ones((2, 2)), "lexi": np.ones((2, 2))}


def tiny_results():
    g = tiny_grid()
    head = {"uniform": np.full(4, 2.0), "alloc-l+t": np.full(4, 1.8), "full": np.full(4, 1.0),
            "top1": np.full(4, 1.0 + math.log(2)), "alloc": [2, 0]}
    curve = {"pairs": {"prefill": {1: 64, 2: 128}}, "ours": {"prefill": {1: [0.001, 0.003, 0.002], 2: [0.004] * 3}},
             "attn": {"decode": [[0.001, 0.002, 0.003]]}}
    sp = {"curve": curve, "rows": [{"phase": "prefill", "scope": "MoE layers only", "allocation": "uniform",
                                    "speed-up": 1.5, "_ratios": [1.4, 1.5, 1.6]}],
          "hf_rows": [{"phase": "prefill", "scope": "MoE layers only", "allocation": "uniform", "speed-up": 1.2,
                       "_ratios": [1.2]}]}
    return {"grid": g, "seeds": {None: head}, "second": {"seeds": {7: dict(head)}, "info": {7: {"val_ppl": 30.0}}},
            "speed": sp, "n_resamples": 199,
            "info": {"MoE layers": 2, "native top-k": 2, "native_k_table": None, "seed": None, "source": "tiny"}}


def test_ppl_is_exp_of_the_mean_nll():
    assert tables.ppl(np.array([math.log(2), math.log(8)])) == pytest.approx(4.0)


def test_quality_table_rows_and_point_intervals():
    rows = tables.quality_table(tiny_grid(), n_resamples=199)
    assert rows[0]["key"] == "full" and math.isnan(rows[0]["ratio to uniform"]) and rows[0]["budget (Σk)"] == 4.0
    assert len(rows) == 1 + 2 * len(allocation.METHODS)
    by = {(r["budget k"], r["key"]): r for r in rows[1:]}
    u = by[(1, "uniform")]
    assert (u["ratio to uniform"], u["ratio lo"], u["ratio hi"]) == (1.0, 1.0, 1.0)
    lt = by[(1, "alloc-l+t")]  # NLL 0.2 nats below uniform on every block: the ratio exp(-0.2), no spread
    assert lt["ratio to uniform"] == pytest.approx(math.exp(-0.2))
    assert lt["ratio lo"] == lt["ratio hi"] == lt["ratio to uniform"]
    assert lt["method"] == tables.LABELS["alloc-l+t"] and lt["budget (Σk)"] == 2 and lt["ppl"] == pytest.approx(math.exp(1.8))


def test_k_base_calibration_and_budget_rows():
    g = tiny_grid()
    kb = {r["K_base"]: r for r in tables.k_base_rows(g, n_resamples=199)}
    assert kb[1]["ratio to uniform"] == kb[1]["lo"] == kb[1]["hi"] == pytest.approx(1.0)
    assert kb[0]["ratio to uniform"] == pytest.approx(math.exp(0.3))
    cal = tables.calibration_rows(g, "sotu", "wiki")
    assert [r["calibration text"] for r in cal] == ["sotu", "wiki", "random token ids"]
    assert [r["ratio to the first text"] for r in cal] == pytest.approx([1.0, 2.0, 3.0])
    assert cal[2]["allocation"] == [0, 2]
    assert tables.budget_rows(tiny_results(), [1, 2]) == [
        {"k (uniform-equivalent)": 1, "budget Σk": 2, "share of native": 0.5},
        {"k (uniform-equivalent)": 2, "budget Σk": 4, "share of native": 1.0}]


def test_allocation_threshold_and_entropy_rows():
    g = tiny_grid()
    al = tables.allocation_rows(g)  # Alloc-L and LExI only, one row per layer
    assert {(r["budget"], r["method"]) for r in al} == {("Σk=2", "alloc-l"), ("Σk=2", "lexi"), ("Σk=4", "alloc-l")}
    assert list(tables.allocation_frame(g).columns) == ["alloc-l @ Σk=2", "lexi @ Σk=2", "alloc-l @ Σk=4"]
    th = tables.threshold_rows(g)
    assert th[0] == {"budget Σk": 2, "top-p p": 0.3, "skipping β": 0.6, "top-p measured Σk": 2.0,
                     "skipping measured Σk": 2.0}
    assert tables.entropy_rows(g) == [{"budget Σk": 2, "layer": 0, "spearman(k_t, entropy)": 1.0, "mean k": 1.5,
                                       "min k": 1, "max k": 2}]
    assert len(tables.entropy_points(g)) == 2


def test_token_entropy_ranks_counts_against_entropy():
    c = SimpleNamespace(n_layers=2, token_counts=[[np.array([1, 2]), np.array([3, 4])], []],
                        token_entropy=[[np.array([0.1, 0.2]), np.array([0.3, 0.5])], []])
    rows = tables.token_entropy(c)
    assert rows[0]["spearman"] == pytest.approx(1.0) and (rows[0]["min k"], rows[0]["max k"], rows[0]["mean k"]) == (1, 4, 2.5)
    assert math.isnan(rows[1]["spearman"]) and rows[1]["max k"] == 0  # a layer with no tokens


def test_seed_rows_and_frame():
    res = tiny_results()
    rows = tables.seed_rows(res)
    assert [r["seed"] for r in rows] == [None, 7] and rows[1]["val ppl (models page)"] == 30.0
    assert rows[0]["top-1 / native"] == pytest.approx(2.0) and rows[0]["ratio"] == pytest.approx(math.exp(-0.2))
    df = tables.seed_frame(res)
    assert list(df.index) == [("main subject", "—"), ("trained MoE", "7")]


def test_speed_tables():
    sp = tiny_results()["speed"]
    curve = tables.curve_rows(sp["curve"])
    r1 = next(r for r in curve if r["k"] == 1)
    assert (r1["ms (median)"], r1["ms min"], r1["ms max"], r1["pairs"]) == pytest.approx((2.0, 1.0, 3.0, 64))
    fr = tables.speed_frame(sp)
    assert "_ratios" not in fr.columns and list(fr["allocation"]) == ["uniform", "uniform (HF grouped_mm)"]
    assert tables.rest_rows(sp) == [{"phase": "decode", "part": "attn", "ms per call (median)": pytest.approx(2.0)}]


def test_metrics_hold_every_table_as_the_notebook_saves_it():
    res = tiny_results()
    m = tables.metrics(res, {"calib_source": "sotu", "calib_alt": "wiki"})
    assert set(m) == {"quality", "seeds", "speed_curve", "speed", "k_base", "calibration", "entropy", "profile",
                      "profile_random", "lexi", "alloc", "info", "regime", "deviation_log_dp"}
    assert m["deviation_log_dp"] == [] and len(m["regime"]) == 2  # tiny results hold no log-DP arm
    q = pd.DataFrame(tables.quality_table(res["grid"], n_resamples=199)).to_dict("records")
    assert m["quality"][1:] == q[1:] and m["quality"][0]["key"] == "full"  # the full row's NaN ratios never compare equal
    assert m["quality"][1]["budget (Σk)"] == 2.0 and m["seeds"] == tables.seed_rows(res)
    assert m["alloc"]["1:alloc-l"] == [2, 0] and m["k_base"][0]["K_base"] == 0
    assert m["info"] == {k: v for k, v in res["info"].items()} and m["profile"] == [[1.0, 1.0], [1.0, 1.0]]


def test_allocation_bootstrap_of_identical_segments_is_its_point():
    # two layers, K = 2, four equal segments: layer 0 loses far more at k = 1, so budget 3 gives it 2
    parts = np.zeros((2, 2, 4))
    parts[0, 0], parts[1, 0] = 3.0, 1.0
    iv = tables.allocation_bootstrap(parts, np.ones(4), 3, lambda ks: ks[0] - ks[1], n_resamples=99)
    assert (iv.estimate, iv.lo, iv.hi, iv.n) == (1.0, 1.0, 1.0, 4)


def _chapter_imports(name: str) -> set[str]:
    tree = ast.parse((CHAPTER_DIR / f"{name}.py").read_text())
    got = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            got |= ({node.module} if node.module != "acl26.papers.alloc_moe"
                    else {f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            got |= {a.name for a in node.names}
    return {m.rsplit(".", 1)[-1] for m in got if m.startswith("acl26.papers.alloc_moe.")}


def test_verdicts_read_spec_and_tables_only_and_tables_never_the_study():
    assert _chapter_imports("verdicts") <= {"spec", "tables"}
    assert not _chapter_imports("tables") & {"study", "bench", "verdicts"}


def test_entropy_link_is_the_mean_spearman_over_layers_with_a_bootstrap_interval():
    from scipy import stats as sps

    rng = np.random.default_rng(3)
    h = [rng.uniform(0, 2, 300) for _ in range(3)]
    rows = [{"_entropy": x, "_counts": np.round(x * 2 + rng.normal(0, 0.5, 300))} for x in h]
    flat = {"_entropy": h[0], "_counts": np.full(300, 2)}  # every token got the same count: left out
    grid = {"half": 2, "token_alloc": {2: rows + [flat]}}
    iv = tables.entropy_link(grid, 499)
    want = np.mean([sps.spearmanr(r["_counts"], r["_entropy"]).statistic for r in rows])
    assert iv.estimate == pytest.approx(want) and iv.lo < want < iv.hi and iv.lo > 0.5 and iv.n == 300
    assert "mean of 3 layers" in iv.method
    assert tables.entropy_link({"half": 2, "token_alloc": {2: [flat]}}, 99) is None
    assert tables.entropy_link({"half": 2}, 99) is None  # older results: no token-level counts


def test_profile_spread_reads_each_rows_baseline_at_its_native_k():
    # row 0 sits on 40 at its native k = 2, row 1 on 10 at its native k = 1 (beyond it: +inf)
    S = np.array([[80.0, 40.0], [10.0, np.inf]])
    assert list(tables.baseline_column(S, [2, 1])) == [40.0, 10.0]
    assert tables.profile_spread(S, [2, 1]) == pytest.approx(4.0)
    rows = tables.regime_rows({"S": S, "native": [2, 1]})
    assert [r["over the smallest row"] for r in rows] == [4.0, 1.0]
    assert rows[0]["S[i, 1] / S[i, K_orig]"] == 2.0 and rows[1]["K_orig"] == 1


def test_profile_spread_bootstrap_re_derives_the_baselines_from_segments():
    # two rows, native k = 2, four segments: row 0's baseline segments 1 nat above row 1's, two of them noisy
    parts = np.zeros((2, 2, 4))
    parts[0, 1] = [2.0, 2.0, 2.5, 1.5]
    parts[1, 1] = 1.0
    w = np.ones(4)
    iv = tables.profile_spread_bootstrap(parts, w, [2, 2], n_resamples=199)
    assert iv.estimate == pytest.approx(math.e) and iv.lo < math.e < iv.hi and iv.n == 4
    assert iv.method == "bootstrap over calibration segments"
    flat = tables.profile_spread_bootstrap(np.ones((2, 2, 4)), w, [2, 2], n_resamples=99)
    assert (flat.estimate, flat.lo, flat.hi) == (1.0, 1.0, 1.0)


def test_log_deviation_rows_label_the_log_dp_beside_the_papers_and_read_no_claim():
    g = tiny_grid()
    assert tables.log_deviation_rows(g, n_resamples=99) == []  # no arm: no rows
    g.update(alloc_log=[1, 1], nll_log=g["nll"][(1, "uniform")] - 0.05)
    rows = tables.log_deviation_rows(g, n_resamples=99)
    assert [r["allocation"] for r in rows] == [[2, 0], [1, 1]]
    assert rows[1]["arm"] == tables.LOG_DEVIATION and "deviation" in rows[1]["arm"] and "not the paper" in rows[1]["arm"]
    assert rows[0]["ratio to uniform"] == pytest.approx(math.exp(-0.1))  # Alloc-L: 0.1 nats below uniform
    assert rows[1]["ratio to uniform"] == rows[1]["lo"] == rows[1]["hi"] == pytest.approx(math.exp(-0.05))
    # the log profile: the same DP kernel on log S; +inf (beyond a layer's native k) stays +inf
    L = tables.log_profile(np.array([[math.e, np.inf]]))
    assert L[0, 0] == pytest.approx(1.0) and np.isposinf(L[0, 1])
    # on rows of very different scales, the raw DP starves the small row; the log DP does not
    S = np.array([[1000.0, 500.0, 400.0], [30.0, 12.0, 10.0]])
    assert allocation.allocate(S, 4) == [3, 1] and allocation.allocate(tables.log_profile(S), 4) == [2, 2]


def test_verdicts_never_read_the_log_deviation():
    src = (CHAPTER_DIR / "verdicts.py").read_text()
    assert "nll_log" not in src and "alloc_log" not in src and "log_deviation" not in src


def test_resampled_ranks_are_scipys_ranks_of_each_resample():
    """The bootstrap of entropy_link ranks each resample from counts instead of sorting it: the same float64
    ranks as scipy's rankdata (ties averaged), for integer counts with many ties and for distinct floats."""
    from scipy import stats as sps

    rng = np.random.default_rng(3)
    for x in (rng.integers(1, 5, 400).astype(float), rng.standard_normal(257), np.round(rng.standard_normal(300), 1),
              np.ones(9)):
        idx = rng.integers(0, len(x), (37, len(x)))
        got, want = tables.resampled_ranks(x, idx), sps.rankdata(x[idx], axis=-1)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    with pytest.raises(ValueError, match="idx must be 2-D"):
        tables.resampled_ranks(np.arange(3.0), np.arange(3))
