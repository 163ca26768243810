"""Bad input anywhere gives a one-line error naming it, or NaN out; never a quiet finite answer (issue 25)."""

from __future__ import annotations

import math
import random
import types

import numpy as np
import pytest
import torch

NAN, INF = math.nan, math.inf


# ---- non-finite inputs and argument checks
#
# Losses and quantizers: non-finite input raises a ValueError naming the tensor, or gives NaN (or ±inf),
# never a finite value. Arguments (counts, sizes, rates, probabilities, seeds, tolerances) go through
# acl26.checks: no truncation (2.9 is not 2), bool is not a number, numpy scalars of any width are taken,
# NaN and inf are refused.

from acl26 import checks, claims, corpus, evaluation, models, stats, texts, timing, training  # noqa: E402
from acl26.kernels import dp_alloc, ternary, tokmerge  # noqa: E402
from acl26.papers import sherry  # noqa: E402
from acl26.papers.alloc_moe import routing  # noqa: E402
from acl26.papers.alloc_moe import allocation as alloc_allocation  # noqa: E402
from acl26.papers.lopt import baselines as lopt_baselines  # noqa: E402
from acl26.papers.lopt import method as lopt_method  # noqa: E402
from acl26.papers.model_interpolation import merge  # noqa: E402
from acl26.papers.mta import data as mta_data  # noqa: E402
from acl26.papers.mta import distill as mta_distill  # noqa: E402
from acl26.papers.mta import losses as L  # noqa: E402
from acl26.papers.sherry import decoder as sherry_decoder  # noqa: E402
from acl26.papers.sherry import qat  # noqa: E402

BADS = [NAN, INF]  # -inf is a legitimate log-probability (probability 0)


def _not_finite(x) -> bool:
    return not bool(torch.isfinite(torch.as_tensor(x)).all())


def _logps(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.log_softmax(torch.randn(3, 6, generator=g, dtype=torch.float64), -1),
            torch.log_softmax(2 * torch.randn(3, 6, generator=g, dtype=torch.float64), -1))


# -- MTA base losses


@pytest.mark.parametrize("bad", BADS, ids=["nan", "inf"])
@pytest.mark.parametrize("name", sorted(L.BASE_LOSSES))
def test_mta_base_loss_refuses_a_non_finite_teacher(name, bad):
    s, t = _logps()
    t[1, 2] = bad
    with pytest.raises(ValueError, match=r"^teacher_logp holds NaN or \+inf$"):
        L.BASE_LOSSES[name](s, t)


@pytest.mark.parametrize("bad", BADS, ids=["nan", "inf"])
@pytest.mark.parametrize("at", [0, 4], ids=["where-teacher-mass", "anywhere"])
@pytest.mark.parametrize("name", sorted(L.BASE_LOSSES))
def test_mta_base_loss_gives_nan_for_a_non_finite_student(name, bad, at):
    s, t = _logps()
    t = torch.log(torch.tensor([[0.5, 0.5, 0, 0, 0, 0]] * 3, dtype=torch.float64))  # p = 0 at index 4
    s[1, at] = bad
    assert math.isnan(float(L.BASE_LOSSES[name](s, t)))


@pytest.mark.parametrize("name", sorted(L.BASE_LOSSES))
def test_mta_base_loss_masked_out_positions_do_not_enter(name):
    s, t = _logps()
    mask = torch.tensor([True, False, True])
    want = float(L.BASE_LOSSES[name](s, t, mask))
    s2, t2 = s.clone(), t.clone()
    s2[1, 0], t2[1, 3] = NAN, INF
    assert float(L.BASE_LOSSES[name](s2, t2, mask)) == want  # the documented mask: nothing of row 1 enters
    t2[0, 0] = NAN
    with pytest.raises(ValueError, match="teacher_logp"):
        L.BASE_LOSSES[name](s2, t2, mask)


def test_mta_base_losses_unchanged_on_good_input():
    s, t = _logps(3)
    p, q = t.exp(), s.exp()
    a = L.ALPHA
    assert float(L.forward_kl(s, t)) == pytest.approx(float((p * (t - s)).sum(-1).mean()), rel=1e-12)
    mix_f = torch.log(a * p + (1 - a) * q)
    assert float(L.skew_forward_kl(s, t)) == pytest.approx(float(-(p * mix_f).sum(-1).mean()), rel=1e-12)
    mix_r = torch.log((1 - a) * p + a * q)
    assert float(L.skew_reverse_kl(s, t)) == pytest.approx(float((q * (s - mix_r)).sum(-1).mean()), rel=1e-12)
    # -inf (probability 0) on either side stays a finite loss
    s[0, 1], t[2, 3] = -INF, -INF
    for fn in L.BASE_LOSSES.values():
        assert math.isfinite(float(fn(s, t)))


@pytest.mark.parametrize("alpha", [1.0, 0.0, True, NAN, INF, "0.1", None])
def test_mta_alpha_is_checked(alpha):
    s, t = _logps()
    with pytest.raises(ValueError, match="^alpha must be"):
        L.skew_forward_kl(s, t, alpha=alpha)


def test_mta_alpha_takes_numpy_floats():
    s, t = _logps()
    assert float(L.skew_reverse_kl(s, t, alpha=np.float32(0.25))) == pytest.approx(
        float(L.skew_reverse_kl(s, t, alpha=float(np.float32(0.25)))), rel=1e-12)


# -- MTA top-k buckets


def _topk_case():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 10, generator=g)
    teacher = torch.log_softmax(torch.randn(3, 10, generator=g) * 2, -1).topk(4, -1)
    return logits, teacher.indices, teacher.values


@pytest.mark.parametrize("bad", BADS, ids=["nan", "inf"])
def test_mta_topk_buckets_refuses_a_non_finite_cached_teacher(bad):
    logits, idx, lp = _topk_case()
    lp[2, 1] = bad
    with pytest.raises(ValueError, match=r"^topk_logp holds NaN or \+inf$"):
        L.topk_buckets(logits, idx, lp)


@pytest.mark.parametrize("inside", [True, False], ids=["in-top-k", "outside-top-k"])
@pytest.mark.parametrize("bad", BADS, ids=["nan", "inf"])
def test_mta_topk_buckets_non_finite_student_logits_give_nan(bad, inside):
    logits, idx, lp = _topk_case()
    col = int(idx[1, 0]) if inside else next(j for j in range(10) if j not in idx[1].tolist())
    logits[1, col] = bad
    sb, tb = L.topk_buckets(logits, idx, lp)
    assert bool(torch.isnan(sb[1]).any()) and bool(torch.isfinite(sb[[0, 2]]).all())
    for fn in L.BASE_LOSSES.values():
        assert math.isnan(float(fn(sb, tb)))


def test_mta_topk_buckets_minus_inf_is_probability_zero():
    logits, idx, lp = _topk_case()
    lp[0, -1] = -INF
    outside = next(j for j in range(10) if j not in idx[1].tolist())
    logits[1, outside] = -INF
    sb, tb = L.topk_buckets(logits, idx, lp)
    assert bool(torch.isfinite(L.forward_kl(sb, tb)))


# -- MTA token importance, pooling, DSA, Hid


@pytest.mark.parametrize("bad", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_mta_token_importance_refuses_non_finite_states(bad):
    h = torch.randn(2, 4, 3)
    m = torch.tensor([[True, True, True, False], [True, True, False, False]])
    h[1, 0, 2] = bad
    with pytest.raises(ValueError, match="^hidden has non-finite values"):
        L.token_importance(h, m)


def _pool_case():
    g = torch.Generator().manual_seed(2)
    h = torch.randn(2, 5, 3, generator=g)
    w = torch.softmax(torch.randn(2, 5, generator=g), -1)
    spans = [[(0, 2), (2, 5)], [(0, 1), (1, 3)]]
    return h, w, spans


@pytest.mark.parametrize("what", ["hidden", "weights"])
@pytest.mark.parametrize("bad", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_mta_pool_spans_propagates_non_finite_input(what, bad):
    h, w, spans = _pool_case()
    good_units, good_w = L.pool_spans(h, w, spans)
    if what == "hidden":
        h[0, 1, 0] = bad
    else:
        w[0, 1] = bad
    units, uw = L.pool_spans(h, w, spans)
    assert _not_finite(units[0, 0])  # the span holding the bad token is not finite
    if what == "weights":
        assert _not_finite(uw[0])
    assert torch.equal(units[1], good_units[1]) and torch.equal(uw[1], good_w[1])  # the other sequence is untouched


def test_mta_pool_spans_weightless_span_unchanged():
    h, w, spans = _pool_case()
    w[0, :2] = 0.0  # a span whose tokens all weigh 0: the plain mean, unit weight 0
    units, uw = L.pool_spans(h, w, spans)
    assert torch.allclose(units[0, 0], h[0, :2].mean(0)) and float(uw[0, 0]) == 0.0


@pytest.mark.parametrize("arg", [0, 1, 2], ids=["student_units", "teacher_units", "unit_weights"])
@pytest.mark.parametrize("bad", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_mta_dsa_loss_is_not_finite_on_non_finite_input(arg, bad):
    g = torch.Generator().manual_seed(4)
    args = [torch.randn(2, 3, 4, generator=g), torch.randn(2, 3, 5, generator=g),
            torch.softmax(torch.randn(2, 3, generator=g), -1)]
    if arg < 2:
        args[arg][1, 2, 0] = bad
    else:
        args[arg][1, 2] = bad
    assert _not_finite(L.dsa_loss(*args))


@pytest.mark.parametrize("arg", [0, 1, 2], ids=["student_hidden", "teacher_hidden", "weights"])
@pytest.mark.parametrize("bad", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_mta_hid_loss_is_not_finite_on_non_finite_input(arg, bad):
    g = torch.Generator().manual_seed(5)
    args = [torch.randn(2, 4, 3, generator=g), torch.randn(2, 4, 6, generator=g),
            torch.softmax(torch.randn(2, 4, generator=g), -1)]
    if arg < 2:
        args[arg][0, 3, 1] = bad
    else:
        args[arg][0, 3] = bad
    assert _not_finite(L.hid_loss(*args, L.projection(3, 6)))


@pytest.mark.parametrize("kw,match", [
    (dict(n_units=2.5), "n_units"), (dict(n_units=True), "n_units"), (dict(length=5.0), "length"),
    (dict(spans=[[(0, 1.5)]]), r"spans\[0\]\[0\] end"), (dict(spans=[[(True, 2)]]), r"spans\[0\]\[0\] start"),
])
def test_mta_span_matrix_checks_its_counts(kw, match):
    args = dict(spans=[[(0, 2), (2, 5)]], n_units=2, length=5) | kw
    with pytest.raises(ValueError, match=match):
        L.span_matrix(**args)


def test_mta_span_matrix_takes_numpy_integers():
    want = L.span_matrix([[(0, 2), (2, 5)]], 2, 5)
    got = L.span_matrix([[(np.int8(0), np.uint16(2)), (np.int64(2), np.int32(5))]], np.int16(2), np.uint8(5))
    assert torch.equal(got, want)


@pytest.mark.parametrize("value", [True, INF, NAN, -1.0, "2"])
def test_mta_condition_lambdas_are_checked(value):
    with pytest.raises(ValueError, match="^lambda_hid must be"):
        mta_distill.Condition(lambda_hid=value)


def test_mta_condition_takes_numpy_floats_and_stores_floats():
    c = mta_distill.Condition(lambda_dsa=np.float32(2.5), lambda_hid=np.int64(1))
    assert type(c.lambda_dsa) is float and c.lambda_dsa == 2.5 and type(c.lambda_hid) is float
    assert mta_distill.Condition(lambda_dsa=3).lambda_dsa == 3  # a plain int is kept as given (cache keys)


@pytest.mark.parametrize("layers", [[0, 1.5], [True, 2], [np.float32(1)]])
def test_mta_make_student_refuses_non_integer_layers(layers):
    fake = types.SimpleNamespace(config=types.SimpleNamespace(num_hidden_layers=4))
    with pytest.raises(ValueError, match=r"^layers\[\d\] must be an integer"):
        mta_distill.make_student(fake, layers)


@pytest.mark.parametrize("seed", [1.5, True, -1, 2**32])
def test_mta_pairs_check_their_seed(seed):
    with pytest.raises(ValueError, match="^seed must be"):
        mta_data.sotu_pairs(2, seed, "train", prompt_words=4, response_words=4)
    with pytest.raises(ValueError, match="^seed must be"):
        mta_data.gym_pairs(2, seed)


# -- Sherry quantizers


_QUANTIZERS = {
    "sparse34": qat.sparse34,
    "absmean": qat.absmean,
    "quantize-sparse34": lambda w: qat.quantize(w, "sparse34"),
    "quantize-absmean": lambda w: qat.quantize(w, "absmean"),
    "state-sparse34": lambda w: qat.ternary_state(w, "sparse34"),
    "state-absmean": lambda w: qat.ternary_state(w, "absmean"),
}


@pytest.mark.parametrize("bad", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("name", sorted(_QUANTIZERS))
def test_sherry_quantizers_refuse_non_finite_weights(name, bad):
    w = torch.randn(4, 8)
    w[2, 5] = bad
    with pytest.raises(ValueError, match=r"^w must be finite \(no NaN or inf\)$"):
        _QUANTIZERS[name](w)


@pytest.mark.parametrize("mode", ["sparse34", "absmean"])
def test_sherry_quant_linear_refuses_a_nan_weight(mode):
    lin = qat.QuantLinear(8, 4, bias=False, mode=mode)
    with torch.no_grad():
        lin.weight[0, 0] = NAN
    with pytest.raises(ValueError, match="finite"):
        lin(torch.randn(2, 8))


def test_sherry_to_packed_names_the_layer_with_a_non_finite_weight():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = qat.QuantLinear(8, 4, bias=False, mode="sparse34")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.layers = torch.nn.ModuleList([Block()])

    m = Model()
    with torch.no_grad():
        m.model.layers[0].proj.weight[1, 1] = INF
    with pytest.raises(ValueError, match=r"^model\.layers\.0\.proj\.weight must be finite"):
        qat.to_packed(m)


def test_sherry_quantizers_unchanged_on_good_input():
    w = np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32)
    t, s = qat.sparse34(torch.from_numpy(w))
    kt, ks = ternary.sparse_ternarize(w)
    assert np.array_equal(t.numpy().astype(np.int8), kt)
    np.testing.assert_allclose(s.numpy(), ks, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("bad", [NAN, INF], ids=["nan", "inf"])
def test_sherry_effective_rank_of_a_non_finite_gradient_is_nan(bad):
    g = torch.randn(4, 4)
    g[0, 0] = bad
    assert math.isnan(qat.effective_rank(g))


@pytest.mark.parametrize("kw,match", [
    (dict(step=2.5), "step"), (dict(step=True), "step"), (dict(step=-1), "step"), (dict(total=0), "total"),
    (dict(total=100.0), "total"), (dict(warmup_frac=NAN), "warmup_frac"), (dict(warmup_frac=1.5), "warmup_frac"),
    (dict(warmup_frac=True), "warmup_frac"),
])
def test_sherry_arenas_lambda_checks_its_arguments(kw, match):
    with pytest.raises(ValueError, match=f"^{match} must be"):
        sherry.arenas_lambda(**(dict(step=3, total=100, warmup_frac=0.1) | kw))


def test_sherry_arenas_lambda_takes_numpy_scalars():
    assert sherry.arenas_lambda(np.int32(30), np.uint16(100), np.float32(0.25)) == \
        sherry.arenas_lambda(30, 100, float(np.float32(0.25)))


@pytest.mark.parametrize("kw,match", [
    (dict(every=0), "every"), (dict(every=2.5), "every"), (dict(total_steps=True), "total_steps"),
    (dict(skip_frac=INF), "skip_frac"),
])
def test_sherry_qat_monitor_checks_its_arguments(kw, match):
    with pytest.raises(ValueError, match=f"^{match} must be"):
        qat.QATMonitor(**(dict(mode="sparse34", total_steps=10, arenas=True, track=[]) | kw))


# -- the ternary kernels' wrappers


@pytest.mark.parametrize("fn", [ternary.sparse_ternarize, ternary.absmean_ternarize])
@pytest.mark.parametrize("bad", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_ternary_quantizers_refuse_non_finite_weights(fn, bad):
    W = np.ones((2, 8), np.float32)
    W[1, 3] = bad
    with pytest.raises(ValueError, match=r"^W must be finite"):
        fn(W)


@pytest.mark.parametrize("gs", [4.5, 4.0, True, np.float32(4), "4", 0, -4])
def test_ternary_group_size_is_never_truncated(gs):
    with pytest.raises(ValueError, match="^group_size must be"):
        ternary.sparse_ternarize(np.ones((2, 8), np.float32), group_size=gs)


def test_ternary_group_size_takes_numpy_integers():
    W = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    for gs in (np.int8(8), np.uint64(8), np.array(8)):
        T, s = ternary.sparse_ternarize(W, group_size=gs)
        T8, s8 = ternary.sparse_ternarize(W, group_size=8)
        assert np.array_equal(T, T8) and np.array_equal(s, s8)


def _packed(fmt="sherry"):
    W = np.random.default_rng(2).standard_normal((20, 16)).astype(np.float32)
    T, scale = ternary.sparse_ternarize(W)
    return getattr(ternary, f"pack_{fmt}")(T), scale


@pytest.mark.parametrize("op", ["gemv", "gemm"])
@pytest.mark.parametrize("bad", [NAN, INF, -INF, 1e300], ids=["nan", "inf", "-inf", "overflows-float32"])
def test_ternary_matmul_refuses_non_finite_activations(op, bad):
    packed, scale = _packed()
    x = np.ones(16, np.float64)
    x[3] = bad
    X = x if op == "gemv" else np.stack([np.ones(16), x])
    with pytest.raises(ValueError, match=("^x" if op == "gemv" else "^X") + " must be finite"):
        getattr(ternary, op)("sherry", packed, scale, X)


@pytest.mark.parametrize("shape", ["scalar", "row"])
@pytest.mark.parametrize("bad", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_ternary_matmul_refuses_a_non_finite_scale(shape, bad):
    packed, scale = _packed()
    s = np.array(bad, np.float32) if shape == "scalar" else scale.copy()
    if shape == "row":
        s[7] = bad
    with pytest.raises(ValueError, match="^scale must be finite"):
        ternary.gemv("sherry", packed, s, np.ones(16, np.float32))


def test_ternary_matmul_unchanged_on_good_input():
    packed, scale = _packed()
    x = np.random.default_rng(3).standard_normal(16).astype(np.float32)
    T = ternary.unpack_sherry(packed)
    np.testing.assert_allclose(ternary.gemv("sherry", packed, scale, x), scale * (T @ x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(16.5, 8), (16, 8.0), (True, 8), (16, np.float32(8)), (16,), (16, -8), "ab"])
def test_ternary_layout_refuses_bad_shapes(shape):
    with pytest.raises(ValueError, match="^shape"):
        ternary.layout("sherry", shape)


def test_ternary_layout_and_unpack_take_numpy_integers():
    assert ternary.layout("tl2", (np.int16(20), np.uint32(16))) == ternary.layout("tl2", (20, 16))
    packed, _ = _packed()
    assert np.array_equal(ternary.unpack_sherry(packed, (np.int64(20), np.int8(16))), ternary.unpack_sherry(packed))
    with pytest.raises(ValueError, match="^shape"):
        ternary.unpack_sherry(packed, (20.0, 16))


@pytest.mark.parametrize("scales", [True, 2.5, 0, np.float32(8), None])
def test_ternary_bits_per_weight_scales_is_checked(scales):
    with pytest.raises(ValueError, match="^scales"):
        ternary.bits_per_weight("sherry", (16, 64), scales)


def test_ternary_bits_per_weight_takes_a_numpy_group_size():
    assert ternary.bits_per_weight("sherry", (16, 64), np.int16(32)) == ternary.bits_per_weight("sherry", (16, 64), 32)


# -- tokmerge, dp_alloc


_TOKS = np.array([[i, i + 1, 7, 1] for i in range(10)], dtype=np.int64)


@pytest.mark.parametrize("kw,match", [
    (dict(min_run=2.9), "min_run"), (dict(min_run=True), "min_run"), (dict(min_run=np.float32(2)), "min_run"),
    (dict(min_run=0), "min_run"), (dict(center=5.5), "center"), (dict(center=INF), "center"),
    (dict(center=False), "center"),
])
def test_tokmerge_find_cut_never_truncates(kw, match):
    with pytest.raises(ValueError, match=f"^{match} must be an integer"):
        tokmerge.find_cut(_TOKS, _TOKS, **(dict(center=5, min_run=2) | kw))


def test_tokmerge_find_cut_takes_numpy_integers():
    want = tokmerge.find_cut(_TOKS, _TOKS, center=5, min_run=3)
    assert tokmerge.find_cut(_TOKS, _TOKS, center=np.int16(5), min_run=np.uint8(3)) == want
    assert (want.ia, want.ib, want.pos) == (5, 5, 5)


@pytest.mark.parametrize("budget", [True, np.bool_(True), 6.5, np.float32(6.5), INF, NAN, "6", None])
def test_dp_alloc_budget_is_an_integer(budget):
    with pytest.raises(ValueError, match="^budget must be an integer"):
        dp_alloc.allocate(np.ones((3, 4)), budget)


def test_dp_alloc_budget_takes_numpy_integers_and_integral_floats():
    cost = np.array([[3.0, 1.0, 0.5], [2.0, 1.5, 1.4]])
    for b in (np.int8(4), np.uint64(4), np.array(4), 4.0, np.float32(4)):  # 4.0: the documented contract
        assert np.array_equal(dp_alloc.allocate(cost, b), dp_alloc.allocate(cost, 4))


def test_alloc_moe_allocate_refuses_nan_costs_but_excludes_inf():
    cost = np.array([[3.0, 1.0, np.inf], [2.0, 1.5, 1.4]])
    assert alloc_allocation.allocate(cost, 6) == [2, 3]
    for bad in (NAN, -INF):
        c = cost.copy()
        c[1, 1] = bad
        with pytest.raises(ValueError, match="^cost holds NaN or -inf"):
            alloc_allocation.allocate(c, 6)


@pytest.mark.parametrize("kw,match", [
    (dict(kind="topp", p=True), "^p must be"), (dict(kind="topp", p=NAN), "^p must be"),
    (dict(kind="topp", p=0.0), "^p must be"), (dict(kind="skip", beta=INF), "^beta must be"),
    (dict(kind="skip", beta=False), "^beta must be"), (dict(kind="skip", beta=None), "^beta must be"),
])
def test_alloc_moe_policy_rates_are_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        routing.Policy(**kw)


def test_alloc_moe_policy_takes_numpy_floats():
    assert routing.Policy("topp", p=np.float32(0.5)).p == 0.5
    assert routing.Policy("skip", beta=np.float16(0.25)).beta == 0.25


# -- LoPT settings


@pytest.mark.parametrize("kw,match", [
    (dict(chunk_chars=1.5), "chunk_chars"), (dict(chunk_chars=True), "chunk_chars"),
    (dict(chunk_chars=np.float32(256)), "chunk_chars"), (dict(overlap_chars=2.5), "overlap_chars"),
    (dict(overlap_chars=1), "overlap_chars"), (dict(min_run=2.9), "min_run"), (dict(min_run=True), "min_run"),
    (dict(min_run=0), "min_run"), (dict(max_retries=-1), "max_retries"), (dict(max_retries=1.0), "max_retries"),
    (dict(workers=0), "workers"), (dict(workers=2.5), "workers"), (dict(workers=True), "workers"),
    (dict(chunk_chars=INF), "chunk_chars"),
])
def test_lopt_validate_settings_names_the_bad_setting(kw, match):
    with pytest.raises(ValueError, match=f"^{match} must be"):
        lopt_method.validate_settings(**(dict(chunk_chars=256, overlap_chars=16) | kw))


def test_lopt_validate_settings_takes_numpy_integers():
    lopt_method.validate_settings(np.int32(256), np.int16(16), np.uint8(2), np.int64(3), "piece", np.int8(2))
    assert lopt_method.chunk_spans(np.int32(1000), np.int16(300), np.int8(16)) == lopt_method.chunk_spans(1000, 300, 16)
    with pytest.raises(ValueError, match="^chunk_chars must be"):
        lopt_method.chunk_spans(1000, 300.0, 16)


@pytest.mark.parametrize("fn", [lopt_baselines.encode_naive, lopt_baselines.encode_delimiter,
                                lopt_baselines.encode_overlap_ids])
@pytest.mark.parametrize("chunk", [0, 2.5, True])
def test_lopt_baselines_check_chunk_chars(fn, chunk):
    with pytest.raises(ValueError, match="^chunk_chars"):
        fn(None, "some text", chunk_chars=chunk)  # refused before the tokenizer is looked at


# -- evaluation


@pytest.mark.parametrize("args,match", [
    ((45.0, 16, 8), "^n must be"), ((45, True, 8), "^context_length must be"), ((45, 16, 8.0), "^stride must be"),
])
def test_evaluation_sliding_windows_never_truncates(args, match):
    with pytest.raises(ValueError, match=match):
        evaluation.sliding_windows(*args)


def test_evaluation_sliding_windows_takes_numpy_integers():
    assert evaluation.sliding_windows(np.int32(45), np.int64(16), np.uint8(8)) == evaluation.sliding_windows(45, 16, 8)


@pytest.mark.parametrize("kw,match", [
    (dict(temperature=INF), "temperature"), (dict(temperature=NAN), "temperature"), (dict(temperature=True), "temperature"),
    (dict(top_p=True), "top_p"), (dict(top_p=NAN), "top_p"), (dict(top_p=0.0), "top_p"), (dict(top_k=2.5), "top_k"),
    (dict(top_k=True), "top_k"), (dict(max_new_tokens=4.0), "max_new_tokens"),
])
def test_evaluation_generation_config_checks_decoding(kw, match):
    with pytest.raises(ValueError, match=f"^{match} must be"):
        evaluation.generation_config(**(dict(max_new_tokens=4, temperature=0.7, pad_token_id=0, eos_token_id=2) | kw))


def test_evaluation_generation_config_takes_numpy_scalars():
    gc = evaluation.generation_config(max_new_tokens=np.int16(4), temperature=np.float32(0.5), top_p=np.float64(0.9),
                                      top_k=np.int64(20), pad_token_id=0, eos_token_id=2)
    assert (gc.max_new_tokens, gc.temperature, gc.top_p, gc.top_k) == (4, 0.5, 0.9, 20)
    assert type(gc.top_k) is int and type(gc.max_new_tokens) is int


@pytest.mark.parametrize("args", [(5.0, 2, 1), (5, True, 1), (5, 2, 1.0), (5, 6, 1), (5, 2, 0)])
def test_evaluation_pass_at_k_checks_its_counts(args):
    with pytest.raises(ValueError, match="must be an integer"):
        evaluation.pass_at_k(*args)


def test_evaluation_metrics_take_numpy_integers():
    assert evaluation.pass_at_k(np.int64(5), np.int32(2), np.int8(2)) == evaluation.pass_at_k(5, 2, 2)
    correct = [[1, 0, 1], [0, 0, 1]]
    assert evaluation.mean_at_k(correct, np.int16(2)) == evaluation.mean_at_k(correct, 2)
    assert evaluation.pass_at_k_mean(correct, np.uint8(2)) == evaluation.pass_at_k_mean(correct, 2)
    for k in (True, 2.0, 4):
        with pytest.raises(ValueError, match="^k must be an integer"):
            evaluation.mean_at_k(correct, k)
    with pytest.raises(ValueError, match="^k must be an integer"):
        evaluation.vote_at_k([["1"], []], ["1", "2"])  # a problem without samples: no k fits


# -- training, models, corpus, texts, timing, claims, stats


@pytest.mark.parametrize("kw,name", [
    (dict(steps=2.5), "steps"), (dict(steps=True), "steps"), (dict(batch_size=0), "batch_size"),
    (dict(lr=INF), "lr"), (dict(lr=NAN), "lr"), (dict(lr=True), "lr"), (dict(warmup_frac=1.0), "warmup_frac"),
    (dict(grad_clip=INF), "grad_clip"), (dict(seed=1.5), "seed"), (dict(seed=2**32), "seed"),
    (dict(betas=(0.9, 1.0)), r"betas\[1\]"), (dict(betas=(0.9,)), "betas"), (dict(eval_every=1.0), "eval_every"),
])
def test_training_config_checks_every_field(kw, name):
    with pytest.raises(ValueError, match=f"^TrainConfig.{name} must be"):
        training.TrainConfig(**(dict(steps=10) | kw))


def test_training_config_stores_python_numbers():
    tc = training.TrainConfig(steps=np.int64(10), lr=np.float32(0.5), betas=(np.float32(0.5), 0.25))
    assert type(tc.steps) is int and type(tc.lr) is float and tc.betas == (0.5, 0.25)
    assert training.TrainConfig(steps=10, lr=1).lr == 1  # plain numbers are kept as given (cache keys)


@pytest.mark.parametrize("top_k", [2.5, True, 0, 40, np.float32(2)])
def test_models_moe_config_top_k_is_checked(top_k):
    with pytest.raises(ValueError, match="^top_k must be between 1 and experts"):
        models.moe_config(100, experts=32, top_k=top_k)


def test_models_moe_config_takes_a_numpy_top_k():
    assert models.moe_config(100, experts=np.int16(8), top_k=np.int64(2)).num_experts_per_tok == 2


def test_corpus_split_of_never_truncates():
    assert corpus.split_of(np.int8(8)) == "validation" and corpus.split_of(np.uint64(9)) == "test"
    for bad in (8.0, 2.5, True, -1):
        with pytest.raises(ValueError, match="^position must be"):
            corpus.split_of(bad)


def test_texts_check_their_counts():
    assert texts.hard_text(np.int32(50), seed=np.int64(1)) == texts.hard_text(50, seed=1)
    for kw in (dict(n_chars=50.5), dict(n_chars=True), dict(seed=1.5), dict(seed=-1)):
        with pytest.raises(ValueError, match="must be"):
            texts.hard_text(**(dict(n_chars=50) | kw))
    with pytest.raises(ValueError, match="^max_pieces must be"):
        texts.hostile_text(random.Random(0), 2.5)


@pytest.mark.parametrize("kw,match", [
    (dict(rounds=2.5), "rounds"), (dict(rounds=True), "rounds"), (dict(calls=0), "calls"), (dict(warm_s=INF), "warm_s"),
    (dict(warm_s=NAN), "warm_s"),
])
def test_timing_interleaved_checks_its_counts(kw, match):
    with pytest.raises(ValueError, match=f"^{match} must be"):
        timing.interleaved({"a": lambda: None}, **(dict(rounds=1) | kw))


def test_timing_rotations_take_numpy_integers():
    assert timing.rotations("abc", np.int8(2)) == timing.rotations("abc", 2)
    with pytest.raises(ValueError, match="^rounds must be"):
        timing.rotations("abc", 2.0)


@pytest.mark.parametrize("make", [lambda: claims.within(1.0, INF), lambda: claims.within(1.0, NAN),
                                  lambda: claims.within(1.0, -0.1), lambda: claims.within(NAN, 0.1),
                                  lambda: claims.at_least(NAN), lambda: claims.at_most(INF),
                                  lambda: claims.at_least(True)])
def test_claim_thresholds_and_tolerances_are_finite_numbers(make):
    with pytest.raises(ValueError, match="^(x|rel) must be a (finite )?number"):
        make()


def test_claim_thresholds_take_numpy_floats():
    assert claims.within(np.float32(2.0), np.float16(0.5))(2.9) and not claims.within(2.0, 0.5)(3.1)
    assert claims.at_least(np.int64(3))(3)


def test_stats_bootstrap_seed_is_checked():
    a, b = [1.0, 2.0, 3.0], [1.5, 2.0, 2.5]
    for seed in (1.5, True, -1):
        with pytest.raises(ValueError, match="^seed must be"):
            stats.paired_bootstrap(a, b, seed=seed, n_resamples=99)


# -- model interpolation


def test_interpolation_similarity_of_a_nan_tensor_is_nan():
    a = {"w": torch.ones(3), "v": torch.ones(2)}
    b = {"w": torch.tensor([1.0, NAN, 1.0]), "v": -torch.ones(2)}
    assert math.isnan(merge.similarity(a, b))
    assert math.isnan(merge.similarity(a, b, reduce="pooled"))
    assert merge.similarity(a, {"w": torch.ones(3), "v": -torch.ones(2)}) == pytest.approx(0.5)


@pytest.mark.parametrize("lam", [True, NAN, INF, 1.5, "0.5"])
def test_interpolation_lambda_is_checked(lam):
    with pytest.raises(ValueError, match="^lam must be"):
        merge.interpolate({"w": torch.zeros(2)}, {"w": torch.ones(2)}, lam)


def test_interpolation_lambda_takes_numpy_floats():
    got = merge.interpolate({"w": torch.zeros(2)}, {"w": torch.ones(2)}, np.float32(0.25))
    assert torch.allclose(got["w"], torch.full((2,), 0.25))


# -- Sherry decoder shapes and limits


@pytest.mark.parametrize("kw,match", [
    (dict(vocab=10.0), "^vocab must be"), (dict(layers=True), "^layers must be"),
    (dict(rope_theta=INF), "^rope_theta must be"), (dict(rope_theta=True), "^rope_theta must be"),
])
def test_sherry_shape_checks_its_sizes(kw, match):
    with pytest.raises(ValueError, match=match):
        sherry_decoder.Shape(**(dict(name="x", hidden=64, intermediate=96, layers=1, heads=4, kv_heads=2, vocab=10) | kw))


@pytest.mark.parametrize("kw,match", [
    (dict(max_gb=INF), "^max_gb must be"), (dict(max_gb=True), "^max_gb must be"), (dict(max_gb=0), "^max_gb must be"),
    (dict(ram_share=True), "^ram_share must be"), (dict(ram_share=NAN), "^ram_share must be"),
    (dict(available=1e9), "^available must be"),
])
def test_sherry_skip_reason_checks_its_limits(kw, match):
    with pytest.raises(ValueError, match=match):
        sherry_decoder.skip_reason("tiny", "fp32", **kw)


def test_sherry_skip_reason_takes_numpy_scalars():
    assert sherry_decoder.skip_reason("tiny", "fp32", max_gb=np.float32(10), ram_share=np.float16(0.5),
                                      available=np.int64(10**12)) is None


def test_sherry_random_ternary_refuses_a_float_shape():
    with pytest.raises(ValueError, match=r"^shape\[1\] must be"):
        sherry_decoder.random_ternary("sherry", (4, 8.0), np.random.default_rng(0))


def test_checks_module_is_the_one_checker():
    # the rules every test above leans on, in one place
    assert checks.integer("k", np.uint64(3)) == 3 and checks.number("x", np.float32(0.5)) == 0.5
    for bad in (2.9, True, np.bool_(True), "3"):
        with pytest.raises(ValueError, match="^k must be an integer"):
            checks.integer("k", bad)
    with pytest.raises(ValueError, match="^x must be a finite number"):
        checks.number("x", 1e999)
