"""Test configuration: offline, deterministic, a private numba cache, and the hypothesis profiles."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("default", max_examples=400, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smoke_book(tmp_path_factory):
    """Every registered notebook executed once with its smoke profile, in a private book folder."""
    from acl26 import registry, runner

    out = tmp_path_factory.mktemp("executed")
    runs = {pid: runner.run(pid, "smoke", out_dir=out, progress=False) for pid in registry.CHAPTERS}
    return out, runs
