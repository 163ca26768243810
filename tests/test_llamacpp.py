"""llama.cpp as Sherry's peer: output parsing, a clear message when it is not built, and (where it is
built) a real timing of ggml's TQ1_0 / TQ2_0 kernels beside ours."""

import pytest

from acl26.papers.sherry import llamacpp, peers

SAMPLE = """Testing 1 devices

Backend 1/1: CPU
  Device description: AMD EPYC
  MUL_MAT(type_a=tq2_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1):    1022 runs -   978.45 us/run - 117.44 MFLOP/run - 120.03 GFLOPS
  MUL_MAT(type_a=tq1_0,type_b=f32,m=4096,n=1,k=14336,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1):     511 runs -  2003.10 us/run - 117.44 MFLOP/run -  58.63 GFLOPS
  Backend CPU: OK
"""


def test_parse_perf_reads_type_shape_and_time():
    rows = llamacpp.parse_perf(SAMPLE)
    assert [(r["type_a"], r["m"], r["n"], r["k"], r["runs"], r["us_per_run"]) for r in rows] == [
        ("tq2_0", 4096, 1, 14336, 1022, 978.45), ("tq1_0", 4096, 1, 14336, 511, 2003.10)]


def test_missing_build_says_how_to_build(monkeypatch, tmp_path):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    assert not llamacpp.available()
    with pytest.raises(llamacpp.LlamaCppMissing, match="acl26 build-llamacpp"):
        llamacpp.require()


@pytest.mark.slow
def test_ggml_kernels_timed_beside_ours():
    if not llamacpp.available():
        pytest.skip("llama.cpp is not built here: `acl26 build-llamacpp` (make book builds it)")
    rows = peers.gemv_vs_llamacpp((4096, 14336), rounds=1, calls=3)  # a shape of test-backend-ops' perf suite
    assert {r["format"] for r in rows} == {"sherry", "tl2", "i2", "TQ1_0", "TQ2_0"}
    assert all(r["us"] > 0 and r["threads"] == llamacpp.PERF_THREADS for r in rows)
