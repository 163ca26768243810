"""acl26.corpus and acl26.problems: the document split rule, the cached tokenized corpus, the BPE trained on train only,
the unigram baseline, GSM8K / reasoning-gym problems and the exact-answer scorers."""

import json
import math
import re

import numpy as np
import pytest

from acl26 import corpus as D
from acl26 import problems as PB
from acl26.texts import Document

# --------------------------------------------------------------------------------------------
# hermetic corpus tests: made-up documents, a private cache


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _docs(n_a=23, n_b=12):
    words = ["whale", "ship", "union", "congress", "thee", "thou", "sea", "state", "law", "king"]
    docs = [Document("a", f"a{i}", " ".join(words[(i + j) % 10] for j in range(40 + i)) + f" number {i}.")
            for i in range(n_a)]
    docs += [Document("b", f"b{i}", f"Chapter {i}. " + " ".join(words[(3 * i + j) % 7] for j in range(30)))
             for i in range(n_b)]
    return docs


def test_split_rule():
    assert [D.split_of(i) for i in range(12)] == ["train"] * 8 + ["validation", "test", "train", "train"]
    with pytest.raises(ValueError, match="position"):
        D.split_of(-1)


def test_splits_are_disjoint_complete_and_per_source():
    docs = _docs()
    splits = D.split_documents(docs)
    titles = {s: [d.title for d in v] for s, v in splits.items()}
    assert titles["validation"] == ["a8", "a18", "b8"]
    assert titles["test"] == ["a9", "a19", "b9"]
    flat = [t for v in titles.values() for t in v]
    assert sorted(flat) == sorted(d.title for d in docs) and len(set(flat)) == len(flat)
    # stable: interleaving the sources changes nothing, only the order within a source matters
    mixed = [d for pair in zip(docs[:12], docs[23:]) for d in pair] + docs[12:23]
    assert {s: sorted(d.title for d in v) for s, v in D.split_documents(mixed).items()} == \
        {s: sorted(v) for s, v in titles.items()}


def _tokenizer(docs):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.train_from_iterator([d.text for d in docs], trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<eot>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return tk


def test_corpus_streams_texts_and_blocks(cache):
    docs = _docs()
    tk = _tokenizer(docs)
    eot = tk.token_to_id("<eot>")
    corpus = D.load_corpus(tk, documents=docs, separator=eot, block_size=16)
    assert D.load_corpus(tk, documents=docs, separator="<eot>").key == corpus.key
    splits = D.split_documents(docs)
    for split in D.SPLITS:
        expected = []
        for i, d in enumerate(splits[split]):
            expected += ([eot] if i else []) + tk.encode(d.text, add_special_tokens=False).ids
        assert corpus.ids[split].tolist() == expected
        assert corpus.text[split] == "\n\n".join(d.text for d in splits[split])
        assert [r["title"] for r in corpus.documents[split]] == [d.title for d in splits[split]]
        assert sum(r["tokens"] for r in corpus.documents[split]) + len(splits[split]) - 1 == len(expected)
        blocks = corpus.blocks(split)
        assert blocks.dtype == np.int64 and blocks.shape == (len(expected) // 16, 16)
        assert blocks.ravel().tolist() == expected[: blocks.size]
    assert corpus.blocks("train", 7).shape[1] == 7
    stats = corpus.stats()
    assert stats["validation"]["documents"] == 3 and stats["train"]["tokens"] == len(corpus.ids["train"])
    ds = corpus.lm_dataset("validation")
    assert ds[0]["input_ids"].tolist() == corpus.blocks("validation")[0].tolist()
    assert ds[0]["labels"].tolist() == ds[0]["input_ids"].tolist()
    assert corpus.path.parent == cache / "corpus" and (corpus.path / "meta.json").is_file()


def test_corpus_cache_hit_and_key(cache, monkeypatch):
    from transformers import PreTrainedTokenizerFast

    docs = _docs()
    tok = PreTrainedTokenizerFast(tokenizer_object=_tokenizer(docs), eos_token="<eot>")
    first = D.load_corpus(tok, documents=docs)

    def boom(*args, **kwargs):
        raise AssertionError("rebuilt although cached")

    with monkeypatch.context() as m:
        m.setattr(D, "_build_corpus", boom)
        again = D.load_corpus(tok, documents=docs, block_size=32)  # block size is not part of the key
        assert again.key == first.key and again.block_size == 32
        for split in D.SPLITS:
            assert np.array_equal(again.ids[split], first.ids[split])
        # a raw tokenizers.Tokenizer with the same serialisation and separator: same key
        assert D.load_corpus(tok.backend_tokenizer, documents=docs, separator=tok.eos_token_id).key == first.key
    # anything that changes the ids changes the key
    assert D.load_corpus(tok, documents=docs, separator=None).key != first.key
    assert D.load_corpus(tok, documents=docs[:-1]).key != first.key
    assert len(list((cache / "corpus").iterdir())) == 3
    assert str(D.load_corpus(tok, documents=docs).path).startswith(str(cache))


@pytest.mark.parametrize("kwargs,match", [
    (dict(block_size=1), "block_size"), (dict(separator="<nope>"), "not a token"), (dict(separator=-1), "separator"),
    (dict(separator=10**6), "outside"),
    (dict(documents=[]), "documents"), (dict(documents=_docs(9, 9)), "empty"),
])
def test_corpus_validation(cache, kwargs, match):
    docs = _docs()
    tk = _tokenizer(docs)
    args = dict(documents=docs, separator=0) | kwargs
    with pytest.raises(ValueError, match=match):
        D.load_corpus(tk, **args)


def test_corpus_rejects_bad_sources_and_tokenizers(cache):
    with pytest.raises(ValueError, match="sources"):
        D.load_corpus(_tokenizer(_docs()), sources=("sotu", "wikipedia"), separator=None)
    with pytest.raises(ValueError, match="sources"):
        D.load_corpus(_tokenizer(_docs()), sources="sotu", separator=None)
    with pytest.raises(ValueError, match="tokenizer"):
        D.load_corpus(object(), documents=_docs())
    with pytest.raises(ValueError, match="no end-of-text"):
        D.load_corpus(_tokenizer(_docs()), documents=_docs())  # separator='eos' needs a transformers tokenizer


# --------------------------------------------------------------------------------------------
# BPE on the train split, unigram baseline


def _bpe_docs():
    docs = _docs()
    # a word that occurs only in validation and test documents, many times
    return [Document(d.source, d.title, d.text + " zyzzyva" * 50) if D.split_of(i) != "train" else d
            for i, d in enumerate(docs[:23])] + docs[23:]


def test_train_bpe_uses_train_only_is_deterministic_and_cached(cache, tmp_path, monkeypatch):
    docs = _bpe_docs()
    tok = D.train_bpe(400, documents=docs, min_frequency=1)
    assert len(tok) <= 400  # training stops early when no pair occurs often enough
    vocab = tok.get_vocab()
    assert not any("zy" in t or "yv" in t for t in vocab), "learned merges from validation/test text"
    assert "Ġwhale" in vocab
    text = "The whale, the ship: thee & thou. ünïcödé 🐋"
    assert tok.decode(tok.encode(text)) == text
    assert tok.eos_token == tok.pad_token == "<|endoftext|>" and tok.eos_token_id == 0
    # a second call reads the cache
    with monkeypatch.context() as m:
        m.setattr(D, "split_documents", lambda *a, **k: (_ for _ in ()).throw(AssertionError("retrained")))
        again = D.train_bpe(400, documents=docs, min_frequency=1)
    assert again.backend_tokenizer.to_str() == tok.backend_tokenizer.to_str()
    # deterministic: a fresh cache trains the same tokenizer
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "other"))
    assert D.train_bpe(400, documents=docs, min_frequency=1).backend_tokenizer.to_str() == \
        tok.backend_tokenizer.to_str()


@pytest.mark.parametrize("kwargs,match", [
    (dict(vocab_size=100), "vocab_size"), (dict(vocab_size=True), "vocab_size"),
    (dict(min_frequency=0), "min_frequency"), (dict(special_tokens=()), "special_tokens"),
    (dict(special_tokens=("a", "a")), "special_tokens"),
])
def test_train_bpe_validation(cache, kwargs, match):
    args = dict(vocab_size=400, documents=_docs()) | kwargs
    with pytest.raises(ValueError, match=match):
        D.train_bpe(args.pop("vocab_size"), **args)


def test_unigram_perplexity_by_hand():
    # counts 2, 1, 0 over N=3 with V=3: p = 3/6, 2/6, 1/6
    assert D.unigram_perplexity([0, 0, 1], [0, 2], 3) == pytest.approx(math.sqrt(2 * 6))
    assert D.unigram_perplexity([0, 0, 1], [1], 3) == pytest.approx(3.0)
    assert D.unigram_perplexity(np.array([], dtype=np.int64), [0, 1], 4) == pytest.approx(4.0)  # uniform
    for args, match in [(([0], [0], 0), "vocab_size"), (([0], [], 3), "empty"), (([5], [0], 3), "outside"),
                        (([0], [[0]], 3), "1-D"), (([0.5], [0], 3), "integer")]:
        with pytest.raises(ValueError, match=match):
            D.unigram_perplexity(*args)


def test_corpus_unigram_matches_function(cache):
    docs = _docs()
    tk = _tokenizer(docs)
    c = D.load_corpus(tk, documents=docs, separator=None)
    assert c.unigram_perplexity() == D.unigram_perplexity(c.ids["train"], c.ids["validation"], c.vocab_size)
    assert c.vocab_size == tk.get_vocab_size()
    with pytest.raises(ValueError, match="split"):
        c.unigram_perplexity("dev")


# --------------------------------------------------------------------------------------------
# exact-answer scoring


@pytest.mark.parametrize("text,expected", [
    ("1,000", "1000"), ("12.0", "12"), ("12.50", "12.5"), ("$1,234.00", "1234"), ("-0", "0"), ("-3", "-3"),
    ("50%", "50"), (" 7. ", "7"), ("0.25", "0.25"), (".5", "0.5"), ("1,00", None), ("abc", None), ("1 2", None),
    ("\u22124", "-4"),
])
def test_normalize_number(text, expected):
    assert PB.normalize_number(text) == expected


@pytest.mark.parametrize("response,expected", [
    ("so 3 + 4 = 7\n#### 7", "7"),
    ("#### 1,000 apples", "1000"),
    ("#### 12.0\nand then 99", "12"),
    ("The answer is $\\boxed{42}$.", "42"),
    ("\\boxed{\\frac{1}{2}} or 7", "\\frac{1}{2}"),
    ("I think it is 5, no wait, 6.", "6"),
    ("<think>maybe 3</think>\nIt is 4 then", "4"),
    ("<think>maybe 3</think> <think>or 5</think> final #### 8", "8"),
    ("<think>2 + 2 = 4, so the answer", None),
    ("no numbers here", None),
    ("#### yes", "yes"),
    ("####", None),
    ("5 - -4 = 9", "9"),
    ("room 3-4", "4"),
    ("total: -12", "-12"),
])
def test_extract_answer(response, expected):
    assert PB.extract_answer(response) == expected


def test_extract_answer_unclosed_think_option_and_is_correct():
    assert PB.extract_answer("<think>it is 4", require_closed_think=False) == "4"
    assert PB.is_correct("#### 1,000", "1000") and PB.is_correct("... so 12.0", "12")
    assert not PB.is_correct("<think> 12", "12") and not PB.is_correct("nothing", "12")
    assert PB.normalize_answer("  Yes  we can. ") == "Yes we can"
    with pytest.raises(ValueError, match="response"):
        PB.extract_answer(None)


@pytest.mark.parametrize("expr,floor,lines,value", [
    ("5 - 3 - 6", False, "5 - 3 = 2\n2 - 6 = -4", "-4"),
    ("( 56 + -33 ) - 84", False, "56 + -33 = 23\n23 - 84 = -61", "-61"),
    ("-2 + 6 * 6", False, "6 * 6 = 36\n-2 + 36 = 34", "34"),
    ("( ( -9 - 6 ) - -( -3 * 4 ) ) * 2 / 2", False,
     "-9 - 6 = -15\n-3 * 4 = -12\n-(-12) = 12\n-15 - 12 = -27\n-27 * 2 = -54\n-54 / 2 = -27", "-27"),
    ("7 / 2", True, "7 / 2 = 3", "3"),
    ("-7 / 2", True, "-7 / 2 = -4", "-4"),
    ("42", False, "42 = 42", "42"),
])
def test_arithmetic_steps(expr, floor, lines, value):
    assert PB.arithmetic_steps(expr, floor_division=floor) == (lines, value)


@pytest.mark.parametrize("expr", ["7 / 2", "1 / 0", "2 ** 3", "x + 1", "1.5 + 2", "(1 +", "abs(3)"])
def test_arithmetic_steps_refuses(expr):
    assert PB.arithmetic_steps(expr) is None


def test_format_response_round_trips():
    p = PB.Problem("t", "t-0", "1 + 2 * 3?", "7", solution="2 * 3 = 6\n1 + 6 = 7\n#### 7", solution_source="x")
    assert p.steps() == "2 * 3 = 6\n1 + 6 = 7"
    assert PB.format_response(p, "direct") == "#### 7"
    assert PB.format_response(p, "cot") == "2 * 3 = 6\n1 + 6 = 7\n#### 7"
    assert PB.format_response(p, "think") == "<think>\n2 * 3 = 6\n1 + 6 = 7\n</think>\n\n#### 7"
    for style in PB.RESPONSE_STYLES:
        assert PB.is_correct(PB.format_response(p, style), p.answer)
    with pytest.raises(ValueError, match="worked solution"):
        PB.format_response(PB.Problem("t", "t-1", "q", "1"), "think")
    with pytest.raises(ValueError, match="style"):
        PB.format_response(p, "long")


def test_gsm8k_template_split_is_fixed():
    train, held = PB.gsm8k_templates("train"), PB.gsm8k_templates("heldout")
    assert len(train) == len(held) == 50 and not train & held and train | held == PB.gsm8k_templates()
    assert sorted(PB.GSM_SYMBOLIC_TO_GSM8K.values()) == sorted(PB.GSM8K_ID_SHUFFLED)  # a bijection
    assert 473 in train and 103 in held  # id_shuffled 0 and 1
    with pytest.raises(ValueError, match="split"):
        PB.gsm8k_templates("test")


# --------------------------------------------------------------------------------------------
# reasoning-gym (an installed dependency; no asset needed)


def test_reasoning_gym_problems_are_seeded_and_match_the_library():
    import reasoning_gym

    a = PB.reasoning_gym_problems("chain_sum", 20, seed=3)
    assert a == PB.reasoning_gym_problems("chain_sum", 20, seed=3)
    assert a != PB.reasoning_gym_problems("chain_sum", 20, seed=4)
    lib = reasoning_gym.create_dataset("chain_sum", seed=3, size=20)
    assert [p.question for p in a] == [x["question"] for x in lib]
    assert [p.answer for p in a] == [x["answer"] for x in lib]
    assert all(p.solution_source.startswith("acl26") and PB.is_correct(p.solution, p.answer) for p in a)
    assert a[0].id == "chain_sum-s3-0" and json.dumps(a[0].metadata)


@pytest.mark.parametrize("task", ["basic_arithmetic", "chain_sum", "products"])
def test_derived_solutions_reproduce_the_generator(task):
    ps = PB.reasoning_gym_problems(task, 60, seed=11)
    assert all(p.solution is not None for p in ps)
    assert all(PB.is_correct(p.solution, p.answer) and PB.is_correct(PB.format_response(p, "think"), p.answer)
               for p in ps)
    raw = PB.reasoning_gym_problems(task, 5, seed=11, worked=False)
    assert all(p.solution is None for p in raw)


def test_gsm_symbolic_with_worked_solutions_and_templates():
    ps = PB.reasoning_gym_problems("gsm_symbolic", 40, seed=0)
    assert all(p.solution_source == "reasoning-gym" and p.solution.endswith(f"#### {p.answer}") for p in ps)
    assert all(PB.is_correct(p.solution, p.answer) for p in ps)
    assert all(p.template == PB.GSM_SYMBOLIC_TO_GSM8K[p.metadata["generator"]] for p in ps)
    held = PB.gsm8k_templates("heldout")
    train_only = PB.reasoning_gym_problems("gsm_symbolic", 40, seed=0, templates=PB.gsm8k_templates("train"))
    assert not {p.template for p in train_only} & held
    assert train_only == PB.reasoning_gym_problems("gsm_symbolic", 40, seed=0, templates=PB.gsm8k_templates("train"))
    # with every template allowed the draw is reasoning-gym's own
    assert PB.reasoning_gym_problems("gsm_symbolic", 10, seed=5, templates=PB.gsm8k_templates()) == \
        PB.reasoning_gym_problems("gsm_symbolic", 10, seed=5)


@pytest.mark.assets
def test_gsm_symbolic_generators_are_the_gsm8k_templates_map():
    """Recompute the generator -> GSM8K map by word overlap with the annotated GSM8K questions."""
    import random

    from reasoning_gym.arithmetic.gsm_symbolic import gsm_symbolic as gs

    def words(s):
        return set(re.findall(r"[a-z]+", s.lower()))

    templ = {r["id_orig"]: words(re.sub(r"\{[^,}]*,", "{", r["question_annotated"].split("#init")[0]))
             for r in PB._gsm8k_records()}
    gens = gs.GSMSymbolicDataset(gs.GSMSymbolicDatasetConfig(seed=0, size=1)).generators
    assert sorted(gens) == list(range(100))
    for g, fn in gens.items():
        w = set().union(*(words(fn(random.Random(s), 1.0)["question"]) for s in range(3)))
        best = max(templ, key=lambda k: len(w & templ[k]) / len(w | templ[k]))
        assert PB.GSM_SYMBOLIC_TO_GSM8K[g] == best, g


@pytest.mark.parametrize("kwargs,match", [
    (dict(task="nope"), "task"), (dict(size=0), "size"), (dict(seed=-1), "seed"),
    (dict(templates=[473]), "'gsm_symbolic' only"), (dict(task="gsm_symbolic", templates=[1]), "unknown GSM8K"),
    (dict(task="gsm_symbolic", templates=[]), "empty"), (dict(bogus=1), "unknown option"),
    (dict(min_terms=5, max_terms=2), "rejected"),
])
def test_reasoning_gym_validation(kwargs, match):
    args = dict(task="chain_sum", size=3, seed=0) | kwargs
    with pytest.raises(ValueError, match=match):
        PB.reasoning_gym_problems(args.pop("task"), args.pop("size"), args.pop("seed"), **args)


# --------------------------------------------------------------------------------------------
# the real assets


@pytest.mark.assets
def test_gsm8k_test_questions():
    qs = PB.gsm8k_test()
    assert len(qs) == 100 and len({q.id for q in qs}) == 100
    assert [q.metadata["id_shuffled"] for q in qs] == list(range(100))
    assert {q.template: q.metadata["id_shuffled"] for q in qs} == PB.GSM8K_ID_SHUFFLED
    assert all(PB.normalize_number(q.answer) == q.answer for q in qs)
    assert all("<<" not in q.solution and PB.is_correct(q.solution, q.answer) for q in qs)
    first = qs[0]
    assert first.id == "gsm8k-473" and first.answer == "10" and "remoras" in first.question
    held = PB.gsm8k_test(PB.gsm8k_templates("heldout"))
    assert len(held) == 50 and all(q.metadata["id_shuffled"] % 2 == 1 for q in held)


@pytest.mark.assets
def test_real_corpus_split():
    splits = D.corpus_documents()
    count = {s: {src: sum(d.source == src for d in v) for src in D.SOURCES} for s, v in splits.items()}
    assert count == {"train": {"sotu": 187, "shakespeare": 34, "moby-dick": 112},
                     "validation": {"sotu": 23, "shakespeare": 4, "moby-dick": 13},
                     "test": {"sotu": 23, "shakespeare": 4, "moby-dick": 13}}
    keys = {s: {(d.source, d.title) for d in v} for s, v in splits.items()}
    assert not keys["train"] & keys["validation"] and not keys["train"] & keys["test"] \
        and not keys["validation"] & keys["test"]
    assert ("shakespeare", "Metadata") not in set().union(*keys.values())
    assert [d.title for d in splits["validation"] if d.source == "shakespeare"] == \
        ["Henry Iv Part 2", "Loves Labours Lost", "Phoenix And The Turtle", "Troilus And Cressida"]
    assert [d.title for d in splits["test"]][:2] == ["1799 John Adams", "1809 James Madison"]


@pytest.mark.assets
def test_real_corpus_with_smollm2_is_cached(tmp_path, monkeypatch):
    from acl26 import paths

    # a private cache that reuses the fetched assets and converted tokenizers of the real one
    real = paths.cache_dir()
    private = tmp_path / "cache"
    private.mkdir()
    for sub in ("assets", "tokenizers"):
        (private / sub).symlink_to(real / sub)
    monkeypatch.setenv("ACL26_CACHE", str(private))
    corpus = D.load_corpus(sources=("moby-dick",))
    assert corpus.path.parent == private / "corpus"
    assert corpus.config["sources"] == ["moby-dick"] and corpus.vocab_size == 49_152
    assert corpus.separator_id == 2  # SmolLM2-Instruct's eos_token, <|im_end|>
    assert D.load_corpus(sources=("moby-dick",), separator="<|endoftext|>").separator_id == 0
    stats = corpus.stats()
    assert [stats[s]["documents"] for s in D.SPLITS] == [112, 13, 13]
    assert 200_000 < stats["train"]["tokens"] < 300_000
    assert 300 < corpus.unigram_perplexity() < 5000
    monkeypatch.setattr(D, "_build_corpus", lambda *a, **k: (_ for _ in ()).throw(AssertionError("rebuilt")))
    assert D.load_corpus(sources=("moby-dick",)).key == corpus.key
