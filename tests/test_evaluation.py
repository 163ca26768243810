"""acl26.evaluation: sliding-window perplexity and generation against a tiny LLaMA built here, and
hand-computed cases for every metric (Pass@k also against brute-force enumeration)."""

import itertools
import math

import numpy as np
import pytest
import torch

from acl26 import evaluation as E

# --------------------------------------------------------------------------------------------
# a tiny causal LM and a character-level tokenizer, built from configs

CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789 .,#<>/-+=?\n")
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL + CHARS)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tk.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=len(SPECIAL) + len(CHARS), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=128, initializer_range=0.2, pad_token_id=0, bos_token_id=1,
                      eos_token_id=2, tie_word_embeddings=False)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def ids(model):
    g = torch.Generator().manual_seed(1)
    return torch.randint(4, model.config.vocab_size, (45,), generator=g)


# --------------------------------------------------------------------------------------------
# perplexity


def test_sliding_windows_score_every_token_once():
    for n, ctx, stride in [(45, 16, 8), (45, 16, 1), (45, 16, 15), (10, 16, 8), (17, 16, 8), (2, 2, 1)]:
        scored = [t for _, e, first in E.sliding_windows(n, ctx, stride) for t in range(first, e)]
        assert scored == list(range(1, n)), (n, ctx, stride)
        for b, e, first in E.sliding_windows(n, ctx, stride):
            assert e - b <= ctx and b < first
    # stride == context_length: the first token of every later window has no context and is skipped
    assert [(b, e, f) for b, e, f in E.sliding_windows(10, 4, 4)] == [(0, 4, 1), (4, 8, 5), (8, 10, 9)]


@pytest.mark.parametrize("n,ctx,stride,match", [(1, 4, 2, "at least 2"), (10, 1, 1, "context_length"),
                                                (10, 4, 5, "stride"), (10, 4, 0, "stride")])
def test_sliding_windows_validation(n, ctx, stride, match):
    with pytest.raises(ValueError, match=match):
        E.sliding_windows(n, ctx, stride)


def test_perplexity_of_one_window_is_exp_mean_nll(model, ids):
    with torch.no_grad():
        logp = torch.log_softmax(model(ids[None]).logits[0].double(), -1)
    nll = -logp[:-1].gather(1, ids[1:, None]).squeeze(1)
    res = E.perplexity(model, ids, context_length=64, stride=64)
    assert res.n_tokens == len(ids) - 1
    assert res.nll_sum == pytest.approx(float(nll.sum()), rel=1e-5)
    assert res.ppl == pytest.approx(math.exp(float(nll.mean())), rel=1e-5)
    assert res.mean_nll == pytest.approx(float(nll.mean()), rel=1e-5)


def _brute_force_nll(model, ids, ctx, stride):
    """Each scored token on its own: one forward pass over exactly its context in its window."""
    total, count = 0.0, 0
    with torch.no_grad():
        for b, e, first in E.sliding_windows(len(ids), ctx, stride):
            for t in range(first, e):
                logits = model(ids[None, b:t]).logits[0, -1].double()
                total -= float(torch.log_softmax(logits, -1)[ids[t]])
                count += 1
    return total, count


@pytest.mark.parametrize("ctx,stride", [(16, 8), (16, 5), (16, 16), (8, 1)])
def test_sliding_window_perplexity_matches_brute_force(model, ids, ctx, stride):
    total, count = _brute_force_nll(model, ids, ctx, stride)
    for bs in (1, 3, 8):
        res = E.perplexity(model, ids, context_length=ctx, stride=stride, batch_size=bs)
        assert res.n_tokens == count
        assert res.nll_sum == pytest.approx(total, rel=1e-5)
        assert res.ppl == pytest.approx(math.exp(total / count), rel=1e-5)


class _NoKeep(torch.nn.Module):
    """A causal LM whose forward has no ``logits_to_keep`` (full logits path)."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.config = inner, inner.config

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, input_ids, use_cache=False):
        return self.inner(input_ids=input_ids, use_cache=use_cache)


def test_perplexity_without_logits_to_keep(model, ids):
    a = E.perplexity(model, ids, context_length=16, stride=8, batch_size=2)
    b = E.perplexity(_NoKeep(model), ids, context_length=16, stride=8, batch_size=2)
    assert a.n_tokens == b.n_tokens and a.nll_sum == pytest.approx(b.nll_sum, rel=1e-6)


def test_perplexity_accepts_lists_and_numpy_and_restores_mode(model, ids):
    ref = E.perplexity(model, ids, context_length=16, stride=8)
    model.train()
    try:
        assert E.perplexity(model, ids.tolist(), context_length=16, stride=8).nll_sum == pytest.approx(ref.nll_sum)
        assert E.perplexity(model, ids.numpy().astype(np.int32), context_length=16).nll_sum == pytest.approx(ref.nll_sum)
        assert model.training
    finally:
        model.eval()


def test_perplexity_bits_per_byte():
    res = E.Perplexity(ppl=math.e, n_tokens=10, nll_sum=10.0)
    assert res.bits_per_byte(20) == pytest.approx(10 / math.log(2) / 20)
    with pytest.raises(ValueError, match="n_bytes"):
        res.bits_per_byte(0)


@pytest.mark.parametrize("kwargs,match", [
    (dict(ids=[[1, 2], [3, 4]]), "1-D"), (dict(ids=[5]), "at least 2"), (dict(ids=[1, 999]), r"\[0, "),
    (dict(batch_size=0), "batch_size"), (dict(context_length=1), "context_length"),
    (dict(context_length=256), "max_position_embeddings"), (dict(stride=40), "stride"),
])
def test_perplexity_validation(model, kwargs, match):
    args = dict(ids=list(range(4, 30)), context_length=16, stride=8, batch_size=2) | kwargs
    with pytest.raises(ValueError, match=match):
        E.perplexity(model, args.pop("ids"), **args)


# --------------------------------------------------------------------------------------------
# generation

PROMPTS = ["12+3=", "a cat sat", "x"]


def _argmax_decode(model, tokenizer, prompt, max_new):
    """Greedy decoding by hand: a full forward pass per step (no cache, no padding)."""
    ids = tokenizer(prompt)["input_ids"]
    out = []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(torch.tensor([ids + out])).logits[0, -1].argmax())
            out.append(nxt)
            if nxt == tokenizer.eos_token_id:
                break
    return out


def test_greedy_equals_argmax_decoding_with_left_padding(model, tokenizer):
    res = E.generate(model, tokenizer, PROMPTS, max_new_tokens=12, temperature=0, batch_size=3)
    for prompt, texts, counts, fin in zip(PROMPTS, res.texts, res.n_tokens, res.finished):
        ref = _argmax_decode(model, tokenizer, prompt, 12)
        assert counts == [len(ref)]
        assert fin == [ref[-1] == tokenizer.eos_token_id]
        assert texts == [tokenizer.decode(ref, skip_special_tokens=True)]
    assert res.prompt_tokens == [len(tokenizer(p)["input_ids"]) for p in PROMPTS]
    assert tokenizer.padding_side == "right"  # restored


def test_greedy_stops_at_eos(model, tokenizer):
    # force an early stop: make every character the "end" by declaring the first greedy token as eos
    first = _argmax_decode(model, tokenizer, PROMPTS[0], 1)[0]
    res = E.generate(model, tokenizer, PROMPTS[:1], max_new_tokens=10, eos_token_id=first)
    assert res.n_tokens == [[1]] and res.finished == [[True]]


def test_sampling_is_deterministic_with_a_seed(model, tokenizer):
    kw = dict(max_new_tokens=10, temperature=1.5, top_p=0.95, top_k=20, n=3, batch_size=4)
    a = E.generate(model, tokenizer, PROMPTS, seed=7, **kw)
    b = E.generate(model, tokenizer, PROMPTS, seed=7, **kw)
    c = E.generate(model, tokenizer, PROMPTS, seed=8, **kw)
    assert a.texts == b.texts and a.n_tokens == b.n_tokens
    assert a.texts != c.texts
    assert [len(row) for row in a.texts] == [3, 3, 3]
    assert all(1 <= n <= 10 for n in a.flat_n_tokens()) and len(a.flat_texts()) == 9
    # the global RNG is left alone
    torch.manual_seed(123)
    x = torch.rand(1)
    torch.manual_seed(123)
    E.generate(model, tokenizer, PROMPTS[:1], seed=1, **kw)
    assert torch.equal(torch.rand(1), x)


def test_top_k_one_is_greedy(model, tokenizer):
    greedy = E.generate(model, tokenizer, PROMPTS, max_new_tokens=8)
    k1 = E.generate(model, tokenizer, PROMPTS, max_new_tokens=8, temperature=0.7, top_k=1, seed=3)
    assert greedy.texts == k1.texts


def test_generation_config_is_explicit():
    g = E.generation_config(max_new_tokens=5, temperature=0, pad_token_id=0, eos_token_id=2)
    assert g.do_sample is False and g.num_beams == 1 and g.repetition_penalty == 1.0
    s = E.generation_config(max_new_tokens=5, temperature=0.6, top_p=0.95, top_k=20, pad_token_id=0, eos_token_id=2)
    assert (s.do_sample, s.temperature, s.top_p, s.top_k) == (True, 0.6, 0.95, 20)
    off = E.generation_config(max_new_tokens=5, temperature=1.0, pad_token_id=0, eos_token_id=2)
    assert (off.top_p, off.top_k) == (1.0, 0)  # no truncation (transformers would default top_k to 50)


@pytest.mark.parametrize("kwargs,match", [
    (dict(max_new_tokens=0), "max_new_tokens"), (dict(temperature=-1), "temperature"),
    (dict(temperature=1, top_p=0), "top_p"), (dict(temperature=1, top_k=0), "top_k"),
    (dict(n=2), "greedy"), (dict(batch_size=0), "batch_size"), (dict(seed=-1), "seed"),
    (dict(prompts="abc"), "prompts"), (dict(prompts=[]), "prompts"), (dict(chat=True), "chat template"),
    (dict(system="be brief"), "system"), (dict(eos_token_id=[]), "eos_token_id"),
])
def test_generate_validation(model, tokenizer, kwargs, match):
    args = dict(prompts=PROMPTS, max_new_tokens=4) | kwargs
    with pytest.raises(ValueError, match=match):
        E.generate(model, tokenizer, args.pop("prompts"), **args)


def test_generate_with_a_chat_template(model, tokenizer):
    tok = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer, pad_token="<pad>", bos_token="<s>",
                              eos_token="</s>", unk_token="<unk>")
    tok.chat_template = "{% for m in messages %}<{{ m['role'][0] }}>{{ m['content'] }}\n{% endfor %}" \
                        "{% if add_generation_prompt %}<a>{% endif %}"
    res = E.generate(model, tok, ["hi"], max_new_tokens=5, chat=True, system="sys")
    assert res.prompt_tokens == [len(tok("<s>sys\n<u>hi\n<a>", add_special_tokens=False)["input_ids"])]
    assert res.texts == [[tok.decode(_argmax_decode_ids(model, tok("<s>sys\n<u>hi\n<a>")["input_ids"], 5, 2),
                                     skip_special_tokens=True)]]


def _argmax_decode_ids(model, ids, max_new, eos):
    out = []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(torch.tensor([ids + out])).logits[0, -1].argmax())
            out.append(nxt)
            if nxt == eos:
                break
    return out


# --------------------------------------------------------------------------------------------
# Pass@k, Mean@k, Vote@k


def _pass_at_k_brute(n, c, k):
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_equals_brute_force_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert E.pass_at_k(n, c, k) == pytest.approx(_pass_at_k_brute(n, c, k), abs=1e-12)
            assert E.pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_hand_cases_and_large_n():
    assert E.pass_at_k(4, 1, 1) == 0.25
    assert E.pass_at_k(4, 2, 2) == pytest.approx(5 / 6)  # 1 - C(2,2)/C(4,2)
    assert E.pass_at_k(5, 0, 3) == 0.0 and E.pass_at_k(5, 5, 1) == 1.0 and E.pass_at_k(5, 3, 3) == 1.0
    # the product form stays finite where the binomials overflow a float
    assert E.pass_at_k(2000, 1, 1000) == pytest.approx(0.5)
    assert 0 < E.pass_at_k(5000, 3, 10) < 1


@pytest.mark.parametrize("n,c,k", [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4), (3.0, 1, 1)])
def test_pass_at_k_validation(n, c, k):
    with pytest.raises(ValueError):
        E.pass_at_k(n, c, k)


def test_mean_and_pass_at_k_over_problems():
    correct = [[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]]
    assert E.mean_at_k(correct) == pytest.approx((0.5 + 0 + 1) / 3)
    assert E.mean_at_k(correct, k=1) == pytest.approx((1 + 0 + 1) / 3)
    assert E.pass_at_k_mean(correct, 1) == pytest.approx((0.5 + 0 + 1) / 3)
    assert E.pass_at_k_mean(correct, 2) == pytest.approx((5 / 6 + 0 + 1) / 3)
    with pytest.raises(ValueError, match="k must"):
        E.mean_at_k(correct, k=5)
    with pytest.raises(ValueError, match="at least one"):
        E.pass_at_k_mean([[]], 1)


def test_majority_vote_and_its_tie_breaking():
    assert E.majority_vote(["3", "4", "4"]) == "4"
    assert E.majority_vote(["3", "4", "4", "3"]) == "3"  # tie: the answer seen first wins
    assert E.majority_vote(["4", "3", "3", "4"]) == "4"
    assert E.majority_vote([None, None, "7"]) == "7"  # no answer does not vote
    assert E.majority_vote([None, None]) is None


def test_vote_at_k():
    answers = [["10", "12", "10"], ["3", None, None], [None, None, None], ["1", "2", "2"]]
    golds = ["10", "3.0", "5", "1"]
    assert E.vote_at_k(answers, golds) == pytest.approx(2 / 4)  # "10" and "3"; "2" beats "1"
    assert E.vote_at_k(answers, golds, k=1) == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="equal length"):
        E.vote_at_k(answers, golds[:2])


def test_think_rate_and_length_stats():
    assert E.think_rate(["<think>a</think> 4", "4", "</think>", "<think> never closed"]) == 0.5
    s = E.length_stats([1, 2, 3, 10])
    assert (s["mean"], s["median"], s["min"], s["max"], s["count"]) == (4.0, 2.5, 1.0, 10.0, 4)
    assert s["std"] == pytest.approx(np.std([1, 2, 3, 10]))
    with pytest.raises(ValueError):
        E.length_stats([])
    with pytest.raises(ValueError):
        E.think_rate([])


def test_reasoning_metrics_by_hand():
    texts = [["<think>2+2=4</think>\n#### 4", "#### 5", "the answer is 4"],
             ["<think>still thinking", "#### 1,000", "1000.0"]]
    golds = ["4", "1000"]
    m = E.reasoning_metrics(texts, golds, n_tokens=[[10, 2, 4], [30, 3, 3]])
    # correct: [T, F, T], [F (unclosed think), T, T]
    assert m["mean@k"] == pytest.approx((2 / 3 + 2 / 3) / 2)
    assert m["pass@1"] == pytest.approx(2 / 3)
    assert m["pass@k"] == 1.0 and m["vote@k"] == 1.0 and m["k"] == 3 and m["problems"] == 2
    assert m["think_rate"] == pytest.approx(1 / 6)
    assert m["tokens"] == pytest.approx(52 / 6) and m["tokens_median"] == 3.5
    m2 = E.reasoning_metrics(texts, golds, k=1)
    assert m2["mean@k"] == 0.5 and m2["vote@k"] == 0.5 and "tokens" not in m2
    with pytest.raises(ValueError, match="shape"):
        E.reasoning_metrics(texts, golds, n_tokens=[[1, 2, 3]])


# --------------------------------------------------------------------------------------------
# ROUGE-L


def test_rouge_l_by_hand():
    # LCS("the cat sat on the mat", "the cat is on the mat") = "the cat on the mat": 5 of 6 each way
    assert E.rouge_l_scores(["the cat sat on the mat"], ["the cat is on the mat"]) == [pytest.approx(5 / 6)]
    assert E.rouge_l(["the cat sat on the mat", "nothing alike"], ["the cat is on the mat", "zzz"]) == \
        pytest.approx(100 * (5 / 6 + 0) / 2)
    # best of several references; case and punctuation are ignored by rouge-score's tokenizer
    assert E.rouge_l_scores(["A B C D"], [["x y", "a, b, c, d!"]]) == [pytest.approx(1.0)]
    # LCS("a b c d", "a c e") = "a c": P = 2/4, R = 2/3, F = 2PR/(P+R) = 4/7
    assert E.rouge_l_scores(["a b c d"], ["a c e"]) == [pytest.approx(4 / 7)]
    # Porter stemming (as MiniLLM/DistiLLM): "cats running" matches "cat run"
    assert E.rouge_l_scores(["cats running"], ["cat run"]) == [pytest.approx(1.0)]
    assert E.rouge_l_scores(["cats running"], ["cat run"], use_stemmer=False) == [pytest.approx(0.0)]


@pytest.mark.parametrize("preds,refs", [([], []), (["a"], ["a", "b"]), ("a", "a"), (["a"], [[]])])
def test_rouge_l_validation(preds, refs):
    with pytest.raises(ValueError):
        E.rouge_l(preds, refs)


def test_generate_pads_with_eos_when_the_tokenizer_has_no_pad_token(model, tokenizer):
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_padding()
    tok = tokenizer.__class__(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    assert tok.pad_token is None
    res = E.generate(model, tok, PROMPTS, max_new_tokens=6)
    ref = E.generate(model, tokenizer, PROMPTS, max_new_tokens=6)
    assert res.texts == ref.texts
    assert tok.pad_token is None and tok.padding_side == "right"
