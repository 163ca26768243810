"""ik_llama.cpp as Sherry's second peer: its asset and build description, a clear refusal where it is not
built or cannot be, its bench output and GGUF files read right, and (where it is built) its BitNet types
quantized from our random ternary GGUF and decoded by its own llama-bench."""

import hashlib
import json

import pytest

from acl26 import assets, machine
from acl26.papers.sherry import bench, forks, ikllama, llamacpp


def test_asset_pins_the_sdist_and_vendors_only_the_sources():
    a = assets.load_manifest()[ikllama.ASSET]
    assert (a.registry, a.package, a.version, a.kind) == ("pypi", "ik-llama-cpp-python", "0.1.5", "sdist")
    assert a.sha256 == "33c67eb99e4dcab5e611050433243815709b8b3067753f9ce18375013cf002ad"
    assert a.license == "MIT" and a.file == "ik_llama_cpp_python-0.1.5.tar.gz"
    assert all(p.startswith(ikllama.SOURCE + "/") for p in a.paths)
    # the build's inputs, and not the 47 MB of vocabularies and test models
    assert {p.removeprefix(ikllama.SOURCE + "/") for p in a.paths} >= {"CMakeLists.txt", "ggml/*", "src/*", "examples/*"}
    assert not any("models" in p for p in a.paths)


def test_forks_share_one_build_description(monkeypatch, tmp_path):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    for mod, fork in ((llamacpp, llamacpp.LLAMACPP), (ikllama, ikllama.IKLLAMA)):
        assert (fork.asset, fork.source, fork.targets, fork.flags) == (mod.ASSET, mod.SOURCE, mod.TARGETS, mod.CMAKE_FLAGS)
        assert "-DGGML_NATIVE=ON" in fork.flags and issubclass(fork.error, forks.PeerMissing)
        assert mod.build_dir() == fork.build_dir() and mod.build_dir().parent == tmp_path / fork.cache
    # llama.cpp's cache key is what it was before the build was shared (an existing build stays valid)
    sha = assets.load_manifest()[llamacpp.ASSET].sha256
    key = hashlib.sha256("\0".join([sha, *llamacpp.CMAKE_FLAGS, machine.cpu_model()]).encode()).hexdigest()[:12]
    assert llamacpp.build_dir().name == key
    assert ikllama.build_dir().parent != llamacpp.build_dir().parent
    assert ikllama.TARGETS == ("llama-quantize", "llama-bench")
    # the sdist lacks the script that writes common/build-info.cpp: the build writes it into its own copy
    assert llamacpp.LLAMACPP.overlay == () and [r for r, _ in ikllama.IKLLAMA.overlay] == ["common/cmake/build-info-gen-cpp.cmake"]
    from dataclasses import replace

    assert replace(ikllama.IKLLAMA, overlay=()).build_dir() != ikllama.build_dir()
    assert issubclass(ikllama.IkLlamaMissing, llamacpp.LlamaCppMissing)


def test_missing_build_says_how_to_build(monkeypatch, tmp_path):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    assert not ikllama.available()
    with pytest.raises(ikllama.IkLlamaMissing, match="ik_llama.cpp is not built here.*acl26 prepare sherry"):
        ikllama.require()
    with pytest.raises(ikllama.IkLlamaMissing, match="acl26 prepare sherry"):
        ikllama.bench_decode(tmp_path / "m.gguf", tokens=2, depth=0, threads=1)


def test_build_refuses_in_one_line_without_build_tools(monkeypatch, tmp_path):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    monkeypatch.setattr(forks.shutil, "which", lambda name: None)
    monkeypatch.setattr(forks.subprocess, "run", lambda *a, **k: pytest.fail("built without the tools"))
    assert forks.tools_missing() == ["cmake", "a C++ compiler", "ninja or make"]
    with pytest.raises(ikllama.IkLlamaMissing, match=r"^cannot build ik_llama.cpp: cmake, a C\+\+ compiler, ninja or make not found$"):
        ikllama.build()
    with pytest.raises(llamacpp.LlamaCppMissing, match="^cannot build llama.cpp: cmake"):
        llamacpp.build()
    # the chapter's hook tries both and says, in one line, that neither could be built
    with pytest.raises(forks.PeerMissing) as exc:
        ikllama.prepare_peers()
    assert "llama.cpp: cmake" in str(exc.value) and "ik_llama.cpp: cmake" in str(exc.value)
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "ikllama").exists() or not any((tmp_path / "ikllama").iterdir())


def test_prepare_hook_builds_both_forks(monkeypatch):
    from acl26.papers import sherry

    assert sherry.CHAPTER.prepare is ikllama.prepare_peers
    calls = []
    monkeypatch.setattr(llamacpp, "prepare", lambda force=False: calls.append(("llama.cpp", force)) or None)
    monkeypatch.setattr(ikllama, "prepare", lambda force=False: calls.append(("ik", force)) or "ik built")
    # prepare_peers looks both hooks up when it runs
    assert ikllama.prepare_peers(True) == "ik built" and calls == [("llama.cpp", True), ("ik", True)]


BENCH_JSON = """build: 0 (unknown) with cc for x86_64-linux-gnu
[
  {
    "build_commit": "unknown",
    "model_type": "llama ?B IQ2_BN - 2.00 bpw Bitnet",
    "n_prompt": 64,
    "n_gen": 16,
    "test_time": "2026-12-06T21:40:00Z",
    "avg_ns": 280000000,
    "avg_ts": 57.1,
    "samples_ns": [ 281000000, 279000000 ],
    "samples_ts": [ 56.9, 57.3 ]
  }
]
"""


def test_bench_json_gives_the_generation_after_the_prompt():
    recs = ikllama.parse_bench(BENCH_JSON)
    assert ikllama.decode_samples(recs, tokens=16, depth=64) == [56.9, 57.3]
    with pytest.raises(ikllama.IkLlamaMissing, match="no decode test of 16 tokens after 0"):
        ikllama.decode_samples(recs, tokens=16, depth=0)
    assert json.loads(BENCH_JSON[BENCH_JSON.index("["):])[0]["n_gen"] == 16


def test_peers_and_shapes():
    from acl26.papers.sherry.decoder import Shape

    assert {q for _, q, _ in ikllama.PEERS.values()} == {"IQ2_BN", "IQ2_BN_R4", "IQ1_BN"}
    assert {h for _, _, h in ikllama.PEERS.values()} == set(llamacpp.HEAD_TYPES)
    assert set(bench.IK_PEERS) <= set(ikllama.PEERS)
    for shape in ("bitnet-0.7b", "llama-3.2-1b", Shape("t", 512, 576, 2, 4, 2, 1000)):
        assert all(ikllama.peer_skip_reason(shape, k) is None for k in ikllama.PEERS)
    assert "blocks of 64" in ikllama.peer_skip_reason(Shape("odd", 512, 720, 2, 4, 2, 1000), "ik-iq2_bn")
    # its 8-bit activation rows are at least 512 long (ik_llama.cpp aborts on shorter ones)
    assert "at least 512" in ikllama.peer_skip_reason("tiny", "ik-iq2_bn") and "hidden 256 is" in ikllama.peer_skip_reason("tiny", "ik-iq1_bn")
    assert "max_gb" in ikllama.peer_skip_reason("llama-3.2-1b", "ik-iq1_bn", max_gb=0.5)
    with pytest.raises(ValueError, match="unknown ik_llama.cpp peer"):
        ikllama.check_peer("ik-tq2_0")
    with pytest.raises(ValueError, match="head"):
        ikllama.quantize(None, None, "IQ2_BN", head="bf16")


def test_decode_rows_are_skipped_saying_why_where_not_built(monkeypatch, tmp_path):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    rows = ikllama.decode_rows("bitnet-0.7b", ["ik-iq2_bn", "ik-iq1_bn-q8head"], tokens=2, context=4, repeats=1, threads=1,
                               llamacpp_peers=["ggml-tq2_0"])
    assert [r["format"] for r in rows] == ["ik-iq2_bn", "ik-iq1_bn-q8head", "ggml-tq2_0"]
    assert all(r["status"] == "skipped" and "acl26 prepare sherry" in r["reason"] and r["decode_tok_s"] is None
               for r in rows)
    assert [r["engine"] for r in rows] == ["ik_llama.cpp", "ik_llama.cpp", "llama.cpp"]
    assert rows[1]["head"] == "q8_0" and rows[0]["activations"] == "int8 (Q8_K64)"


def test_fastest_peer_is_like_for_like():
    rows = [dict(shape="s", format="ggml-tq2_0", peer=True, head="f16", status="ok", decode_tok_s=50.0),
            dict(shape="s", format="ik-iq2_bn", peer=True, head="f16", status="ok", decode_tok_s=60.0),
            dict(shape="s", format="ik-iq2_bn-q8head", peer=True, head="q8_0", status="ok", decode_tok_s=70.0),
            dict(shape="s", format="ik-iq1_bn", peer=True, head="f16", status="skipped", decode_tok_s=None),
            dict(shape="t", format="ik-iq2_bn", peer=True, head="f16", status="ok", decode_tok_s=90.0),
            dict(shape="s", format="sherry", head="bf16", status="ok", decode_tok_s=100.0)]
    assert bench.fastest_peer(rows, "s", "f16")["format"] == "ik-iq2_bn"
    assert bench.fastest_peer(rows, "s", "q8_0")["format"] == "ik-iq2_bn-q8head"
    assert bench.fastest_peer(rows, "u", "f16") is None



def test_peer_goals_judge_sherry_on_per_round_ratios_against_the_fastest_peer():
    """The fastest peer of each head precision is named; Sherry's goals read its slowest same-round ratio."""
    def row(fmt, runs, head, engine=None):
        return dict(shape="s", format=fmt, label=fmt, peer=engine is not None, engine=engine, head=head, status="ok",
                    decode_runs=runs, decode_tok_s=sorted(runs)[len(runs) // 2])

    rows = [row("ggml-tq2_0", [40, 40, 40], "f16", "llama.cpp"), row("ik-iq2_bn_r4", [50, 50, 50], "f16", "ik_llama.cpp"),
            row("ik-iq2_bn_r4-q8head", [60, 60, 60], "q8_0", "ik_llama.cpp"),
            row("sherry-a8", [61, 70, 66], "bf16"), row("sherry", [55, 45, 52], "bf16"),
            row("sherry-a8-q8head", [80, 80, 80], "q8_0")]
    t = {(r["shape"], r["format"]): r for r in rows}
    goals = {g["goal"]: g for g in bench._peer_goals("s", t, quick=False, cpu="CPU")}
    named = [g for k, g in goals.items() if k.startswith("the fastest peer row at s, f16")][0]
    assert "ik-iq2_bn_r4 (ik_llama.cpp), 50.0 tok/s" in named["measured"]
    a8 = [g for k, g in goals.items() if "8-bit activations" in k and "bf16 head" in k][0]
    assert a8["met"] is True and "[1.22, 1.40]" in a8["measured"]  # slowest round 61 / 50
    f32 = [g for k, g in goals.items() if "8-bit activations" not in k and "bf16 head" in k][0]
    assert f32["met"] is False  # one round at 45 / 50
    q8 = {("8-bit activations" in k): g for k, g in goals.items() if k.endswith("8-bit head against q8_0")}
    assert q8[True]["met"] is True  # 80 / 60 in every round
    assert q8[False]["met"] is None and "sherry-q8head was not timed" in q8[False]["measured"]
    missing = bench._peer_goals("u", t, quick=False, cpu="")
    assert all(g["met"] is None for g in missing) and "none ran" in missing[0]["measured"]


def test_gguf_sizes_read_without_gguf_py(tmp_path):
    """ik_llama.cpp's types are past gguf-py's numbering, so its files are read by our own header parser; on a
    file gguf-py can read, both agree."""
    path = llamacpp.write_gguf("tiny", tmp_path / "tiny.gguf")
    ours, theirs = ikllama.gguf_sizes(path), llamacpp.gguf_sizes(path)
    assert ours == theirs


@pytest.mark.assets
def test_type_numbers_match_the_vendored_header():
    import re

    if not assets.is_cached(assets.load_manifest()[ikllama.ASSET]):
        pytest.skip("the ikllama-src asset is not fetched (acl26 fetch)")
    header = (assets.path(ikllama.ASSET) / ikllama.SOURCE / "ggml" / "include" / "ggml.h").read_text()
    for name, number in ikllama._IK_TYPES.items():
        assert re.search(rf"GGML_TYPE_{name}\s*=\s*{number},", header), name


@pytest.mark.slow
def test_bitnet_types_quantized_from_our_gguf_and_decoded(monkeypatch, tmp_path):
    if not ikllama.available():
        pytest.skip("ik_llama.cpp is not built here: `acl26 prepare sherry` (make book builds it)")
    from acl26.papers.sherry.decoder import Shape

    s = Shape("t", 512, 1024, 2, 4, 2, 1000)
    monkeypatch.setattr(ikllama, "gguf_dir", lambda shape, seed=0: tmp_path / "ik")
    monkeypatch.setattr(llamacpp, "gguf_dir", lambda shape, seed=0: tmp_path / "ggml")
    for key in ("ik-iq2_bn", "ik-iq2_bn_r4-q8head", "ik-iq1_bn"):
        path = ikllama.gguf_model(s, key)
        z = ikllama.gguf_sizes(path)
        assert z["types"] == [ikllama.PEERS[key][1]] and z["embedding_types"] == [ikllama.PEERS[key][2].upper()]
        assert all(v > 0 for v in ikllama.bench_decode(path, tokens=4, depth=8, threads=1, repetitions=2))


def test_limit_goal_reads_the_whole_tokens_bytes_against_the_bandwidth():
    r = dict(shape="s", format="sherry-a8-q8head", bytes_per_token=2**20 * 100, decode_tok_s=100.0,
             bandwidth_gb_s=20.0, limit_share=2**20 * 100 * 100.0 / 20e9)
    g = bench._limit_goal("s", {("s", "sherry-a8-q8head"): r}, quick=False, cpu="")
    assert g["met"] is False and "(52%)" in g["measured"] and "10.5 GB/s of 20.0 GB/s" in g["measured"]
    assert bench._limit_goal("s", {("s", "sherry-a8-q8head"): dict(r, limit_share=0.8)}, quick=False, cpu="")["met"] is True
    assert bench._limit_goal("s", {}, quick=False, cpu="")["met"] is None


def test_step_kernel_goal_compares_sherrys_8bit_products_with_tq2_0_per_token_on_the_same_threads(monkeypatch):
    """Issue 41, point 2 (per kernel, like for like): Sherry's 8-bit-activation products of one 0.7B decode step,
    profiled on test-backend-ops's thread count, against TQ2_0's over the same step, met only when Sherry's slowest
    round beats TQ2_0's fastest; either way."""
    from acl26.papers.sherry import peers, speed

    def model_gemv(shape, rounds):
        return [dict(format=f, source="llama.cpp", round=r, us_per_token=us + 100 * r, products=168,
                     threads=llamacpp.PERF_THREADS, shape=shape, shapes="...")
                for r in range(rounds) for f, us in (("TQ2_0", 6000.0), ("TQ1_0", 9000.0))]

    ours = dict(ms=4.5, ms_min=4.2, ms_max=4.9)
    calls = []

    def decode_profile(shape, formats, *, n_threads, repeats, **kw):
        calls.append((shape, tuple(formats), n_threads, repeats))
        return [dict(shape=shape, format="sherry-a8", engine="fused", part="total", ms=9.0, ms_min=8.0, ms_max=10.0,
                     regions=121),
                dict(shape=shape, format="sherry-a8", engine="fused", part="projections", regions=121, **ours)]

    monkeypatch.setattr(peers, "model_gemv", model_gemv)
    monkeypatch.setattr(speed, "decode_profile", decode_profile)
    monkeypatch.setattr(llamacpp, "available", lambda: True)
    rows, goal = bench.step_kernel_benchmark(rounds=3)
    assert calls == [(bench.STEP_SHAPE, ("sherry-a8",), llamacpp.PERF_THREADS, 3)]  # the peer's threads
    assert goal["met"] is True and "TQ2_0 6.10 ms [6.00, 6.20]" in goal["measured"] and len(rows) == 3
    assert "Sherry 4.50 ms [4.20, 4.90]" in goal["measured"]
    ours.update(ms=6.1, ms_min=5.9, ms_max=6.3)  # Sherry's slowest round above TQ2_0's fastest
    assert bench.step_kernel_benchmark(rounds=3)[1]["met"] is False
    assert bench.step_kernel_benchmark(rounds=3, quick=True)[1]["met"] is None
    monkeypatch.setattr(llamacpp, "available", lambda: False)
    _, goal = bench.step_kernel_benchmark(rounds=3)
    assert goal["met"] is None and "not built" in goal["measured"]
