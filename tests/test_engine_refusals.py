"""Sherry's Engine (issue 38, point 5): it runs only the maths it implements.

An allow-list of architectures and config features: LLaMA; Mistral without a sliding window or with every
position inside it; Granite only with neutral multipliers; dynamic RoPE only up to the trained length.
Anything else is a one-line ValueError naming the feature. Argument errors as documented; ``generate``'s
KV cache is sized before it is allocated; NaN weights are named by layer in every format."""

import numpy as np
import pytest
import torch

from acl26.papers.sherry import decoder
from acl26.papers.sherry.engine import Engine, check_model

TINY = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, pad_token_id=None,
            bos_token_id=None, eos_token_id=None)


def tiny(config_class: str, seed=0, **kw):
    """A tiny causal LM of ``transformers.<config_class>`` (hidden 64, 2 layers, vocabulary 96)."""
    import transformers

    torch.manual_seed(seed)
    cfg = getattr(transformers, config_class)(**{**TINY, **kw})
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def refused(match, fn, *args, **kw) -> str:
    """``fn(*args, **kw)`` raises a one-line ValueError matching ``match``; its message."""
    with pytest.raises(ValueError, match=match) as e:
        fn(*args, **kw)
    assert "\n" not in str(e.value)
    return str(e.value)


def ids_of(n, seed=1):
    return torch.randint(0, 96, (1, n), generator=torch.Generator().manual_seed(seed))


def assert_logits_match(model, eng, ids):
    """The engine's fp32 logits are the torch model's, to float rounding (the tolerance of test_sherry_engine)."""
    with torch.no_grad():
        want = model(ids).logits[0, -1].numpy()
    got = eng.logits(ids)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= 1e-4 * np.ptp(want)
    assert int(np.argmax(got)) == int(np.argmax(want))


# ------------------------------------------------------------------------------------------------
# architectures and config features


def test_mistral_inside_its_sliding_window_is_the_transformers_model_and_past_it_is_refused():
    """A window of W: up to W positions every query sees every earlier key, the decoder's maths; W + 1
    positions would need the window (transformers' logits then differ), so the engine refuses them."""
    model = tiny("MistralConfig", sliding_window=8)
    assert check_model(model) == 8
    eng = Engine.from_transformers(model, "fp32")
    assert eng.max_positions == 8
    assert_logits_match(model, eng, ids_of(8))
    msg = refused("sliding_window=8", eng.logits, ids_of(9))
    assert "9 positions" in msg
    prompt = ids_of(5)  # 5 + 4 new ids: 8 positions run (the last new id is not fed back)
    with torch.no_grad():
        ref = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=4, do_sample=False,
                             pad_token_id=0)[0]
    assert eng.generate(prompt, 4).tolist() == ref.tolist()
    refused("sliding_window=8", eng.generate, prompt, 5)
    free = Engine.from_transformers(tiny("MistralConfig", sliding_window=None), "fp32")
    assert free.max_positions is None
    assert_logits_match(tiny("MistralConfig", sliding_window=None), free, ids_of(20))


@pytest.mark.parametrize("feature,value", [("embedding_multiplier", 12.0), ("residual_multiplier", 0.22),
                                           ("attention_multiplier", 0.0078125), ("logits_scaling", 8.0)])
def test_granite_multipliers_are_refused_by_name(feature, value):
    model = tiny("GraniteConfig", **{"attention_multiplier": 16 ** -0.5, feature: value})
    refused(f"config.{feature}={value}", Engine.from_transformers, model, "sherry")


def test_granite_with_neutral_multipliers_is_the_llama_maths():
    model = tiny("GraniteConfig", attention_multiplier=16 ** -0.5)  # 1 / sqrt(head_dim): the decoder's scale
    assert_logits_match(model, Engine.from_transformers(model, "fp32"), ids_of(20))


def test_dynamic_rope_runs_up_to_the_trained_length_and_refuses_past_it():
    """Dynamic NTK RoPE is the plain RoPE up to max_position_embeddings and rescales past it. The engine
    takes the original frequencies even after transformers has run past the length (which rescales its
    rotary embedding in place), and refuses longer runs."""
    model = tiny("LlamaConfig", max_position_embeddings=8,
                 rope_scaling={"rope_type": "dynamic", "factor": 4.0})
    with torch.no_grad():
        model(ids_of(20))  # transformers grows its frequencies for 20 positions
    eng = Engine.from_transformers(model, "fp32")
    assert eng.max_positions == 8
    assert_logits_match(model, eng, ids_of(6))
    refused("max_position_embeddings=8", eng.logits, ids_of(9))
    refused("max_position_embeddings=8", eng.generate, ids_of(6), 4)
    assert eng.generate(ids_of(6), 3).shape == (9,)


@pytest.mark.parametrize("config_class,model_type", [("Phi3Config", "phi3"), ("OlmoConfig", "olmo"),
                                                     ("CohereConfig", "cohere"), ("Qwen2Config", "qwen2"),
                                                     ("GemmaConfig", "gemma")])
def test_other_architectures_are_refused_in_one_line_naming_the_model_type(config_class, model_type):
    model = tiny(config_class)
    refused(f"model_type '{model_type}'", Engine.from_transformers, model, "sherry")
    refused(f"model_type '{model_type}'", check_model, model)


@pytest.mark.parametrize("kw,match", [
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}}, "'yarn'"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}}, "partial rotary"),
    ({"attention_bias": True}, "config.attention_bias=True"),
    ({"mlp_bias": True}, "config.mlp_bias=True"),
    ({"hidden_act": "gelu"}, "config.hidden_act='gelu'"),
])
def test_config_features_the_decoder_does_not_compute_are_refused_by_name(kw, match):
    refused(match, Engine.from_transformers, tiny("LlamaConfig", **kw), "fp32")


@pytest.mark.parametrize("rope", [None, {"rope_type": "linear", "factor": 4.0}])
def test_llama_with_fixed_rope_frequencies_has_no_length_limit(rope):
    model = tiny("LlamaConfig", max_position_embeddings=8, rope_scaling=rope)
    eng = Engine.from_transformers(model, "fp32")
    assert eng.max_positions is None
    assert_logits_match(model, eng, ids_of(20))  # past max_position_embeddings: the same maths


# ------------------------------------------------------------------------------------------------
# the vocabulary


def test_a_vocabulary_larger_than_the_embedding_table_is_refused():
    model = tiny("LlamaConfig", tie_word_embeddings=False)
    model.model.embed_tokens = torch.nn.Embedding(80, 64)
    model.lm_head = torch.nn.Linear(64, 80, bias=False)
    refused("config.vocab_size 96 exceeds the embedding table's 80 rows", Engine.from_transformers, model, "fp32")


def test_a_padded_embedding_table_is_the_vocabulary():
    """A table with more rows than config.vocab_size: transformers' logits have a row per table row, and any
    id below the rows is looked up; the engine does the same."""
    model = tiny("LlamaConfig", vocab_size=80)
    model.resize_token_embeddings(96)
    model.config.vocab_size = 80
    eng = Engine.from_transformers(model, "fp32")
    assert eng.vocab == 96
    assert_logits_match(model, eng, torch.tensor([[3, 90, 7, 85]]))


# ------------------------------------------------------------------------------------------------
# argument errors


def test_fmt_must_be_one_of_the_format_names():
    model = tiny("LlamaConfig")
    for bad in (["sherry"], ("sherry",), None, 3):
        refused("fmt", Engine.from_transformers, model, bad)
        refused("fmt", Engine.random, "tiny", bad)


def test_ids_outside_the_vocabulary_are_named_with_the_vocabulary_size():
    eng = Engine.from_transformers(tiny("LlamaConfig"), "fp32")
    refused(r"token id 96 \(position 1\) is outside the vocabulary of 96", eng.logits, [3, 96, 4])
    refused(r"token id -1 \(position 0\) is outside the vocabulary of 96", eng.generate, [-1, 2], 3)


def test_generate_sizes_the_kv_cache_before_allocating_it(monkeypatch):
    eng = Engine.from_transformers(tiny("LlamaConfig"), "fp32")

    def no_allocation(capacity):
        raise AssertionError(f"a KV cache of {capacity} positions was allocated before the check")

    monkeypatch.setattr(eng.model, "new_cache", no_allocation)
    msg = refused("KV cache", eng.generate, [1, 2, 3], 10 ** 12)
    assert "max_new_tokens=1000000000000" in msg
    monkeypatch.setattr(decoder, "available_bytes", lambda: 2 ** 20)  # 1 MiB of memory available
    refused("KV cache", eng.generate, [1, 2, 3], 10 ** 5)  # 51 MB of keys and values
    refused("KV cache", eng.logits, np.ones(10 ** 4, np.int64))


def test_max_new_tokens_must_be_an_integer_at_least_0():
    eng = Engine.from_transformers(tiny("LlamaConfig"), "fp32")
    for bad in (-1, 2.0, True, "3", None):
        refused("max_new_tokens", eng.generate, [1, 2], bad)


def test_eos_token_id_must_be_none_an_id_or_a_list_of_ids():
    eng = Engine.from_transformers(tiny("LlamaConfig"), "fp32")
    for bad in (1.5, True, 96, -1, "2", [], [1, 2.5], [[1]]):
        refused("eos_token_id", eng.generate, [1, 2], 3, eos_token_id=bad)
    out = eng.generate([1, 2], 6)
    first, second = int(out[2]), int(out[3])
    assert eng.generate([1, 2], 6, eos_token_id=[second, first]).tolist() == [1, 2, first]
    assert eng.generate([1, 2], 6, eos_token_id=np.int64(first)).tolist() == [1, 2, first]


# ------------------------------------------------------------------------------------------------
# non-finite weights


@pytest.mark.parametrize("fmt", list(decoder.FORMATS))
def test_nan_weights_are_named_by_layer_in_every_format(fmt):
    model = tiny("LlamaConfig")
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[3, 5] = float("nan")
    refused(r"model\.layers\.1\.mlp\.down_proj\.weight holds NaN", Engine.from_transformers, model, fmt)
    if fmt in decoder.PACKED:  # the block left in bf16 is checked too
        refused(r"model\.layers\.1\.mlp\.down_proj\.weight holds NaN", Engine.from_transformers, model, fmt,
                blocks=[0])


@pytest.mark.parametrize("tensor", ["model.layers.0.input_layernorm.weight", "model.norm.weight",
                                    "model.embed_tokens.weight", "lm_head.weight",
                                    "model.layers.0.self_attn.k_proj.weight"])
def test_inf_anywhere_is_named(tensor):
    model = tiny("LlamaConfig", tie_word_embeddings=False)
    with torch.no_grad():
        model.get_parameter(tensor).view(-1)[7] = float("inf")
    refused(rf"{tensor.replace('.', '[.]')} holds inf", Engine.from_transformers, model, "sherry")
