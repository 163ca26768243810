"""acl26.kernels.dp_alloc.allocate: exact against brute force (cost, and the stated tie rule), its
numpy twin, and input validation."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acl26.kernels import dp_alloc
from naive import dp_alloc as naive_dp


def brute(cost, budget):
    """Every allocation: the least cost (summed from the first layer), then the smallest total,
    then the smallest k from the last layer backwards (the documented tie rule)."""
    L, K = cost.shape
    best = None
    for ks in itertools.product(range(1, K + 1), repeat=L):
        if sum(ks) > budget:
            continue
        c = 0.0
        for i, k in enumerate(ks):
            c += float(cost[i, k - 1])
        key = (c, sum(ks), ks[::-1])
        if best is None or key < best[0]:
            best = (key, ks)
    return np.array(best[1])


def total(cost, ks):
    c = 0.0
    for i, k in enumerate(ks):
        c += float(cost[i, k - 1])
    return c


@settings(max_examples=300, deadline=None)
@given(L=st.integers(1, 5), K=st.integers(1, 4), data=st.data())
def test_allocate_matches_brute_force(L, K, data):
    budget = data.draw(st.integers(L, L * K + 2))
    # small integers make exact ties common, so the tie rule is exercised
    vals = data.draw(st.lists(st.integers(-3, 6), min_size=L * K, max_size=L * K))
    cost = np.array(vals, dtype=np.float64).reshape(L, K) / 2
    ks = dp_alloc.allocate(cost, budget)
    assert ks.dtype == np.int64 and ks.shape == (L,)
    assert ks.min() >= 1 and ks.max() <= K and ks.sum() <= budget
    np.testing.assert_array_equal(ks, brute(cost, budget))
    np.testing.assert_array_equal(ks, naive_dp.allocate(cost, budget))


def test_allocate_on_random_real_costs_and_its_twin():
    rng = np.random.default_rng(0)
    for _ in range(50):
        L, K = rng.integers(1, 6), rng.integers(1, 5)
        cost = rng.standard_normal((L, K))
        budget = int(rng.integers(L, L * K + 1))
        ks = dp_alloc.allocate(cost, budget)
        assert total(cost, ks) == total(cost, brute(cost, budget))
        np.testing.assert_array_equal(ks, naive_dp.allocate(cost, budget))
    cost = rng.random((64, 16))
    np.testing.assert_array_equal(dp_alloc.allocate(cost, 384), naive_dp.allocate(cost, 384))


def test_allocate_typical_profiles():
    # cost falls with k (more experts, lower perplexity): a generous budget gives every layer K
    cost = np.array([[4.0, 2.0, 1.0], [9.0, 3.0, 2.5]])
    np.testing.assert_array_equal(dp_alloc.allocate(cost, 6), [3, 3])
    np.testing.assert_array_equal(dp_alloc.allocate(cost, 100), [3, 3])
    # the tighter budget goes where it buys most: layer 1 gains 6 from its second expert
    np.testing.assert_array_equal(dp_alloc.allocate(cost, 3), [1, 2])
    np.testing.assert_array_equal(dp_alloc.allocate(cost, 2), [1, 1])
    # the budget is an upper bound: a cost that rises with k keeps one expert
    np.testing.assert_array_equal(dp_alloc.allocate(-cost, 6), [1, 1])
    # one layer, one expert count
    np.testing.assert_array_equal(dp_alloc.allocate([[1.5]], 1), [1])
    np.testing.assert_array_equal(dp_alloc.allocate(np.zeros((3, 2), dtype=np.float32), 5), [1, 1, 1])


@pytest.mark.parametrize("cost,budget,match", [
    (np.ones((3, 4)), 2, r"budget \(2\) must be at least the number of layers \(3\)"),
    (np.ones((3, 4)), 3.5, "budget must be an integer"),
    (np.ones((3, 4)), True, "budget must be an integer"),
    (np.ones((3, 4)), "6", "budget must be an integer"),
    (np.array([[1.0, np.nan], [1.0, 2.0]]), 4, r"cost\[0, 1\] \(layer 0, 2 experts\) is nan"),
    (np.array([[1.0, 2.0], [np.inf, 2.0]]), 4, r"cost\[1, 0\].* is inf"),
    (np.ones(4), 4, r"2-D \(layers, K\), got shape \(4,\)"),
    (np.ones((2, 2, 2)), 4, "2-D"),
    (np.ones((0, 3)), 1, "at least one layer"),
    (np.ones((2, 0)), 2, "at least one layer and one expert count"),
    ([[1.0, 2.0], [3.0]], 2, "2-D array"),
    ([["a", "b"]], 2, "real numbers"),
    (np.ones((2, 2)) * 1j, 2, "complex"),
    (None, 2, "2-D array"),
    (np.full((2, 2), 1e308), 2, "overflow"),
])
def test_allocate_rejects_bad_input_naming_the_problem(cost, budget, match):
    with pytest.raises(ValueError, match=match):
        dp_alloc.allocate(cost, budget)


def test_allocate_accepts_integral_floats_and_numpy_integers():
    cost = np.array([[3.0, 1.0], [3.0, 1.0]])
    np.testing.assert_array_equal(dp_alloc.allocate(cost, 3.0), dp_alloc.allocate(cost, np.int32(3)))
