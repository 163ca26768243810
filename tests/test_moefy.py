"""MoEfication (acl26.papers.alloc_moe.moefy): exact at every expert, the dense MLP with the other
experts' neurons zeroed at k, balanced experts, the chapter's routing on it, and one-line argument errors."""

import numpy as np
import pytest
import torch

from acl26.papers.alloc_moe import budgeted, moe_blocks, moefy, native_k, topk
from acl26.papers.alloc_moe.moefy import MoEfiedMLP, balanced_clusters


def _tiny(seed=0, width=64, layers=2):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=width, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def _calib(n=4, t=24, seed=1):
    return torch.randint(0, 97, (n, t), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def dense():
    return _tiny()


def test_every_expert_kept_gives_the_dense_logits(dense):
    ids = _calib(2, 16, seed=5)
    moe = moefy(dense, 8, _calib(), top_k=8)
    with torch.no_grad():
        want, got = dense(ids).logits, moe(ids).logits
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), (got - want).abs().max()
    assert all(isinstance(layer.mlp, MoEfiedMLP) for layer in moe.model.layers)
    assert not any(isinstance(layer.mlp, MoEfiedMLP) for layer in dense.model.layers)  # the input is left alone


def test_k_experts_are_the_dense_mlp_with_the_other_neurons_zeroed(dense):
    moe = moefy(dense, 8, _calib(), top_k=3)
    x = torch.randn(10, 32, generator=torch.Generator().manual_seed(2))
    for dl, ml in zip(dense.model.layers, moe.model.layers):
        d, m = dl.mlp, ml.mlp
        _, _, idx = m.gate(x)
        got = m(x)
        # each expert's neurons, found back in the dense MLP by matching gate_proj rows
        rows = {tuple(r.tolist()): i for i, r in enumerate(d.gate_proj.weight)}
        owner = np.full(d.gate_proj.out_features, -1)
        for e in range(8):
            for r in m.experts.gate_proj[e]:
                owner[rows[tuple(r.tolist())]] = e
        assert (np.bincount(owner, minlength=8) == 8).all()  # balanced: 64 neurons, 8 experts of 8
        for t in range(len(x)):
            mask = torch.as_tensor(np.isin(owner, idx[t].numpy()), dtype=x.dtype)
            h = d.act_fn(d.gate_proj(x[t])) * d.up_proj(x[t]) * mask
            assert torch.allclose(got[t], d.down_proj(h), atol=1e-6), t


def test_the_chapter_routing_runs_on_it_and_drops_by_the_routers_scores(dense):
    ids = _calib(2, 16, seed=7)
    full = moefy(dense, 8, _calib(), top_k=8)
    assert native_k(full) == [8, 8] and len(moe_blocks(full)) == 2
    at3 = moefy(dense, 8, _calib(), top_k=3)
    with torch.no_grad():
        want = at3(ids).logits
        with budgeted(full, topk([3, 3])) as counter:
            got = full(ids).logits
    assert torch.allclose(got, want, atol=1e-5)  # keeping the top 3 of 8 by the router = a router at top 3
    assert counter.per_layer() == [3.0, 3.0]


def test_balanced_clusters_are_balanced_and_group_alike_rows():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 16))
    rows = np.repeat(centres, 6, axis=0) + 0.01 * rng.normal(size=(24, 16))
    labels = balanced_clusters(rows, 4, seed=3)
    assert (np.bincount(labels, minlength=4) == 6).all()
    for g in range(4):  # each true group lands in one cluster
        assert len(set(labels[g * 6:(g + 1) * 6])) == 1
    with pytest.raises(ValueError, match="n_clusters"):
        balanced_clusters(rows, 5)


@pytest.mark.parametrize("kwargs,match", [
    (dict(n_experts=7), "n_experts must divide"),
    (dict(n_experts=0), "n_experts"),
    (dict(top_k=0), "top_k"),
    (dict(top_k=9), "top_k"),
    (dict(top_k=2.0), "top_k"),
    (dict(calibration=torch.zeros(0, dtype=torch.long)), "calibration"),
    (dict(calibration=torch.zeros(3, 0, dtype=torch.long)), "calibration"),
    (dict(calibration=torch.zeros(4, 5)), "calibration must be a LongTensor"),
    (dict(calibration=[1, 2, 3]), "calibration must be a LongTensor"),
    (dict(calibration=torch.tensor([1, 97])), r"calibration: token ids must lie in \[0, 97\)"),
    (dict(calibration=torch.zeros(2, 2, 2, dtype=torch.long)), "calibration must be 1-D"),
])
def test_bad_arguments_raise_one_line_naming_them(dense, kwargs, match):
    args = dict(n_experts=8, calibration=_calib(1, 8), top_k=2) | kwargs
    with pytest.raises(ValueError, match=match) as e:
        moefy(dense, args.pop("n_experts"), args.pop("calibration"), **args)
    assert "\n" not in str(e.value)


def test_a_model_without_dense_mlps_is_refused(dense):
    moe = moefy(dense, 8, _calib(1, 8), top_k=2)
    with pytest.raises(ValueError, match="not a dense SwiGLU MLP"):
        moefy(moe, 8, _calib(1, 8), top_k=2)
    with pytest.raises(ValueError, match="LLaMA-family"):
        moefy(torch.nn.Linear(2, 2), 8, _calib(1, 8), top_k=2)


def test_layers_converts_only_those_and_stays_exact(dense):
    ids = _calib(2, 16, seed=5)
    moe = moefy(dense, 8, _calib(), top_k=8, layers=[1])
    assert [isinstance(layer.mlp, MoEfiedMLP) for layer in moe.model.layers] == [False, True]
    assert native_k(moe) == [8]  # the chapter sees one MoE layer
    with torch.no_grad():
        assert torch.allclose(moe(ids).logits, dense(ids).logits, atol=1e-5, rtol=1e-5)
    # a layer left dense can be converted later; a converted one cannot be converted again
    both = moefy(moe, 4, _calib(), top_k=2, layers=[0])
    assert native_k(both) == [2, 8]
    with pytest.raises(ValueError, match="layer 1's MLP is not a dense SwiGLU MLP"):
        moefy(moe, 8, _calib(), top_k=2, layers=[1])


@pytest.mark.parametrize("layers,match", [([], "at least one layer"), ([0, 0], "repeat"), ([2], "layers must be"),
                                          ([-1], "layers must be"), ([1.0], "layers must be"), ("0", "sequence"),
                                          (3, "sequence")])
def test_bad_layers_raise_one_line_naming_them(dense, layers, match):
    with pytest.raises(ValueError, match=match) as e:
        moefy(dense, 8, _calib(1, 8), top_k=2, layers=layers)
    assert "\n" not in str(e.value)


def test_the_policies_rank_a_moefied_router_by_its_scores_not_its_unit_weights(dense):
    """Skipping keeps an expert whose predicted mass is at least beta times the token's top one, and top-p
    reads each expert's share of the token's total mass: both from the router's logits, since every
    kept weight is 1."""
    from acl26.papers.alloc_moe import routing as R

    ids = _calib(2, 16, seed=9)
    moe = moefy(dense, 8, _calib(), top_k=6)

    def run(policy):
        seen = []  # each layer's router logits in this very run (a budget upstream changes them downstream)
        hooks = [b.gate.register_forward_hook(lambda m, a, out: seen.append(out[0].detach().clone()))
                 for b in moe_blocks(moe)]
        try:
            with torch.no_grad(), budgeted(moe, policy) as c:
                moe(ids)
        finally:
            for h in hooks:
                h.remove()
        return c.per_layer(), [lg.clamp_min(0) for lg in seen]

    for beta, p in ((0.0, 0.3), (0.6, 0.6), (0.9, 0.95)):
        got, masses = run(R.skip(beta))
        want = [float((m.topk(6, dim=-1).values >= beta * m.max(-1, keepdim=True).values).sum(1).float().mean())
                for m in masses]
        np.testing.assert_allclose(got, want, rtol=1e-6)
        got, masses = run(R.topp(p))
        share = [torch.sort(m / m.sum(-1, keepdim=True), descending=True).values for m in masses]
        want = [float(((sh.cumsum(-1) <= p).sum(-1) + 1).clamp(max=6).float().mean()) for sh in share]
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert run(R.skip(0.9))[0] != [6.0, 6.0]  # it drops something: unit weights would have kept all six


# ---- shared experts (issue 40, point 5): n_shared always-on experts beside the routed ones ----------------

def test_with_shared_experts_every_routed_expert_kept_gives_the_dense_logits(dense):
    ids = _calib(2, 16, seed=5)
    moe = moefy(dense, 6, _calib(), top_k=6, n_shared=2)  # 64 neurons: 8 clusters of 8, 2 of them shared
    with torch.no_grad():
        want, got = dense(ids).logits, moe(ids).logits
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), (got - want).abs().max()
    for layer in moe.model.layers:
        m = layer.mlp
        assert m.gate.num_experts == m.experts.num_experts == 6 and m.shared_experts.num_experts == 2
        assert m.shared_experts.gate_proj.shape == (16, 32)  # two experts of 8 neurons
    assert native_k(moe) == [6, 6]  # the router and its top-k count routed experts only


def test_shared_experts_are_the_highest_mass_clusters_and_stay_on_at_any_k(dense):
    calib = _calib()
    seen = {i: [] for i in range(len(dense.model.layers))}  # each MLP's input on the calibration tokens
    hooks = [layer.mlp.register_forward_pre_hook(lambda mod, args, i=i: seen[i].append(args[0].reshape(-1, 32)))
             for i, layer in enumerate(dense.model.layers)]
    with torch.no_grad():
        dense(input_ids=calib, use_cache=False)
    for h in hooks:
        h.remove()
    plain = moefy(dense, 8, calib, top_k=8)  # the same 8 clusters (same seed), none shared
    moe = moefy(dense, 6, calib, top_k=1, n_shared=2)
    x = torch.randn(10, 32, generator=torch.Generator().manual_seed(2))
    for i, (dl, pl, ml) in enumerate(zip(dense.model.layers, plain.model.layers, moe.model.layers)):
        d = dl.mlp
        # each cluster's activation mass over the calibration tokens, from the MLP's inputs as moefy saw them
        inputs = torch.cat(seen[i])
        a = (d.act_fn(inputs @ d.gate_proj.weight.T) * (inputs @ d.up_proj.weight.T)).abs().detach()
        rows = {tuple(r.tolist()): i for i, r in enumerate(d.gate_proj.weight)}
        cluster_mass = [float(a[:, [rows[tuple(r.tolist())] for r in pl.mlp.experts.gate_proj[e]]].sum())
                        for e in range(8)]
        shared_rows = {rows[tuple(r.tolist())] for r in ml.mlp.shared_experts.gate_proj}
        top2 = sorted(range(8), key=lambda e: -cluster_mass[e])[:2]
        want = {rows[tuple(r.tolist())] for e in top2 for r in pl.mlp.experts.gate_proj[e]}
        assert shared_rows == want
        # at top-1: the shared neurons and the routed expert's neurons, the rest zeroed
        _, _, idx = ml.mlp.gate(x)
        got = ml.mlp(x)
        for t in range(len(x)):
            keep = shared_rows | {rows[tuple(r.tolist())] for r in ml.mlp.experts.gate_proj[int(idx[t, 0])]}
            mask = torch.zeros(d.gate_proj.out_features)
            mask[list(keep)] = 1.0
            h = d.act_fn(d.gate_proj(x[t])) * d.up_proj(x[t]) * mask
            assert torch.allclose(got[t], d.down_proj(h), atol=1e-6), t


@pytest.mark.parametrize("kwargs,match", [
    (dict(n_experts=6, n_shared=1), r"n_experts \+ n_shared \(6 \+ 1\) must divide"),
    (dict(n_shared=-1), "n_shared"),
    (dict(n_shared=1.0), "n_shared"),
    (dict(n_experts=6, n_shared=2, top_k=7), "top_k"),
])
def test_bad_shared_arguments_raise_one_line_naming_them(dense, kwargs, match):
    args = dict(n_experts=8, calibration=_calib(1, 8), top_k=2) | kwargs
    with pytest.raises(ValueError, match=match) as e:
        moefy(dense, **args)
    assert "\n" not in str(e.value)


def test_alloc_t_on_a_moefied_router_ranks_by_share_so_the_uncertain_token_gets_the_slot():
    """Issue 40, point 6: the paper's Alloc-T pools gate probabilities (per-token shares), not raw masses.
    Token 0 is confident with large masses (shares .5/.3/.15/.05); token 1 is uncertain with small ones
    (.25 each). Two extra slots: by share, one each (0's .30, then 1's .25); by raw mass both went to token 0."""
    from types import SimpleNamespace

    from acl26.papers.alloc_moe import routing as R

    gate = SimpleNamespace(scores_are_logits=True)
    logits = torch.tensor([[100.0, 60.0, 30.0, 10.0], [1.0, 1.0, 1.0, 1.0]])
    indices = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])
    route_logits, scores = R.route_scores(gate, logits, indices, torch.ones(2, 4))
    assert torch.allclose(scores, torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.25] * 4]))
    keep = R.keep_slots(R.alloc_t([2], k_base=1), 0, route_logits, scores, indices, 4)
    assert keep.sum(dim=1).tolist() == [2, 2]  # was [3, 1]: the uncertain token now gets a second expert
    # skipping compares each score with the token's top one: unchanged by the division
    assert R.keep_slots(R.skip(0.5), 0, route_logits, scores, indices, 4).sum(dim=1).tolist() == [2, 4]
