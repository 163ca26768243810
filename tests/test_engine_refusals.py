"""Sherry's Engine (issue 38, point 5): it runs only the maths it implements.

An allow-list of architectures and config features: LLaMA; Mistral without a sliding window or with every
position inside it; Granite only with neutral multipliers; dynamic RoPE only up to the trained length.
Anything else is a one-line ValueError naming the feature. The modules are checked by exact type, not the
config alone: a LoRA adapter, a Linear subclass, a LayerNorm for an RMSNorm, another attention scale, hooks,
attention dropout in training mode, ... are refused naming the module. Argument errors as documented;
``generate``'s KV cache is sized before it is allocated; NaN weights are named by layer in every format."""

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


# ------------------------------------------------------------------------------------------------
# modules: the engine computes the architecture's own modules, so anything else in their place is refused
# (the config alone does not say what the forward computes)


def logits_of(model, n=12):
    with torch.no_grad():
        return model(ids_of(n)).logits[0, -1].numpy()


def changes_the_forward(mutate, config_class="LlamaConfig", **kw):
    """``mutate(model)`` on a tiny model changes transformers' logits (so the engine, which would not see it, must
    refuse it); returns the mutated model."""
    before = logits_of(tiny(config_class, **kw))
    model = tiny(config_class, **kw)
    mutate(model)
    assert np.abs(logits_of(model) - before).max() > 1e-3
    return model


def test_a_peft_lora_model_is_refused_naming_the_adapted_projection():
    """peft injects its LoRA layers into the model in place: the object is still a LlamaForCausalLM whose config
    is unchanged, but q_proj and v_proj now add a low-rank update the engine would drop."""
    peft = pytest.importorskip("peft")
    model = tiny("LlamaConfig")
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                                         init_lora_weights=False))
    assert np.abs(logits_of(model) - logits_of(tiny("LlamaConfig"))).max() > 1e-3
    msg = refused(r"model\.layers\.0\.self_attn\.q_proj is a peft\.tuners\.lora\.layer\.Linear, not a "
                  r"torch\.nn\.Linear", Engine.from_transformers, model, "fp32")
    assert "plain linear layers" in msg
    refused("q_proj is a peft", check_model, model)
    refused("model must be a transformers LLaMA-family", Engine.from_transformers, wrapped, "fp32")
    model = wrapped.merge_and_unload()  # the adapters merged into plain Linears: the engine takes it
    assert_logits_match(model, Engine.from_transformers(model, "fp32"), ids_of(12))


class LoraLike(torch.nn.Module):
    """A LoRA-adapted projection as an adapter library builds it: the base Linear (whose weight it exposes)
    plus a low-rank update."""

    def __init__(self, base, r=4):
        super().__init__()
        self.base_layer = base
        self.lora_A = torch.nn.Linear(base.in_features, r, bias=False)
        self.lora_B = torch.nn.Linear(r, base.out_features, bias=False)
        torch.nn.init.normal_(self.lora_B.weight, std=0.5)

    @property
    def weight(self):
        return self.base_layer.weight

    def forward(self, x):
        return self.base_layer(x) + self.lora_B(self.lora_A(x))


def test_a_custom_module_in_place_of_a_projection_is_refused():
    def adapt(model):
        attn = model.model.layers[1].self_attn
        attn.v_proj = LoraLike(attn.v_proj)

    model = changes_the_forward(adapt)
    refused(r"model\.layers\.1\.self_attn\.v_proj is a test_engine_refusals\.LoraLike, not a torch\.nn\.Linear",
            Engine.from_transformers, model, "sherry")


class ScaledLinear(torch.nn.Linear):
    """A Linear subclass with its own forward: the weight is the same, the maths is not."""

    def forward(self, x):
        return 1.5 * super().forward(x)


def test_a_linear_subclass_with_its_own_forward_is_refused():
    def swap(model):
        old = model.model.layers[0].mlp.up_proj
        new = ScaledLinear(old.in_features, old.out_features, bias=False)
        new.weight = old.weight
        model.model.layers[0].mlp.up_proj = new

    model = changes_the_forward(swap)
    refused(r"model\.layers\.0\.mlp\.up_proj is a test_engine_refusals\.ScaledLinear, not a torch\.nn\.Linear or "
            r"acl26\.papers\.sherry\.qat\.QuantLinear or acl26\.papers\.sherry\.qat\.PackedLinear",
            Engine.from_transformers, model, "fp32")


def test_a_layernorm_in_place_of_the_rmsnorm_is_refused():
    """LayerNorm without bias has the (hidden,) weight of an RMSNorm but subtracts the mean."""
    model = changes_the_forward(lambda m: setattr(m.model.layers[0], "input_layernorm",
                                                  torch.nn.LayerNorm(64, bias=False)))
    refused(r"model\.layers\.0\.input_layernorm is a torch\.nn\.LayerNorm, not a LlamaRMSNorm",
            Engine.from_transformers, model, "fp32")
    model = tiny("MistralConfig")
    model.model.norm = torch.nn.LayerNorm(64, bias=False)
    refused(r"model\.norm is a torch\.nn\.LayerNorm, not a MistralRMSNorm", check_model, model)


def test_an_attention_scale_other_than_one_over_sqrt_head_dim_is_refused():
    model = changes_the_forward(lambda m: setattr(m.model.layers[1].self_attn, "scaling", 1.0))
    refused(r"model\.layers\.1\.self_attn\.scaling=1\.0 is not implemented", Engine.from_transformers, model, "fp32")


def test_the_rmsnorm_eps_is_the_modules_own_and_must_be_one_for_all():
    """The norms' forward adds their variance_epsilon, whatever config.rms_norm_eps says: the engine uses it."""
    def set_eps(model, eps=0.1):
        for m in model.modules():
            if type(m).__name__ == "LlamaRMSNorm":
                m.variance_epsilon = eps

    model = changes_the_forward(set_eps)
    assert model.config.rms_norm_eps == 1e-6
    assert_logits_match(model, Engine.from_transformers(model, "fp32"), ids_of(12))
    model.model.layers[1].post_attention_layernorm.variance_epsilon = 1e-5
    refused(r"model\.layers\.1\.post_attention_layernorm has eps 1e-05 but model\.layers\.0\.input_layernorm 0\.1",
            Engine.from_transformers, model, "fp32")


def scale_output(module, args, output):
    return output * 2


def scale_input(module, args):
    return (args[0] * 2,)


@pytest.mark.parametrize("where,register", [
    ("model.layers.0.mlp.down_proj", lambda m: m.register_forward_hook(scale_output)),
    ("model.layers.1.self_attn.o_proj", lambda m: m.register_forward_pre_hook(scale_input)),
    ("model.norm", lambda m: m.register_forward_hook(scale_output)),
    ("lm_head", lambda m: m.register_forward_pre_hook(scale_input)),
])
def test_forward_hooks_on_any_module_are_refused(where, register):
    handles = []
    model = changes_the_forward(lambda m: handles.append(register(m.get_submodule(where))))
    refused(rf"model: {where.replace('.', '[.]')} \(.*\) has a forward (pre-)?hook \(scale_", Engine.from_transformers,
            model, "fp32")
    handles[0].remove()
    assert_logits_match(model, Engine.from_transformers(model, "fp32"), ids_of(12))


def test_a_global_forward_hook_is_refused():
    def global_hook(m):
        handles.append(torch.nn.modules.module.register_module_forward_hook(
            lambda mod, args, out: out * 2 if isinstance(mod, torch.nn.Linear) else None))

    handles = []
    try:
        model = changes_the_forward(global_hook)
        refused("a global forward hook is registered", Engine.from_transformers, model, "fp32")
    finally:
        for h in handles:
            h.remove()


def test_a_forward_replaced_on_the_instance_is_refused():
    def patch(model):
        mlp = model.model.layers[0].mlp
        mlp.forward = lambda x: 2 * type(mlp).forward(mlp, x)

    model = changes_the_forward(patch)
    refused(r"model\.layers\.0\.mlp \(LlamaMLP\) has its forward replaced on the instance", Engine.from_transformers,
            model, "fp32")


def test_transformers_output_capturing_hooks_are_allowed():
    """transformers leaves hooks that only record hidden states / attentions on the modules once asked for them;
    they do not change the forward."""
    model = tiny("LlamaConfig", attn_implementation="eager")
    with torch.no_grad():
        model(ids_of(5), output_hidden_states=True, output_attentions=True)
    assert any(m._forward_hooks for m in model.modules())
    assert_logits_match(model, Engine.from_transformers(model, "fp32"), ids_of(12))


def test_attention_dropout_in_training_mode_is_refused_and_in_eval_mode_taken():
    model = tiny("LlamaConfig", attention_dropout=0.5)
    assert_logits_match(model, Engine.from_transformers(model, "fp32"), ids_of(12))
    model.train()
    refused(r"model\.layers\.0\.self_attn is in training mode with attention_dropout=0\.5", Engine.from_transformers,
            model, "fp32")
    Engine.from_transformers(tiny("LlamaConfig").train(), "fp32")  # no dropout: training mode computes the same


def test_an_embedding_with_max_norm_is_refused_and_padding_idx_taken():
    def renorm(model):
        model.model.embed_tokens.max_norm = 0.1

    model = changes_the_forward(renorm, tie_word_embeddings=False)
    refused(r"model\.embed_tokens has max_norm=0\.1", Engine.from_transformers, model, "fp32")
    model = tiny("LlamaConfig", pad_token_id=3)  # padding_idx changes only the gradient
    assert model.model.embed_tokens.padding_idx == 3
    assert_logits_match(model, Engine.from_transformers(model, "fp32"), ids_of(12))


def test_a_parametrized_weight_is_refused():
    """torch's parametrizations compute the weight in the forward: the module's type is no longer Linear."""
    from torch.nn.utils import parametrize

    class Double(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    model = changes_the_forward(lambda m: parametrize.register_parametrization(m.model.layers[0].self_attn.k_proj,
                                                                               "weight", Double()))
    refused(r"model\.layers\.0\.self_attn\.k_proj is a torch\.nn\.utils\.parametrize\.ParametrizedLinear",
            Engine.from_transformers, model, "fp32")


def test_a_qat_layer_with_its_arenas_residual_is_refused():
    """A QuantLinear's forward adds lam * W to its ternary weight while lam > 0 (during training); the engine
    packs the ternary weight alone, which is the forward only at lam 0 (the end of training)."""
    from acl26.papers.sherry import qat

    model = qat.wrap(tiny("LlamaConfig"), "sparse34")
    ref = logits_of(model)
    model.model.layers[1].mlp.gate_proj.lam = 0.25
    assert np.abs(logits_of(model) - ref).max() == 0  # in eval mode the residual is off (the authors' Arenas)...
    model.model.layers[1].mlp.gate_proj.train()
    assert np.abs(logits_of(model) - ref).max() > 1e-3  # ...and in training it is on
    refused(r"model\.layers\.1\.mlp\.gate_proj is a QuantLinear with the Arenas residual lam=0\.25",
            Engine.from_transformers, model, "sherry")
    model.model.layers[1].mlp.gate_proj.lam = 0.0
    Engine.from_transformers(model, "sherry")


@pytest.mark.parametrize("path,match", [
    ("model.layers.0.self_attn", r"model\.layers\.0\.self_attn is a .*MyLlamaAttention, not a LlamaAttention"),
    ("model.layers.1.mlp", r"model\.layers\.1\.mlp is a .*MyLlamaMLP, not a LlamaMLP"),
    ("model.layers.1", r"model\.layers\.1 is a .*MyLlamaDecoderLayer, not a LlamaDecoderLayer"),
    ("model", r"model: model is a .*MyLlamaModel, not a LlamaModel"),
    ("", r"MyLlamaForCausalLM is not a LlamaForCausalLM"),
])
def test_subclasses_of_the_architectures_modules_are_refused(path, match):
    """A subclass may override the forward (the first three below do); one that does not is refused too."""
    def halve_attention(self, *a, **k):
        out, weights = base.forward(self, *a, **k)
        return 0.5 * out, weights

    forwards = {"LlamaAttention": halve_attention,
                "LlamaMLP": lambda self, x: 0.5 * base.forward(self, x),
                "LlamaDecoderLayer": lambda self, h, *a, **k: 2 * base.forward(self, h, *a, **k) - h}  # 2x branches
    model = tiny("LlamaConfig")
    m = model.get_submodule(path)
    base = type(m)
    fwd = forwards.get(base.__name__)
    m.__class__ = type(f"My{base.__name__}", (base,), {} if fwd is None else {"forward": fwd})
    if fwd is not None:
        assert np.abs(logits_of(model) - logits_of(tiny("LlamaConfig"))).max() > 1e-3
    refused(match, Engine.from_transformers, model, "fp32")


def test_an_activation_other_than_silu_in_the_mlp_module_is_refused():
    model = changes_the_forward(lambda m: setattr(m.model.layers[0].mlp, "act_fn", torch.nn.GELU()))
    assert model.config.hidden_act == "silu"
    refused(r"model\.layers\.0\.mlp\.act_fn is a torch\.nn\.GELU, not a SiLUActivation or torch\.nn\.SiLU",
            Engine.from_transformers, model, "fp32")


def test_an_lm_head_other_than_a_plain_linear_is_refused():
    def swap(model):
        head = ScaledLinear(64, 96, bias=False)
        head.weight = model.lm_head.weight
        model.lm_head = head

    model = changes_the_forward(swap, tie_word_embeddings=False)
    refused(r"lm_head is a test_engine_refusals\.ScaledLinear, not a torch\.nn\.Linear", Engine.from_transformers,
            model, "fp32")


def test_layers_past_config_num_hidden_layers_are_refused():
    """transformers runs only the first config.num_hidden_layers layers of model.layers."""
    model = tiny("LlamaConfig", num_hidden_layers=3)
    model.config.num_hidden_layers = 2
    refused(r"model\.layers \(torch\.nn\.ModuleList of 3\) must be a ModuleList of config\.num_hidden_layers=2",
            Engine.from_transformers, model, "fp32")


@pytest.mark.parametrize("attr,module", [("residual_multiplier", "model.layers.1"),
                                         ("embedding_multiplier", "model")])
def test_granite_multipliers_held_by_the_modules_are_refused(attr, module):
    """Granite's layers and model keep their multiplier from the config they were built with."""
    kw = dict(attention_multiplier=16 ** -0.5)
    model = changes_the_forward(lambda m: setattr(m.get_submodule(module), attr, 2.0), "GraniteConfig", **kw)
    refused(rf"model: {module.replace('.', '[.]')}\.{attr}=2\.0 is not implemented", Engine.from_transformers, model,
            "fp32")


def test_an_attention_function_registered_over_transformers_own_is_refused(monkeypatch):
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def hot(module, q, k, v, mask, **kw):
        return sdpa_attention_forward(module, q, k, v, mask, **{**kw, "scaling": 2 * kw["scaling"]})

    before = logits_of(tiny("LlamaConfig"))
    monkeypatch.setitem(AttentionInterface._global_mapping, "sdpa", hot)
    model = tiny("LlamaConfig")
    assert model.config._attn_implementation == "sdpa"
    assert np.abs(logits_of(model) - before).max() > 1e-3
    refused(r"registered for config\._attn_implementation='sdpa' is test_engine_refusals\..*hot, not transformers' own",
            Engine.from_transformers, model, "fp32")


def test_a_projection_of_another_shape_than_the_configs_is_refused():
    """A consistent change of the MLP width runs in transformers but not in a decoder built from the config."""
    def widen(model):
        for layer in model.model.layers:
            mlp = layer.mlp
            mlp.gate_proj, mlp.up_proj = torch.nn.Linear(64, 256, bias=False), torch.nn.Linear(64, 256, bias=False)
            mlp.down_proj = torch.nn.Linear(256, 64, bias=False)

    model = changes_the_forward(widen)
    refused(r"model\.layers\.0\.mlp\.gate_proj is 256 x 64, not the config's 128 x 64", Engine.from_transformers,
            model, "fp32")
