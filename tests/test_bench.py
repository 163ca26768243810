"""acl26 bench writes the JSON the Performance page reads (figures are printed, not asserted)."""

import json

import pytest

from acl26 import bench

pytestmark = [pytest.mark.assets, pytest.mark.slow]


def test_quick_benchmark_writes_rows_and_goals(tmp_path):
    files = bench.run_benchmarks(["lopt"], quick=True, out_dir=tmp_path)
    data = json.loads(files[0].read_text())
    assert data["paper"] == "lopt" and data["quick"] and data["machine"]["cpus"] >= 1
    m = data["machine"]
    assert m["cpu"] is not None and m["simd"] and m["read_gb_s"] > 0, "each record carries the machine it ran on"
    assert m["read_gb_s_range"][0] <= m["read_gb_s"] <= m["read_gb_s_range"][1]
    assert all(r["median_s"] > 0 for r in data["rows"])
    assert all(r["min_s"] <= r["median_s"] <= r["max_s"] for r in data["rows"])
    assert any("backend encode" in r["benchmark"] for r in data["rows"]), "the backend baseline is timed"
    same = [g for g in data["goals"] if "identical" in g["goal"]]
    assert same and all(g["met"] for g in same), "LoPT output differed from sequential during the benchmark"
    assert {"goal", "target", "measured", "met"} <= set(data["goals"][0])
