"""LoPT's encode must equal the tokenizer's own sequential encode for every input (issue #4).

Property tests (hypothesis) hunt for a mismatch with tiny chunks and overlaps over an alphabet of
boundary-hostile pieces, on every real tokenizer family the book uses.
"""

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acl26 import texts, tokenization
from acl26.papers import lopt

pytestmark = pytest.mark.assets

TOKENIZERS = ["llama3", "qwen3", "llama2", "mistral", "gpt2", "smollm2", "phi3", "deepseek-llm", "starcoder"]

PIECES = list(texts.HOSTILE_PIECES)

hostile_text = st.lists(st.sampled_from(PIECES), min_size=0, max_size=120).map("".join)


@st.composite
def settings(draw):
    chunk = draw(st.integers(3, 64))
    overlap = draw(st.integers(2, chunk - 1))
    return chunk, overlap, draw(st.integers(0, 3)), draw(st.sampled_from([1, 2]))


@pytest.fixture(scope="module", params=TOKENIZERS)
def tok(request):
    return tokenization.load(request.param)


@given(text=hostile_text, setting=settings())
def test_identical_to_sequential_on_hostile_text(tok, text, setting):
    chunk, overlap, retries, workers = setting
    ids = lopt.encode(tok, text, chunk_chars=chunk, overlap_chars=overlap, max_retries=retries, workers=workers)
    assert ids == tok.encode(text, add_special_tokens=False)


@given(text=hostile_text, setting=settings())
def test_identical_with_special_tokens_and_offsets(tok, text, setting):
    chunk, overlap, retries, workers = setting
    ids, offsets = lopt.encode(tok, text, chunk_chars=chunk, overlap_chars=overlap, max_retries=retries,
                               workers=workers, add_special_tokens=True, return_offsets=True)
    ref = tok(text, add_special_tokens=True, return_offsets_mapping=True)
    assert ids == ref["input_ids"]
    assert np.array_equal(offsets, np.asarray(ref["offset_mapping"], dtype=np.int64).reshape(-1, 2))


@pytest.mark.parametrize("name", ["sotu", "shakespeare", "moby-dick", "hard"])
def test_identical_on_real_text_slices(tok, name):
    text = texts.load(name)
    rng = random.Random(hash((name, tok.name_or_path)) & 0xFFFF)
    for _ in range(4):
        n = rng.randint(2_000, 30_000)
        start = rng.randrange(0, len(text) - n)
        piece = text[start:start + n]
        chunk = rng.randint(16, 4096)
        overlap = rng.randint(2, min(chunk - 1, 512))
        ids, st_ = lopt.encode(tok, piece, chunk_chars=chunk, overlap_chars=overlap, return_stats=True)
        assert ids == tok.encode(piece, add_special_tokens=False), (name, start, n, chunk, overlap)
        if n >= 2 * chunk and not st_.fallback:  # long enough to split: the merge path ran
            assert not st_.sequential and st_.n_chunks > 1, st_


def test_added_token_longer_than_the_overlap_is_never_cut():
    """Regression: a special token covering the whole overlap is invisible to both chunks."""
    tok = tokenization.load("llama3")
    text = ("İ12½</s>😀,aﬁ\x0b the\ufeff/½\r\n3<s>\x0b12ß/日'll</s>\r\n  日1_\u2028ﬁ</s>.😀1ﬁİ's"
            "<|begin_of_text|>  é \x0bab本語क्ष1本語-<|endoftext|>क्ष０ﬁ12<s>\t<|begin_of_text|>the,/")
    assert lopt.encode(tok, text, chunk_chars=14, overlap_chars=11) == tok.encode(text, add_special_tokens=False)
    long_token = "<|reserved_special_token_250|>"
    text = ("word " * 10 + long_token) * 40
    for chunk in range(12, 40, 3):
        for overlap in (2, 5, 9, chunk - 1):
            ids = lopt.encode(tok, text, chunk_chars=chunk, overlap_chars=overlap, workers=1)
            assert ids == tok.encode(text, add_special_tokens=False), (chunk, overlap)


def test_lstrip_rstrip_added_tokens():
    from tokenizers import AddedToken, Tokenizer

    bk = Tokenizer.from_str(tokenization.load("gpt2").backend_tokenizer.to_str())
    bk.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True), AddedToken("[SEP]", rstrip=True)])
    rng = random.Random(1)
    for _ in range(300):
        text = "".join(rng.choice(["<mask>", "[SEP]", " ", "   ", "a", "bc", "\n", "1"]) for _ in range(rng.randint(1, 60)))
        chunk = rng.randint(3, 20)
        overlap = rng.randint(2, chunk - 1)
        ref = bk.encode(text, add_special_tokens=False).ids
        assert lopt.encode(bk, text, chunk_chars=chunk, overlap_chars=overlap, workers=1) == ref, (text, chunk, overlap)


@given(text=st.lists(st.sampled_from(PIECES[-6:] + [" ", "a", "\n", "1", "日"]), max_size=80).map("".join),
       setting=settings())
def test_identical_on_special_token_soup(tok, text, setting):
    chunk, overlap, retries, workers = setting
    ids = lopt.encode(tok, text, chunk_chars=chunk, overlap_chars=overlap, max_retries=retries, workers=workers)
    assert ids == tok.encode(text, add_special_tokens=False)


def test_paper_rule_is_lossy_where_ours_is_not():
    """The reason for our rule: a known input where the end-of-run cut goes wrong (see the chapter)."""
    tok = tokenization.load("qwen3")
    rng = random.Random(0)
    found = None
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(5, 80)))
        chunk = rng.randint(3, 30)
        overlap = rng.randint(2, chunk - 1)
        ref = tok.encode(text, add_special_tokens=False)
        assert lopt.encode(tok, text, chunk_chars=chunk, overlap_chars=overlap, workers=1) == ref
        if lopt.encode(tok, text, chunk_chars=chunk, overlap_chars=overlap, rule="paper", workers=1) != ref:
            found = (text, chunk, overlap)
            break
    assert found is not None, "expected the paper's rule to fail somewhere on tiny overlaps"


def test_raw_tokenizers_object_and_transformers_agree():
    tok = tokenization.load("llama3")
    bk = tok.backend_tokenizer
    text = texts.load("moby-dick")[:50_000]
    assert lopt.encode(bk, text, chunk_chars=2048) == bk.encode(text, add_special_tokens=False).ids


def test_long_single_piece_grows_then_falls_back_exactly():
    tok = tokenization.load("llama3")
    text = "a" * 6000  # one pre-tokenizer piece: no boundary anywhere
    ids, stats = lopt.encode(tok, text, chunk_chars=500, overlap_chars=16, max_retries=2, return_stats=True)
    assert ids == tok.encode(text, add_special_tokens=False)
    assert stats.fallback and stats.sequential and stats.retries > 0 and stats.failed_boundaries > 0
    assert "after 2 growing rounds" in stats.reason


def test_growing_resolves_a_local_long_piece():
    tok = tokenization.load("gpt2")
    text = "word " * 400 + "x" * 900 + " word" * 400  # a 900-character piece inside normal text
    ids, stats = lopt.encode(tok, text, chunk_chars=256, overlap_chars=32, max_retries=4, return_stats=True)
    assert ids == tok.encode(text, add_special_tokens=False)
    assert stats.retries > 0 and not stats.fallback


def test_short_text_goes_sequential_and_says_so():
    tok = tokenization.load("gpt2")
    ids, stats = lopt.encode(tok, "hello world", return_stats=True)
    assert ids == tok.encode("hello world", add_special_tokens=False)
    assert stats.short and stats.sequential and not stats.fallback


def test_empty_text():
    tok = tokenization.load("llama2")
    assert lopt.encode(tok, "", add_special_tokens=True) == tok.encode("", add_special_tokens=True)


def test_truncation_configured_on_a_raw_tokenizer_goes_sequential():
    from tokenizers import Tokenizer

    bk = Tokenizer.from_str(tokenization.load("gpt2").backend_tokenizer.to_str())
    bk.enable_truncation(max_length=50)
    text = "the quick brown fox " * 200
    ids, stats = lopt.encode(bk, text, chunk_chars=64, overlap_chars=8, return_stats=True)
    assert ids == bk.encode(text).ids and len(ids) == 50
    assert stats.sequential and "truncation" in stats.reason


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_split_special_tokens_is_honoured(executor):
    tok = tokenization.load("llama3")
    text = "<|begin_of_text|> hi " * 300
    kw = dict(chunk_chars=128, overlap_chars=32, executor=executor, workers=2)
    assert lopt.encode(tok, text, **kw) == tok.encode(text, add_special_tokens=False)
    tok.split_special_tokens = True
    try:  # the setting changes between calls: worker processes must follow it
        assert lopt.encode(tok, text, **kw) == tok.encode(text, add_special_tokens=False)
    finally:
        tok.split_special_tokens = False
    assert lopt.encode(tok, text, **kw) == tok.encode(text, add_special_tokens=False)


def test_processes_executor_is_identical():
    tok = tokenization.load("llama2")
    text = texts.load("hard")[:60_000]
    ids, stats = lopt.encode(tok, text, chunk_chars=4096, overlap_chars=128, executor="processes", workers=2,
                             return_stats=True, return_offsets=False)
    assert ids == tok.encode(text, add_special_tokens=False)
    assert stats.executor == "processes" and not stats.sequential


@pytest.mark.parametrize("kwargs,match", [
    (dict(chunk_chars=10, overlap_chars=10), "chunk_chars"),
    (dict(overlap_chars=1), "overlap_chars"),
    (dict(min_run=0), "min_run"),
    (dict(max_retries=-1), "max_retries"),
    (dict(rule="fast"), "rule"),
    (dict(workers=0), "workers"),
    (dict(executor="gpu"), "executor"),
    (dict(chunk_chars=1.5), "chunk_chars"),
])
def test_bad_settings_fail_fast_naming_the_parameter(kwargs, match):
    tok = tokenization.load("gpt2")
    with pytest.raises(ValueError, match=match):
        lopt.encode(tok, "text", **kwargs)


def test_bad_inputs():
    tok = tokenization.load("gpt2")
    with pytest.raises(TypeError, match="text must be a str"):
        lopt.encode(tok, b"bytes")
    with pytest.raises(TypeError, match="fast tokenizer"):
        lopt.encode(object(), "text")


def test_baselines_are_lossy_somewhere():
    tok = tokenization.load("llama2")
    text = texts.load("moby-dick")[:40_000]
    ref = tok.encode(text, add_special_tokens=False)
    assert lopt.encode_naive(tok, text, chunk_chars=1000) != ref
    assert lopt.encode_delimiter(tok, text, chunk_chars=1000) != ref
    gpt2 = tokenization.load("gpt2")
    hard = texts.load("hard")[:40_000]
    assert lopt.encode_overlap_ids(gpt2, hard, chunk_chars=200, overlap_chars=4) != gpt2.encode(hard, add_special_tokens=False)


def _trained(kind: str):
    """Small tokenizers of other families, trained here in a second: WordPiece (BERT pipeline with
    NFD + lowercase + accent stripping) and Unigram (SentencePiece-style, no splitting)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    corpus = texts.load("moby-dick")[:300_000].splitlines() + [texts.hard_text(20_000, seed=3)]
    if kind == "wordpiece":
        tk = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tk.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
        tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=3000, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    elif kind == "unigram-nfkc":
        tk = Tokenizer(models.Unigram())
        tk.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(" ", "▁")])
        tk.pre_tokenizer = None
        tk.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=2000, special_tokens=["<unk>"], unk_token="<unk>")
    else:
        raise ValueError(kind)
    tk.train_from_iterator(corpus, trainer=trainer)
    return tk


@pytest.mark.parametrize("kind", ["wordpiece", "unigram-nfkc"])
def test_other_tokenizer_families(kind):
    tk = _trained(kind)
    rng = random.Random(5)
    for _ in range(300):
        text = texts.hostile_text(rng, 80) + " " + texts.load("moby-dick")[rng.randrange(10**6):][:rng.randint(0, 300)]
        chunk = rng.randint(3, 60)
        overlap = rng.randint(2, chunk - 1)
        ids = lopt.encode(tk, text, chunk_chars=chunk, overlap_chars=overlap, workers=1)
        assert ids == tk.encode(text, add_special_tokens=False).ids, (kind, text, chunk, overlap)
    big = texts.load("moby-dick")[:200_000]
    ids, stats = lopt.encode(tk, big, chunk_chars=8192, overlap_chars=256, return_stats=True)
    assert ids == tk.encode(big, add_special_tokens=False).ids
    if kind == "wordpiece":  # a splitting pre-tokenizer: the merge path must have run
        assert not stats.sequential and stats.n_chunks > 1 and len(stats.cuts) == stats.n_chunks - 1, stats
    else:  # Unigram without a splitting pre-tokenizer: sequential up front, and it says why
        assert stats.sequential and "no provable piece boundary" in stats.reason


def test_unigram_without_pre_tokenizer_goes_sequential():
    """Regression: a Unigram model's hard junctions are not exact boundaries (Viterbi breaks ties
    between equal-score segmentations by float rounding that depends on the prefix), so such a
    tokenizer must be encoded sequentially. This tokenizer and text once gave a different result."""
    import json
    from pathlib import Path

    from tokenizers import Tokenizer

    case = json.loads((Path(__file__).parent / "data" / "unigram_tie.json").read_text(encoding="utf-8"))
    tk = Tokenizer.from_str(json.dumps(case["tokenizer"]))
    ids, stats = lopt.encode(tk, case["text"], chunk_chars=case["chunk_chars"], overlap_chars=case["overlap_chars"],
                             workers=1, return_stats=True)
    assert ids == tk.encode(case["text"], add_special_tokens=False).ids
    assert stats.sequential and "no provable piece boundary" in stats.reason


def test_speed_summary_and_decomposition_separate_chunking_from_parallelism():
    from acl26.papers.lopt import tables

    rows = []
    for rep, (seq, one, two) in enumerate([(6.0, 3.0, 1.5), (6.2, 3.1, 1.6), (5.8, 2.9, 1.4)]):
        rows += [dict(tokenizer="t", n_chars=10_000_000, repeat=rep, method="sequential", workers=1, total=seq,
                      split=0.0, encode=seq, merge=0.0, same=True),
                 dict(tokenizer="t", n_chars=10_000_000, repeat=rep, method="lopt", workers=1, total=one,
                      split=0.01, encode=one - 0.02, merge=0.01, same=True),
                 dict(tokenizer="t", n_chars=10_000_000, repeat=rep, method="lopt", workers=2, total=two,
                      split=0.01, encode=two - 0.02, merge=0.01, same=True)]
    summary = tables.speed_summary(rows)
    two_w = next(r for r in summary if r["method"] == "lopt" and r["workers"] == 2)
    assert two_w["total"] == 1.5 and two_w["speed-up"] == pytest.approx(4.0)
    (d,) = tables.decomposition(summary)
    assert d["speedup"] == pytest.approx(4.0) and d["chunking"] == pytest.approx(2.0) and d["parallel"] == pytest.approx(2.0)
    assert d["chunking"] * d["parallel"] == pytest.approx(d["speedup"])
    assert "already 2.00× faster" in d["reading"] and "at most the worker count" in d["reading"]


def test_a_tokenizers_implementations_wrapper_is_accepted():
    """PreTrainedTokenizerFast(tokenizer_object=ByteLevelBPETokenizer(...)) wraps a BaseTokenizer."""
    from tokenizers.implementations import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts.load("moby-dick")[:200_000].splitlines(), vocab_size=600, show_progress=False)
    text = texts.load("moby-dick")[:60_000]
    for tk in (bpe, PreTrainedTokenizerFast(tokenizer_object=bpe)):
        ids, st = lopt.encode(tk, text, chunk_chars=4096, overlap_chars=128, return_stats=True)
        assert ids == lopt.sequential_ids(tk, text) and not st.sequential and st.n_chunks > 1


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_stats_say_where_the_time_goes(executor):
    """The profile behind the parallel factor: the backend's time (GIL released), Python's around it (GIL
    held), and each worker's busy time, summed over the chunks actually encoded."""
    tok = tokenization.load("gpt2")
    text = texts.load("moby-dick")[:40_000]
    ids, st = lopt.encode(tok, text, chunk_chars=2048, overlap_chars=64, workers=2, executor=executor,
                          return_stats=True)
    assert ids == tok.encode(text, add_special_tokens=False)
    assert st.time_backend > 0 and st.time_python > 0
    assert 1 <= len(st.busy) <= 2 and abs(sum(st.busy.values()) - st.time_backend - st.time_python) < 1e-6
    assert st.imbalance >= 1.0 and "imbalance" in st.as_dict() and "busy" not in st.as_dict()
    _, seq = lopt.encode(tok, "short", return_stats=True)
    assert seq.busy == {} and seq.imbalance != seq.imbalance  # NaN: nothing was chunked
