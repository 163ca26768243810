"""Alloc-MoE: Alloc-T's selection against a brute-force reference, the routing policies against plain
truncation on every transformers experts path and MoE family, the counters, the profiles, the
real-shape layer against its dense reference, and the real-checkpoint path on a tiny checkpoint."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from acl26 import models
from acl26.papers.alloc_moe import alloc_t_mask, allocation, routing as R, spec, speed as S, study, tables


# --------------------------------------------------------------------------------------------
# Alloc-T


def reference_mask(scores: np.ndarray, k: int, k_base: int, k_max: int) -> np.ndarray:
    """Alloc-T by the definition, in plain Python: ranks by (-score, expert), pool by (-score, expert, token)."""
    T, E = scores.shape
    mask = np.zeros((T, E), dtype=bool)
    pool = []
    for t in range(T):
        order = sorted(range(E), key=lambda e: (-scores[t, e], e))
        for e in order[:k_base]:
            mask[t, e] = True
        pool += [(-scores[t, e], e, t) for e in order[k_base:k_max]]
    for _, e, t in sorted(pool)[: (k - k_base) * T]:
        mask[t, e] = True
    return mask


@st.composite
def alloc_cases(draw):
    T = draw(st.integers(0, 7))
    E = draw(st.integers(1, 7))
    k_max = draw(st.integers(0, E))
    k = draw(st.integers(0, k_max))
    k_base = draw(st.integers(0, k))
    # few distinct values, so ties are common
    vals = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -1.0, 0.1]), min_size=T * E, max_size=T * E))
    return np.array(vals, dtype=np.float64).reshape(T, E), k, k_base, k_max


@settings(max_examples=400)
@given(alloc_cases())
def test_alloc_t_matches_the_definition(case):
    scores, k, k_base, k_max = case
    got = alloc_t_mask(scores, k, k_base=k_base, k_max=k_max)
    assert isinstance(got, np.ndarray) and got.dtype == bool
    np.testing.assert_array_equal(got, reference_mask(scores, k, k_base, k_max))
    T = scores.shape[0]
    assert got.sum() == k * T
    if T:
        per = got.sum(axis=1)
        assert per.min() >= k_base and per.max() <= k_max


@settings(max_examples=200)
@given(alloc_cases())
def test_alloc_t_is_top_k_when_it_should_be(case):
    scores, k, k_base, k_max = case
    top = reference_mask(scores, k, k, k)  # plain top-k, ties by expert index
    np.testing.assert_array_equal(alloc_t_mask(scores, k, k_base=k, k_max=k_max), top)
    np.testing.assert_array_equal(alloc_t_mask(scores[:1], k, k_base=k_base, k_max=k_max), top[:1])
    np.testing.assert_array_equal(alloc_t_mask(scores, k_max, k_base=k_base, k_max=k_max), reference_mask(scores, k_max, k_max, k_max))


def test_alloc_t_ties_break_by_expert_then_token():
    s = np.zeros((3, 4))
    m = alloc_t_mask(s, 2, k_base=1, k_max=4)
    # every token keeps expert 0; the pool of 3 extra picks goes to expert 1 of tokens 0, 1, 2
    np.testing.assert_array_equal(m, np.array([[1, 1, 0, 0]] * 3, dtype=bool))
    s = np.array([[0.9, 0.5, 0.5, 0.1], [0.9, 0.5, 0.5, 0.1]])
    m = alloc_t_mask(s, 2, k_base=1, k_max=3)
    np.testing.assert_array_equal(m, np.array([[1, 1, 0, 0], [1, 1, 0, 0]], dtype=bool))
    s = np.array([[0.9, 0.5, 0.45, 0.1], [0.9, 0.2, 0.1, 0.0]])  # token 0 gets both extra picks
    m = alloc_t_mask(s, 2, k_base=1, k_max=3)
    np.testing.assert_array_equal(m.sum(axis=1), [3, 1])


def test_alloc_t_takes_torch_and_keeps_device_and_type():
    s = torch.rand(6, 8, generator=torch.Generator().manual_seed(0))
    m = alloc_t_mask(s, 3, k_base=1, k_max=6)
    assert isinstance(m, torch.Tensor) and m.dtype == torch.bool and int(m.sum()) == 18
    np.testing.assert_array_equal(m.numpy(), reference_mask(s.numpy().astype(np.float64), 3, 1, 6))
    assert alloc_t_mask(s.to(torch.bfloat16), 3, k_max=6).sum() == 18
    assert alloc_t_mask(np.arange(12).reshape(3, 4), 1, k_max=2).sum() == 3  # integer scores


@pytest.mark.parametrize("args,kw,match", [
    ((np.zeros(4), 1), dict(k_max=2), "2-D"),
    ((np.zeros((2, 3)), 3), dict(k_max=2), "k must be"),
    ((np.zeros((2, 3)), 1), dict(k_max=4), "k_max"),
    ((np.zeros((2, 3)), 1), dict(k_base=2, k_max=3), "k_base"),
    ((np.zeros((2, 3)), 1.5), dict(k_max=3), "k must be an integer"),
    ((np.zeros((2, 3)), True), dict(k_max=3), "k must be an integer"),
    ((np.array([[0.0, np.nan]]), 1), dict(k_max=2), "finite"),
    ((np.array([[0.0, np.inf]]), 1), dict(k_max=2), "finite"),
    ((np.array([["a", "b"]]), 1), dict(k_max=2), "real numbers"),
    ((np.zeros((2, 3), dtype=complex), 1), dict(k_max=2), "real"),
    ((np.zeros((2, 3)), -1), dict(k_max=2), "k must be"),
])
def test_alloc_t_rejects_bad_input_naming_it(args, kw, match):
    with pytest.raises(ValueError, match=match):
        alloc_t_mask(*args, **kw)


def test_alloc_t_needs_k_max_as_a_keyword():
    with pytest.raises(TypeError):
        alloc_t_mask(np.zeros((2, 3)), 1)


# --------------------------------------------------------------------------------------------
# policies on real transformers MoE classes


def tiny_qwen3(impl=None, experts=8, top_k=4, layers=2, seed=0):
    cfg = models.moe_config(300, hidden=32, layers=layers, heads=2, kv_heads=1, experts=experts, top_k=top_k,
                            expert_intermediate=16)
    if impl:
        cfg._experts_implementation = impl
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    m = AutoModelForCausalLM.from_config(cfg)
    return m.eval()


def tiny_family(family, seed=0):
    from transformers import (AutoModelForCausalLM, DeepseekV2Config, MixtralConfig, OlmoeConfig,
                              Qwen2MoeConfig)

    common = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                  max_position_embeddings=64)
    if family == "mixtral":
        cfg = MixtralConfig(**common, intermediate_size=16, num_local_experts=8, num_experts_per_tok=4)
    elif family == "olmoe":
        cfg = OlmoeConfig(**common, intermediate_size=16, num_experts=8, num_experts_per_tok=4)
    elif family == "qwen2_moe":
        cfg = Qwen2MoeConfig(**common, intermediate_size=32, moe_intermediate_size=16, shared_expert_intermediate_size=16,
                             num_experts=8, num_experts_per_tok=4, decoder_sparse_step=1)
    elif family == "deepseek_v2":
        cfg = DeepseekV2Config(**common, intermediate_size=32, moe_intermediate_size=16, n_routed_experts=8,
                               num_experts_per_tok=4, n_shared_experts=1, first_k_dense_replace=0, n_group=1,
                               topk_group=1, q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=8,
                               qk_nope_head_dim=8, v_head_dim=16, head_dim=8)
    else:
        raise ValueError(family)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(cfg).eval()


def truncated(model, ks, x):
    blocks = R.moe_blocks(model)
    old = [b.gate.top_k for b in blocks]
    try:
        for b, k in zip(blocks, ks):
            b.gate.top_k = k
        return model(input_ids=x).logits
    finally:
        for b, k in zip(blocks, old):
            b.gate.top_k = k


@pytest.mark.parametrize("impl", ["eager", "grouped_mm", "batched_mm", None])
def test_budgeted_top_k_equals_plain_truncation_on_every_experts_path(impl):
    model = tiny_qwen3(impl)
    x = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(1))
    before = model.config._experts_implementation
    for ks in ([1, 1], [2, 3], [4, 1], [4, 4]):
        ref = truncated(model, ks, x)
        with torch.no_grad(), R.budgeted(model, R.topk(ks)) as c:
            got = model(input_ids=x).logits
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
        assert c.pairs == [k * 24 for k in ks] and c.tokens == [24, 24]
    assert model.config._experts_implementation == before
    assert all("forward" not in b.gate.__dict__ for b in R.moe_blocks(model))


@pytest.mark.parametrize("family", ["mixtral", "olmoe", "qwen2_moe", "deepseek_v2"])
def test_budgeted_top_k_on_other_moe_families(family):
    model = tiny_family(family)
    assert R.native_k(model) == [4, 4]
    x = torch.randint(0, 300, (2, 10), generator=torch.Generator().manual_seed(2))
    for ks in ([1, 2], [3, 4]):
        ref = truncated(model, ks, x)
        with torch.no_grad(), R.budgeted(model, R.topk(ks)) as c:
            got = model(input_ids=x).logits
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
        assert c.experts_per_token() == sum(ks)
    with torch.no_grad(), R.budgeted(model, R.alloc_t([2, 2])) as c:
        model(input_ids=x)
    assert c.pairs == [40, 40]


def test_budgeted_restores_the_router_after_an_error():
    model = tiny_qwen3("grouped_mm")
    with pytest.raises(RuntimeError, match="boom"):
        with R.budgeted(model, R.topk([1, 1])):
            raise RuntimeError("boom")
    assert model.config._experts_implementation == "grouped_mm"
    assert all("forward" not in b.gate.__dict__ for b in R.moe_blocks(model))


def test_budgeted_rejects_mismatched_policies():
    model = tiny_qwen3()
    with pytest.raises(ValueError, match="2 MoE layers"):
        with R.budgeted(model, R.topk([1, 1, 1])):
            pass
    with pytest.raises(ValueError, match="exceeds the native top_k"):
        with R.budgeted(model, R.topk([5, 1])):
            pass
    with pytest.raises(ValueError, match="no MoE blocks"):
        R.moe_blocks(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("make,match", [
    (lambda: R.topp(0.0), "p must be"), (lambda: R.topp(1.5), "p must be"), (lambda: R.skip(-0.1), "beta"),
    (lambda: R.alloc_t([2, 1], k_base=2), "k_base"), (lambda: R.Policy("nope"), "kind"),
    (lambda: R.Policy("topk"), "needs ks"), (lambda: R.topk([0, 1]), "ks"),
])
def test_policies_validate_up_front(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_top_p_keeps_the_crossing_expert_and_skipping_compares_to_top_1():
    w = torch.tensor([[0.5, 0.3, 0.1, 0.05]])
    idx = torch.tensor([[2, 0, 1, 3]])
    logits = torch.log(torch.tensor([[0.3, 0.1, 0.5, 0.05, 0.05]]))  # softmax = [.3, .1, .5, .05, .05]
    keep = lambda pol: R.keep_slots(pol, 0, logits, w, idx, 5)[0].tolist()
    assert keep(R.topp(0.6)) == [True, True, False, False]  # 0.5 <= 0.6 < 0.8
    assert keep(R.topp(0.5)) == [True, True, False, False]  # 0.5 does not exceed 0.5: the next one crosses
    assert keep(R.topp(0.4)) == [True, False, False, False]
    assert keep(R.topp(1.0)) == [True, True, True, True]  # never exceeds 1: capped at the native K
    assert keep(R.skip(0.5)) == [True, True, False, False]  # 0.3 >= 0.25 > 0.1
    assert keep(R.skip(0.0)) == [True] * 4
    assert keep(R.skip(1.0)) == [True, False, False, False]


def test_counter_sees_alloc_t_spend_exactly_and_tokens_vary():
    model = tiny_qwen3(top_k=6, experts=8)
    x = torch.randint(0, 300, (3, 16), generator=torch.Generator().manual_seed(3))
    nll, c = allocation.evaluate(model, x, R.alloc_t([3, 2], k_base=1), batch_blocks=3, per_token=True)
    assert nll.shape == (3,) and np.isfinite(nll).all()
    assert c.pairs == [3 * 48, 2 * 48] and c.per_layer() == [3.0, 2.0]
    counts = np.concatenate(c.token_counts[0])
    assert counts.min() >= 1 and counts.max() <= 6 and counts.sum() == 144
    assert all(l.sum() == p for l, p in zip(c.load, c.pairs))
    _, full = allocation.evaluate(model, x, None, batch_blocks=3)
    assert full.per_layer() == [6.0, 6.0] and R.load_similarity(full, full) == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------
# profiles, thresholds, allocation


def test_isolated_profile_and_allocation():
    model = tiny_qwen3(layers=3, top_k=3, experts=6)
    calib = torch.randint(0, 300, (2, 16), generator=torch.Generator().manual_seed(4))
    S = allocation.profile_sensitivity(model, calib, batch_blocks=2, progress=False)
    assert S.shape == (3, 3) and np.isfinite(S).all()
    # the shallowest layer at its native k with every deeper layer at top-1 is one setting seen twice:
    # layer 1 at top-1 (layer 2 at top-1 below it ... ) equals layer 0 at native with the rest at top-1
    assert S[0, 2] == pytest.approx(S[1, 0], rel=1e-9)
    ks = allocation.allocate(S, 6)
    assert len(ks) == 3 and sum(ks) <= 6 and min(ks) >= 1
    cost = allocation.lexi_costs(model, samples=16)
    assert cost.shape == (3, 3) and np.allclose(cost[:, 2], 0.0) and (cost[:, 0] > 0).all()


def test_thresholds_match_a_budget():
    model = tiny_qwen3(layers=2, top_k=4, experts=8)
    x = torch.randint(0, 300, (2, 32), generator=torch.Generator().manual_seed(5))
    for kind in ("topp", "skip"):
        th, got = allocation.match_threshold(model, x, kind, 5.0, iters=12, batch_blocks=2)
        assert 0 <= th <= 1 and abs(got - 5.0) < 0.5
    with pytest.raises(ValueError, match="kind"):
        allocation.match_threshold(model, x, "top-k", 5.0, iters=2, batch_blocks=2)


def test_methods_at_every_budget_spend_it():
    S = np.tile(np.linspace(3, 1, 6), (6, 1)) + np.arange(6)[:, None]
    pols = allocation.methods_at(3, 6, s_alloc=S, lexi=S, k_base=1, thresholds={"top-p": 0.5, "skip": 0.3})
    assert set(pols) == set(allocation.METHODS)
    for m, p in pols.items():
        if p.ks is not None:
            assert sum(p.ks) <= 18


# --------------------------------------------------------------------------------------------
# the real-shape layer


@pytest.mark.parametrize("k", [1, 2, 4])
def test_grouped_layer_matches_dense_and_hf(k):
    layer = S.random_layer(48, 8, 24, 2, 4, seed=k)
    x = torch.randn(20, 48, generator=torch.Generator().manual_seed(k))
    idx, w = S.route(layer, x, k)
    assert int((idx < 8).sum()) == 20 * k
    a, b = S.grouped_forward(layer, x, idx, w), S.dense_forward(layer, x, idx, w)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(S.hf_forward(layer, S.hf_experts(layer), x, k), a, rtol=1e-4, atol=1e-5)


def test_stack_speedups_and_stretch():
    curve = {"ours": {"decode": {1: [1.0, 1.0], 2: [2.0, 2.2], 4: [4.0, 4.0]}}, "pairs": {"decode": {1: 1, 2: 2, 4: 4}}}
    rows = S.stack_speedups(curve, {"half": [2, 2]}, [4, 4])
    assert rows[0]["_ratios"] == pytest.approx([2.0, 8 / 4.4])
    for ks, layers, budget in (([6, 5, 3, 2, 1, 1], 26, 78), ([1], 5, 5), ([6, 6], 3, 18), ([3, 1, 2], 7, 20)):
        out = S.stretch(ks, layers, budget, 6)
        assert len(out) == layers and sum(out) == budget and min(out) >= 1 and max(out) <= 6
    with pytest.raises(ValueError, match="budget"):
        S.stretch([1, 2], 4, 30, 6)
    curve["attn"] = {"decode": {0: [0.5, 0.5]}}
    curve["head"] = {"decode": {0: [1.0, 1.0]}}
    rows = S.stack_speedups(curve, {"half": [2, 2]}, [4, 4], with_rest=True)
    assert rows[0]["_ratios"] == pytest.approx([(8 + 2) / (4 + 2), (8 + 2) / (4.4 + 2)])
    assert rows[0]["scope"].startswith("MoE + attention")
    del curve["attn"]
    with pytest.raises(ValueError, match="rest"):
        S.stack_speedups(curve, {"half": [2, 2]}, [4, 4], with_rest=True)


def test_cost_curve_records_every_round():
    layer = S.random_layer(16, 4, 8, 1, 2)
    rest = S.random_rest(((24, 16), (10, 16), (32, 8), (16, 16)), 50, 16)
    c = S.cost_curve(layer, prefill_tokens=8, rounds=3, rest=rest)
    assert set(c["ours"]) == {"prefill", "decode"} and all(len(v) == 3 for v in c["ours"]["prefill"].values())
    assert c["pairs"]["prefill"] == {1: 8, 2: 16}
    assert len(c["attn"]["prefill"][0]) == 3 and len(c["head"]["decode"][0]) == 3
    q, up, o = S.attn_forward(rest, torch.randn(5, 16))
    assert q.shape == (5, 24) and up.shape == (5, 32) and o.shape == (5, 16)


# --------------------------------------------------------------------------------------------
# the real-checkpoint path


@pytest.mark.assets
def test_real_checkpoint_path_runs_profile_and_allocation_unchanged(tmp_path):
    """A tiny random Qwen3-MoE saved to disk with a tokenizer goes through the chapter's own functions."""
    from acl26 import corpus as corpus_mod

    tok = corpus_mod.train_bpe(1024)
    model = tiny_qwen3(layers=2, top_k=3, experts=6)
    model.config.vocab_size = 300
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    P = spec.SPEC.resolve("smoke", {"checkpoint": str(tmp_path), "budgets": [1, 2], "eval_blocks": 4})
    m, t, info = study.main_subject(P)
    assert info["source"].startswith("checkpoint") and R.native_k(m) == [3, 3] and info["native_k_table"] is None
    tx = study.texts(P, t, 32)
    # the tiny model's vocabulary is smaller than the tokenizer's: clamp ids to it for this test only
    tx = {k: v.clamp(max=299) for k, v in tx.items()}
    S_ = allocation.profile_sensitivity(m, tx["sotu"], batch_blocks=2, progress=False)
    assert S_.shape == (2, 3) and np.isfinite(S_).all()
    assert sum(allocation.allocate(S_, 3)) <= 3


def test_checkpoint_without_tokenizer_fails_naming_it(tmp_path):
    tiny_qwen3().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="'checkpoint'.*tokenizer_config.json"):  # the spec refuses it first
        spec.SPEC.resolve("smoke", {"checkpoint": str(tmp_path)})
    P = dict(spec.SPEC.resolve("smoke"), checkpoint=str(tmp_path))  # past the spec: the study's own check
    with pytest.raises(ValueError, match="checkpoint"):
        study.main_subject(P)


def test_allocation_benchmark_quick_and_its_peers_agree():
    from acl26.papers.alloc_moe import bench

    out = bench.benchmarks(quick=True)
    goals = {g["goal"]: g for g in out["goals"]}
    assert goals["allocate matches brute force on random small instances"]["met"] is True
    assert {r["benchmark"] for r in out["rows"]} == {"allocate: numba DP", "allocate: pure-Python DP", "allocate: scipy milp"}
    rng = np.random.default_rng(1)
    for _ in range(20):
        cost = rng.random((5, 4))
        b = int(rng.integers(5, 21))
        ks = bench.python_dp(cost.tolist(), b)
        best = cost[np.arange(5), np.asarray(ks) - 1].sum()
        assert np.isclose(best, cost[np.arange(5), bench.milp_alloc(cost, b) - 1].sum())
        from acl26.kernels import dp_alloc
        assert np.isclose(best, cost[np.arange(5), dp_alloc.allocate(cost, b) - 1].sum())


# --------------------------------------------------------------------------------------------
# the controls' measurements and the chapter's one entry point


def test_random_calibration_blocks_are_uniform_ids_fixed_by_seed():
    a, b = study.random_blocks(4, 64, 300), study.random_blocks(4, 64, 300)
    assert a.shape == (4, 64) and torch.equal(a, b) and int(a.min()) >= 0 and int(a.max()) < 300
    assert not torch.equal(a, study.random_blocks(4, 64, 300, seed=1))
    assert len(torch.unique(study.random_blocks(8, 512, 50))) == 50  # every id drawn


def test_headline_seed_scores_top_1_and_from_grid_reads_the_same_fields():
    model = tiny_qwen3(layers=2, top_k=4, experts=8)
    g = torch.Generator().manual_seed(6)
    tx = {"eval": torch.randint(0, 300, (4, 16), generator=g), "sotu": torch.randint(0, 300, (2, 16), generator=g)}
    P = {"budgets": [1, 2, 3], "batch_blocks": 2, "k_base": 1, "calib_source": "sotu"}
    r = study.headline_seed(model, tx, P, progress=False)
    top1, _ = allocation.evaluate(model, tx["eval"], R.topk([1, 1]), batch_blocks=2)
    np.testing.assert_allclose(r["top1"], top1)
    assert np.isfinite(r["top1"]).all() and sum(r["alloc"]) <= 4
    grid = {"half": 2, "nll": {(2, "uniform"): r["uniform"], (2, "alloc-l+t"): r["alloc-l+t"]}, "full_nll": r["full"],
            "top1_nll": r["top1"], "alloc_main": r["alloc"]}
    assert set(study.from_grid(grid)) == set(r)


@pytest.mark.assets
@pytest.mark.slow
def test_run_returns_everything_record_claims_reads(tmp_path):
    """study.run_experiments on a tiny checkpoint: one call, and its result alone decides every claim and control."""
    from acl26 import claims as C
    from acl26 import corpus as corpus_mod
    from acl26.papers.alloc_moe import CHAPTER
    from transformers import AutoModelForCausalLM

    tok = corpus_mod.train_bpe(1024)
    torch.manual_seed(0)
    cfg = models.moe_config(len(tok), hidden=32, layers=2, heads=2, kv_heads=1, experts=6, top_k=3,
                            expert_intermediate=16, max_positions=32)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    P = spec.SPEC.resolve("smoke", {"checkpoint": str(tmp_path), "budgets": [1, 2], "eval_blocks": 4,
                                     "n_resamples": 99, "speed_rounds": 1})
    res = study.run_experiments(P, progress=False)
    assert {"grid", "seeds", "speed", "n_resamples"} <= set(res) and list(res["seeds"]) == [None]
    g = res["grid"]
    np.testing.assert_array_equal(g["top1_nll"], g["nll"][(1, "uniform")])  # budget 1 is top-1: scored once
    assert g["S_rand"].shape == g["S"].shape and sum(g["alloc_rand"]) <= g["half"] * 2
    # the labelled deviation (issue 40, point 7): the same DP over log S, scored at half budget beside Alloc-L
    assert sum(g["alloc_log"]) <= g["half"] * 2 and g["nll_log"].shape == g["nll"][(g["half"], "alloc-l")].shape
    assert set(res["speed"]["allocs"]) == {"uniform", "Alloc-MoE"}
    ledger = C.Ledger("alloc_moe", "smoke", list(CHAPTER.claims))
    CHAPTER.record_claims(ledger, res)
    assert not ledger.missing()
    assert all(e.holds in C.VERDICTS for e in ledger.entries.values())


def test_choose_native_k_is_the_smallest_k_whose_every_larger_k_is_within_the_margin():
    from acl26.papers.alloc_moe import moefy
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    dense = LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)).eval()
    g = torch.Generator().manual_seed(2)
    moe = moefy(dense, 8, torch.randint(0, 97, (4, 24), generator=g), top_k=8, layers=[0, 2])
    blocks = torch.randint(0, 97, (4, 24), generator=g)
    for margin in (0.0, 1e-3, 0.05, 1e9):
        k, rows = study.choose_native_k(moe, blocks, margin, batch_blocks=2, progress=False)
        assert R.native_k(moe) == [k, k] and rows[0]["k"] == 8 and rows[0]["ratio to dense"] == 1.0
        assert [r["k"] for r in rows] == list(range(8, 8 - len(rows), -1))
        assert all(r["within margin"] == (r["ratio to dense"] <= 1 + margin) for r in rows)
        assert all(r["within margin"] for r in rows[:-1]) and k == min(r["k"] for r in rows if r["within margin"])
        assert rows[-1]["k"] == 1 or not rows[-1]["within margin"]  # it stops at the first k outside
    assert k == 1  # an unbounded margin keeps every k
    dense_nll, _ = allocation.evaluate(moefy(dense, 8, blocks, top_k=8), blocks, None, batch_blocks=2)
    assert np.isclose(rows[0]["ppl"], tables.ppl(dense_nll), rtol=1e-5)  # every expert kept: the dense model


@pytest.mark.assets
def test_a_dense_checkpoint_is_moefied_and_budgets_at_its_native_k_fail_naming_them(tmp_path):
    from acl26 import corpus as corpus_mod
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = corpus_mod.train_bpe(1024)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 max_position_embeddings=32)).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    P = spec.SPEC.resolve("smoke", {"checkpoint": str(tmp_path), "moefy_layers": [1, 2], "moefy_experts": 6,
                                     "moefy_shared": 2, "native_margin": 1e9, "budgets": [1]})
    # every k within the margin: K_orig is 1, and the budget 1 is not below it
    rule = r"^budgets must each be below the native top-k \(the MoEfied subject's: 1, "
    with pytest.raises(ValueError, match=rule) as e:
        study.main_subject(P, progress=False)
    assert "\n" not in str(e.value)
    P["native_margin"], P["budgets"] = 0.0, []  # past the spec: no budget to check
    m, t, info = study.main_subject(P, progress=False)
    assert len(R.native_k(m)) == 2 and info["native_k_table"][0]["k"] == 6 and "MoEfied" in info["source"]
    # moefy_shared reaches moefy: two always-on shared experts beside the six routed ones (issue 40, point 5)
    assert "6 routed + 2 shared" in info["source"]
    assert all(b.shared_experts is not None and b.shared_experts.num_experts == 2 for b in R.moe_blocks(m))
    with pytest.raises(ValueError, match="moefy_layers: .* has 3 decoder layers, got \\[3\\]"):
        study.main_subject({**P, "moefy_layers": [1, 3]}, progress=False)


def test_segments_weight_back_to_the_block_means_and_the_allocation_bootstrap_re_derives_s():
    model = tiny_qwen3(layers=3, top_k=4, experts=8)
    g = torch.Generator().manual_seed(4)
    blocks = torch.randint(0, 300, (3, 21), generator=g)  # 20 predicted tokens: segments of 8, 8, 4
    per_block, _ = allocation.evaluate(model, blocks, None, batch_blocks=2)
    seg, _ = allocation.evaluate(model, blocks, None, batch_blocks=2, segment=8)
    w = allocation.segment_weights(20, 8, 3)
    assert seg.shape == (9,) and list(w[:3]) == [8, 8, 4]
    np.testing.assert_allclose([np.average(seg[3 * b:3 * b + 3], weights=w[:3]) for b in range(3)], per_block, rtol=1e-5)
    S, parts = allocation.profile_sensitivity(model, blocks, batch_blocks=2, progress=False, segment=8)
    np.testing.assert_allclose(S, allocation.profile_sensitivity(model, blocks, batch_blocks=2, progress=False), rtol=1e-5)
    assert parts.shape == (3, 4, 9)
    shape = lambda ks: float(ks[0] - ks[-1])  # noqa: E731
    iv = tables.allocation_bootstrap(parts, w, 6, shape, n_resamples=200)
    assert iv.estimate == shape(allocation.allocate(S, 6)) and iv.lo <= iv.estimate <= iv.hi and iv.n == 9
    assert iv == tables.allocation_bootstrap(parts, w, 6, shape, n_resamples=200)  # seeded


def _tiny_moe_config(arch: str, vocab: int):
    """A tiny OLMoE or DeepSeek-V2 config (6 experts, top-3, 2 MoE layers): the paper's other model families."""
    if arch == "olmoe":
        from transformers import OlmoeConfig

        return OlmoeConfig(vocab_size=vocab, hidden_size=32, intermediate_size=16, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, num_experts=6, num_experts_per_tok=3,
                           max_position_embeddings=64)
    from transformers import DeepseekV2Config

    return DeepseekV2Config(vocab_size=vocab, hidden_size=32, intermediate_size=32, moe_intermediate_size=16,
                            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, n_routed_experts=6,
                            num_experts_per_tok=3, n_shared_experts=1, first_k_dense_replace=0, kv_lora_rank=8,
                            q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
                            max_position_embeddings=64, topk_method="greedy", n_group=1, topk_group=1)


@pytest.mark.assets
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["olmoe", "deepseek_v2"])
def test_the_checkpoint_path_runs_olmoe_and_deepseek_v2(tmp_path, arch):
    """The local-checkpoint path on tiny OLMoE and DeepSeek-V2 models saved as a user's (issue 29, point 2):
    every MoE layer's router is found with its native top-k, and the result decides every claim."""
    from acl26 import claims as C
    from acl26 import corpus as corpus_mod
    from acl26.papers.alloc_moe import CHAPTER
    from transformers import AutoModelForCausalLM

    tok = corpus_mod.train_bpe(1024)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(_tiny_moe_config(arch, len(tok))).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    P = spec.SPEC.resolve("smoke", {"checkpoint": str(tmp_path), "budgets": [1, 2], "eval_blocks": 4,
                                     "n_resamples": 99, "speed_rounds": 1})
    res = study.run_experiments(P, progress=False)
    info = res["info"]
    assert info["MoE layers"] == 2 and info["experts per layer"] == 6 and info["native top-k"] == 3
    assert {"OlmoeForCausalLM": "olmoe", "DeepseekV2ForCausalLM": "deepseek_v2"}[info["class"]] == arch
    ledger = C.Ledger("alloc_moe", "smoke", list(CHAPTER.claims))
    CHAPTER.record_claims(ledger, res)
    assert not ledger.missing()


# --------------------------------------------------------------------------------------------
# cached prefixes: the same figures as full forwards, bit for bit


def _moefied(layers=4, moe_layers=(1, 2), shared=1, seed=0):  # 6 routed + 2 shared of 64 neurons
    """A tiny LLaMA with MoEfied MLPs in ``moe_layers`` only (dense layers before, between and after)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from acl26.papers.alloc_moe import moefy

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    calib = torch.randint(0, 97, (4, 24), generator=torch.Generator().manual_seed(1))
    moe = moefy(LlamaForCausalLM(cfg).eval(), 6, calib, top_k=4, n_shared=shared + 1, layers=list(moe_layers))
    return moe.eval()


def _policies(native):
    L = len(native)
    return [None, R.topk([2] * L), R.topk([native[0]] + [1] * (L - 1)), R.alloc_t([2] * L, 1), R.topp(0.6),
            R.skip(0.3)]


@pytest.mark.parametrize("make", [lambda: _moefied(), lambda: tiny_qwen3(layers=3, top_k=3, experts=6),
                                  lambda: tiny_family("deepseek_v2")])
def test_a_prefix_gives_the_full_forwards_figures_exactly(make):
    model = make()
    vocab = model.config.vocab_size
    x = torch.randint(0, vocab, (5, 20), generator=torch.Generator().manual_seed(3))  # a short last batch
    depths = allocation.moe_depths(model)
    pre = allocation.capture_prefix(model, x, batch_blocks=2, starts=[depths[0]])
    for pol in _policies(R.native_k(model)):
        for per_token in (False, True):
            want, c_want = allocation.evaluate(model, x, pol, batch_blocks=2, per_token=per_token)
            got, c_got = allocation.evaluate(model, x, pol, batch_blocks=2, per_token=per_token, prefix=pre)
            assert np.array_equal(got, want), (pol, np.abs(got - want).max())
            assert c_got.per_layer() == c_want.per_layer()
        if pol is not None:
            assert allocation.measured_budget(model, x, pol, 2, prefix=pre) == allocation.measured_budget(model, x, pol, 2)
    seg, _ = allocation.evaluate(model, x, None, batch_blocks=2, segment=7, prefix=pre)
    assert np.array_equal(seg, allocation.evaluate(model, x, None, batch_blocks=2, segment=7)[0])


@pytest.mark.parametrize("make", [lambda: _moefied(layers=5, moe_layers=(1, 2, 3)),
                                  lambda: tiny_qwen3(layers=3, top_k=3, experts=6)])
def test_the_profile_from_cached_prefixes_is_the_full_forwards_profile(make):
    """Each layer's passes start at that layer, its shallower MoE layers' states cached at their native top-k."""
    model = make()
    calib = torch.randint(0, model.config.vocab_size, (3, 18), generator=torch.Generator().manual_seed(6))
    native = R.native_k(model)
    L = len(native)
    want = np.full((L, max(native)), np.nan)
    want_parts = np.full((L, max(native), 3 * 4), np.nan)  # 17 predicted tokens: segments of 5, 5, 5, 2
    for i in range(L):
        for k in range(1, native[i] + 1):
            ks = [native[j] if j < i else 1 for j in range(L)]
            ks[i] = k
            want[i, k - 1] = np.exp(np.mean(allocation.evaluate(model, calib, R.topk(ks), batch_blocks=2)[0]))
            want_parts[i, k - 1] = allocation.evaluate(model, calib, R.topk(ks), batch_blocks=2, segment=5)[0]
    assert np.array_equal(allocation.profile_sensitivity(model, calib, batch_blocks=2, progress=False), want)
    _, parts = allocation.profile_sensitivity(model, calib, batch_blocks=2, progress=False, segment=5)
    assert np.array_equal(parts, want_parts)


def test_a_prefix_is_refused_where_it_is_not_the_forwards_own():
    model = _moefied(layers=4, moe_layers=(1, 2))
    x = torch.randint(0, 97, (4, 16), generator=torch.Generator().manual_seed(2))
    depths = allocation.moe_depths(model)
    assert depths == [1, 2]
    pre = allocation.capture_prefix(model, x, batch_blocks=2, starts=depths)
    with pytest.raises(ValueError, match="changes a MoE layer before decoder layer 2"):
        allocation.evaluate(model, x, R.topk([1, 1]), batch_blocks=2, prefix=pre, start=2)
    with pytest.raises(ValueError, match="changes a MoE layer before"):
        allocation.evaluate(model, x, R.topp(0.5), batch_blocks=2, prefix=pre, start=2)
    with pytest.raises(ValueError, match="other blocks or batches"):
        allocation.evaluate(model, x, None, batch_blocks=4, prefix=pre)
    with pytest.raises(ValueError, match="other blocks or batches"):
        allocation.evaluate(model, x.flip(0), None, batch_blocks=2, prefix=pre)
    with pytest.raises(ValueError, match="not 3"):
        allocation.evaluate(model, x, None, batch_blocks=2, prefix=pre, start=3)
    with pytest.raises(ValueError, match="after the first"):
        allocation.measured_budget(model, x, R.topp(0.5), 2,
                                   prefix=allocation.capture_prefix(model, x, batch_blocks=2, starts=[2]))
    with pytest.raises(ValueError, match="starts must be"):
        allocation.capture_prefix(model, x, batch_blocks=2, starts=[4])
    study.set_native_k(model, 3)
    with pytest.raises(ValueError, match="native top-k"):
        allocation.evaluate(model, x, None, batch_blocks=2, prefix=pre, start=2)
    # at the first MoE layer the prefix is dense: a changed native top-k leaves it the forward's own
    got = allocation.evaluate(model, x, None, batch_blocks=2, prefix=pre, start=1)[0]
    assert np.array_equal(got, allocation.evaluate(model, x, None, batch_blocks=2)[0])
