"""acl26.papers.sherry.speed: the speed formats (:class:`SpeedFormat`) and the steps of the speed table
that need no timing (sizes, memory, rows)."""

import pytest

from acl26.papers.sherry import decoder, speed
from acl26.papers.sherry.speed import SPEED_FORMATS, SpeedFormat


@pytest.mark.parametrize("name", SPEED_FORMATS)
def test_every_speed_format_round_trips(name):
    f = SpeedFormat.parse(name)
    assert f.name == name and SpeedFormat.parse(f.name) == f
    assert f == SpeedFormat.of(f.packing, act8=f.act8, q8_head=f.q8_head)
    assert f.variant == (name != f.packing)


def test_speed_format_fields():
    assert SpeedFormat.parse("sherry-a8-q8head") == SpeedFormat("sherry", "int8", "q8_0")
    assert SpeedFormat.parse("bf16") == SpeedFormat("bf16", "bf16", "bf16")
    assert SpeedFormat.parse("fp32") == SpeedFormat("fp32", "float32", "fp32")
    assert SpeedFormat.parse("i2-q8head") == SpeedFormat("i2", "float32", "q8_0")
    assert SpeedFormat.parse("tl2-a8").label == "TL2 (ours, lookup table), 8-bit activations"
    assert len(set(SPEED_FORMATS)) == len(SPEED_FORMATS) == 15


@pytest.mark.parametrize("bad", ["fp16", "bf16-a8", "fp32-a8", "fp32-q8head", "sherry-q8head-a8", "sherry-a8-a8",
                                 "sherry-", "-a8", "", "Sherry", 3, None])
def test_a_bad_format_name_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="unknown format") as e:
        SpeedFormat.parse(bad)
    assert repr(bad) in str(e.value) and "\n" not in str(e.value)


def test_a_format_that_cannot_run_cannot_be_made():
    for fields in [("fp32", "int8", "fp32"), ("bf16", "int8", "bf16"), ("fp32", "float32", "q8_0"),
                   ("sherry", "float32", "fp32"), ("sherry", "bf16", "bf16"), ("fp16", "float32", "bf16")]:
        with pytest.raises(ValueError, match="no speed format"):
            SpeedFormat(*fields)


def test_parse_formats():
    assert speed.parse_formats(["sherry", "sherry-a8"]) == [SpeedFormat.parse("sherry"), SpeedFormat.parse("sherry-a8")]
    for bad, msg in [("sherry", "non-empty list"), ([], "non-empty list"), (["i2", "i2"], "repeat"),
                     (["i2", "i2-a9"], "formats: unknown format 'i2-a9'")]:
        with pytest.raises(ValueError, match=msg):
            speed.parse_formats(bad)


def test_the_bytes_of_models_built_together():
    s = decoder.SHAPES["tiny"]
    b = {p: decoder.model_bytes(s, p) for p in ("fp32", "bf16", "sherry")}
    fmts = speed.parse_formats(["sherry", "sherry-q8head", "sherry-a8", "sherry-a8-q8head"])
    # one sherry model (with the bf16 table), two 8-bit heads, one copy of the streams for 8-bit activations
    assert speed._bytes_together(s, fmts) == b["sherry"]["total"] + 2 * speed._q8_head_bytes(s) + b["sherry"]["streams"]
    fmts = speed.parse_formats(["fp32", "bf16", "sherry"])  # fp32 keeps its own table; bf16 and sherry share one
    assert speed._bytes_together(s, fmts) == b["fp32"]["total"] + b["bf16"]["total"] + b["sherry"]["total"] - \
        b["sherry"]["embedding"]


def test_a_skipped_row():
    s = decoder.SHAPES["tiny"]
    cfg = speed._Settings(tokens=4, repeats=2, context=8, prefill=True, n_threads=1, max_gb=1.0, interleave=True,
                          seed=0, fused=True, progress=False)
    row = speed._our_row(s, SpeedFormat.parse("sherry-a8-q8head"), "too big", None, True, cfg)
    assert row["format"] == "sherry-a8-q8head" and row["status"] == "skipped" and row["reason"] == "too big"
    assert row["interleaved"] is None and row["engine"] == "fused" and row["decode_runs"] == []
    assert row["head"] == "q8_0" and row["activations"] == "int8"
    assert row["label"] == "Sherry, 8-bit activations, 8-bit head (Q8_0 layout)"
    assert row["weight_mb"] == decoder.model_bytes(s, "sherry")["linear"] / decoder.MB
    assert all(row[k] is None for k in ("decode_tok_s", "decode_ms", "head_ms", "blocks_ms", "prefill_tok_s", "build_s"))


def test_peer_rows_join_the_rotation(monkeypatch):
    """llama.cpp stood in for: its rows come from its files' sizes and one sample per round, in the rotation."""
    from pathlib import Path

    from acl26.papers.sherry import llamacpp

    samples = iter(range(1, 100))
    monkeypatch.setattr(llamacpp, "available", lambda: True)
    monkeypatch.setattr(llamacpp, "peer_skip_reason", lambda s, k, max_gb: "no TQ1_0 here" if k == "ggml-tq1_0" else None)
    monkeypatch.setattr(llamacpp, "gguf_model", lambda s, k, seed: Path(f"/nowhere/{k}.gguf"))
    monkeypatch.setattr(llamacpp, "bench_decode", lambda path, tokens, depth, threads: [float(next(samples))])
    monkeypatch.setattr(llamacpp, "gguf_sizes", lambda path: dict(
        linear=1000, embedding=300, total=1500, head=200, linear_params=4000, types=["tq2_0"], embedding_types=["f16"]))
    rows = speed.speed_table(["tiny"], ["sherry"], tokens=2, repeats=3, context=3, progress=False,
                             peers=["ggml-tq2_0", "ggml-tq1_0", "ggml-tq2_0-q8head"])
    by = {r["format"]: r for r in rows}
    assert [r["format"] for r in rows] == ["sherry", "ggml-tq2_0", "ggml-tq1_0", "ggml-tq2_0-q8head"]
    # the rounds run (sherry, tq2_0, tq2_0-q8head) rotated by one each: the peers' samples in that order
    assert by["ggml-tq2_0"]["decode_runs"] == [1.0, 3.0, 6.0] and by["ggml-tq2_0-q8head"]["decode_runs"] == [2.0, 4.0, 5.0]
    tq2 = by["ggml-tq2_0"]
    assert tq2["peer"] is True and tq2["status"] == "ok" and tq2["decode_tok_s"] == 3.0 and tq2["interleaved"] is True
    assert tq2["bytes_per_token"] == 1000 + 200 + 1500 - 1000 - 300 and tq2["bits_per_weight"] == 2.0
    assert tq2["gguf_types"] == "tq2_0 (embeddings and head: f16)" and tq2["activations"] == "int8 (Q8_K)"
    skipped = by["ggml-tq1_0"]
    assert skipped["status"] == "skipped" and skipped["reason"] == "no TQ1_0 here" and skipped["decode_runs"] == []
    assert skipped["limit_share"] is None and skipped["interleaved"] is None


def test_ik_llama_cpp_peers_join_the_same_rotation_and_name_their_fork(monkeypatch):
    """Issue 41, point 1: both forks' peers stood in for; each row is timed by its own fork, in one rotation."""
    from pathlib import Path

    from acl26.papers.sherry import ikllama, llamacpp

    samples = iter(range(1, 100))
    calls = []
    sizes = dict(linear=1000, embedding=300, total=1500, head=200, linear_params=4000, types=["x"], embedding_types=["f16"])
    for fork, name in ((llamacpp, "ggml"), (ikllama, "ik")):
        monkeypatch.setattr(fork, "available", lambda: True)
        monkeypatch.setattr(fork, "peer_skip_reason", lambda s, k, max_gb: None)
        monkeypatch.setattr(fork, "gguf_model", lambda s, k, seed, name=name: Path(f"/nowhere/{name}/{k}.gguf"))
        monkeypatch.setattr(fork, "bench_decode", lambda path, tokens, depth, threads, name=name:
                            calls.append((name, path.name)) or [float(next(samples))])
        monkeypatch.setattr(fork, "gguf_sizes", lambda path: sizes)
    rows = speed.speed_table(["tiny"], ["sherry"], tokens=2, repeats=2, context=3, progress=False,
                             peers=["ggml-tq2_0", "ik-iq2_bn_r4"])
    by = {r["format"]: r for r in rows}
    assert by["ik-iq2_bn_r4"]["engine"] == "ik_llama.cpp" and by["ggml-tq2_0"]["engine"] == "llama.cpp"
    assert by["ik-iq2_bn_r4"]["activations"] == ikllama.ACTIVATIONS["IQ2_BN_R4"]
    assert ("ik", "ik-iq2_bn_r4.gguf") in calls and ("ggml", "ggml-tq2_0.gguf") in calls
    assert all(("ik" in path) == (fork == "ik") for fork, path in calls), "each peer is timed by its own fork"
    assert len(by["ik-iq2_bn_r4"]["decode_runs"]) == len(by["ggml-tq2_0"]["decode_runs"]) == 2
    with pytest.raises(ValueError, match="unknown peer 'ik-nope'.*ik-iq2_bn_r4"):
        speed.speed_table(["tiny"], ["sherry"], peers=["ik-nope"], progress=False)
    monkeypatch.setattr(ikllama, "available", lambda: False)
    rows = speed.speed_table(["tiny"], ["sherry"], tokens=2, repeats=1, context=3, progress=False, peers=["ik-iq2_bn"])
    assert rows[-1]["status"] == "skipped" and "ik_llama.cpp is not built here" in rows[-1]["reason"]


def test_decode_summary_marks_the_fastest_peer_of_each_head_precision():
    import numpy as np

    from acl26.papers.sherry import tables

    def row(fmt, runs, head, engine=None):
        return dict(shape="s", format=fmt, label=fmt, status="ok", decode_runs=runs, decode_tok_s=float(np.median(runs)),
                    head=head, peer=engine is not None, engine=engine, total_mb=1.0, bits_per_weight=1.0)

    rows = [row("sherry", [10, 20], "bf16"), row("sherry-q8head", [30, 40], "q8_0"),
            row("ggml-tq2_0", [5, 10], "f16", "llama.cpp"), row("ik-iq2_bn_r4", [8, 12], "f16", "ik_llama.cpp"),
            row("ggml-tq2_0-q8head", [25, 30], "q8_0", "llama.cpp"), row("ik-iq2_bn_r4-q8head", [15, 20], "q8_0", "ik_llama.cpp")]
    out = {r["format"]: r for r in tables.decode_summary(rows)}
    assert out["ik-iq2_bn_r4"]["source"] == "ik_llama.cpp" and out["ggml-tq2_0"]["source"] == "llama.cpp"
    assert [r["format"] for r in tables.fastest_peers(list(out.values()))] == ["ik-iq2_bn_r4", "ggml-tq2_0-q8head"]
    assert out["sherry"]["fastest_peer"] is None and out["ggml-tq2_0"]["fastest_peer"] is False
    assert out["ik-iq2_bn_r4"]["sherry / this"] == pytest.approx((10 / 8 + 20 / 12) / 2) and out["ggml-tq2_0-q8head"]["vs"] == "sherry-q8head"
