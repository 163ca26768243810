"""The small shared helpers: acl26.timing, acl26.checks, acl26.machine, acl26.notebook."""

import warnings

import pytest

from acl26 import checks, machine, notebook, timing


def test_rotations_put_every_candidate_first_in_turn():
    order = timing.rotations(["a", "b", "c"], 4)
    assert order == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert [o[0] for o in order[:3]] == ["a", "b", "c"]


def test_interleaved_times_every_call_in_rotated_order():
    calls = []
    cands = {k: (lambda k=k: calls.append(k)) for k in "xy"}
    times = timing.interleaved(cands, rounds=2, calls=3, warm_s=0)
    assert {k: len(v) for k, v in times.items()} == {"x": 3 * 2, "y": 3 * 2}
    firsts = [calls[0], calls[len(calls) // 2]]
    assert firsts == ["x", "y"], "the second round must start with the other candidate"
    assert timing.median([3.0, 1.0, 2.0]) == 2.0 and timing.median([]) != timing.median([])
    assert timing.spread([1.0, 3.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}


def test_threads_sets_and_restores_torch_and_numba():
    import numba
    import torch

    before = (numba.get_num_threads(), torch.get_num_threads())
    with timing.threads(1):
        assert numba.get_num_threads() == 1 and torch.get_num_threads() == 1
    assert (numba.get_num_threads(), torch.get_num_threads()) == before
    with pytest.raises(ValueError, match="n must be an integer"):
        with timing.threads(0):
            pass


def test_checks_name_the_argument_and_bound():
    assert checks.integer("k", 3, 1, 5) == 3
    for bad in (0, 6, 2.0, True, "3"):
        with pytest.raises(ValueError, match=r"^k must be an integer >= 1 and <= 5"):
            checks.integer("k", bad, 1, 5)
    assert checks.number("p", 1, 0, 1) == 1.0
    for bad in (float("nan"), float("inf"), 0.0, False):
        with pytest.raises(ValueError, match="p must be a"):
            checks.number("p", bad, 0, 1, lo_open=True)


def test_machine_describes_itself():
    d = machine.describe()
    assert d["cpus"] == machine.cpu_count() >= 1 and d["python"]
    assert d["simd"] == machine.simd(machine.cpu_flags())


def test_simd_names_the_widest_level_and_the_extensions():
    assert machine.simd({"sse4_2", "avx2", "avx512f", "avx512bw", "avx512_vnni", "avx512vbmi"}) == \
        "AVX-512 (BW, VNNI, VBMI)"
    assert machine.simd({"sse4_2", "avx2", "avx_vnni"}) == "AVX2 (AVX-VNNI)"
    assert machine.simd({"sse4_2"}) == "SSE4.2"
    assert machine.simd({"sse2"}) == "below SSE4.2"
    assert machine.simd(set()) == "unknown"


def test_notebook_setup_validates_and_silences_only_known_noise(monkeypatch):
    from acl26 import params

    with pytest.raises(params.ParamError, match="'trials'"):
        notebook.setup("lopt", {"profile": "smoke", "trials": -1})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        P, ledger = notebook.setup("lopt", {"profile": "smoke"})
        warnings.warn("a real problem", UserWarning)
    assert P["profile"] == "smoke" and ledger.paper == "lopt"
    assert any("a real problem" in str(w.message) for w in seen), "an unknown warning must still show"
    assert all(len(n) == 4 and n[3] for n in notebook.NOISE), "every silenced warning says why"
