"""Sherry's tables (acl26.papers.sherry.tables): known small results give known rows, summaries and metrics
(issue 42, point 1)."""

import json
import math
from types import SimpleNamespace

import pytest

from acl26.papers.sherry import tables


def _run(variant, seed, ppl, *, lam=(), ranks=None, flips=None):
    return {"variant": variant, "seed": seed, "val_ppl": ppl, "seconds": 1.5, "from_cache": False,
            "history": {"eval_step": [0, 2], "val_loss": [3.0, 2.5]},
            "monitor": {"lambda": [list(x) for x in lam], "effective_rank": ranks or {}, "flip_rate": flips or {}}}


@pytest.fixture
def results():
    layer = "model.layers.1.mlp.up_proj"
    runs = [_run("sparse34", 0, 20.0, ranks={layer: [[0, 4.0], [2, 2.0]]}, flips={layer: [[2, 0.1]]}),
            _run("sparse34+arenas", 0, 16.0, lam=[(0, 1.0), (2, 0.0)], ranks={layer: [[0, 5.0], [2, 3.0]]}),
            _run("sparse34", 1, 30.0), _run("sparse34+arenas", 1, 25.0)]
    return {"qat_runs": runs,
            "qat_seeds": {"sparse34": {0: 20.0, 1: 30.0}, "sparse34+arenas": {0: 16.0, 1: 25.0}},
            "trapping": [{"variant": "sparse34", "seed": s, "layer": "1.mlp.up_proj", "stuck share": x,
                          "mean state changes": 2 * x, tables.INPUT_RANK: 10 * x, tables.WEIGHT_RANK: 5 * x}
                         for s, x in ((0, 0.2), (1, 0.4))],
            "model_file": {"variant": "sparse34", "layers": 7, "weights": 1000,
                           "bytes": {"sherry": 300, "i2": 400}, "layer_bytes": {"sherry": 150, "i2": 240},
                           "header_bytes": {"sherry": 10, "i2": 12}},
            "bits": {"sherry": {"index": 1.0, "sign": 0.25, "streams": 1.25, "scales": 0.01, "total": 1.26}},
            "ptq": [{"weights": "full precision", "mode": "fp", "ppl": 10.0, "tokens": 5, "seconds": 0.1}],
            "speed": [{"shape": "tiny", "format": "sherry", "status": "ok", "reason": ""},
                      {"shape": "tiny", "format": "ggml-tq2_0", "status": "skipped", "reason": "not built"}]}


def test_qat_rows_spread_and_arenas_gains(results):
    rows = tables.qat_rows(results)
    assert [(r["key"], r["seed"]) for r in rows] == [("sparse34", 0), ("sparse34+arenas", 0), ("sparse34", 1),
                                                    ("sparse34+arenas", 1)]
    assert rows[0]["held-out ppl (inference weights)"] == 20.0 and rows[0]["variant"] != "sparse34"  # the label
    spread = tables.qat_spread(results)
    assert spread.loc["mean", "sparse34"] == 25.0 and spread.loc["min", "sparse34+arenas"] == 16.0
    assert spread.loc["std", "sparse34"] == pytest.approx(math.sqrt(50))  # sample standard deviation
    assert tables.arenas_gains(results) == pytest.approx({0: 0.25, 1: 0.2})
    assert tables.arenas_gains(dict(results, qat_seeds={"sparse34": {0: 20.0}})) is None


def test_curves_of_one_seed(results):
    assert tables.loss_curves(results, 1) == [{"variant": v, "step": s, "val loss": l}
                                              for v in ("sparse34", "sparse34+arenas") for s, l in ((0, 3.0), (2, 2.5))]
    assert tables.arenas_lambda(results, 0) == [{"step": 0, "lambda": 1.0}, {"step": 2, "lambda": 0.0}]
    assert tables.arenas_lambda({"qat_runs": results["qat_runs"][:1]}, 0) is None
    ranks = tables.rank_curves(results, 0)
    assert {r["layer"] for r in ranks} == {"1.mlp.up_proj"} and len(ranks) == 4
    assert {r["gradient"] for r in ranks} == {"dL/dW"}  # these runs recorded no input gradients
    assert tables.rank_curves(results, 1) == []
    assert tables.flip_rows(results) == [{"variant": "sparse34", "seed": 0, "layer": "1.mlp.up_proj", "step": 2,
                                          "changed share": 0.1}]


def test_trapping_summary_is_mean_min_max_over_seeds(results):
    summary = tables.trapping_summary(results)
    row = summary.loc[("sparse34", "1.mlp.up_proj")]
    assert row[("stuck share", "mean")] == pytest.approx(0.3)
    assert row[(tables.INPUT_RANK, "min")] == pytest.approx(2.0)
    assert row[("mean state changes", "max")] == pytest.approx(0.8)
    assert len(tables.trapping_summary({"trapping": []})) == 0


def test_file_bytes_rest_is_what_the_layers_and_header_leave():
    files = tables.file_bytes({"model_file": {"bytes": {"sherry": 300}, "layer_bytes": {"sherry": 150},
                                              "header_bytes": {"sherry": 10}}})
    assert files.loc["sherry", "rest (embeddings, norms)"] == 140
    assert tables.file_bytes({"model_file": None}) is None


def test_file_bytes_of_the_paper_shape_are_shown_against_the_2_bit_file():
    pf = {"bytes": {"sherry": 200, "i2": 250}, "layer_bytes": {"sherry": 100, "i2": 150}, "header_bytes": {"sherry": 5, "i2": 5}}
    files = tables.file_bytes({"model_file": None, "paper_file": pf}, "paper_file")
    assert files["of the 2-bit file"].tolist() == [0.8, 1.0]
    assert tables.file_bytes({"model_file": None}, "paper_file") is None  # older results: no such key


def test_bits_and_ptq_rows(results):
    assert tables.bits_rows(results) == [{"format": "sherry", "index bits/w": 1.0, "sign bits/w": 0.25,
                                          "streams bits/w": 1.25, "scales bits/w (fp32 per row)": 0.01,
                                          "total bits/w": 1.26}]
    rows = tables.ptq_rows(results)
    assert rows == results["ptq"] and rows[0] is not results["ptq"][0]


def test_metrics_keep_the_figures_without_the_training_logs(results):
    out = tables.metrics(results)
    assert out["qat"][0] == {"variant": "sparse34", "seed": 0, "val_ppl": 20.0, "seconds": 1.5, "from_cache": False}
    assert "qat_runs" not in out and out["packed"] is None and out["trapping"] == results["trapping"]
    json.dumps(out)  # JSON-ready


def test_decoded_shapes_fragment(results):
    text = tables.decoded_shapes({"metrics": tables.metrics(results)})
    assert text == "- `tiny`: decoded in sherry; skipped: ggml-tq2_0 (not built).\n"
    assert "has not run" in tables.decoded_shapes(None)


def test_what_the_study_files_of_each_run():
    q, up = "model.layers.2.self_attn.q_proj", "model.layers.2.mlp.up_proj"
    log = {"monitor": {"stuck_share": {q: 0.5}, "mean_flips": {q: 3.0},
                       "effective_rank": {q: [[0, 2.0], [4, 4.0]], up: [[0, 1.0]]},
                       "input_rank": {q: [[0, 6.0], [4, 8.0]], up: [[0, 5.0]]}},
           "final": {"val_block_losses": (1.0, 2.0)}}
    run = SimpleNamespace(log=log)
    rows = tables.trapping_rows(run, "sparse34", 7)
    assert rows[0] == {"variant": "sparse34", "seed": 7, "layer": "2.self_attn.q_proj", "stuck share": 0.5,
                       "mean state changes": 3.0, tables.INPUT_RANK: 7.0, tables.WEIGHT_RANK: 3.0}
    # a layer with ranks but no ternary statistics (full precision has no ternary state): NaN, not left out
    assert rows[1]["layer"] == "2.mlp.up_proj" and rows[1][tables.INPUT_RANK] == 5.0
    assert math.isnan(rows[1]["stuck share"]) and math.isnan(rows[1]["mean state changes"])
    assert tables.block_nll({"sparse34": run}) == {"sparse34": [1.0, 2.0]}
    assert tables.rank_snapshots({"sparse34": run}) == {"sparse34": [5.0, 6.0, 8.0]}  # dL/dX, layers sorted by name
    assert tables.rank_snapshots({"sparse34": run}, "effective_rank") == {"sparse34": [1.0, 2.0, 4.0]}


def _arenas_run(seed, eval_step, val_loss, steps=240):
    return {"variant": "sparse34+arenas", "seed": seed, "steps": steps,
            "history": {"eval_step": list(eval_step), "val_loss": list(val_loss)}}


def test_arenas_settle_reads_the_last_two_evaluations_and_lambda_at_them():
    runs = [_arenas_run(0, [192, 216, 240], [3.0, math.log(20.0), math.log(19.0)]),
            _arenas_run(1, [24, 48], [3.0, 2.9]),  # still inside the residual: lambda high at step 47
            {"variant": "sparse34", "seed": 0, "steps": 240, "history": {"eval_step": [216, 240], "val_loss": [1, 2]}},
            _arenas_run(2, [240], [3.0]),  # one evaluation: nothing to compare
            # a final evaluation forced 5 steps after the previous one is compared with the one a full interval back
            _arenas_run(3, [216, 240, 245], [math.log(21.0), math.log(20.0), math.log(20.0)], steps=245)]
    rows = tables.arenas_settle({"qat_runs": runs})
    assert [r["seed"] for r in rows] == [0, 1, 3]
    assert rows[2]["steps"] == "216, 245" and rows[2]["relative change"] == pytest.approx(20 / 21 - 1)
    assert rows[0]["relative change"] == pytest.approx(-0.05) and rows[0]["faded"]
    assert rows[0]["steps"] == "216, 240" and rows[0]["ppl last"] == pytest.approx(19.0)
    lam = [float(x) for x in rows[0]["lambda"].split(", ")]
    assert lam[1] == pytest.approx(0.0, abs=1e-3) and 0 < lam[0] < 0.1
    assert not rows[1]["faded"]
