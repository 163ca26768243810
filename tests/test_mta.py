"""MTA chapter: the KD losses (hand-computed and against TRL), token importance, pooling, DSA, Hid,
units from offsets and spaCy, the pairs, the student, the distillation loop and local checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from acl26.papers.mta import data as D
from acl26.papers.mta import distill as Dl
from acl26.papers.mta import losses as L
from acl26.papers.mta import units as U


def _logp(*rows):
    return torch.log(torch.tensor(rows, dtype=torch.float64))


# ---- base KD losses, by hand


def test_forward_kl_by_hand():
    p, q = _logp([0.5, 0.5]), _logp([0.25, 0.75])
    want = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert float(L.forward_kl(q, p)) == pytest.approx(want, rel=1e-12)
    assert float(L.forward_kl(p, p)) == 0.0


def test_skew_forward_kl_by_hand_is_distillm_cross_entropy_form():
    p, q = _logp([0.5, 0.5]), _logp([0.25, 0.75])
    mix = [0.1 * 0.5 + 0.9 * 0.25, 0.1 * 0.5 + 0.9 * 0.75]
    want = -(0.5 * math.log(mix[0]) + 0.5 * math.log(mix[1]))
    assert float(L.skew_forward_kl(q, p)) == pytest.approx(want, rel=1e-12)
    # the same gradient as the skew KL: it differs from KL(p || mix) by p's entropy only
    kl = 0.5 * math.log(0.5 / mix[0]) + 0.5 * math.log(0.5 / mix[1])
    assert float(L.skew_forward_kl(q, p)) - kl == pytest.approx(math.log(2), rel=1e-12)


def test_skew_reverse_kl_by_hand():
    p, q = _logp([0.5, 0.5]), _logp([0.25, 0.75])
    mix = [0.9 * 0.5 + 0.1 * 0.25, 0.9 * 0.5 + 0.1 * 0.75]
    want = 0.25 * math.log(0.25 / mix[0]) + 0.75 * math.log(0.75 / mix[1])
    assert float(L.skew_reverse_kl(q, p)) == pytest.approx(want, rel=1e-12)
    assert float(L.skew_reverse_kl(p, p)) == pytest.approx(0.0, abs=1e-15)


def test_losses_average_over_masked_positions_only():
    p = _logp([0.5, 0.5], [0.9, 0.1], [0.2, 0.8])
    q = _logp([0.25, 0.75], [0.5, 0.5], [0.2, 0.8])
    mask = torch.tensor([True, False, True])
    for fn in L.BASE_LOSSES.values():
        both = fn(q, p, mask)
        rows = [fn(q[i:i + 1], p[i:i + 1]) for i in (0, 2)]
        assert float(both) == pytest.approx(float(sum(rows) / 2), rel=1e-12)
    with pytest.raises(ValueError, match="mask"):
        L.forward_kl(q, p, torch.tensor([True, False]))
    with pytest.raises(ValueError, match="alpha"):
        L.skew_forward_kl(q, p, alpha=1.0)


def test_zero_probabilities_give_finite_losses():
    p = torch.log(torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64))
    q = _logp([0.5, 0.25, 0.25])
    assert float(L.forward_kl(q, p)) == pytest.approx(math.log(2))
    for fn in L.BASE_LOSSES.values():
        assert math.isfinite(float(fn(q, p)))


def test_losses_have_finite_gradients_and_ignore_masked_rows_with_minus_inf():
    s = torch.log_softmax(torch.tensor([[0.5, 0.2, -math.inf], [1.0, 0.0, 0.0]]), -1).requires_grad_()
    t = torch.log_softmax(torch.tensor([[0.1, 0.3, -math.inf], [0.0, 2.0, -1.0]]), -1).requires_grad_()
    for fn in L.BASE_LOSSES.values():
        loss = fn(s, t)
        assert math.isfinite(float(loss))
        gs, gt = torch.autograd.grad(loss, (s, t))
        assert torch.isfinite(gs).all() and torch.isfinite(gt).all(), fn.__name__
    bad = torch.tensor([[0.0, -math.inf], [math.log(0.5), math.log(0.5)]])
    good = torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    mask = torch.tensor([False, True])
    assert float(L.forward_kl(bad, good, mask)) == 0.0  # the masked-out row (infinite KL) does not enter
    assert float(L.forward_kl(good[:0], good[:0])) == 0.0  # no position: 0, not NaN
    assert float(L.forward_kl(good, good, torch.tensor([False, False]))) == 0.0


def test_forward_kl_agrees_with_trl_generalized_jsd_at_beta_0():
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental.gkd import GKDTrainer

    g = torch.Generator().manual_seed(0)
    s = torch.randn(2, 5, 11, generator=g)
    t = torch.randn(2, 5, 11, generator=g) * 2
    mask = torch.tensor([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)
    labels = torch.where(mask, 0, -100)
    ours = L.forward_kl(torch.log_softmax(s, -1), torch.log_softmax(t, -1), mask)
    theirs = GKDTrainer.generalized_jsd_loss(s, t, labels=labels, beta=0.0)
    assert float(ours) == pytest.approx(float(theirs), abs=1e-6)


def test_topk_buckets_exact_at_full_vocab_and_coarser_below():
    g = torch.Generator().manual_seed(1)
    s, t = torch.randn(4, 16, generator=g), torch.randn(4, 16, generator=g) * 3
    tl = torch.log_softmax(t, -1)
    full = L.forward_kl(torch.log_softmax(s, -1), tl)
    top = tl.topk(16, -1)
    sb, tb = L.topk_buckets(s, top.indices, top.values)
    assert sb.exp().sum(-1).sub(1).abs().max() < 1e-5 and tb.exp().sum(-1).sub(1).abs().max() < 1e-5
    assert float(L.forward_kl(sb, tb)) == pytest.approx(float(full), abs=1e-5)
    for k in (1, 4, 8):
        top = tl.topk(k, -1)
        sb, tb = L.topk_buckets(s, top.indices, top.values)
        assert sb.shape[-1] == k + 1
        assert torch.allclose(sb.exp().sum(-1), torch.ones(4), atol=1e-5)
        assert float(L.forward_kl(sb, tb)) <= float(full) + 1e-6  # a coarser partition never has a larger KL
    sb.sum().backward() if sb.requires_grad else None


def test_topk_buckets_gradients_are_finite_when_top_k_holds_all_mass():
    s = torch.randn(3, 5, requires_grad=True)
    t = torch.log_softmax(torch.tensor([[50.0, 0, 0, 0, 0]] * 3), -1)
    top = t.topk(1, -1)
    sb, tb = L.topk_buckets(s, top.indices, top.values)
    L.skew_reverse_kl(sb, tb).backward()
    assert torch.isfinite(s.grad).all()


# ---- token importance


def _importance_by_hand(h: np.ndarray) -> np.ndarray:
    hn = h / h.std()
    s = hn @ hn.T / math.sqrt(h.shape[1])
    np.fill_diagonal(s, -np.inf)
    a = np.exp(s - s.max(1, keepdims=True))
    a /= a.sum(1, keepdims=True)
    return a.mean(0)


def test_token_importance_by_hand_and_its_properties():
    h = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [7.0, 7.0]]])
    mask = torch.tensor([[True, True, True, False]])
    w = L.token_importance(h, mask)
    want = _importance_by_hand(h[0, :3].numpy())
    assert np.allclose(w[0, :3].numpy(), want, atol=1e-6)
    assert float(w[0, 3]) == 0.0
    g = torch.Generator().manual_seed(2)
    hh = torch.randn(3, 7, 8, generator=g)
    m = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] + [0] * 6], dtype=torch.bool)
    w = L.token_importance(hh, m)
    assert (w >= 0).all() and (w[~m] == 0).all()
    assert torch.allclose(w.sum(-1), torch.ones(3), atol=1e-6)
    assert float(w[2, 0]) == 1.0  # one token: all the weight
    assert torch.allclose(L.token_importance(hh * 37.5, m), w, atol=1e-6)
    assert torch.allclose(L.token_importance(hh * 1e-3, m), w, atol=1e-5)
    assert float(L.token_importance(hh, torch.zeros_like(m)).abs().sum()) == 0.0
    with pytest.raises(ValueError, match="mask"):
        L.token_importance(hh, m[:, :3])
    u = L.uniform_importance(m)
    assert torch.allclose(u.sum(-1), torch.ones(3)) and float(u[1, 0]) == 0.25


# ---- pooling, DSA, Hid


def test_token_importance_refuses_non_finite_states_and_ignores_padding_values():
    h = torch.randn(1, 4, 3)
    m = torch.tensor([[True, True, True, False]])
    w = L.token_importance(h, m)
    h2 = h.clone()
    h2[0, 3] = math.inf  # padding: ignored
    assert torch.equal(L.token_importance(h2, m), w)
    h2[0, 1] = math.nan
    with pytest.raises(ValueError, match="non-finite"):
        L.token_importance(h2, m)


def test_pool_spans_by_hand():
    h = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [4.0, 4.0], [9.0, 9.0]]])
    w = torch.tensor([[0.1, 0.3, 0.6, 0.0]])
    units, uw = L.pool_spans(h, w, [[(0, 2), (2, 3), (3, 4)]])
    assert torch.allclose(units[0, 0], torch.tensor([0.1 / 0.4, 0.6 / 0.4]))
    assert torch.allclose(units[0, 1], torch.tensor([4.0, 4.0]))
    assert torch.allclose(units[0, 2], torch.tensor([9.0, 9.0]))  # weightless span: its plain mean
    assert torch.allclose(uw[0], torch.tensor([0.4, 0.6, 0.0]))
    # sequences with fewer spans get zero-weight padding units
    h2 = torch.cat([h, h])
    units, uw = L.pool_spans(h2, torch.cat([w, w]), [[(0, 2)], [(0, 1), (1, 3)]])
    assert uw.shape == (2, 2) and float(uw[0, 1]) == 0.0 and float(uw[0, 0]) == 1.0
    with pytest.raises(ValueError, match="outside"):
        L.pool_spans(h, w, [[(2, 9)]])


def test_dsa_by_hand_invariances_and_gradient_flow():
    t = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    s = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    w = torch.tensor([[0.5, 0.25, 0.25]])
    d_t = {(0, 1): 1.0, (0, 2): 1 - 1 / math.sqrt(2), (1, 2): 1 - 1 / math.sqrt(2)}
    d_s = {(0, 1): 0.0, (0, 2): 1.0, (1, 2): 1.0}
    # Σ_{i≠j}: each unordered pair counts twice, (i, j) and (j, i)
    want = 2 * sum(float(w[0, i] * w[0, j]) * (d_s[i, j] - d_t[i, j]) ** 2 for i, j in d_t)
    assert float(L.dsa_loss(s, t, w)) == pytest.approx(want, rel=1e-6)
    g = torch.Generator().manual_seed(3)
    tt = torch.randn(2, 6, 5, generator=g)
    ww = torch.softmax(torch.randn(2, 6, generator=g), -1)
    q, _ = torch.linalg.qr(torch.randn(5, 5, generator=g))
    scale = torch.rand(2, 6, 1, generator=g) + 0.1
    assert float(L.dsa_loss(tt @ q * scale, tt, ww)) < 1e-10  # rotation and positive rescaling: zero
    ss = torch.randn(2, 6, 5, generator=g)
    perm = torch.randperm(6, generator=g)
    a = L.dsa_loss(ss, tt, ww)
    b = L.dsa_loss(ss[:, perm], tt[:, perm], ww[:, perm])
    assert float(a) > 0 and float(a) == pytest.approx(float(b), rel=1e-5)
    # the student's units may have another size: only each side's geometry enters
    assert math.isfinite(float(L.dsa_loss(torch.randn(2, 6, 3, generator=g), tt, ww)))
    s_req, t_req = ss.clone().requires_grad_(), tt.clone().requires_grad_()
    L.dsa_loss(s_req, t_req, ww).backward()
    assert s_req.grad is not None and s_req.grad.abs().sum() > 0 and t_req.grad is None


def test_hid_loss_by_hand_with_a_projection():
    proj = L.projection(2, 2)
    assert torch.equal(proj.weight, torch.eye(2)) and proj.bias is None
    s = torch.tensor([[[1.0, 0.0], [1.0, 1.0]]])
    t = torch.tensor([[[0.0, 1.0], [2.0, 2.0]]])
    w = torch.tensor([[0.25, 0.75]])
    assert float(L.hid_loss(s, t, w, proj)) == pytest.approx(0.25 * 1.0 + 0.75 * 0.0, abs=1e-6)
    p2 = L.projection(2, 3)
    assert p2.weight.shape == (3, 2)
    with torch.no_grad():
        p2.weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]))
    t3 = torch.tensor([[[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]]])
    assert float(L.hid_loss(s, t3, w, p2)) == pytest.approx(0.0, abs=1e-6)
    t_req = t3.clone().requires_grad_()
    L.hid_loss(s, t_req, w, p2).backward()
    assert t_req.grad is None and p2.weight.grad is not None


def test_key_layers_and_the_teacher_map():
    assert L.key_layers(12) == {"word": [6], "phrase": [9, 12]}  # the paper's GPT-2 student
    assert L.key_layers(6) == {"word": [3], "phrase": [5, 6]}
    assert L.key_layers(2) == {"word": [1], "phrase": [2]}
    assert L.key_layers(1) == {"word": [1], "phrase": [1]}
    assert L.teacher_layer(6, 12, 48) == 24 and L.teacher_layer(3, 6, 30) == 15 and L.teacher_layer(5, 6, 30) == 25
    with pytest.raises(ValueError, match="l_student"):
        L.teacher_layer(7, 6, 30)
    with pytest.raises(ValueError):
        L.key_layers(0)


# ---- units


def test_word_spans_and_token_mapping_with_a_span_inside_a_token():
    text = "Don't stop, well-known friends!"
    words = [text[s:e] for s, e in U.word_char_spans(text)]
    assert words == ["Don't", "stop", "well-known", "friends"]
    offsets = [(0, 3), (3, 6), (6, 11), (11, 12), (12, 17), (17, 24), (24, 30), (30, 31)]
    # a span from inside token 1 to inside token 2 takes both whole tokens
    assert U.to_token_spans([(4, 8)], offsets) == [(1, 3)]
    assert U.to_token_spans([(0, 5)], offsets) == [(0, 2)]
    assert U.to_token_spans([(30, 31)], offsets) == [(7, 8)]
    assert U.to_token_spans([(40, 45)], offsets) == []  # past the text: no token, dropped
    assert U.to_token_spans([(0, 3), (1, 2)], offsets) == [(0, 1)]  # duplicates kept once
    assert U.to_token_spans([(0, 3)], [(0, 0), (0, 3)]) == [(1, 2)]  # empty tokens belong to no span


@pytest.mark.assets
def test_phrase_spans_on_known_chunks():
    text = "The quick brown fox has been jumping over the lazy dogs."
    got = U.phrase_kinds(text)
    assert ("NP", "The quick brown fox") in got and ("NP", "the lazy dogs") in got
    assert ("VP", "has been jumping") in got
    spans = U.phrase_char_spans(text)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # in order, not overlapping


@pytest.mark.assets
def test_encoded_pairs_label_the_response_and_map_units_onto_tokens():
    from acl26 import tokenization

    tok = tokenization.load("smollm2")
    pair = D.Pair("sotu", "Continue: The nation is strong.", "We have built new roads for our people.")
    (e,) = D.encode(tok, [pair], max_len=128)
    text = tok.decode(e.ids)
    resp = [i for i, lab in enumerate(e.labels) if lab]
    assert tok.decode([e.ids[i] for i in resp]) == pair.reference + tok.eos_token
    assert resp == list(range(resp[0], len(e.ids)))
    words = [tok.decode(e.ids[s:t]).strip() for s, t in e.words]
    assert words[-8:] == ["We", "have", "built", "new", "roads", "for", "our", "people"]
    assert words[:1] == ["Continue"] and "nation" in words
    phrases = [tok.decode(e.ids[s:t]).strip() for s, t in e.phrases]
    assert "new roads" in phrases and "our people" in phrases and "The nation" in phrases
    assert all(0 <= s < t <= len(e.ids) for s, t in e.words + e.phrases)
    assert text.startswith("<|im_start|>system")
    assert e.content is not None and not any(e.content[:5])  # the template's first tokens are not content
    content_text = tok.decode([i for i, c in zip(e.ids, e.content) if c])
    assert "Continue: The nation is strong." in content_text and pair.reference in content_text
    assert "<|im_start|>" not in content_text and "assistant" not in content_text
    with pytest.raises(ValueError, match="max_len=12 leaves no response token"):
        D.encode(tok, [pair], max_len=12)
    kept = D.encode(tok, [pair, D.Pair("x", "Hi", "Yes.")], max_len=22, skip_unlabelled=True)
    assert [k.pair.prompt for k in kept] == ["Hi"]
    (cut,) = D.encode(tok, [pair], max_len=30)
    assert len(cut.ids) == 30 and any(cut.labels) and all(t <= 30 for _, t in cut.words + cut.phrases)


@pytest.mark.assets
def test_heldout_pairs_come_from_other_addresses_and_other_problems():
    params = dict(train_pairs=40, eval_pairs=12, gym_share=0.25, prompt_words=12, response_words=8, seed=0)
    ex = D.examples(params)
    assert len(ex["train"]) == 40 and len(ex["heldout"]) == 12
    train_q = {p.prompt for p in ex["train"] if p.source == "chain_sum"}
    assert not train_q & {p.prompt for p in ex["heldout"] if p.source == "chain_sum"}
    train_text = " ".join(p.prompt + " " + p.reference for p in ex["train"] if p.source == "sotu")
    for p in ex["heldout"]:
        if p.source == "sotu":
            assert p.reference not in train_text
    assert D.examples(params)["train"] == ex["train"]  # deterministic


# ---- the student and the loop


def _tiny_lm(layers: int = 4, vocab: int = 97, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


def test_layer_subset_and_make_student():
    assert Dl.layer_subset(30, 6) == [0, 6, 12, 17, 23, 29]
    assert Dl.layer_subset(30, 8) == [0, 4, 8, 12, 17, 21, 25, 29]
    assert Dl.layer_subset(5, 5) == [0, 1, 2, 3, 4] and Dl.layer_subset(5, 1) == [4]
    with pytest.raises(ValueError):
        Dl.layer_subset(5, 6)
    t = _tiny_lm()
    s = Dl.make_student(t, [0, 3])
    assert s.config.num_hidden_layers == 2
    assert torch.equal(s.model.layers[1].mlp.up_proj.weight, t.model.layers[3].mlp.up_proj.weight)
    assert torch.equal(s.model.embed_tokens.weight, t.model.embed_tokens.weight)
    full = Dl.make_student(t, [0, 1, 2, 3]).eval()
    x = torch.randint(0, 97, (2, 9))
    assert torch.allclose(full(input_ids=x).logits, t(input_ids=x).logits, atol=1e-6)
    with pytest.raises(ValueError, match="increasing"):
        Dl.make_student(t, [2, 1])
    Dl.freeze_embeddings(s)
    assert not s.model.embed_tokens.weight.requires_grad and not s.lm_head.weight.requires_grad


def test_condition_validation():
    with pytest.raises(ValueError, match="base"):
        Dl.Condition(base="kl")
    with pytest.raises(ValueError, match="units"):
        Dl.Condition(units="sentence")
    with pytest.raises(ValueError, match="lambda_dsa"):
        Dl.Condition(lambda_dsa=float("nan"))
    assert not Dl.Condition().mta and Dl.Condition(hid=True).mta


def _tiny_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    teacher = _tiny_lm(4, seed=1)
    student = Dl.make_student(teacher, [0, 3])
    g = torch.Generator().manual_seed(0)
    items = []
    for i in range(6):
        n = 10 + i
        ids = torch.randint(0, 97, (n,), generator=g).tolist()
        labels = [j >= n // 2 for j in range(n)]
        items.append(D.Encoded(D.Pair("x", f"p{i}", f"r{i}"), ids, labels, words=[(0, 2), (2, 3), (5, 7)],
                               phrases=[(0, 3), (5, 8)]))
    key = L.key_layers(2)
    layers = [L.teacher_layer(x, 2, 4) for x in key["word"] + key["phrase"]]
    cache = D.teacher_cache(teacher, items, layers, top_k=5, pad_id=0, progress=False)
    return Dl.Setup(student, "tiny", items, cache, key, pad_id=0), teacher


def test_teacher_cache_holds_the_teachers_top_k_and_states(tmp_path, monkeypatch):
    setup, teacher = _tiny_setup(tmp_path, monkeypatch)
    b = setup.batch([1, 4])
    with torch.no_grad():
        out = teacher(input_ids=b["ids"], attention_mask=b["attn"].long(), output_hidden_states=True)
    lp = torch.log_softmax(out.logits, -1)
    top = lp.topk(5, -1)
    m = b["attn"]
    assert torch.equal(b["topk_idx"][m], top.indices[m])
    assert torch.allclose(b["topk_logp"][m], top.values[m], atol=1e-6)
    assert torch.allclose(b["hidden"][:, :, 0][m], out.hidden_states[2][m], atol=1e-2)  # float16 cache
    assert setup.cache.layers == [2, 4]
    again = D.teacher_cache(teacher, setup.items, [2, 4], top_k=5, pad_id=0, progress=False)
    assert again.folder == setup.cache.folder
    with pytest.raises(ValueError, match="outside"):
        D.teacher_cache(teacher, setup.items, [5], top_k=5, pad_id=0, progress=False)


def test_distill_is_deterministic_cached_and_each_term_changes_the_loss(tmp_path, monkeypatch):
    setup, teacher = _tiny_setup(tmp_path, monkeypatch)
    cfg = Dl.DistillConfig(steps=3, batch_size=2, lr=1e-2, seed=0)
    full = Dl.Condition(dsa=True, hid=True)
    a = Dl.distill(setup, full, cfg, name="t-a", progress=False, use_cache=False)
    b = Dl.distill(setup, full, cfg, name="t-b", progress=False, use_cache=False)
    for (k, v), w in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(v, w), k
    c = Dl.distill(setup, full, cfg, name="t-a", progress=False)  # a saved its result: a cache hit
    assert c.from_cache and c.log["key"] == a.log["key"]
    for (k, v), w in zip(a.model.state_dict().items(), c.model.state_dict().values()):
        assert torch.equal(v, w), k
    # a trained model and its cached copy have the same evaluation key (weights and config)
    assert D.state_digest(a.model) == D.state_digest(c.model)
    assert Dl._config_of(a.model) == Dl._config_of(c.model)
    other = Dl.distill(setup, full, Dl.DistillConfig(steps=3, batch_size=2, lr=1e-2, seed=1), name="t-a", progress=False)
    assert other.log["key"] != c.log["key"]
    # the embeddings stay the teacher's; the layers move
    assert torch.equal(a.model.model.embed_tokens.weight, setup.student.model.embed_tokens.weight)
    assert not torch.equal(a.model.model.layers[0].mlp.up_proj.weight, setup.student.model.layers[0].mlp.up_proj.weight)
    projs = torch.nn.ModuleList([L.projection(16, 16) for _ in range(2)])
    batch = setup.batch([0, 5])
    base = Dl.loss_terms(setup.student, projs, batch, Dl.Condition(), setup)
    assert set(base) == {"base", "loss"} and torch.equal(base["loss"], base["base"])
    terms = {name: Dl.loss_terms(setup.student, projs, batch, cond, setup)
             for name, cond in {"full": full, "dsa": Dl.Condition(dsa=True), "hid": Dl.Condition(hid=True),
                                "word": Dl.Condition(dsa=True, hid=True, units="word"),
                                "flat": Dl.Condition(dsa=True, hid=True, importance=False)}.items()}
    f = terms["full"]
    assert float(f["loss"]) == pytest.approx(float(f["base"] + 2.0 * f["dsa"] + 0.2 * f["hid"]), rel=1e-6)
    assert float(terms["dsa"]["loss"]) == pytest.approx(float(f["base"] + 2.0 * f["dsa"]), rel=1e-6)
    assert float(terms["hid"]["loss"]) == pytest.approx(float(f["base"] + 0.2 * f["hid"]), rel=1e-6)
    assert float(terms["word"]["dsa"]) != pytest.approx(float(f["dsa"]))
    assert float(terms["flat"]["hid"]) != pytest.approx(float(f["hid"]))
    times = Dl.step_times(setup, {"base": Dl.Condition(), "MTA": full}, batch_size=2, rounds=2)
    assert len(times["base"]) == len(times["MTA"]) == 2
    # as a user runs a step: the teacher's forward inside it, on both arms
    calls = []
    original = teacher.forward

    def counted(*a, **k):
        calls.append(k.get("output_hidden_states"))
        return original(*a, **k)

    teacher.forward = counted
    times = Dl.step_times(setup, {"base": Dl.Condition(), "MTA": full}, batch_size=2, rounds=2, teacher=teacher)
    assert len(times["MTA"]) == 2 and calls.count(True) == calls.count(False) >= 2  # warm-up calls too


def test_the_base_loss_compares_the_logits_at_t_with_the_teachers_at_t(tmp_path, monkeypatch):
    """The student's logits and the teacher's cached top-k are taken at the same positions (the ones
    before each label): with top-k = the whole vocabulary the loss is the full-vocabulary KL there."""
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    teacher = _tiny_lm(4, seed=1)
    student = Dl.make_student(_tiny_lm(4, seed=2), [0, 3])  # other weights: a KL far from 0
    with torch.no_grad():
        student.lm_head.weight.mul_(30.0)
    g = torch.Generator().manual_seed(5)
    items = [D.Encoded(D.Pair("x", "p", "r"), torch.randint(0, 97, (n,), generator=g).tolist(),
                       [j >= n - 4 for j in range(n)], words=[(0, 2)], phrases=[(0, 2)]) for n in (9, 12)]
    cache = D.teacher_cache(teacher, items, [2, 4], top_k=97, pad_id=0, progress=False)
    setup = Dl.Setup(student, "tiny", items, cache, L.key_layers(2), pad_id=0)
    b = setup.batch([0, 1])
    got = Dl.loss_terms(student, torch.nn.ModuleList(), b, Dl.Condition(base="fkl"), setup)["base"]
    with torch.no_grad():
        want, n = 0.0, 0
        for e in items:
            ids = torch.tensor([e.ids])
            sl = torch.log_softmax(student(input_ids=ids).logits[0], -1)
            tl = torch.log_softmax(teacher(input_ids=ids).logits[0], -1)
            for t in range(len(e.ids) - 1):
                if e.labels[t + 1]:
                    want += float((tl[t].exp() * (tl[t] - sl[t])).sum())
                    n += 1
    assert want / n > 0.05
    assert float(got) == pytest.approx(want / n, rel=1e-4)


def test_make_student_refuses_other_layouts():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2, n_positions=32))
    with pytest.raises(ValueError, match="model.layers"):
        Dl.make_student(gpt2, [0])


def test_response_nll_is_the_reference_tokens_cross_entropy(tmp_path, monkeypatch):
    setup, teacher = _tiny_setup(tmp_path, monkeypatch)
    items = setup.items[:3]
    got = Dl.response_nll(teacher, items, pad_id=0)
    for e, v in zip(items, got):
        ids = torch.tensor([e.ids])
        with torch.no_grad():
            logp = torch.log_softmax(teacher(input_ids=ids).logits[0, :-1], -1)
        tgt = [i for i in range(1, len(e.ids)) if e.labels[i]]
        want = -float(np.mean([float(logp[i - 1, e.ids[i]]) for i in tgt]))
        assert v == pytest.approx(want, rel=1e-5)


@pytest.mark.assets
@pytest.mark.slow
def test_the_study_runs_on_local_teacher_and_student_checkpoints(tmp_path, monkeypatch):
    from acl26 import claims as C
    from acl26 import registry
    from acl26.papers.mta import study

    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    teacher, tok = study.tiny_teacher(seed=3)
    student = Dl.make_student(teacher, [1, 3])
    teacher.save_pretrained(tmp_path / "teacher")
    tok.save_pretrained(tmp_path / "teacher")
    student.save_pretrained(tmp_path / "student")
    ch = registry.get("mta")
    p = ch.spec.resolve("smoke", {"teacher": str(tmp_path / "teacher"), "student": str(tmp_path / "student")})
    r = study.run_experiments(p, progress=False)
    assert r["recovery"] is None and r["student_id"].startswith("local:") and r["teacher_id"].startswith("local:")
    assert r["n_student"] == 2 and r["n_teacher"] == 4 and r["teacher_layers"] == [2, 4]
    ledger = C.Ledger("mta", "smoke", list(ch.claims))
    ch.record_claims(ledger, r)
    assert ledger.entries["student_recovers"].holds == C.UNTESTED
    assert ledger.entries["trl_agrees"].holds == C.HOLDS
    with pytest.raises(Exception, match="teacher"):
        ch.spec.resolve("smoke", {"teacher": str(tmp_path / "nowhere")})


def test_reading_the_verdicts_is_made_by_the_package():
    """The notebook's "Reading the verdicts" prose depends on verdicts: it is made by tested package
    code (verdicts.reading), not by a notebook cell branching on them."""
    import copy

    from cases import mta as mta_cases
    from acl26 import claims as C
    from acl26 import registry
    from acl26.papers.mta import verdicts

    ch = registry.get("mta")
    good = mta_cases.synthetic()
    params = {"steps": 10}
    ledger = C.Ledger("mta", "book", list(ch.claims))
    ch.record_claims(ledger, good)
    assert verdicts.reading(ledger, good, params) == "Every claim tested here holds."
    bad = copy.deepcopy(good)
    base = bad["base_losses"][0]
    for s in bad["seeds"]:
        bad["runs"][f"{base}|MTA|{s}"] = mta_cases.rec(15.0, s, noise=0.5, salt=77)
    ledger = C.Ledger("mta", "book", list(ch.claims))
    ch.record_claims(ledger, bad)
    text = verdicts.reading(ledger, bad, params)
    assert text.startswith("- **MTA improves") and "10 steps" in text


def test_every_quality_claim_needs_the_teacher_ahead_control():
    """The student must trail the teacher by more than the main comparison's interval half-width;
    otherwise each quality claim is not testable here, whatever its own figure."""
    import copy

    from cases import mta as mta_cases
    from acl26 import claims as C
    from acl26 import registry

    ch = registry.get("mta")
    quality = [c.id for c in ch.claims if "teacher_ahead" in c.controls]
    assert set(quality) == {"improves_sfkl", "improves_fkl", "improves_srkl", "dsa_over_hid", "word_and_phrase",
                            "importance_helps"}
    good = mta_cases.synthetic()
    ledger = C.Ledger("mta", "book", list(ch.claims))
    ch.record_claims(ledger, good)
    assert ledger.entries["teacher_ahead"].holds == C.HOLDS and ledger.entries["improves_sfkl"].holds == C.HOLDS
    for lead in (5.0, 15.2):  # behind the start student; ahead by less than the seeds' half-width
        bad = copy.deepcopy(good)
        bad["evals"]["teacher"] = mta_cases.rec(lead, 9)
        ledger = C.Ledger("mta", "book", list(ch.claims))
        ch.record_claims(ledger, bad)
        assert ledger.entries["teacher_ahead"].holds != C.HOLDS
        for cid in quality:
            if ledger.entries[cid].holds != C.UNTESTED:  # fkl / srkl: not run in this profile
                assert ledger.entries[cid].holds == C.NOT_TESTABLE, cid
        assert ledger.entries["overhead"].holds == C.HOLDS  # not a quality claim: no control


def test_the_kl_claims_need_room_to_close():
    """closer_* measure distillation as KL to the teacher; where the start student is already as close to the
    teacher as the comparison's half-width, no gain could be seen: not testable here."""
    import copy

    from cases import mta as mta_cases
    from acl26 import claims as C
    from acl26 import registry

    ch = registry.get("mta")
    assert {c.id for c in ch.claims if "kl_room" in c.controls} == {"closer_sfkl", "closer_fkl", "closer_srkl"}
    good = mta_cases.synthetic()
    ledger = C.Ledger("mta", "book", list(ch.claims))
    ch.record_claims(ledger, good)
    assert ledger.entries["kl_room"].holds == C.HOLDS and ledger.entries["closer_sfkl"].holds == C.HOLDS
    assert "two-level bootstrap" in ledger.entries["closer_sfkl"].note
    bad = copy.deepcopy(good)
    bad["kl"]["start"] = [1e-4] * mta_cases.N_PAIRS  # the start student already matches the teacher
    ledger = C.Ledger("mta", "book", list(ch.claims))
    ch.record_claims(ledger, bad)
    assert ledger.entries["kl_room"].holds != C.HOLDS
    assert all(ledger.entries[f"closer_{b}"].holds == C.NOT_TESTABLE for b in ("sfkl", "fkl", "srkl"))
    nokl = copy.deepcopy(good)
    del nokl["kl"]
    ledger = C.Ledger("mta", "book", list(ch.claims))
    ch.record_claims(ledger, nokl)
    assert ledger.entries["closer_sfkl"].holds == C.UNTESTED and ledger.entries["kl_room"].holds == C.UNTESTED


def test_heldout_kl_is_zero_for_the_teacher_itself_and_positive_otherwise():
    from acl26.papers.mta import data as D
    from acl26.papers.mta import distill as Dl
    from acl26.papers.mta import spec, study

    P = spec.SPEC.resolve("smoke", {})
    teacher, tok = study.tiny_teacher()
    other, _ = study.tiny_teacher(seed=1)
    pairs = D.examples(P)["heldout"]
    items = D.encode(tok, pairs, max_len=P["max_len"], with_units=False, skip_unlabelled=True)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    same = Dl.heldout_kl(teacher, teacher, items, pad, batch_size=3)
    assert len(same) == len(items) and max(abs(x) for x in same) < 1e-5
    diff = Dl.heldout_kl(other, teacher, items, pad)
    assert all(x > 1e-3 for x in diff)
    # the teacher's log-probabilities made once give the same figures (the study reuses them for every model)
    t_lp = Dl.teacher_logprobs(teacher, items, pad, batch_size=2)
    again = Dl.heldout_kl(other, None, items, pad, batch_size=5, teacher_lp=t_lp)
    assert np.allclose(again, diff, rtol=1e-5, atol=1e-6)
    # by hand, for the first pair: the mean over its response positions of sum p (log p - log q)
    b = D.pad_batch(items[:1], pad)
    pos = (D.predict_mask(b["labels"]) & b["attn"]).bool()[0]
    with torch.no_grad():
        lp = torch.log_softmax(teacher(input_ids=b["ids"]).logits[0][pos].double(), -1)
        lq = torch.log_softmax(other(input_ids=b["ids"]).logits[0][pos].double(), -1)
    assert diff[0] == pytest.approx(float((lp.exp() * (lp - lq)).sum(-1).mean()), rel=1e-4)
    with pytest.raises(ValueError, match="teacher_lp holds"):
        Dl.heldout_kl(other, None, items, pad, teacher_lp=t_lp[:-1])


def test_no_lead_is_no_room_even_without_noise():
    import copy

    from cases import mta as mta_cases
    from acl26 import claims as C
    from acl26 import registry

    ch = registry.get("mta")
    r = copy.deepcopy(mta_cases.synthetic())
    flat = mta_cases.rec(20.0, 0, noise=0.0)
    for k in r["runs"]:
        r["runs"][k] = dict(flat)  # every run identical: half-width 0
    r["evals"]["teacher"] = r["evals"]["start"] = dict(flat)  # and no lead
    ledger = C.Ledger("mta", "book", list(ch.claims))
    ch.record_claims(ledger, r)
    assert ledger.entries["teacher_ahead"].holds == C.FAILS
    assert ledger.entries["improves_sfkl"].holds == C.NOT_TESTABLE


def test_one_reference_pass_gives_the_nll_and_the_kl_with_or_without_logits_to_keep(tmp_path, monkeypatch):
    setup, teacher = _tiny_setup(tmp_path, monkeypatch)
    items, student = setup.items, setup.student
    t_lp = Dl.teacher_logprobs(teacher, items, 0, batch_size=4)
    got = Dl.reference_scores(student, items, 0, batch_size=4, teacher_lp=t_lp)
    assert np.allclose(got["kl"], Dl.heldout_kl(student, None, items, 0, batch_size=3, teacher_lp=t_lp), rtol=1e-5)
    # the NLL by hand: mean -log q(reference token) over the positions that predict it
    for e, v in zip(items, got["nll"]):
        with torch.no_grad():
            lq = torch.log_softmax(student(input_ids=torch.tensor([e.ids])).logits[0].double(), -1)
        want = -np.mean([float(lq[i - 1, e.ids[i]]) for i in range(1, len(e.ids)) if e.labels[i]])
        assert v == pytest.approx(want, rel=1e-5)
    # a forward without logits_to_keep takes the full logits and gives the same figures
    monkeypatch.setattr(Dl.evaluation, "keeps_logits", lambda model: False)
    full = Dl.reference_scores(student, items, 0, batch_size=4, teacher_lp=t_lp)
    assert np.allclose(full["nll"], got["nll"], rtol=1e-5) and np.allclose(full["kl"], got["kl"], rtol=1e-5)
    assert "kl" not in Dl.reference_scores(student, items, 0)
    with pytest.raises(ValueError, match="teacher_lp holds"):
        Dl.reference_scores(student, items, 0, teacher_lp=t_lp[:2])


def test_evaluate_caches_the_kl_under_its_teacher(tmp_path, monkeypatch):
    from acl26.papers.mta import study

    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    teacher, tok = study.tiny_teacher()
    other, _ = study.tiny_teacher(seed=1)
    pairs = [D.Pair("x", "Add 2 and 3.", "5"), D.Pair("x", "Say hello.", "hello")]
    items = D.encode(tok, pairs, max_len=64, with_units=False, skip_unlabelled=True)
    t_lp = Dl.teacher_logprobs(teacher, items, tok.eos_token_id)
    ev = dict(samples=2, max_new_tokens=3, seed=0, pad_id=tok.eos_token_id, batch_size=4)
    rec = Dl.evaluate(other, tok, pairs, items, cache_key={"who": "o"}, teacher_lp=t_lp, teacher_key="t1", **ev)
    assert np.allclose(rec["kl"], Dl.heldout_kl(other, None, items, tok.eos_token_id, teacher_lp=t_lp), rtol=1e-5)
    assert len(rec["rouge"]) == len(rec["texts"]) == 2
    plain = Dl.evaluate(other, tok, pairs, items, cache_key={"who": "o"}, **ev)  # no KL asked for: its own entry
    assert "kl" not in plain and plain["nll"] == rec["nll"]
    assert len(list((tmp_path / "mta").glob("eval-*.json"))) == 2
    again = Dl.evaluate(other, tok, pairs, items, cache_key={"who": "o"}, teacher_lp=t_lp, teacher_key="t1", **ev)
    assert again == rec  # a cache hit
    Dl.evaluate(other, tok, pairs, items, cache_key={"who": "o"}, teacher_lp=t_lp, teacher_key="t2", **ev)
    assert len(list((tmp_path / "mta").glob("eval-*.json"))) == 3  # another teacher: another entry
    with pytest.raises(ValueError, match="teacher_key"):
        Dl.evaluate(other, tok, pairs, items, cache_key={"who": "o"}, teacher_lp=t_lp, **ev)


def test_sampled_responses_follow_the_seed_and_stop_at_eos():
    from acl26.papers.mta import study

    model, tok = study.tiny_teacher()
    pairs = [D.Pair("x", f"Question {i}?", "answer") for i in range(3)]
    a = Dl.sample_responses(model, tok, pairs, samples=2, max_new_tokens=5, seed=3, batch_size=4)
    b = Dl.sample_responses(model, tok, pairs, samples=2, max_new_tokens=5, seed=3, batch_size=4)
    c = Dl.sample_responses(model, tok, pairs, samples=2, max_new_tokens=5, seed=4, batch_size=4)
    assert a == b and a != c and len(a) == 3 and all(len(r) == 2 for r in a)
    with pytest.raises(ValueError, match="samples"):
        Dl.sample_responses(model, tok, pairs, samples=0, max_new_tokens=5, seed=3, batch_size=4)


def test_distill_in_bf16_only_where_native_and_the_key_says_which(tmp_path, monkeypatch):
    from acl26 import training

    setup, _ = _tiny_setup(tmp_path, monkeypatch)
    full = Dl.Condition(dsa=True, hid=True)
    fp = Dl.DistillConfig(steps=2, batch_size=2, lr=1e-2, seed=0)
    bf = Dl.DistillConfig(steps=2, batch_size=2, lr=1e-2, seed=0, bf16=True)
    seen = []
    real = Dl.loss_terms

    def spy(*a, **k):
        seen.append(k.get("bf16"))
        return real(*a, **k)

    monkeypatch.setattr(Dl, "loss_terms", spy)
    monkeypatch.setattr(training, "bf16_native_on", lambda device: True)
    on = Dl.distill(setup, full, bf, name="b", progress=False, use_cache=False)
    assert seen == [True, True] and on.log["precision"] == "bf16 autocast"
    monkeypatch.setattr(training, "bf16_native_on", lambda device: False)
    seen.clear()
    off = Dl.distill(setup, full, bf, name="b", progress=False, use_cache=False)
    assert seen == [False, False] and off.log["precision"] == "fp32"
    plain = Dl.distill(setup, full, fp, name="b", progress=False, use_cache=False)
    # three keys: bf16 that ran, bf16 asked for but fp32 ran, fp32 asked for
    assert len({on.log["key"], off.log["key"], plain.log["key"]}) == 3
    # under autocast the losses stay float32 and close to the fp32 ones
    monkeypatch.setattr(Dl, "loss_terms", real)
    projs = torch.nn.ModuleList([L.projection(16, 16) for _ in range(2)])
    batch = setup.batch([0, 5])
    t32 = real(setup.student, projs, batch, full, setup)
    t16 = real(setup.student, projs, batch, full, setup, bf16=True)
    assert t16["loss"].dtype == torch.float32 and float(t16["loss"]) == pytest.approx(float(t32["loss"]), rel=0.05)
