"""Sherry's training side (acl26.papers.sherry.qat): the torch quantizers agree with the kernels, Arenas, STE,
trapping statistics, and the packed model computes what the fake-quantized one did (issue #5)."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from acl26 import models, training
from acl26.papers import sherry
from acl26.kernels import ternary


@st.composite
def weights(draw):
    rows = draw(st.integers(1, 24))
    groups = draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, 4 * groups)).astype(np.float32)
    if draw(st.booleans()):  # ties and zeros: the tie rule must agree too
        w = np.round(w * 2) / 2
    return w


@given(weights())
def test_torch_3to4_quantizer_matches_the_kernel(w):
    t, s = sherry.sparse34(torch.from_numpy(w))
    kt, ks = ternary.sparse_ternarize(w)
    assert np.array_equal(t.numpy().astype(np.int8), kt)
    np.testing.assert_allclose(s.numpy(), ks, rtol=2e-6, atol=1e-7)
    assert np.all((kt != 0).reshape(len(w), -1, 4).sum(-1) == 3)


@given(weights())
def test_torch_absmean_matches_the_kernel(w):
    t, s = sherry.absmean(torch.from_numpy(w))
    kt, ks = ternary.absmean_ternarize(w)
    np.testing.assert_allclose(float(s), float(ks), rtol=1e-6)
    # rounding at exactly +-0.5 * scale may differ with a scale that differs in the last bit
    assert np.mean(t.numpy().astype(np.int8) == kt) > 0.99


def test_arenas_schedule():
    total = 100
    lams = [sherry.arenas_lambda(s, total) for s in range(total)]
    assert lams[0] == 0 and lams[10] == pytest.approx(1.0)
    assert all(a <= b for a, b in zip(lams[:10], lams[1:11]))
    assert all(a >= b for a, b in zip(lams[10:], lams[11:]))
    assert lams[-1] == pytest.approx(0.0, abs=1e-12)


def test_straight_through_gradient_and_arenas_residual():
    torch.manual_seed(0)
    lin = sherry.QuantLinear(8, 3, bias=False, mode="sparse34")
    x = torch.randn(5, 8)
    lin(x).sum().backward()
    q = sherry.quantize(lin.weight, "sparse34").requires_grad_(True)
    torch.nn.functional.linear(x, q).sum().backward()
    assert torch.allclose(lin.weight.grad, q.grad)  # STE: d loss / d W = d loss / d Q(W)
    lin.weight.grad = None
    lin.lam = 0.5
    y = lin(x)
    assert torch.allclose(y, x @ (sherry.quantize(lin.weight, "sparse34") + 0.5 * lin.weight).T, atol=1e-6)
    with pytest.raises(ValueError, match="mode"):
        sherry.QuantLinear(4, 4, False, "int4")
    with pytest.raises(ValueError, match="divisible by 4"):
        sherry.sparse34(torch.randn(2, 6))


def tiny_model():
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = models.dense_config(128, hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64, max_positions=32)
    return AutoModelForCausalLM.from_config(cfg)


def test_wrap_replaces_block_linears_only_and_shares_parameters():
    model = tiny_model()
    before = {n: p for n, p in model.named_parameters()}
    sherry.wrap(model, "sparse34")
    layers = sherry.quantized_layers(model)
    assert len(layers) == 2 * 7 and all(isinstance(m, sherry.QuantLinear) for _, m in layers)
    assert not isinstance(model.lm_head, sherry.QuantLinear)
    after = {n: p for n, p in model.named_parameters()}
    assert before.keys() == after.keys() and all(before[n] is after[n] for n in before)


def test_effective_rank():
    assert sherry.effective_rank(torch.outer(torch.arange(1.0, 5), torch.arange(1.0, 4))) == pytest.approx(1.0, abs=1e-4)
    assert sherry.effective_rank(torch.eye(6)) == pytest.approx(6.0, rel=1e-5)


def test_monitor_drives_lambda_and_records_trapping(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    g = torch.Generator().manual_seed(0)
    tr, va = torch.randint(0, 128, (64, 17), generator=g), torch.randint(0, 128, (8, 17), generator=g)
    cfg = tiny_model().config
    track = ["model.layers.1.mlp.up_proj", "model.layers.1.self_attn.q_proj"]
    mon = sherry.QATMonitor("sparse34", 20, True, track, every=2)
    tc = training.TrainConfig(steps=20, batch_size=4, eval_every=10, eval_blocks=4, checkpoint_every=5)
    res = training.train(cfg, tc, tr, va, name="qat", data_fingerprint="x", progress=False, monitor=mon,
                         init=lambda: sherry.wrap(tiny_model(), "sparse34"), key_extra={"v": "arenas"},
                         prepare=lambda m: sherry.wrap(m, "sparse34"))
    summary = res.log["monitor"]
    assert max(l for _, l in summary["lambda"]) == pytest.approx(1.0)
    assert set(summary["stuck_share"]) == set(track) and all(0 <= v <= 1 for v in summary["stuck_share"].values())
    assert all(len(summary["effective_rank"][n]) >= 5 for n in track)
    again = training.train(cfg, tc, tr, va, name="qat", data_fingerprint="x", progress=False,
                           init=lambda: sherry.wrap(tiny_model(), "sparse34"), key_extra={"v": "arenas"},
                           prepare=lambda m: sherry.wrap(m, "sparse34"))
    assert again.from_cache and isinstance(again.model.model.layers[0].mlp.up_proj, sherry.QuantLinear)


def test_packed_model_computes_the_fake_quantized_logits():
    model = sherry.wrap(tiny_model(), "sparse34").eval()
    x = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        fake = model(x).logits
        import copy

        packed_model = sherry.to_packed(copy.deepcopy(model))
        packed = packed_model(x).logits
    assert torch.allclose(fake, packed, atol=1e-4, rtol=1e-4)
    layers = [m for m in packed_model.modules() if isinstance(m, sherry.PackedLinear)]
    assert len(layers) == 14 and all(m.nbytes > 0 for m in layers)
    with pytest.raises(ValueError, match="only 3:4"):
        sherry.to_packed(sherry.wrap(tiny_model(), "absmean"))
