"""fastokens beside LoPT (acl26.papers.lopt.peers): exactness, the skip and refusal lines, the bench's row shape.

The tokenizers are tiny and built here; the tests that run fastokens skip where it is not installed
(the ``[peers]`` extra), the skip path itself is tested with the import made to fail.
"""

import sys

import pytest

from acl26.papers.lopt import peers

CORPUS = ["The quick brown fox jumps over the lazy dog.", "Lossless parallel tokenization, naïve café 東京 2026!",
          "    indented\tand tabbed\nlines  with   runs of spaces"] * 20
TEXT = "The lazy fox, naïve and quick — 東京 in 2026.\n\tTabs  and   spaces, the dog jumps!"

needs_fastokens = pytest.mark.skipif(peers.missing() is not None, reason=peers.SKIP)


def _fast(tk):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tk)


@pytest.fixture(scope="module")
def byte_level():
    """A byte-level BPE (GPT-2's pipeline) trained on a few lines: a tokenizer fastokens implements."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return _fast(tk)


@pytest.fixture(scope="module")
def metaspace():
    """A SentencePiece-style BPE with a Metaspace pre-tokenizer (Mistral's): one fastokens refuses, LoPT runs."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Metaspace()
    tk.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>"], show_progress=False))
    return _fast(tk)


def test_missing_fastokens_is_one_skip_line(monkeypatch, byte_level):
    monkeypatch.setitem(sys.modules, "fastokens", None)  # `import fastokens` now raises ImportError
    assert peers.missing() == peers.SKIP == "fastokens not installed: pip install 'acl26-repro[peers]'"
    with pytest.raises(ImportError, match=r"acl26-repro\[peers\]"):
        peers.Peer(byte_level, TEXT, [1, 2], 1)
    row = peers.skipped("every tokenizer", peers.missing())
    assert row == {"goal": "every tokenizer: fastokens beside LoPT (a peer)", "target": "reported",
                   "measured": f"skipped: {peers.SKIP}", "met": None}


@needs_fastokens
def test_fastokens_is_exact_on_a_short_text(byte_level):
    assert peers.exact(byte_level, TEXT)
    assert peers.exact(byte_level, "")
    assert peers.encode(peers.load(byte_level), TEXT) == byte_level.encode(TEXT, add_special_tokens=False)
    with pytest.raises(TypeError, match="text must be a str"):
        peers.encode(peers.load(byte_level), b"bytes")


@needs_fastokens
def test_a_refused_tokenizer_is_its_one_line_reason(byte_level, metaspace):
    assert peers.refusal(byte_level) is None
    reason = peers.refusal(metaspace)
    assert reason.startswith("fastokens cannot load this tokenizer") and "Metaspace" in reason and "\n" not in reason
    with pytest.raises(peers.Unsupported, match="Metaspace"):
        peers.Peer(metaspace, TEXT, [1], 1)  # refused before any process starts
    with pytest.raises(TypeError, match="tokenizer must be"):
        peers.load(object())  # not a refusal: anything without a tokenizers backend raises


@needs_fastokens
def test_the_peer_process_times_and_checks_its_ids(byte_level):
    ref = byte_level.encode(TEXT, add_special_tokens=False)
    with peers.Peer(byte_level, TEXT, ref, 2) as peer:
        seconds, cpu_s, equal = peer.run()
        assert seconds > 0 and cpu_s >= 0 and equal is True
        assert peer.run()[2] is True  # it answers every run
    with peers.Peer(byte_level, TEXT, ref[:-1], 1) as peer:
        assert peer.run()[2] is False  # ids that differ are reported, not hidden
    peer.close()  # closing twice is harmless


def test_peer_parameters_are_validated(byte_level):
    with pytest.raises(ValueError, match="threads"):
        peers.Peer(byte_level, TEXT, [1], 0)
    with pytest.raises(ValueError, match="text"):
        peers.Peer(byte_level, "", [1], 1)
    with pytest.raises(TypeError, match="reference"):
        peers.Peer(byte_level, TEXT, ["1"], 1)
    with pytest.raises(ValueError, match="workers"):
        peers.thread_counts(0)
    assert peers.thread_counts(1) == [1] and peers.thread_counts(4) == [1, 4]


def test_rows_and_goals_have_the_bench_shape():
    times = {"backend": [2.0, 2.2, 1.8], "w1": [2.1, 2.0, 2.2], "w2": [1.2, 1.0, 1.1],
             peers.key(1): [0.5, 0.4, 0.6], peers.key(2): [0.3, 0.25, 0.2]}
    cpu = {peers.key(1): [0.5, 0.4, 0.6], peers.key(2): [0.5, 0.45, 0.4]}
    rows = peers.rows("llama3", 1000, times, cpu, {1: "w1", 2: "w2"}, installed="0.3.5")
    assert [set(r) for r in rows] == [{"benchmark", "chars", "median_s", "min_s", "max_s", "ratio", "vs_lopt",
                                       "threads", "cpu_s"}] * 2
    one, two = rows
    assert one["benchmark"] == "llama3: fastokens 0.3.5, 1 thread (peer)" and "fastokens 0.3.5, " in two["benchmark"]
    assert one["min_s"] <= one["median_s"] <= one["max_s"] and one["median_s"] == 0.5
    assert one["ratio"] == pytest.approx(2.0 / 0.5)  # the backend's median over this row's
    assert one["vs_lopt"] == pytest.approx(4.2)  # LoPT's time over fastokens', per repeat: 4.2, 5.0, 3.67
    assert two["vs_lopt"] == pytest.approx(4.0)  # 1.2/0.3, 1.0/0.25, 1.1/0.2 -> 4, 4, 5.5
    assert one["threads"] == 1 and 1 <= two["threads"] <= 2 and one["cpu_s"] == 0.5
    goals = peers.goals("llama3", times, False, 2, "w2")
    assert all(set(g) == {"goal", "target", "measured", "met"} and g["met"] is None for g in goals)
    assert goals[0]["measured"] == "no" and "identical" not in goals[0]["goal"]  # a peer never fails our goals
    assert goals[1]["measured"].startswith("4.00× (range 4.00–5.50× over 3 repeats)")
    with pytest.raises(KeyError, match="fastokens 2"):
        peers.rows("llama3", 1000, {"backend": [1.0], "w1": [1.0], peers.key(1): [1.0]}, cpu, {2: "w2"})
    with pytest.raises(ValueError, match="expected 3"):
        peers.rows("llama3", 1000, {**times, "w2": [1.0]}, cpu, {2: "w2"})
    with pytest.raises(ValueError, match="non-empty"):
        peers.skipped("llama3", "")


@pytest.mark.assets
@needs_fastokens
def test_what_lopt_adds_on_the_chapter_tokenizers():
    line = peers.coverage(["llama3", "mistral"])
    assert line["measured"].startswith("1 of 2; not mistral (") and "Metaspace" in line["measured"]
    assert line["met"] is None and "LoPT: all of them" in line["target"]
