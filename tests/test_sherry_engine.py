"""Sherry's Engine (issue 28, point 3): any transformers LLaMA-family causal LM through the packed decoder.
Exactly representable weights are packed exactly, and the engine's logits match the torch model's."""

import numpy as np
import pytest
import torch

from acl26.papers.sherry import qat
from acl26.papers.sherry.engine import Engine, ternary_of


def tiny_llama(*, tied=True, rope_scaling=None, layers=2, vocab=96, seed=0):
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=tied, rope_theta=50000.0, rope_scaling=rope_scaling, rms_norm_eps=1e-6)
    return AutoModelForCausalLM.from_config(cfg).eval()


def _ternarize_in_place(model, fmt, seed=0):
    """Every projection set to diag(s) T, with T valid for fmt (3:4 for sherry): exactly representable."""
    g = torch.Generator().manual_seed(seed)
    for layer in model.model.layers:
        for lin in [m for m in layer.modules() if isinstance(m, torch.nn.Linear)]:
            out_f, in_f = lin.weight.shape
            t = torch.randint(-1, 2, (out_f, in_f), generator=g).float()
            if fmt == "sherry":
                t = t.reshape(out_f, in_f // 4, 4)
                t = torch.where(t == 0, torch.ones_like(t), t)
                zero = torch.randint(0, 4, (out_f, in_f // 4, 1), generator=g)
                t = t.scatter(-1, zero, 0.0).reshape(out_f, in_f)
            s = torch.rand(out_f, generator=g) * 0.1 + 0.02
            with torch.no_grad():
                lin.weight.copy_(s[:, None] * t)


def _bf16_tables(model):
    """The torch reference with the embeddings (and head) rounded to bf16, as the engine stores them."""
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(model.model.embed_tokens.weight.to(torch.bfloat16).float())
        if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
            model.lm_head.weight.copy_(model.lm_head.weight.to(torch.bfloat16).float())
    return model


@pytest.mark.parametrize("fmt", ["sherry", "i2", "tl2"])
def test_row_scaled_ternary_weights_are_packed_exactly(fmt):
    model = tiny_llama()
    _ternarize_in_place(model, fmt)
    eng = Engine.from_transformers(model, fmt)
    for i, layer in enumerate(model.model.layers):
        for short, lin in eng.model.blocks[i].linears.items():
            want = {"q": layer.self_attn.q_proj, "k": layer.self_attn.k_proj, "v": layer.self_attn.v_proj,
                    "o": layer.self_attn.o_proj, "gate": layer.mlp.gate_proj, "up": layer.mlp.up_proj,
                    "down": layer.mlp.down_proj}[short].weight.detach().numpy()
            np.testing.assert_allclose(lin.dense(), want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("tied,rope_scaling", [
    (True, None),
    (False, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
             "original_max_position_embeddings": 16}),
])
@pytest.mark.parametrize("fmt", ["fp32", "sherry"])
def test_engine_logits_match_the_torch_model(fmt, tied, rope_scaling):
    """fp32: the same model, so to float rounding (1e-4). sherry, on 3:4 row-scaled weights (exactly
    representable): the torch model with bf16 embedding tables, to the bf16 rounding of the head's
    input (a stated 1% of the logits' spread)."""
    model = tiny_llama(tied=tied, rope_scaling=rope_scaling)
    if fmt == "sherry":
        _ternarize_in_place(model, fmt)
        _bf16_tables(model)
    ids = torch.randint(0, 96, (1, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(ids).logits[0, -1].numpy()
    got = Engine.from_transformers(model, fmt).logits(ids)
    tol = 1e-4 if fmt == "fp32" else 0.01
    assert np.max(np.abs(got - want)) <= tol * (np.ptp(want) + 1e-6)
    assert int(np.argmax(got)) == int(np.argmax(want)) or fmt != "fp32"


def test_generate_is_greedy_and_matches_transformers_generate():
    model = tiny_llama(layers=3)
    ids = torch.randint(0, 96, (1, 6), generator=torch.Generator().manual_seed(2))
    eng = Engine.from_transformers(model, "fp32")
    out = eng.generate(ids, 8)
    with torch.no_grad():
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                             pad_token_id=0)[0].numpy()
    assert out.tolist() == ref.tolist()
    assert eng.generate(ids, 0).tolist() == ids[0].tolist()
    first = int(out[6])
    assert eng.generate(ids, 8, eos_token_id=first).tolist() == ids[0].tolist() + [first]


def test_a_qat_model_keeps_its_quantizer_and_only_the_chosen_blocks_are_packed():
    model = tiny_llama(layers=3)
    qat.wrap(model, "sparse34", blocks=[1])
    eng = Engine.from_transformers(model, "sherry", blocks=[1])
    assert eng.packed_blocks == [1]
    kinds = [{type(lin).__name__ for lin in b.linears.values()} for b in eng.model.blocks]
    assert kinds == [{"TorchLinear"}, {"PackedWeights"}, {"TorchLinear"}]
    q = model.model.layers[1].mlp.up_proj
    np.testing.assert_allclose(eng.model.blocks[1].linears["up"].dense(),
                               qat.quantize(q.weight.detach(), "sparse34").numpy(), rtol=1e-6, atol=0)
    T, s = ternary_of(q, "sherry")
    assert set(np.unique(T)) <= {-1, 0, 1} and s.shape == (q.out_features,)


def test_a_packed_qat_model_is_decoded_from_its_own_streams():
    """One packed-layer type: qat.to_packed's layers are decoder PackedWeights, used as they are."""
    from acl26.papers.sherry import decoder

    model = tiny_llama(layers=2)
    qat.wrap(model, "sparse34", blocks=[0, 1])
    with torch.no_grad():
        ref = model(torch.tensor([[3, 1, 4, 1, 5]])).logits[0, -1].numpy()
    qat.to_packed(model)
    layer = model.model.layers[1].mlp.down_proj
    assert isinstance(layer, qat.PackedLinear) and isinstance(layer, decoder.PackedWeights)
    eng = Engine.from_transformers(model, "sherry")
    assert eng.model.blocks[1].linears["down"].packed.codes.base is not None  # fused: a view of the stack
    np.testing.assert_array_equal(eng.model.blocks[1].linears["down"].dense(), layer.dense())
    i2 = Engine.from_transformers(model, "i2", blocks=[0])  # another format: dequantized, re-ternarized
    assert i2.model.blocks[0].linears["q"].fmt == "i2"
    got = eng.logits([3, 1, 4, 1, 5])
    assert np.abs(got - ref).max() <= 0.02 * np.abs(ref).max()  # bf16 tables; the packed kernels are exact


def test_bad_inputs_are_refused_naming_the_argument():
    model = tiny_llama()
    with pytest.raises(ValueError, match="fmt"):
        Engine.from_transformers(model, "q4_0")
    with pytest.raises(ValueError, match="blocks"):
        Engine.from_transformers(model, "sherry", blocks=[2])
    with pytest.raises(ValueError, match="model must be a transformers LLaMA-family"):
        Engine.from_transformers(torch.nn.Linear(4, 4), "sherry")
    eng = Engine.from_transformers(model, "fp32")
    for bad in ([], [[1, 2], [3, 4]], [96], [-1], [0.5]):
        with pytest.raises(ValueError, match="ids"):
            eng.logits(bad)
    with pytest.raises(ValueError, match="max_new_tokens"):
        eng.generate([1, 2], -1)
    absq = qat.wrap(tiny_llama(), "absmean_row")
    with pytest.raises(ValueError, match="3:4 layers only"):
        Engine.from_transformers(absq, "sherry")


@pytest.mark.assets
def test_smollm2_through_the_engine_is_the_transformers_model():
    """The real model: in fp32 the engine's logits equal transformers' to 1e-5 of their spread, and greedy
    decoding gives the same tokens as transformers' own generate."""
    from acl26 import models

    model, tok = models.smollm2()
    ids = tok("The President told Congress that", return_tensors="pt").input_ids
    with torch.no_grad():
        want = model(ids).logits[0, -1].numpy()
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                             pad_token_id=tok.eos_token_id)[0].numpy()
    eng = Engine.from_transformers(model, "fp32")
    assert np.max(np.abs(eng.logits(ids) - want)) <= 1e-5 * np.ptp(want)
    assert eng.generate(ids, 8).tolist() == ref.tolist()


def test_random_engine_is_the_speed_tables_model():
    eng = Engine.random("tiny", "sherry", seed=1)
    assert eng.fused and eng.packed_blocks == list(range(4)) and eng.fmt == "sherry"
    out = eng.generate([1, 2, 3], 4)
    assert out.shape == (7,) and out[:3].tolist() == [1, 2, 3]
    plain = Engine.random("tiny", "fp32", seed=1)
    assert not plain.fused and plain.packed_blocks == []


def test_act8_engine_decodes_on_8bit_activations():
    """act8: the fused step multiplies int8 activations. On exactly representable weights its logits stay
    within a few hundredths of the float32-activation engine's spread (the activations' rounding), and
    decoding through it is greedy on its own logits."""
    model = tiny_llama()
    _ternarize_in_place(model, "sherry")
    eng = Engine.from_transformers(model, "sherry")
    eng8 = Engine.from_transformers(model, "sherry", act8=True)
    assert eng8.fused and eng8.model.fused.act8 and not eng.model.fused.act8
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    out, out8 = eng.generate(ids, 6), eng8.generate(ids, 6)
    assert out8.shape == out.shape and out8[:8].tolist() == ids
    cache = eng8.model.new_cache(10)
    eng8.model.forward(np.asarray(ids[:-1]), cache)
    cache0 = eng.model.new_cache(10)
    eng.model.forward(np.asarray(ids[:-1]), cache0)
    nxt8, nxt = eng8.model.next_token(ids[-1], cache), eng.model.next_token(ids[-1], cache0)
    l8, l0 = eng8.model.fused_logits, eng.model.fused_logits
    assert nxt8 == int(np.argmax(l8)) and nxt == int(np.argmax(l0))
    assert 0 < np.abs(l8 - l0).max() <= 0.05 * np.ptp(l0)
    rnd = Engine.random("tiny", "tl2", act8=True)
    assert rnd.model.fused.act8 and rnd.generate([1, 2], 2).shape == (4,)


def test_act8_is_refused_where_there_is_no_packed_fused_step():
    model = tiny_llama()
    for fmt in ("fp32", "bf16"):
        with pytest.raises(ValueError, match="act8"):
            Engine.from_transformers(model, fmt, act8=True)
    with pytest.raises(ValueError, match="act8 needs every block"):
        Engine.from_transformers(model, "sherry", blocks=[0], act8=True)
    with pytest.raises(ValueError, match="act8"):
        Engine.from_transformers(model, "sherry", act8=1)
    with pytest.raises(ValueError, match="act8"):
        Engine.random("tiny", "sherry", fuse=False, act8=True)
    with pytest.raises(ValueError, match="act8"):
        Engine.random("tiny", "bf16", act8=True)
    from acl26.papers.sherry import decoder

    bf16 = Engine.random("tiny", "bf16", fuse=False).model
    with pytest.raises(ValueError, match="act8 must be True or False, and True only for a packed format"):
        decoder.fused_weights(bf16, act8=True)
