"""Sherry's training side (acl26.papers.sherry.qat): the torch quantizers agree with the kernels, Arenas, STE,
trapping statistics, and the packed model computes what the fake-quantized one did (issue #5)."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from acl26 import models, training
from acl26.papers import sherry
from acl26.papers.sherry import qat as qat_mod
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


def _sparse34_torch_ops(w: torch.Tensor):
    """qat.sparse34 as it was written in torch ops alone (before the Numba pass): the reference its fast
    path must equal bit for bit (T with its signed zeros, and the scale)."""
    out_f, in_f = w.shape
    g = w.detach().reshape(out_f, in_f // 4, 4)
    a = g.abs()
    keep = torch.ones_like(g).scatter_(-1, a.argmin(-1, keepdim=True), 0.0)
    t = torch.where(g < 0, -1.0, 1.0).to(w.dtype) * keep
    return t.reshape(out_f, in_f), (a * keep).sum(dim=(1, 2)) / keep.sum(dim=(1, 2))


@given(weights(), st.booleans())
def test_the_3to4_fast_path_equals_the_torch_ops_bit_for_bit(w, negative_zeros):
    if negative_zeros:  # zeroed weights that are -0.0 or negative keep their sign in T, as sign * 0 gives
        w = np.where(np.arange(w.size).reshape(w.shape) % 3 == 0, np.float32(-0.0), w).astype(np.float32)
    x = torch.from_numpy(w)
    t, s = sherry.sparse34(x)
    rt, rs = _sparse34_torch_ops(x)
    assert torch.equal(t.view(torch.int32), rt.view(torch.int32))
    assert torch.equal(s.view(torch.int32), rs.view(torch.int32))
    # a non-contiguous weight (a transposed view) takes the torch path: the same T, and its scale is the torch
    # ops' on that view (torch may sum a strided view in another order, as it always did)
    view = torch.from_numpy(np.ascontiguousarray(w.T)).T
    tt, ts = sherry.sparse34(view)
    vt, vs = _sparse34_torch_ops(view)
    assert torch.equal(tt.view(torch.int32), rt.view(torch.int32)) and torch.equal(ts.view(torch.int32), vs.view(torch.int32))
    assert torch.allclose(ts, rs, rtol=1e-6, atol=0)


def test_sparse_split_refuses_what_it_cannot_quantize():
    kt, kept = ternary.sparse_split(np.array([[0.5, -0.1, -2.0, 0.1]], np.float32))
    assert kt.tolist() == [[1.0, -0.0, -1.0, 1.0]] and np.signbit(kt[0, 1])
    assert kept.dtype == np.float32 and np.array_equal(kept, np.array([[0.5, 0.0, 2.0, 0.1]], np.float32))
    for bad, what in ((np.ones((2, 6), np.float32), "multiple of 4"), (np.ones((2, 8)), "float32"),
                      (np.ones(8, np.float32), "2-D"), (np.ones((0, 8), np.float32), "non-empty")):
        with pytest.raises(ValueError, match=what):
            ternary.sparse_split(bad)
    for v in (np.nan, np.inf, -np.inf):
        w = np.ones((3, 8), np.float32)
        w[2, 5] = v
        with pytest.raises(ValueError, match="finite"):
            ternary.sparse_split(w)
        with pytest.raises(ValueError, match="finite"):
            sherry.sparse34(torch.from_numpy(w))


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
    # dL/dX at the same snapshots: one rank per snapshot, each at most the tokens or features of the input
    assert [s for s, _ in summary["input_rank"][track[0]]] == [s for s, _ in summary["effective_rank"][track[0]]]
    assert all(0 < r <= 4 * 16 for n in track for _, r in summary["input_rank"][n])
    again = training.train(cfg, tc, tr, va, name="qat", data_fingerprint="x", progress=False,
                           init=lambda: sherry.wrap(tiny_model(), "sparse34"), key_extra={"v": "arenas"},
                           prepare=lambda m: sherry.wrap(m, "sparse34"))
    assert again.from_cache and isinstance(again.model.model.layers[0].mlp.up_proj, sherry.QuantLinear)


def test_arenas_residual_is_zero_outside_training():
    """The authors' Arenas: eps = 0 when not training, so an evaluation scores the pure ternary model."""
    model = sherry.wrap(tiny_model(), "sparse34")
    x = torch.randint(0, 128, (2, 16))
    model.eval()
    with torch.no_grad():
        pure = model(input_ids=x).logits
    for _, m in sherry.quantized_layers(model):
        m.lam = 0.7
    with torch.no_grad():
        assert torch.equal(model(input_ids=x).logits, pure)  # eval mode: the residual is off
        model.train()
        assert not torch.allclose(model(input_ids=x).logits, pure)  # training: Q(W) + 0.7 W


def test_monitor_measures_the_input_gradient_through_the_layer_alone():
    """dL/dX of a tracked layer is the gradient through that layer (dL/dY @ W_eff), not the total gradient of a
    tensor that other layers read too (q, k and v share their input)."""
    torch.manual_seed(0)
    model = sherry.wrap(tiny_model(), "sparse34").train()
    name = "model.layers.1.self_attn.q_proj"
    mon = sherry.QATMonitor("sparse34", 4, True, [name], every=1)
    q = model.get_submodule(name)
    seen = {}

    def keep(module, grad_input, grad_output):
        seen["gy"] = grad_output[0].detach().clone()

    hook = q.register_full_backward_hook(keep)
    x = torch.randint(0, 128, (2, 16))
    mon.before_step(2, model)  # lambda > 0 at step 2 of 4
    assert q.lam > 0
    model(input_ids=x, labels=x).loss.backward()
    hook.remove()
    expect = seen["gy"].reshape(-1, q.out_features) @ q.effective_weight().detach()
    assert torch.allclose(mon._x_grads[name], expect, atol=1e-5)
    mon.on_grads(2, model)
    assert mon.input_ranks[name][0][1] == pytest.approx(sherry.effective_rank(expect), rel=1e-4)
    assert not mon._handles and not q._backward_hooks  # the hooks last one step


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


# ---- whole-model files (acl26.papers.sherry.modelfile): what the size claim is measured on


def _trained_like(mode="sparse34"):
    """A tiny model wrapped for QAT, its weights spread like a trained model's (with exact ties in some groups)."""
    model = sherry.wrap(tiny_model(), mode).eval()
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight[:4] = torch.round(model.model.layers[0].mlp.up_proj.weight[:4] * 8) / 8
    return model


def _bf16_rest(model):
    """A copy of ``model`` whose tensors outside the decoder blocks' linear layers are rounded to bf16."""
    import copy

    ref = copy.deepcopy(model)
    linear = {f"{n}.weight" for n, _ in sherry.quantized_layers(ref)}
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if name not in linear:
                p.copy_(p.to(torch.bfloat16).float())
    return ref


@pytest.mark.parametrize("weights", ["sherry", "i2", "bf16"])
def test_model_file_loads_back_bit_exact(tmp_path, weights):
    from acl26.papers.sherry import modelfile

    model = _trained_like()
    path = modelfile.save_model(model, tmp_path / f"m-{weights}.safetensors", weights)
    check = modelfile.verify(model, path)
    assert check["exact"] and not check["mismatched"] and check["layers"] == 14 and check["tensors"] >= 14
    assert check["bytes"] == path.stat().st_size and 0 < check["layer_bytes"] < check["bytes"]
    mf = modelfile.load_model(path)
    assert mf.weights == weights and mf.tied == {"lm_head.weight": "model.embed_tokens.weight"}
    if weights != "bf16":  # the unpacked streams are the fake-quantizer's ternary matrix and scale, bit for bit
        for name, layer in sherry.quantized_layers(model):
            t, s = sherry.sparse34(layer.weight)
            T, scale = mf.ternary(name)
            assert np.array_equal(T, t.numpy().astype(np.int8)) and np.array_equal(scale, s.detach().numpy())
        # and the model rebuilt from the file (packed kernels) computes what the fake-quantized one does
        x = torch.randint(0, 128, (2, 16))
        with torch.no_grad():
            got, want = modelfile.model_from_file(path)(x).logits, _bf16_rest(model)(x).logits
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_model_file_sizes_follow_the_formats(tmp_path):
    from acl26.papers.sherry import study

    model = _trained_like()
    out = study.model_files(model, "sparse34")
    assert out["exact"] and out["layers"] == 14 and out["weights"] == 2 * (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 64)
    nb, lb = out["bytes"], out["layer_bytes"]
    assert nb["sherry"] < nb["i2"] < nb["bf16"]
    # Sherry's streams are 5/8 of the 2-bit ones; the float32 row scales are the same in both
    rows = 2 * (32 + 16 + 16 + 32 + 64 + 64 + 32)
    assert lb["sherry"] - 4 * rows == out["weights"] * 5 // 32 and lb["i2"] - 4 * rows == out["weights"] // 4
    hb = out["header_bytes"]  # the Sherry file's header names one more tensor per layer (the signs)
    assert hb["sherry"] > hb["i2"] and nb["i2"] - hb["i2"] - lb["i2"] == nb["sherry"] - hb["sherry"] - lb["sherry"]


def test_a_different_model_does_not_verify(tmp_path):
    from acl26.papers.sherry import modelfile

    model = _trained_like()
    path = modelfile.save_model(model, tmp_path / "m.safetensors")
    with torch.no_grad():
        model.model.layers[1].self_attn.q_proj.weight.mul_(-1)  # every ternary state of one layer flips
        model.model.norm.weight.add_(0.5)
    check = modelfile.verify(model, path)
    assert not check["exact"]
    assert set(check["mismatched"]) == {"model.layers.1.self_attn.q_proj.weight", "model.norm.weight"}


@pytest.mark.parametrize("damage", ["flip a data byte", "truncate", "flip a header byte", "not ours"])
def test_a_damaged_or_foreign_model_file_is_refused(tmp_path, damage):
    from safetensors.torch import save_file

    from acl26.papers.sherry import modelfile

    path = modelfile.save_model(_trained_like(), tmp_path / "m.safetensors")
    data = bytearray(path.read_bytes())
    header = 8 + int.from_bytes(data[:8], "little")
    if damage == "flip a data byte":
        data[header + (len(data) - header) // 2] ^= 0x10
    elif damage == "truncate":
        data = data[: len(data) - 100]
    elif damage == "flip a header byte":
        data[header // 2] ^= 0x01
    bad = tmp_path / "bad.safetensors"
    if damage == "not ours":
        save_file({"w": torch.zeros(4)}, str(bad))
    else:
        bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="not a whole-model file acl26 wrote, or damaged") as err:
        modelfile.load_model(bad)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="damaged"):
        modelfile.verify(_trained_like(), bad)
    with pytest.raises(FileNotFoundError, match="no such model file"):
        modelfile.load_model(tmp_path / "missing.safetensors")


def test_model_file_writer_refuses_a_foreign_file_and_a_bad_model(tmp_path):
    from acl26 import io
    from acl26.papers.sherry import modelfile

    mine = tmp_path / "mine.safetensors"
    mine.write_text("the user's")
    with pytest.raises(io.OutputExistsError):
        modelfile.save_model(_trained_like(), mine)
    assert mine.read_text() == "the user's"
    path = modelfile.save_model(_trained_like(), tmp_path / "m.safetensors")
    modelfile.save_model(_trained_like(), path)  # ours, unchanged: replaced
    with pytest.raises(ValueError, match="3:4 ternary layers only"):
        modelfile.save_model(_trained_like("absmean"), tmp_path / "a.safetensors")
    assert modelfile.verify(_trained_like("absmean"), modelfile.save_model(_trained_like("absmean"),
                                                                            tmp_path / "a.safetensors", "i2"))["exact"]
    with pytest.raises(ValueError, match="no quantized layers|ternary QuantLinear"):
        modelfile.save_model(tiny_model(), tmp_path / "fp.safetensors")
    with pytest.raises(ValueError, match="weights must be one of"):
        modelfile.save_model(_trained_like(), tmp_path / "x.safetensors", "tq2_0")
    model = _trained_like()
    modelfile.save_model(model, tmp_path / "before.safetensors")  # quantized once, remembered
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight[0, 0] = float("nan")
    for weights in ("sherry", "bf16"):  # the changed weight is seen, and refused
        with pytest.raises(ValueError, match=r"model\.layers\.0\.mlp\.down_proj\.weight.*finite"):
            modelfile.save_model(model, tmp_path / f"nan-{weights}.safetensors", weights)
    assert not list(tmp_path.glob("nan-*"))


def test_absmean_per_row_scales_each_row_by_its_own_mean():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(6, 16, generator=g) * torch.tensor([0.1, 1, 10, 0.5, 2, 3])[:, None]
    t, s = sherry.absmean(w, per_row=True)
    assert s.shape == (6,) and torch.allclose(s, w.abs().mean(dim=1))
    for r in range(6):  # each row alone is the per-tensor quantizer of that row
        tr, sr = sherry.absmean(w[r:r + 1])
        assert torch.equal(t[r], tr[0]) and torch.isclose(s[r], sr)
    q = qat_mod.quantize(w, "absmean_row")
    assert torch.equal(q, t * s[:, None])
    # one scale per tensor squeezes a small-magnitude row to zeros; per row it keeps its signs
    assert (sherry.absmean(w)[0][0] == 0).float().mean() > 0.9 and (t[0] == 0).float().mean() < 0.6
    with pytest.raises(ValueError, match="finite"):
        sherry.absmean(torch.tensor([[float("nan"), 1.0]]), per_row=True)


def test_wrap_blocks_quantizes_only_those_blocks():
    model = sherry.wrap(tiny_model(), "absmean_row", blocks=[1])
    kinds = {n: type(m).__name__ for n, m in sherry.quantized_layers(model)}
    assert kinds and all((v == "QuantLinear") == (".layers.1." in n) for n, v in kinds.items())
    assert [n for n, _ in sherry.quantized_layers(model, [1])] == [n for n in kinds if ".layers.1." in n]
    for bad in ([], [1, 1], [2], [-1]):
        with pytest.raises(ValueError, match="blocks"):
            sherry.wrap(tiny_model(), "sparse34", blocks=bad)
    with pytest.raises(ValueError, match="mode must be one of"):
        sherry.wrap(tiny_model(), "absmean_col")


def test_model_file_round_trips_a_row_scaled_absmean_model(tmp_path):
    from acl26.papers.sherry import modelfile

    model = _trained_like("absmean_row")
    path = modelfile.save_model(model, tmp_path / "m.safetensors", "i2")
    assert modelfile.verify(model, path)["exact"]
    mf = modelfile.load_model(path)
    for name, layer in sherry.quantized_layers(model):
        t, s = sherry.absmean(layer.weight, per_row=True)
        T, scale = mf.ternary(name)
        assert scale.shape == (layer.out_features,) and np.array_equal(T, t.numpy().astype(np.int8))
        assert np.array_equal(scale, s.detach().numpy())
    x = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(modelfile.model_from_file(path)(x).logits, _bf16_rest(model)(x).logits,
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("weights", ["sherry", "i2"])
def test_a_partly_wrapped_model_packs_and_saves_its_wrapped_blocks_only(tmp_path, weights):
    """QAT of a subset of blocks: the other blocks stay full precision in the file and in to_packed."""
    import copy

    from acl26.papers.sherry import modelfile

    model = sherry.wrap(tiny_model(), "sparse34", blocks=[1]).eval()
    assert {n.split(".")[2] for n, _ in sherry.quantized_layers(model)} == {"1"}
    path = modelfile.save_model(model, tmp_path / "m.safetensors", weights)
    assert modelfile.verify(model, path)["exact"] and modelfile.verify(model, path)["layers"] == 7
    x = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(modelfile.model_from_file(path)(x).logits, _bf16_rest(model)(x).logits,
                                   atol=1e-5, rtol=1e-5)
        packed = sherry.to_packed(copy.deepcopy(model))
        assert sum(isinstance(m, sherry.PackedLinear) for m in packed.modules()) == 7
        torch.testing.assert_close(packed(x).logits, model(x).logits, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="blocks must be a sequence"):
        sherry.wrap(tiny_model(), "sparse34", blocks=1)


@pytest.mark.assets
@pytest.mark.slow
def test_qat_of_a_block_subset_on_a_local_llama_checkpoint(tmp_path, monkeypatch):
    """The accuracy half's code path on a user's checkpoint (a tiny random LLaMA saved as a user would):
    only the QAT'd block moves, the cache keeps only it and gives the same model back, the packed model
    computes the fake-quantized perplexity, the whole-ternary copy puts every block in 3:4, and the
    packed model generates."""
    import copy

    from transformers import AutoModelForCausalLM

    from acl26 import corpus as corpus_mod
    from acl26.papers.sherry import study, tables

    monkeypatch.setattr(training, "_folders", lambda name, key: (tmp_path / "models" / f"{name}-{key[:12]}",
                                                                   tmp_path / "models" / f"{name}-{key[:12]}.partial"))
    tok = corpus_mod.train_bpe(1024)
    torch.manual_seed(0)
    cfg = models.dense_config(len(tok), hidden=32, layers=3, heads=4, kv_heads=2, intermediate=64, max_positions=64)
    start = AutoModelForCausalLM.from_config(cfg)
    ckpt = tmp_path / "ckpt"
    start.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    P = study.SPEC.resolve("smoke", {"checkpoint": str(ckpt), "qat_blocks": [1], "block_size": 32, "eval_blocks": 4,
                                     "qat_steps": 4, "track_every": 2, "qat_lr": 1e-2})
    r, test = study.qat(P, "sparse34+arenas", seed=0, progress=False)
    assert test.shape == (4, 32) and len(r.log["final"]["val_block_losses"]) == 4
    before, after = start.state_dict(), r.model.state_dict()
    moved = {n for n in before if not torch.equal(before[n], after[n])}
    assert moved and all(".layers.1." in n for n in moved)
    assert all(m.mode == "sparse34" and m.lam == 0.0 for _, m in sherry.quantized_layers(r.model))
    assert {n.split(".")[2] for n, _ in sherry.quantized_layers(r.model)} == {"1"}
    assert [row["layer"] for row in tables.trapping_rows(r, "sparse34+arenas", 0)] == [
        "1.self_attn.q_proj", "1.mlp.up_proj", "1.mlp.down_proj"]
    again, _ = study.qat(P, "sparse34+arenas", seed=0, progress=False)
    assert again.from_cache and (again.folder / training.TRAINABLE_FILE).is_file()
    assert all(torch.equal(a, b) for a, b in zip(again.model.state_dict().values(), after.values()))

    packed = sherry.to_packed(copy.deepcopy(r.model))
    pk = study.packed_perplexity(r, test, packed)
    assert pk["layers"] == 7 and abs(pk["packed_ppl"] - pk["fake_ppl"]) / pk["fake_ppl"] < 1e-4
    whole = qat_mod.whole_ternary(r.model)
    assert len(sherry.quantized_layers(whole)) == 21
    assert all(isinstance(m, sherry.QuantLinear) and m.mode == "sparse34" for _, m in sherry.quantized_layers(whole))
    assert torch.equal(whole.model.layers[1].mlp.up_proj.weight, r.model.model.layers[1].mlp.up_proj.weight)
    assert study.model_files(whole, "sparse34+arenas")["exact"]
    gen = study.generations({"packed": packed}, tok, 3)
    assert len(gen) == len(study.GEN_PROMPTS) and all(g["new tokens"] <= 3 for g in gen)

    with pytest.raises(ValueError, match=r"qat_blocks: checkpoint .* has 3 decoder layers"):
        study.subject(P | {"qat_blocks": [3]})


def test_the_size_claim_s_files_are_of_the_named_shape_and_read_back_exactly():
    """shape_files writes the Sherry and 2-bit files of a random 3:4 model of the shape (issue 40, point 3):
    every linear layer of every block is packed, the embedding is stored once (tied), and Sherry's file is the
    smaller by what its streams save (1.25 against 2 bits per weight), less its longer header."""
    from acl26.papers.sherry import decoder, study

    shape = decoder.SHAPES["tiny"]
    out = study.shape_files("tiny")
    assert out["exact"] and out["shape"] == "tiny" and out["layers"] == 7 * shape.layers
    assert sorted(out["bytes"]) == ["i2", "sherry"]  # the two the claim compares (no BF16 file of 1.5 GB)
    assert out["weights"] == shape.linear_params
    saved = out["layer_bytes"]["i2"] - out["layer_bytes"]["sherry"]
    assert saved == pytest.approx(shape.linear_params * (2 - 1.25) / 8, rel=0.02)
    # the rest (embeddings, norms) is the same in both files: they differ by the layers and the header only
    header = out["header_bytes"]["sherry"] - out["header_bytes"]["i2"]
    assert out["bytes"]["i2"] - out["bytes"]["sherry"] == saved - header
    with pytest.raises(ValueError, match="size_shape: unknown shape 'nope'"):
        study.shape_model("nope")
