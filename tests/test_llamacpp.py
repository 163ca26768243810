"""llama.cpp as Sherry's peer: output parsing, a clear message when it is not built, and (where it is
built) a real timing of ggml's TQ1_0 / TQ2_0 kernels beside ours."""

import pytest

from acl26.papers.sherry import llamacpp, peers, tables

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
    with pytest.raises(llamacpp.LlamaCppMissing, match="acl26 prepare sherry"):
        llamacpp.require()


@pytest.mark.slow
def test_ggml_kernels_timed_beside_ours():
    if not llamacpp.available():
        pytest.skip("llama.cpp is not built here: `acl26 prepare sherry` (make book builds it)")
    rows = peers.gemv_vs_llamacpp((4096, 14336), rounds=1, calls=3)  # a shape of test-backend-ops' perf suite
    assert {r["format"] for r in rows} == {"sherry", "tl2", "i2", "TQ1_0", "TQ2_0"}
    assert all(r["us"] > 0 and r["threads"] == llamacpp.PERF_THREADS for r in rows)


TEST_FILE_SAMPLE = """  MUL_MAT(name=tq1_0,type=f32,ne=[4096,1,1,1],op_params=[],sources=tq1_0[4096,4096,1,1],f32[4096,1,1,1]):  2405 runs -  1206.20 us/run -     3488 kB/run -   2.76 GB/s
  MUL_MAT(name=tq2_0,type=f32,ne=[4096,1,1,1],op_params=[],sources=tq2_0[14336,4096,1,1],f32[14336,1,1,1]):   1972 runs -   532.17 us/run -     4256 kB/run -   7.63 GB/s
"""


def test_parse_perf_reads_test_file_cases():
    rows = llamacpp.parse_perf(TEST_FILE_SAMPLE)
    assert [(r["type_a"], r["m"], r["n"], r["k"], r["us_per_run"]) for r in rows] == [
        ("tq1_0", 4096, 1, 4096, 1206.20), ("tq2_0", 4096, 1, 14336, 532.17)]


@pytest.mark.assets
def test_mul_mat_case_is_a_contiguous_generic_op():
    from acl26 import assets

    if not (assets.path(llamacpp.ASSET) / llamacpp.SOURCE).is_dir():
        pytest.skip("the llamacpp-src asset is not fetched (acl26 fetch)")
    f = llamacpp.mul_mat_case("tq2_0", 4096, 1024).split()
    # op, out type f32, out ne [m, n, 1, 1], no op params, two sources, name
    assert f[1:7] == ["0", "4096", "1", "1", "1", "0"] and f[7] == "2" and f[-1] == "tq2_0"
    src0 = [int(x) for x in f[8:17]]
    assert src0[0] == 35 and src0[1:5] == [1024, 4096, 1, 1]
    assert src0[5:9] == [66, 1024 // 256 * 66, 1024 // 256 * 66 * 4096, 1024 // 256 * 66 * 4096]
    with pytest.raises(ValueError, match="multiple of"):
        llamacpp.mul_mat_case("tq1_0", 64, 1000)


def test_tq_peers_skip_shapes_whose_rows_are_not_whole_blocks():
    assert llamacpp.peer_skip_reason("bitnet-3b", "ggml-tq2_0").startswith("TQ types pack rows")
    assert llamacpp.peer_skip_reason("bitnet-3b", "ggml-f16") is None
    assert llamacpp.peer_skip_reason("bitnet-0.7b", "ggml-tq1_0-qhead") is None
    assert "max_gb" in llamacpp.peer_skip_reason("bitnet-3b", "ggml-f16", max_gb=1.0)
    with pytest.raises(ValueError, match="unknown llama.cpp peer"):
        llamacpp.peer_skip_reason("tiny", "ggml-q4_0")


def test_written_gguf_has_the_shape_and_ternary_weights(tmp_path):
    import gguf
    import numpy as np

    from acl26.papers.sherry.decoder import Shape

    s = Shape("t", 256, 512, 2, 4, 2, 300, tied=False)
    path = llamacpp.write_gguf(s, tmp_path / "m.gguf")
    r = gguf.GGUFReader(str(path))
    t = {x.name: x for x in r.tensors}
    assert len(t) == 3 + 9 * s.layers
    assert list(t["blk.1.ffn_down.weight"].shape) == [512, 256]  # ggml order: inputs first
    assert list(t["output.weight"].shape) == [256, 300]
    w = np.asarray(t["blk.0.attn_q.weight"].data, dtype=np.float32)
    assert set(np.unique(np.round(w * np.sqrt(256), 3))) <= {-1.0, 0.0, 1.0}
    assert int(r.fields["llama.vocab_size"].parts[-1][0]) == 300
    assert len(r.fields["tokenizer.ggml.tokens"].data) == 300
    assert not list(tmp_path.glob(".*tmp")), "the write is atomic"


def test_speed_table_reports_llamacpp_peers_as_skipped_when_not_built(monkeypatch, tmp_path):
    from acl26.papers.sherry import speed

    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    rows = speed.speed_table(["tiny"], ["sherry"], tokens=1, repeats=1, context=2, progress=False,
                             peers=["ggml-tq2_0"])
    peer = next(r for r in rows if r["format"] == "ggml-tq2_0")
    assert peer["status"] == "skipped" and "acl26 prepare sherry" in peer["reason"] and peer["decode_tok_s"] is None
    with pytest.raises(ValueError, match="peers"):
        speed.speed_table(["tiny"], ["sherry"], peers=["q4_0"], progress=False)


@pytest.mark.slow
def test_llama_bench_decodes_a_written_ternary_model(monkeypatch, tmp_path):
    if not llamacpp.available():
        pytest.skip("llama.cpp is not built here: `acl26 prepare sherry` (make book builds it)")
    from acl26.papers.sherry.decoder import Shape

    s = Shape("t", 256, 512, 2, 4, 2, 1000)
    monkeypatch.setattr(llamacpp, "gguf_dir", lambda shape, seed=0: tmp_path / "gguf")
    for key in ("ggml-tq2_0", "ggml-tq2_0-q8head", "ggml-tq1_0-qhead"):
        path = llamacpp.gguf_model(s, key)
        z = llamacpp.gguf_sizes(path)
        assert z["types"] == [llamacpp.PEERS[key][1]]
        head = llamacpp.PEERS[key][2]
        if head is None:  # llama-quantize's own choice: not f16
            assert z["embedding_types"] != ["F16"]
        else:
            assert z["embedding_types"] == [head.upper()]
        assert all(v > 0 for v in llamacpp.bench_decode(path, tokens=4, depth=8, threads=1, repetitions=2))


@pytest.mark.slow
def test_ggml_gemv_at_any_shape_through_a_test_file():
    if not llamacpp.available():
        pytest.skip("llama.cpp is not built here: `acl26 prepare sherry` (make book builds it)")
    rows = llamacpp.mul_mat_perf(("tq1_0", "tq2_0"), m=512, k=1024)
    assert sorted(r["type_a"] for r in rows) == ["tq1_0", "tq2_0"] and all(r["us_per_run"] > 0 for r in rows)


def test_decode_summary_gives_ranges_and_per_round_ratios():
    rows = [dict(shape="s", format="sherry", label="Sherry", status="ok", decode_tok_s=20.0, decode_runs=[20.0, 18.0, 22.0],
                 total_mb=100.0, bits_per_weight=1.3),
            dict(shape="s", format="ggml-tq2_0", label="TQ2_0", status="ok", decode_tok_s=10.0, decode_runs=[10.0, 12.0, 8.0],
                 peer=True, gguf_types="TQ2_0 (embeddings and head: F16)", total_mb=120.0, bits_per_weight=2.06),
            dict(shape="s", format="ggml-tq1_0", label="TQ1_0", status="skipped", decode_tok_s=None, decode_runs=[])]
    out = {r["format"]: r for r in tables.decode_summary(rows)}
    assert set(out) == {"sherry", "ggml-tq2_0"}  # skipped rows are left out
    tq = out["ggml-tq2_0"]
    assert tq["source"] == "llama.cpp" and tq["head"] == "F16" and out["sherry"]["source"] == "ours"
    assert (tq["min_tok_s"], tq["decode_tok_s"], tq["max_tok_s"]) == (8.0, 10.0, 12.0)
    # per-round ratios 2.0, 1.5, 2.75: their median and range, not the ratio of medians
    assert tq["sherry / this"] == 2.0 and tq["min ratio"] == 1.5 and tq["max ratio"] == 2.75


def test_gemv_summary_groups_by_shape():
    rows = [dict(format=f, source="ours" if f == "sherry" else "llama.cpp", round=r, us=us * (1 + r / 10), threads=1,
                 shape=shape) for shape, scale in (("4096x4096", 1.0), ("4096x14336", 3.5))
            for r in range(3) for f, us in (("sherry", 800.0 * scale), ("TQ2_0", 1000.0 * scale))]
    out = {(r["shape"], r["format"]): r for r in tables.gemv_summary(rows)}
    assert set(out) == {(s, f) for s in ("4096x4096", "4096x14336") for f in ("sherry", "TQ2_0")}
    assert out[("4096x4096", "TQ2_0")]["vs_sherry"] == pytest.approx(1.25)
    assert out[("4096x14336", "sherry")]["min_us"] == pytest.approx(2800.0)


@pytest.mark.slow
def test_model_gemv_sums_one_decode_steps_products():
    if not llamacpp.available():
        pytest.skip("llama.cpp is not built here: `acl26 prepare sherry` (make book builds it)")
    from acl26.papers.sherry import peers
    from acl26.papers.sherry.decoder import Shape

    s = Shape("t", 256, 512, 2, 4, 2, 1000)
    rows = peers.model_gemv(s, rounds=1, calls=2)
    assert {r["format"] for r in rows} == {"sherry", "tl2", "i2", "TQ1_0", "TQ2_0"}
    assert all(r["products"] == 2 * 7 and r["us_per_token"] > 0 for r in rows)
    assert rows[0]["shapes"] == "2 x 256x256 + 2 x 128x256 + 2 x 512x256 + 1 x 256x512, x 2 blocks"
    summary = {r["format"]: r for r in tables.model_gemv_summary(rows)}
    assert summary["sherry"]["vs_sherry"] == 1.0
    with pytest.raises(ValueError, match="multiple of 256"):
        peers.model_gemv(Shape("u", 128, 512, 1, 4, 2, 100), rounds=1)
