"""Model-interpolation chapter: the merge, the streamed merge, σ, TA/TIES via mergekit, rollouts, the band, the verdicts."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from acl26 import claims as C
from acl26.papers.model_interpolation import merge as M
from acl26.papers.model_interpolation import rollout as R
from acl26.papers.model_interpolation import ablation, spec, stages, study, tables, verdicts
from cases.model_interpolation import rec as _rec, synthetic as _synthetic


def _tiny_llama(seed: int, layers: int = 3, vocab: int = 64):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=False)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg)


@pytest.fixture(scope="module")
def pair_sd():
    a, b = _tiny_llama(0), _tiny_llama(1)
    return ({k: v.detach().clone() for k, v in a.state_dict().items()},
            {k: v.detach().clone() for k, v in b.state_dict().items()})


# ---- interpolate


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_endpoints_bit_exact_and_dtype_kept(pair_sd, dtype):
    a = {k: v.to(dtype) for k, v in pair_sd[0].items()}
    b = {k: v.to(dtype) for k, v in pair_sd[1].items()}
    for lam, ref in ((0, a), (0.0, a), (1, b), (1.0, b)):
        out = M.interpolate(a, b, lam)
        assert set(out) == set(ref)
        for k in ref:
            assert out[k].dtype == dtype and torch.equal(out[k], ref[k])
            assert out[k].data_ptr() != ref[k].data_ptr()  # a new state dict, not views of the inputs
    mid = M.interpolate(a, b, 0.3)
    assert all(mid[k].dtype == dtype for k in mid)


def test_interior_is_the_formula(pair_sd):
    a, b = pair_sd
    for lam in (0.1, 0.25, 0.5, 0.73, 0.999):
        out = M.interpolate(a, b, lam)
        for k in a:
            ref = a[k].double() + lam * (b[k].double() - a[k].double())
            assert torch.allclose(out[k].double(), ref, atol=1e-6, rtol=1e-6), k
    # bf16: within one bf16 rounding of the exact value
    a16 = {k: v.bfloat16() for k, v in a.items()}
    b16 = {k: v.bfloat16() for k, v in b.items()}
    out = M.interpolate(a16, b16, 0.4)
    for k in a16:
        ref = a16[k].double() + 0.4 * (b16[k].double() - a16[k].double())
        assert torch.allclose(out[k].double(), ref, rtol=2 ** -7, atol=1e-6), k


def test_inputs_untouched(pair_sd):
    a, b = pair_sd
    a0 = {k: v.clone() for k, v in a.items()}
    M.interpolate(a, b, 0.5, layers=[1], modules="mlp")
    assert all(torch.equal(a[k], a0[k]) for k in a)


def test_layer_and_module_filters(pair_sd):
    a, b = pair_sd
    out = M.interpolate(a, b, 0.5, layers=[0, 2])
    for k in a:
        changed = not torch.equal(out[k], a[k])
        layer = M.layer_of(k)
        expect = layer in (0, 2) and M.module_of(k) is not None  # attention and MLP tensors of those layers
        assert changed == expect, k
    out = M.interpolate(a, b, 0.5, modules="mlp")
    for k in a:
        assert (not torch.equal(out[k], a[k])) == (M.module_of(k) == "mlp"), k
    out = M.interpolate(a, b, 0.5, modules=["attn"], layers=[1])
    for k in a:
        assert (not torch.equal(out[k], a[k])) == (M.module_of(k) == "attn" and M.layer_of(k) == 1), k
    # embeddings, norms and the head stay Instruct's under any restriction
    for k in ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "model.layers.0.input_layernorm.weight"):
        assert torch.equal(M.interpolate(a, b, 0.7, modules=["attn", "mlp"])[k], a[k])
    # both modules of every layer = everything but embeddings, norms and head
    full = M.interpolate(a, b, 0.7)
    restricted = M.interpolate(a, b, 0.7, modules=["attn", "mlp"], layers=[0, 1, 2])
    for k in a:
        if M.module_of(k) is not None:
            assert torch.equal(full[k], restricted[k])
    assert not torch.equal(full["model.embed_tokens.weight"], a["model.embed_tokens.weight"])


def test_names_of_other_families():
    assert M.layer_of("transformer.h.11.mlp.c_fc.weight") == 11 and M.module_of("transformer.h.11.mlp.c_fc.weight") == "mlp"
    assert M.module_of("transformer.h.3.attn.c_attn.weight") == "attn"
    assert M.module_of("model.layers.7.block_sparse_moe.experts.0.w1.weight") == "mlp"
    assert M.layer_of("model.embed_tokens.weight") is None and M.module_of("model.norm.weight") is None
    assert M.module_of("model.layers.2.post_attention_layernorm.weight") is None


def test_numpy_scalars_are_numbers(pair_sd):
    a, b = pair_sd
    for lam in (np.float32(0.5), np.int64(0), np.float64(1.0), np.int32(1)):
        out = M.interpolate(a, b, lam, layers=[np.int64(1)])
        ref = M.interpolate(a, b, float(lam), layers=[1])
        assert all(torch.equal(out[k], ref[k]) for k in a)
    with pytest.raises(ValueError, match="lam"):
        M.interpolate(a, b, np.bool_(True))


@pytest.mark.parametrize("lam", [-0.1, 1.0001, float("nan"), float("inf"), True, "0.5", None])
def test_bad_lambda(pair_sd, lam):
    with pytest.raises(ValueError, match="lam"):
        M.interpolate(*pair_sd, lam)


def test_mismatches_name_the_tensor(pair_sd):
    a, b = pair_sd
    b2 = dict(b)
    b2["model.layers.1.mlp.up_proj.weight"] = torch.zeros(3, 3)
    with pytest.raises(ValueError, match="model.layers.1.mlp.up_proj.weight"):
        M.interpolate(a, b2, 0.5)
    with pytest.raises(ValueError, match="model.layers.1.mlp.up_proj.weight"):  # also outside the selection
        M.interpolate(a, b2, 0.5, layers=[0])
    b3 = dict(b)
    b3.pop("model.norm.weight")
    with pytest.raises(ValueError, match="model.norm.weight"):
        M.interpolate(a, b3, 0.5)
    b4 = dict(b)
    b4["model.norm.weight"] = b["model.norm.weight"].half()
    with pytest.raises(ValueError, match="model.norm.weight: dtypes differ"):
        M.interpolate(a, b4, 0.5)
    with pytest.raises(ValueError, match="layers"):
        M.interpolate(a, b, 0.5, layers=[5])
    with pytest.raises(ValueError, match="modules"):
        M.interpolate(a, b, 0.5, modules="ffn")
    with pytest.raises(ValueError, match="layers"):
        M.interpolate(a, b, 0.5, layers=[])


def test_similarity():
    a = {"x": torch.tensor([1.0, -2.0, 3.0]), "y": torch.tensor([2.0, 2.0])}
    assert M.similarity(a, a) == 0.0
    neg = {k: -v for k, v in a.items()}
    assert M.similarity(a, neg) == pytest.approx(1.0)
    b = {"x": torch.tensor([1.0, -1.0, 3.0]), "y": torch.tensor([2.0, 4.0])}
    sx = 1 / (6 + 5)
    sy = 2 / (4 + 6)
    assert M.similarity(a, b) == pytest.approx((sx + sy) / 2)
    assert M.similarity(a, b, reduce="pooled") == pytest.approx(3 / 21)
    with pytest.raises(ValueError, match="reduce"):
        M.similarity(a, b, reduce="max")


# ---- streamed


def test_streamed_matches_in_memory(tmp_path):
    from transformers import AutoModelForCausalLM

    a, b = _tiny_llama(0), _tiny_llama(1)
    a.save_pretrained(tmp_path / "a")
    b.config.tag = "thinking"
    b.save_pretrained(tmp_path / "b")
    for shard_bytes, layers, modules in ((1 << 30, None, None), (4096, [0, 2], None), (2048, None, "mlp")):
        out = M.interpolate_files(tmp_path / "a", tmp_path / "b", tmp_path / "out", 0.35, layers=layers,
                                  modules=modules, shard_bytes=shard_bytes)
        merged = AutoModelForCausalLM.from_pretrained(out)
        assert getattr(merged.config, "tag", None) == "thinking"  # config copied from Thinking
        ref = M.interpolate(a.state_dict(), b.state_dict(), 0.35, layers=layers, modules=modules)
        got = merged.state_dict()
        for k in ref:
            assert torch.equal(got[k], ref[k]), k
        assert (len(list(out.glob("*.safetensors"))) > 1) == (shard_bytes < 1 << 20)
    with pytest.raises(ValueError, match="lam"):
        M.interpolate_files(tmp_path / "a", tmp_path / "b", tmp_path / "bad", 2.0)
    assert not (tmp_path / "bad").exists()


def test_streamed_shape_mismatch_leaves_nothing(tmp_path):
    a, b = _tiny_llama(0), _tiny_llama(1, vocab=80)
    a.save_pretrained(tmp_path / "a")
    b.save_pretrained(tmp_path / "b")
    with pytest.raises(ValueError, match="embed_tokens|lm_head"):
        M.interpolate_files(tmp_path / "a", tmp_path / "b", tmp_path / "out", 0.5)
    assert not (tmp_path / "out").exists()


# ---- TA and TIES through mergekit


def _ties_reference(base, tvs, density, scale):
    """TIES from its definition (Yadav et al. 2023), numpy: trim, elect by summed sign, disjoint mean."""
    trimmed = []
    for tv in tvs:
        k = int(density * tv.size)
        keep = np.zeros(tv.size, bool)
        keep[np.argsort(-np.abs(tv))[:k]] = True
        trimmed.append(np.where(keep, tv, 0.0))
    T = np.stack(trimmed)
    sign = np.where(T.sum(0) >= 0, 1.0, -1.0)
    agree = (np.sign(T) == sign) & (T != 0)
    count = agree.sum(0)
    merged = np.where(count > 0, (T * agree).sum(0) / np.maximum(count, 1), 0.0)
    return base + scale * merged


def test_ties_against_its_definition():
    rng = np.random.default_rng(0)
    n = 200
    base = rng.normal(size=n)
    a = base + rng.normal(size=n)
    b = base + rng.normal(size=n)
    tb = {"layer.w": torch.tensor(base, dtype=torch.float64)}
    out = M.ties(tb, {"i": {"layer.w": torch.tensor(a)}, "t": {"layer.w": torch.tensor(b)}}, density=0.2, scale=0.5)
    ref = _ties_reference(base, [a - base, b - base], 0.2, 0.5)
    np.testing.assert_allclose(out["layer.w"].numpy(), ref, rtol=1e-6, atol=1e-9)


def test_ties_sign_election_by_hand():
    base = {"w": torch.zeros(4)}
    i = {"w": torch.tensor([2.0, -1.0, 3.0, -4.0])}
    t = {"w": torch.tensor([-1.0, -3.0, 1.0, 2.0])}
    out = M.ties(base, {"i": i, "t": t}, density=1.0, scale=1.0)["w"]
    # entry 0: sum +1 -> +, only 2 agrees -> 2; entry 1: both -, mean -2; entry 2: both +, mean 2;
    # entry 3: sum -2 -> -, only -4 agrees -> -4
    assert torch.allclose(out, torch.tensor([2.0, -2.0, 2.0, -4.0]))
    half = M.ties(base, {"i": i, "t": t}, density=0.5, scale=0.5)["w"]
    # trim to 2 of 4: i keeps 3, -4; t keeps -1 (rank tie with 1? no: |-3|, |2| are largest) -> t keeps -3, 2
    # entry 1: only -3 -> -3; entry 2: only 3 -> 3; entry 3: -4 + 2 = -2 -> -, -4 -> -4; times 0.5
    assert torch.allclose(half, torch.tensor([0.0, -1.5, 1.5, -2.0]))


def test_task_arithmetic():
    base = {"w": torch.tensor([1.0, 1.0])}
    out = M.task_arithmetic(base, {"i": {"w": torch.tensor([2.0, 0.0])}, "t": {"w": torch.tensor([3.0, 1.0])}}, scale=0.7)
    assert torch.allclose(out["w"], torch.tensor([1 + 0.7 * (1 + 2), 1 + 0.7 * (-1 + 0)]))
    bf = {"w": base["w"].bfloat16()}
    out = M.task_arithmetic(bf, {"i": {"w": torch.tensor([2.0, 0.0]).bfloat16()}}, scale=0.5)
    assert out["w"].dtype == torch.bfloat16


def test_a_model_named_base_is_refused():
    with pytest.raises(ValueError, match="base"):
        M.task_arithmetic({"w": torch.zeros(2)}, {"base": {"w": torch.ones(2)}})


def test_merges_on_a_model(pair_sd):
    a, b = pair_sd
    base = {k: (x + y) / 2 for (k, x), y in zip(a.items(), b.values())}
    for out in (M.ties(base, {"i": a, "t": b}), M.task_arithmetic(base, {"i": a, "t": b})):
        assert set(out) == set(a) and all(out[k].shape == a[k].shape and out[k].dtype == a[k].dtype for k in a)


# ---- rollouts


def test_rollouts_greedy_match_generate():
    from acl26 import evaluation, tokenization

    tok = tokenization.load("smollm2")
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    prompts = ["What is 2 + 3?", "Add these numbers please: 17 + 4 + 9 ="]
    ro = R.rollouts(model, tok, prompts, k=1, max_new_tokens=10, temperature=0, eos_token_id=[tok.eos_token_id])
    ref = evaluation.generate(model, tok, prompts, max_new_tokens=10, temperature=0, batch_size=2,
                              eos_token_id=[tok.eos_token_id])
    # generate() adds the tokenizer's special tokens; SmolLM2's tokenizer adds none
    assert ro.texts == ref.texts and ro.n_tokens == ref.n_tokens
    samp = R.rollouts(model, tok, prompts, k=3, max_new_tokens=6, temperature=0.6, top_p=0.95, top_k=20, seed=1)
    again = R.rollouts(model, tok, prompts, k=3, max_new_tokens=6, temperature=0.6, top_p=0.95, top_k=20, seed=1)
    assert samp.texts == again.texts and len(samp.texts) == 2 and all(len(r) == 3 for r in samp.texts)
    with pytest.raises(ValueError, match="k > 1"):
        R.rollouts(model, tok, prompts, k=2, max_new_tokens=4, temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        R.rollouts(model, tok, prompts, k=1, max_new_tokens=4, temperature=0.5, top_p=1.5)
    for bad in (2.5, True, [], "x"):  # one line naming eos_token_id, as generate() says it
        with pytest.raises(ValueError, match="eos_token_id"):
            R.rollouts(model, tok, prompts, k=1, max_new_tokens=4, temperature=0, eos_token_id=bad)
    ids = R.rollouts(model, tok, prompts, k=1, max_new_tokens=4, temperature=0, eos_token_id=np.int64(tok.eos_token_id))
    assert ids.texts == R.rollouts(model, tok, prompts, k=1, max_new_tokens=4, temperature=0).texts


def test_sampling_respects_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(2000, 1)
    g = torch.Generator().manual_seed(0)
    picks = R.sample_next(logits, 1.0, None, 2, g)
    assert set(picks.tolist()) == {0, 1}
    picks = R.sample_next(logits, 1.0, 0.79, None, g)  # 0.5 < 0.79 -> the crossing token 1 is kept, 2 is not
    assert set(picks.tolist()) == {0, 1}
    picks = R.sample_next(logits, 1.0, 0.81, None, g)
    assert set(picks.tolist()) == {0, 1, 2}
    assert R.sample_next(logits[:3], 0, None, None, g).tolist() == [0, 0, 0]


# ---- the band and the verdicts


def test_band_and_width():
    lams = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert stages.band(lams, [0, 0, 0.05, 0.5, 0.95, 1]) == (0.4, 0.8)
    assert stages.band(lams, [0, 0, 0, 0.3, 0.5, 0.6]) is None
    m = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1]], dtype=float)
    # mean curve 0, 0, 0, .5, 1, 1: 10% reached at 0.4 + 0.2 * 0.2 = 0.44, 90% at 0.6 + 0.2 * 0.8 = 0.76
    assert tables.band_width(lams, m) == pytest.approx(0.32)
    assert tables.band_width(lams, np.zeros((2, 6))) == tables.NEVER
    assert tables.band_width(lams, np.ones((2, 6))) == tables.NEVER  # starts high: no rise
    assert tables.band_width(lams, np.array([[0.5, 0.5, 1, 1, 1, 1]])) == tables.NEVER
    assert stages.fine_grid(lams, [0, 0, 0.2, 0.6, 1, 1], 3) == [0.45, 0.5, 0.55]
    assert stages.fine_grid(lams, [0, 0, 0, 0, 0, 0], 3) == []


def test_record_claims_on_a_clear_three_stage_curve():
    res = _synthetic()
    led = C.Ledger("model_interpolation", "test", list(spec.CLAIMS))
    verdicts.record_claims(led, res)
    v = {cid: e.holds for cid, e in led.entries.items()}
    assert res["band"] == (0.4, 0.6)
    assert v["think_sigmoid"] == C.HOLDS
    assert v["mean_jumps"] == C.HOLDS  # Pass@4 rises less than Mean@4 across the band
    assert v["length_grows"] == C.HOLDS and v["matches_at_fewer_tokens"] == C.HOLDS
    assert v["mlp_drives"] == C.HOLDS and v["late_layers"] == C.HOLDS
    assert v["beats_merging"] == C.HOLDS
    assert v["decoding_robust"] == C.HOLDS  # the two grid settings are the same rollouts here
    assert v["thinking_thinks"] == C.HOLDS and v["thinking_better"] == C.HOLDS and v["endpoints_exact"] == C.HOLDS
    assert led.entries["endpoints_exact"].claim.kind == "fact"
    assert not led.missing()


def test_a_curve_that_starts_high_does_not_rise():
    res = _synthetic()
    n = len(res["sweep"][0.0]["correct"])
    res["sweep"] = {lam: _rec(r["correct"], [[True] * 4] * n, r["tokens"], 4) for lam, r in res["sweep"].items()}
    led = C.Ledger("model_interpolation", "test", list(spec.CLAIMS))
    verdicts.record_claims(led, res)
    assert led.entries["think_sigmoid"].holds == C.FAILS


@pytest.mark.parametrize("density", [0.2, 0.8])
def test_beats_merging_needs_every_baseline(density):
    """TIES at density 0.2 and 0.8 (the paper's "sparsity 0.2" read both ways): the stronger decides."""
    res = _synthetic()
    best = res["sweep"][0.8]
    # one TIES as good as the best λ: that comparison is not a win
    res["variants"][spec.ties_name(density)] = _rec(best["correct"], best["think"], best["tokens"], 4)
    led = C.Ledger("model_interpolation", "test", list(spec.CLAIMS))
    verdicts.record_claims(led, res)
    assert led.entries["beats_merging"].holds == C.FAILS
    assert f"decided on the least favourable comparison ({spec.ties_name(density)})" in led.entries["beats_merging"].note


def test_endpoint_error_sees_nan():
    a = {"w": torch.tensor([1.0, float("nan")])}
    assert M.endpoint_error(a, {"w": torch.tensor([2.0, float("nan")])}) == 0.0  # NaN at the same place on both sides is the same tensor


def test_record_claims_fail_when_nothing_happens():
    res = _synthetic()
    n = len(res["sweep"][0.0]["correct"])
    flat = {lam: _rec(r["correct"], [[False] * 4] * n, r["tokens"], 4) for lam, r in res["sweep"].items()}
    res.update(sweep=flat, decisive={lam: flat[lam] for lam in (0.0, 1.0)}, band=None, grid_lambda=None,
               ablation_lambda=None, best_lambda=None, grid=[], grid_default=None, grid_control=None)
    res["variants"] = {k: v for k, v in res["variants"].items() if not k.startswith("λ")}
    led = C.Ledger("model_interpolation", "test", list(spec.CLAIMS))
    verdicts.record_claims(led, res)
    v = {cid: e.holds for cid, e in led.entries.items()}
    assert v["think_sigmoid"] == C.FAILS and v["thinking_thinks"] == C.FAILS
    assert v["mean_jumps"] == C.UNTESTED and v["length_grows"] == C.UNTESTED and v["decoding_robust"] == C.UNTESTED
    assert v["mlp_drives"] == C.UNTESTED and "no band" in led.entries["mlp_drives"].note  # nothing past a band
    assert v["decoding_matters"] == C.UNTESTED
    # no band, no λ past it: nothing to compare with Thinking, and the claims say why
    assert v["matches_at_fewer_tokens"] == v["beats_merging"] == C.UNTESTED
    assert "no band" in led.entries["matches_at_fewer_tokens"].note
    assert not led.missing()


def test_ablations_are_decided_past_the_band_by_the_papers_offset():
    assert stages.ablation_lambda((0.4, 0.6), 0.2) == 0.8  # the paper: band 0.4 → 0.6, ablations at 0.8
    assert stages.ablation_lambda((0.7, 0.8), 0.2) == 1.0
    assert stages.ablation_lambda((0.8, 0.9), 0.2) is None  # no room past the band
    assert stages.ablation_lambda(None, 0.2) is None
    # the λ compared with Thinking is the same point, accuracy-blind, and below 1 (λ = 1 is Thinking)
    assert stages.best_lambda((0.4, 0.6), 0.2) == 0.8 and stages.best_lambda((0.7, 0.8), 0.2) is None
    assert stages.best_lambda((0.45, 0.633333), 0.2) == 0.833333
    res = _synthetic()
    res["variants"][spec.SKIP_MLP] = res["variants"][spec.SKIP_ATTN]
    led = C.Ledger("model_interpolation", "test", list(spec.CLAIMS))
    verdicts.record_claims(led, res)
    assert led.entries["mlp_drives"].holds == C.FAILS  # a difference of exactly 0 is not > 0, where parts can think
    assert "λ 0.8, the band's end 0.6 + 0.2" in led.entries["mlp_drives"].note
    res = _synthetic()
    res.update(ablation_lambda=None, band=(0.8, 0.9))
    led = C.Ledger("model_interpolation", "test", list(spec.CLAIMS))
    verdicts.record_claims(led, res)
    assert led.entries["late_layers"].holds == C.UNTESTED and "past λ = 1" in led.entries["late_layers"].note


def test_head_cuts_a_record_to_its_first_problems():
    res = _synthetic()
    rec = res["sweep"][0.5]
    h = study.head(rec, 7)
    assert len(h["correct"]) == len(h["finished"]) == len(h["golds"]) == 7 and h["k"] == rec["k"]
    assert h["tokens"] == rec["tokens"][:7]
    n = len(rec["correct"])
    with pytest.raises(ValueError, match=f"fewer than {n + 1}"):
        study.head(rec, n + 1)


def test_load_into_accepts_only_tied_omissions():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=4,
                      num_key_value_heads=2, tie_word_embeddings=True)
    m = LlamaForCausalLM(cfg)
    sd = {k: v.clone() for k, v in m.state_dict().items() if k != "lm_head.weight"}
    study.load_into(m, sd)  # the tied head may be missing
    sd.pop("model.norm.weight")
    with pytest.raises(ValueError, match="model.norm.weight"):
        study.load_into(m, sd)


def test_spec_checks():
    with pytest.raises(ValueError, match="best_lambda"):  # no longer a parameter: the band's end + the offset
        spec.SPEC.resolve("book", {"best_lambda": 0.75})
    with pytest.raises(ValueError, match="T 0.6, top-p 0.95"):
        spec.SPEC.resolve("book", {"grid_top_ps": [0.8, 0.9]})
    with pytest.raises(ValueError, match="lambdas"):
        spec.SPEC.resolve("book", {"lambdas": [0.2, 1.0]})
    with pytest.raises(ValueError, match="instruct and thinking"):
        spec.SPEC.resolve("book", {"instruct": "/x"})


# ---- the local-checkpoint path (e.g. the Qwen3-4B pair), on two tiny checkpoints saved to disk


def _saved_trio(tmp_path, model_cls, cfg, tok, *, seed: int, **overrides) -> dict:
    """A base, an Instruct and a Thinking model of ``cfg`` (seeds ``seed``, ``seed + 1``, ``seed + 2``) saved
    with ``tok`` the way a user's checkpoints are, and the smoke parameters pointing at them."""
    for i, name in enumerate(("base", "instruct", "thinking")):
        torch.manual_seed(seed + i)
        model_cls(cfg).save_pretrained(tmp_path / name)
        tok.save_pretrained(tmp_path / name)
    return spec.SPEC.resolve("smoke", {"instruct": str(tmp_path / "instruct"), "thinking": str(tmp_path / "thinking"),
                                        "base": str(tmp_path / "base"), **overrides})


@pytest.mark.slow
def test_study_on_local_checkpoints(tmp_path, monkeypatch):
    from acl26 import tokenization

    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    tok = tokenization.load("smollm2")
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    P = _saved_trio(tmp_path, LlamaForCausalLM, cfg, tok, seed=0, eval_problems=3, power_problems=5,
                    max_new_tokens=4)
    res = study.run_experiments(P, progress=False)
    assert sorted(res["sweep"]) == [0.0, 0.5, 0.8, 1.0]
    assert {0.0, 1.0} <= set(res["decisive"])
    assert res["best_lambda"] is None or res["best_lambda"] in res["decisive"]
    assert all(len(r["correct"]) == P["power_problems"] for r in res["decisive"].values())
    assert all(len(r["correct"]) == P["eval_problems"] for r in res["sweep"].values())
    # the sweep's record at a decisive λ is that λ's power record cut to the sweep's problems
    assert res["sweep"][1.0]["tokens"] == res["decisive"][1.0]["tokens"][:P["eval_problems"]]
    assert {"TA", spec.ties_name(0.2), spec.ties_name(0.8)} <= set(res["variants"])
    if res["ablation_lambda"] is not None:
        assert set(ablation.ablations(3)) <= set(res["variants"])
    assert res["n_layers"] == 3 and res["endpoint_error"] == 0.0 and res["source"].startswith("local checkpoints")
    rec = res["sweep"][1.0]
    assert len(rec["correct"]) == 3 and all(len(r) == P["k"] for r in rec["correct"])
    assert all(1 <= n <= 4 for row in rec["tokens"] for n in row)
    led = C.Ledger("model_interpolation", "smoke", list(spec.CLAIMS), P)
    verdicts.record_claims(led, res)
    assert not led.missing()
    # the streamed merge (paper-scale pairs) gives the same merged models, hence the same rollouts
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache-streamed"))
    res_s = study.run_experiments(dict(P, merge="streamed"), progress=False)
    for lam in res["sweep"]:
        assert res_s["sweep"][lam]["tokens"] == res["sweep"][lam]["tokens"]
        assert res_s["sweep"][lam]["answers"] == res["sweep"][lam]["answers"]
    assert (tmp_path / "cache-streamed" / "model_interpolation" / "streamed-merge" / "interpolation.json").is_file()
    # without a base, TA and TIES are not run and their claim says why
    P2 = dict(P, base="")
    res2 = study.run_experiments(P2, progress=False)
    assert "TA" not in res2["variants"]
    led2 = C.Ledger("model_interpolation", "smoke", list(spec.CLAIMS), P2)
    verdicts.record_claims(led2, res2)
    assert led2.entries["beats_merging"].holds == C.UNTESTED


def test_streamed_sharded_inputs_and_bad_out_dir(tmp_path):
    from transformers import AutoModelForCausalLM

    a, b = _tiny_llama(0), _tiny_llama(1)
    a.save_pretrained(tmp_path / "a", max_shard_size="20KB")  # several shards and an index
    b.save_pretrained(tmp_path / "b")
    assert (tmp_path / "a" / "model.safetensors.index.json").is_file()
    out = M.interpolate_files(tmp_path / "a", tmp_path / "b", tmp_path / "out", 0.6, shard_bytes=8192)
    got = AutoModelForCausalLM.from_pretrained(out).state_dict()
    ref = M.interpolate(a.state_dict(), b.state_dict(), 0.6)
    assert all(torch.equal(got[k], ref[k]) for k in ref)
    import json

    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == sum(v.numel() * v.element_size() for v in ref.values())
    with pytest.raises(ValueError, match="out_dir"):
        M.interpolate_files(tmp_path / "a", tmp_path / "b", tmp_path / "b", 0.5)


#: each control, and the claims that name it: a claim's cut-off control covers exactly the runs that claim reads
CONTROLS = {"thinking_better": {"matches_at_fewer_tokens"},
            "cut_off_sweep": {"think_sigmoid"}, "cut_off_band": {"mean_jumps"}, "cut_off_length": {"length_grows"},
            "cut_off_best": {"matches_at_fewer_tokens"}, "cut_off_merging": {"beats_merging"},
            "cut_off_modules": {"mlp_drives"}, "cut_off_layers": {"late_layers"}, "cut_off_grid": {"decoding_robust"},
            "decoding_matters": {"decoding_robust"}, "full_merge_thinks": {"mlp_drives", "late_layers"},
            "thinking_better_gsm8k": {"matches_at_fewer_tokens_gsm8k"},
            "few_cut_off_gsm8k": {"matches_at_fewer_tokens_gsm8k"}}


@pytest.mark.parametrize("control", list(CONTROLS))
def test_a_failing_control_makes_the_claims_naming_it_not_testable(control):
    """The accuracy claims need Thinking ahead of Instruct by more than their half-width (on each benchmark);
    every claim needs fewer than 10% of the responses of its own runs cut off at the token cap; decoding_robust
    needs a decoding that must matter to move Mean@k; the ablations need the full merge to think."""
    import copy

    from cases import model_interpolation as mi_cases
    from acl26 import claims as C
    from acl26 import registry

    ch = registry.get("model_interpolation")
    assert {c.id for c in ch.claims if c.kind == "control"} == set(CONTROLS)
    naming = {c.id for c in ch.claims if control in c.controls}
    assert naming == CONTROLS[control]
    r = copy.deepcopy(mi_cases.synthetic())
    if control == "thinking_better":  # Thinking no better than Instruct: a gap inside the noise
        r["decisive"][1.0]["correct"] = copy.deepcopy(r["decisive"][0.0]["correct"])
    else:
        mi_cases.FAIL[control](r)
    ledger = C.Ledger(ch.id, "book", list(ch.claims))
    ch.record_claims(ledger, r)
    assert ledger.entries[control].holds != C.HOLDS
    for cid in naming:
        assert ledger.entries[cid].holds == C.NOT_TESTABLE, cid
        assert f"control {control}" in ledger.entries[cid].note
    # and no other claim is touched: a cut-off in runs a claim does not read leaves its verdict alone (λ = 1 and
    # the compared λ, cut by cut_off_length's and cut_off_best's cases, are read by several claims)
    others = {c.id for c in ch.claims if c.kind == "claim"} - naming
    if control not in ("cut_off_length", "cut_off_best"):
        assert all(ledger.entries[cid].holds != C.NOT_TESTABLE for cid in others), control


def test_decoding_matters_is_decided_on_the_size_of_the_move():
    """A hot temperature that raises accuracy moves it too: the control reads |Δ|."""
    res = _synthetic()
    hot = res["grid_control"]
    n = len(res["variants"][hot]["correct"])
    res["variants"][hot] = _rec([[True] * 4] * n, res["variants"][hot]["think"], res["variants"][hot]["tokens"], 4)
    led = C.Ledger("model_interpolation", "test", list(spec.CLAIMS))
    verdicts.record_claims(led, res)
    e = led.entries["decoding_matters"]
    assert e.holds == C.HOLDS and e.ours > 0 and "mirrored" in e.interval.method


def test_a_cut_off_ablation_makes_only_its_claim_not_testable():
    """A partial merge that rambles to the cap reads as 'not thinking': the module ablation's cut-offs gate
    mlp_drives, and nothing else."""
    res = _synthetic()
    part = res["variants"][spec.SKIP_ATTN]
    res["variants"][spec.SKIP_ATTN] = {**part, "finished": [[False] * 4 for _ in part["correct"]]}
    led = C.Ledger("model_interpolation", "test", list(spec.CLAIMS))
    verdicts.record_claims(led, res)
    assert led.entries["cut_off_modules"].holds == C.FAILS and spec.SKIP_ATTN in led.entries["cut_off_modules"].shown
    assert led.entries["mlp_drives"].holds == C.NOT_TESTABLE
    assert led.entries["late_layers"].holds == led.entries["think_sigmoid"].holds == C.HOLDS


def test_variants_run_the_papers_ablations_and_grid(monkeypatch):
    """The ablations leave one part at Instruct and interpolate everything else (paper §5.3); TIES runs at each
    density; the decoding grid and its control run at the grid's λ with grid_k rollouts."""
    calls = []
    monkeypatch.setattr(study, "evaluate", lambda pair, make, name, items, dec, params, cache_key=None, k=None:
                        calls.append((name, dict(cache_key), k)) or {"label": name})
    P = spec.SPEC.resolve("smoke", {"ties_densities": [0.2, 0.8]})
    pair = {"base": {}, "base_digest": "b", "n_layers": 3, "instruct": {}, "thinking": {}}
    out = study.variants(pair, ["q"], P, 0.3, 1.0, progress=False)
    keys = {name: key for name, key, _ in calls}
    assert keys[spec.SKIP_ATTN] == {"lam": 1.0, "skip": "attn"} and keys[spec.SKIP_MLP] == {"lam": 1.0, "skip": "mlp"}
    assert keys[spec.ONLY_FIRST] == {"lam": 1.0, "skip_layers": [1, 2]}
    assert keys[spec.ONLY_LATE] == {"lam": 1.0, "skip_layers": [0]}
    assert {spec.ties_name(0.2), spec.ties_name(0.8), "TA"} <= set(out)
    grid = {name: k for name, _, k in calls if name.startswith("λ 0.3")}
    assert len(grid) == len(P["grid_temperatures"]) * len(P["grid_top_ps"]) + 1
    assert set(grid.values()) == {P["grid_k"]}
    assert spec.control_name(0.3, P["grid_control_temperature"]) in out
    calls.clear()
    out = study.variants(pair, ["q"], P, None, None, progress=False)  # no band: no ablation, no grid
    assert not any(k in out for k in ablation.ablations(3)) and not any(k.startswith("λ") for k in out)


def test_grid_lambda_is_the_last_stage_one_point():
    """The paper's decoding grid is at MI-0.4, a stage-1 model: ours at the band's lower end."""
    lams = [0.0, 0.2, 0.4, 0.5, 0.6, 1.0]
    assert stages.grid_lambda(lams, [0, 0, 0.05, 0.5, 0.95, 1]) == 0.4
    assert stages.grid_lambda(lams, [0, 0, 0.2, 0.5, 0.8, 0.85]) is None  # never ≥ 90%: no band
    P = spec.SPEC.resolve("book", {})
    assert study.grid_default(0.4, P) == spec.grid_name(0.4, 0.6, 0.95)
    assert study.grid_default(0.0, P) == spec.grid_name(0.0, 0.7, 0.8)  # Instruct's own decoding
    assert P["grid_temperatures"] == [0.6, 0.65, 0.7] and P["grid_top_ps"] == [0.8, 0.85, 0.9, 0.95]


@pytest.mark.slow
def test_study_on_a_local_qwen3_pair(tmp_path, monkeypatch):
    """The paper's own architecture: a tiny Qwen3 Instruct/Thinking pair (query/key norms, tied embeddings) and
    its base, saved the way a user's checkpoints are, through the whole study."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from acl26 import tokenization

    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    tok = tokenization.load("smollm2")
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                      tie_word_embeddings=True)
    P = _saved_trio(tmp_path, Qwen3ForCausalLM, cfg, tok, seed=10, eval_problems=2, power_problems=3,
                    max_new_tokens=3)
    res = study.run_experiments(P, progress=False)
    assert sorted(res["sweep"]) == [0.0, 0.5, 0.8, 1.0] and res["n_layers"] == 2
    assert res["endpoint_error"] == 0.0 and res["source"].startswith("local checkpoints")
    assert {"TA", spec.ties_name(0.2)} <= set(res["variants"])
    led = C.Ledger("model_interpolation", "smoke", list(spec.CLAIMS), P)
    verdicts.record_claims(led, res)
    assert not led.missing()


def test_sampling_with_no_cut_draws_from_the_whole_softmax():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1, 0.0]]).clamp_min(1e-30)).repeat(4000, 1)
    g = torch.Generator().manual_seed(0)
    got = R.sample_next(logits, 1.0, None, None, g)
    freq = torch.bincount(got, minlength=4).double() / len(got)
    assert freq[3] == 0 and torch.allclose(freq[:3], torch.tensor([0.7, 0.2, 0.1], dtype=torch.double), atol=0.03)
    same = R.sample_next(logits, 1.0, 1.0, None, torch.Generator().manual_seed(0))  # top-p 1 cuts nothing either
    assert torch.equal(same, got)
    hot = R.sample_next(logits[:1000], 2.0, None, None, torch.Generator().manual_seed(0))  # T = 2 flattens
    assert (hot == 2).double().mean() > 0.15


def test_draw_inverts_the_cumulative_sum(monkeypatch):
    from acl26 import rollout

    g = torch.Generator().manual_seed(1)
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0, 3.0], [1.0, 1.0, 1.0, 1.0, 0.0]])
    got = torch.stack([rollout.draw(probs, g) for _ in range(3000)])  # [3000, 3]
    assert set(got[:, 0].tolist()) == {1, 3} and abs((got[:, 0] == 1).double().mean() - 0.5) < 0.04
    assert (got[:, 1] == 4).all()  # an unnormalised row; the zeros are never drawn
    assert set(got[:, 2].tolist()) == {0, 1, 2, 3}
    # a uniform number of 0 takes the first positive entry; one just below 1 the last
    for u, want in ((0.0, 1), (1 - 1e-7, 3)):
        monkeypatch.setattr(torch, "rand", lambda *a, u=u, **k: torch.full((1, 1), u))
        assert int(rollout.draw(probs[:1], g)[0]) == want


@pytest.mark.parametrize("bf16", [True, False])
def test_the_pair_is_fine_tuned_in_the_precision_asked_for(monkeypatch, bf16):
    from acl26 import training
    from acl26.papers.model_interpolation import pair

    seen = {}

    def fake_train(config, tc, *a, **k):
        seen["tc"] = tc
        return "trained"

    monkeypatch.setattr(training, "train", fake_train)
    params = {**spec.SPEC.resolve("smoke", {}), "bf16": bf16}
    assert pair.fine_tune("thinking", params, progress=False) == "trained"
    assert seen["tc"].bf16 is bf16 and seen["tc"].steps == params["steps_thinking"]
    assert spec.SPEC.resolve("book", {})["bf16"] is True
