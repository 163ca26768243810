"""The shared-models page's tables: pure functions of the study's results (issue 42, point 1)."""

from types import SimpleNamespace

import pytest

from acl26.papers.models import tables


def test_top_k_table_measures_each_k_against_the_trained_one():
    rows = [{"top_k": 1, "val_loss": 0.0, "val_ppl": 30.0}, {"top_k": 2, "val_loss": 0.0, "val_ppl": 20.0}]
    t = tables.top_k_table(rows, 2)
    assert t["vs trained k"].tolist() == pytest.approx([0.5, 0.0])
    with pytest.raises(ValueError):  # the trained k must be in the sweep
        tables.top_k_table(rows, 3)


def test_seed_spread_is_across_seeds():
    seeds = [{"seed": s, "moe val ppl": p, "top-1 cost": c} for s, p, c in ((0, 10.0, 0.1), (1, 12.0, 0.3))]
    sp = tables.seed_spread(seeds)
    assert sp.loc["mean", "moe val ppl"] == pytest.approx(11.0) and sp.loc["max", "top-1 cost"] == pytest.approx(0.3)
    assert sp.loc["std", "moe val ppl"] == pytest.approx(2 ** 0.5)  # the sample standard deviation


def test_training_curves_smooth_each_split_apart():
    log = {"history": {"step": [1, 2, 3], "train_loss": [3.0, 1.0, 2.0], "eval_step": [2], "val_loss": [9.0]}}
    c = tables.training_curves(SimpleNamespace(log=log), "moe", smooth=2)
    train = c[c.split == "train"]["smoothed"].tolist()
    assert train == pytest.approx([3.0, 2.0, 1.5]) and c[c.split == "validation"]["smoothed"].tolist() == [9.0]
