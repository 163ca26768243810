"""acl26.stats: the two-level bootstrap (seeds, then units within each) and its place in the one noisy rule."""

import numpy as np
import pytest

from acl26 import stats


def test_two_level_bootstrap_covers_seeds_and_units():
    rng = np.random.default_rng(0)
    per_seed = [(rng.normal(1.0 + 0.1 * s, 1, 60), rng.normal(0, 1, 60)) for s in range(3)]
    iv = stats.two_level_bootstrap(per_seed, n_resamples=999)
    assert iv.lo < iv.estimate < iv.hi and iv.n == 3 and "two-level" in iv.method
    assert iv.estimate == pytest.approx(np.mean([np.mean(a - b) for a, b in per_seed]))
    assert iv.lo > 0.5  # a clear effect is decided
    # seeds that disagree widen it past zero even when each seed's units are tight
    flip = [(np.full(60, 1.0) + rng.normal(0, 0.01, 60), np.zeros(60)), (np.full(60, -1.0), np.zeros(60))]
    iv = stats.two_level_bootstrap(flip, n_resamples=999)
    assert iv.lo < 0 < iv.hi
    v, iv2, how = stats.noisy([0.1, 0.2], nested=per_seed, n_resamples=999)
    assert "two-level" in how and iv2.n == 3
    with pytest.raises(ValueError, match="at least 2 seeds"):
        stats.two_level_bootstrap(per_seed[:1])
    with pytest.raises(ValueError, match=r"per_seed\[1\]"):
        stats.two_level_bootstrap([per_seed[0], (np.ones(3), np.ones(4))])
    with pytest.raises(ValueError, match="mean difference only"):
        stats.noisy(nested=per_seed, statistic="ppl_ratio")
