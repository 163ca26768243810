"""Sherry (ACL 2026, arXiv 2601.07892): a real transformers model through the packed decoder.

:class:`Engine` takes a LLaMA-family causal LM of ``transformers`` and runs it through
:class:`acl26.papers.sherry.decoder.Model`, the decoder the speed table times: every projection of
the chosen blocks packed in one weight format and multiplied by its kernel, the rest in numpy.

The engine runs only the maths it implements: RMSNorm, rotary positions, grouped-query attention
over every earlier position with scale ``1 / sqrt(head_dim)``, a SwiGLU MLP, plain residuals, tied or
separate embeddings, unscaled logits; no biases, no query/key norms. It takes the architectures of
:data:`ARCHITECTURES` (``config.model_type`` ``llama``, e.g. LLaMA-3.2 and SmolLM2; ``mistral``;
``granite`` with neutral multipliers) and the RoPE variants of :data:`ROPE_TYPES` (fixed frequencies:
plain, ``linear``, LLaMA-3's ``llama3``; ``dynamic`` NTK only up to ``config.max_position_embeddings``,
where its frequencies are the plain ones). Anything else is refused by
:meth:`Engine.from_transformers` with a one-line ``ValueError`` naming the architecture or the config
feature: another ``model_type`` (Phi-3, OLMo, Cohere, Qwen, Gemma, ...), a multiplier of
:data:`MULTIPLIERS` (Granite's ``embedding_multiplier``, ``residual_multiplier``,
``attention_multiplier`` other than ``head_dim ** -0.5``, ``logits_scaling``) or another feature of
:data:`FEATURES` (soft-capping, query/key norms, ...), YaRN or LongRoPE, a partial rotary dimension,
biases, an activation other than SiLU, an attention implementation other than transformers' own
(:data:`ATTENTION`), a vocabulary (``config.vocab_size``) larger than the embedding table, and NaN or inf
in any weight (the error names the tensor, e.g. ``model.layers.3.mlp.down_proj.weight holds NaN``, in
every format).

The config alone does not say what the forward computes, so the modules are checked too, each by exact
type (a subclass may override ``forward``): the causal LM, its inner model, decoder layers, attention,
MLP, RMSNorms and rotary embedding must be exactly the architecture's classes of transformers (e.g.
``LlamaRMSNorm``; not ``nn.LayerNorm``), the MLP's activation exactly SiLU, the embedding exactly
``torch.nn.Embedding`` without ``max_norm`` (``padding_idx`` changes only gradients), the head exactly
``torch.nn.Linear``, and each projection exactly a ``torch.nn.Linear`` or one of this project's layers,
:class:`~acl26.papers.sherry.qat.QuantLinear` (without its Arenas residual: ``lam`` 0) or
:class:`~acl26.papers.sherry.qat.PackedLinear`, of the config's shape. So a peft LoRA model (adapters
injected in place), a parametrized weight or a ``Linear`` subclass is refused, naming the module, e.g.
``model.layers.0.self_attn.q_proj is a peft.tuners.lora.layer.Linear, not a torch.nn.Linear ...``. Also
refused: an attention ``scaling`` other than ``head_dim ** -0.5``, Granite multipliers kept by the modules
(``residual_multiplier``, ``embedding_multiplier``), more layers than ``config.num_hidden_layers`` (the
forward runs only those), attention dropout in training mode, RMSNorms of different eps (the engine uses
the modules' ``variance_epsilon``, what their forward adds, not ``config.rms_norm_eps``), any forward hook
or pre-hook on any module (transformers' output-capturing hooks, which return nothing, are allowed), a
global forward hook (``torch.nn.modules.module.register_module_forward_hook``), and a ``forward`` replaced
on a module instance (e.g. by accelerate).

Two features hold only up to a length, :attr:`Engine.max_positions`: Mistral's sliding window
(``config.sliding_window`` W: every position must see all the earlier ones, so at most W positions) and
dynamic RoPE (at most ``config.max_position_embeddings``); :meth:`Engine.logits` and
:meth:`Engine.generate` refuse a longer run before computing anything.

Packing a linear layer of weight ``W`` (``out x in``) into a ternary format gives ``T`` and one
float32 scale per row:

* ``sherry``: ``T`` is 3:4 ternary (:func:`acl26.papers.sherry.qat.sparse34`);
* ``i2`` and ``tl2``: ``T`` is absmean ternary with one scale per row (BitNet b1.58's rule,
  :func:`acl26.papers.sherry.qat.absmean` with ``per_row``);

and in both, the row's scale is the least-squares one, ``<W_r, T_r> / <T_r, T_r>`` (for 3:4 this is
the mean |w| of the kept weights, :func:`~acl26.papers.sherry.qat.sparse34`'s own scale). A weight that
is already a row-scaled ternary matrix of the format (``W = diag(s) T``) is therefore packed exactly.
A :class:`~acl26.papers.sherry.qat.QuantLinear` of a QAT model keeps its own ternary states and
scales: what its fake-quantized forward computes is what is packed. A layer already packed
(:class:`~acl26.papers.sherry.qat.PackedLinear`, e.g. after :func:`~acl26.papers.sherry.qat.to_packed`
or from a model file) is used as it is when ``fmt`` is its format, else dequantized first.

Embeddings, the output head and the norms follow the decoder's convention: float32 for ``fp32``,
bfloat16 tables for every other format (norms stay float32).

Decoding: the prompt runs through the decoder's batched path (prefill), each new token through the
fused step of :mod:`acl26.kernels.decode` when every block is in one format of
:data:`~acl26.papers.sherry.decoder.FUSED` (bf16, or a packed format in all blocks), else through
the numpy decoder (a model packed only in some blocks, or fp32); :attr:`Engine.fused` says which.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from acl26 import checks
from acl26.kernels import ternary as tn
from acl26.papers.sherry import decoder as D
from acl26.papers.sherry import qat

#: decoder.Shape's projection names -> a LLaMA block's modules
_PROJ = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
         "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


def _dense_weight(layer) -> torch.Tensor:
    """A layer's float weight: a ``Linear``'s own, a packed layer's dequantized (``scale * T``)."""
    if isinstance(layer, D.PackedWeights):
        return torch.from_numpy(np.ascontiguousarray(layer.dense()))
    return layer.weight.detach()


def ternary_of(layer, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """``(T int8, scale float32 per row)`` that ``layer`` (a ``Linear`` or a QAT ``QuantLinear``) is packed as
    in the ternary ``fmt``; see the module docstring. NaN or inf in the weight raises (naming it)."""
    if fmt not in D.PACKED:
        raise ValueError(f"fmt must be one of {D.PACKED} to be ternarized, got {fmt!r}")
    w = _dense_weight(layer).float()
    if isinstance(layer, qat.QuantLinear) and layer.mode != "fp":
        if fmt == "sherry" and layer.mode != "sparse34":
            raise ValueError(f"the sherry format holds 3:4 layers only; this QuantLinear is {layer.mode!r}")
        t, s = qat.ternarize(w, layer.mode)
        if s.dim() == 0:
            s = s.expand(w.shape[0])
        return t.to(torch.int8).numpy(), s.float().numpy().astype(np.float32)
    t = qat.sparse34(w)[0] if fmt == "sherry" else qat.absmean(w, per_row=True)[0]
    tt = (t * t).sum(dim=1)
    s = torch.where(tt > 0, (w * t).sum(dim=1) / tt.clamp_min(1), torch.zeros_like(tt))
    return t.to(torch.int8).numpy(), s.numpy().astype(np.float32)


#: the transformers architectures the engine runs: ``config.model_type`` -> the causal LM's class
ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "granite": "GraniteForCausalLM"}
#: RoPE variants (``config.rope_parameters["rope_type"]``) whose frequencies the engine reads from the model's
#: rotary embedding: fixed ones, and ``dynamic``, which is the plain RoPE up to ``max_position_embeddings``
ROPE_TYPES = ("default", "linear", "llama3", "dynamic")
#: config multipliers -> their neutral value (a callable of the head dimension); any other value changes the
#: maths (Granite's: embeddings, residual branches, attention scores, logits), so it is refused
MULTIPLIERS = {"embedding_multiplier": lambda hd: 1.0, "residual_multiplier": lambda hd: 1.0,
               "attention_multiplier": lambda hd: hd ** -0.5, "logits_scaling": lambda hd: 1.0,
               "logit_scale": lambda hd: 1.0}
#: config features the decoder does not compute -> what they are; refused unless unset (None, False or 0)
FEATURES = {"attention_bias": "biases in the attention projections", "mlp_bias": "biases in the MLP projections",
            "attn_logit_softcapping": "soft-capped attention scores", "final_logit_softcapping": "soft-capped logits",
            "use_qk_norm": "query/key norms", "qk_layernorm": "query/key norms",
            "use_parallel_residual": "a parallel attention and MLP residual"}


def _check_config(model, cfg) -> tuple[str, int, list[tuple[int, str]]]:
    """``(rope_type, head_dim, limits)`` of a model whose architecture and config the engine implements, where
    ``limits`` are ``(max positions, why)``; else a one-line ValueError naming the architecture or feature."""
    mt = getattr(cfg, "model_type", None)
    if mt not in ARCHITECTURES:
        raise ValueError(f"model: {type(model).__name__} (config.model_type {mt!r}) is not an architecture the "
                         f"engine implements; it runs {sorted(ARCHITECTURES)}")
    import transformers

    cls = getattr(transformers, ARCHITECTURES[mt])
    if type(model) is not cls:  # a subclass may override forward
        raise ValueError(f"model: {_type_name(type(model))} is not a {cls.__name__} (config.model_type {mt!r}); the "
                         f"engine runs exactly the causal LMs of {sorted(ARCHITECTURES)}")
    _check_attention(getattr(cfg, "_attn_implementation", None))
    act = getattr(cfg, "hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"model: config.hidden_act={act!r} is not implemented; the MLP must be SwiGLU ('silu')")
    heads, hidden = cfg.num_attention_heads, cfg.hidden_size
    hd = getattr(cfg, "head_dim", None) or hidden // heads
    if hd * heads != hidden:
        raise ValueError(f"model: config.head_dim {hd} x {heads} heads must equal hidden_size {hidden}")
    for f, why in FEATURES.items():
        v = getattr(cfg, f, None)
        if v is not None and v is not False and v != 0:
            raise ValueError(f"model: config.{f}={v!r} ({why}) is not implemented")
    for f, neutral in MULTIPLIERS.items():
        v = getattr(cfg, f, None)
        if v is not None and not math.isclose(checks.number(f"config.{f}", v), neutral(hd), rel_tol=1e-6):
            raise ValueError(f"model: config.{f}={v!r} is not implemented; the engine computes {f}={neutral(hd):g}")
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if not isinstance(rope, dict) or any(isinstance(v, dict) for v in rope.values()):
        raise ValueError(f"model: config.rope_parameters={rope!r} (per-layer RoPE) is not implemented")
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        raise ValueError(f"model: RoPE type {rope_type!r} (config.rope_parameters) is not implemented; the engine "
                         f"runs {list(ROPE_TYPES)}")
    limits = []
    if rope_type == "dynamic":
        mp = checks.integer("config.max_position_embeddings", cfg.max_position_embeddings, 1)
        limits.append((mp, f"dynamic RoPE rescales its frequencies past config.max_position_embeddings={mp}, "
                           f"which the engine does not implement"))
    window = getattr(cfg, "sliding_window", None) if mt == "mistral" else None
    if window is not None:
        window = checks.integer("config.sliding_window", window, 1)
        limits.append((window, f"Mistral's sliding-window attention (config.sliding_window={window}) is not "
                               f"implemented, so every position must see all the earlier ones"))
    return rope_type, hd, limits


def _check_attention(impl) -> None:
    """``config._attn_implementation`` is one of :data:`ATTENTION`, run by transformers' own function (not one
    registered over it with ``AttentionInterface.register``); else a one-line ValueError."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if impl not in ATTENTION:
        raise ValueError(f"model: config._attn_implementation={impl!r} is not an attention the engine knows the maths "
                         f"of; it runs {[a for a in ATTENTION if a]}")
    fn = ALL_ATTENTION_FUNCTIONS.get(impl or "eager")
    if impl in (None, "eager"):
        own = fn is None  # nothing registered over it: the modeling file's eager attention
    else:
        own = getattr(fn, "__module__", "").startswith("transformers.integrations.")
    if not own:
        raise ValueError(f"model: the attention function registered for config._attn_implementation={impl!r} is "
                         f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}, not transformers' own; "
                         f"the engine computes only transformers' attention")


def _finite(name: str, t) -> None:
    """A one-line ValueError naming the tensor ``name`` when ``t`` holds NaN or inf."""
    t = torch.as_tensor(t)
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        what = "NaN" if bool(torch.isnan(t).any()) else "inf"
        raise ValueError(f"model: {name} holds {what}; the engine refuses non-finite weights")


#: ``config.model_type`` -> the prefix of its modules' classes in ``transformers.models.<type>.modeling_<type>``
_PREFIX = {"llama": "Llama", "mistral": "Mistral", "granite": "Granite"}
#: transformers' attention implementations (``config._attn_implementation``) that all compute
#: ``softmax(Q K^T * scaling + causal mask) V``; None is transformers' default (eager)
ATTENTION = (None, "eager", "sdpa", "flash_attention_2", "flash_attention_3", "flash_attention_4", "flex_attention")
_LINEARS = "the engine computes only plain linear layers"


def _type_name(t: type) -> str:
    mod = t.__module__
    if mod.startswith("torch.nn.modules."):
        return f"torch.nn.{t.__qualname__}"
    return t.__qualname__ if mod.startswith(("transformers.", "builtins")) else f"{mod}.{t.__qualname__}"


def _get(parent, path: str):
    """``parent``'s submodule or attribute at the dotted ``path``, None where there is none."""
    try:
        return parent.get_submodule(path)
    except AttributeError:
        return None


def _exact(m, name: str, classes: tuple, why: str) -> None:
    """A one-line ValueError naming the module ``name`` and its type unless its type is exactly one of
    ``classes`` (a subclass may override ``forward``, so it is refused too)."""
    if type(m) not in classes:
        want = " or ".join(_type_name(c) for c in classes)
        raise ValueError(f"model: {name} is a {_type_name(type(m))}, not a {want}; {why}")


def _arch(mt: str) -> dict:
    """The classes of architecture ``mt``'s modules, by role (``Model``, ``DecoderLayer``, ``Attention``, ...)."""
    import importlib

    mod = importlib.import_module(f"transformers.models.{mt}.modeling_{mt}")
    return {role: getattr(mod, _PREFIX[mt] + role)
            for role in ("Model", "DecoderLayer", "Attention", "MLP", "RMSNorm", "RotaryEmbedding")}


def _is_capture_hook(hook) -> bool:
    """transformers' output-capturing hook (installed once ``output_hidden_states`` / ``output_attentions``
    was asked for): it records outputs and returns None, so the forward is unchanged."""
    return (getattr(hook, "__module__", "") == "transformers.utils.output_capturing"
            and getattr(hook, "__name__", "") == "output_capturing_hook")


def _check_hooks(model) -> None:
    """No forward hook, pre-hook or per-instance ``forward`` on any module of ``model``, and no global forward
    hook (``torch.nn.modules.module.register_module_forward_hook`` and friends): they can change what the
    forward computes, which the engine cannot see. transformers' output-capturing hooks are allowed."""
    from torch.nn.modules import module as nn_module

    for g in ("_global_forward_hooks", "_global_forward_pre_hooks"):
        if getattr(nn_module, g, None):
            raise ValueError(f"model: a global forward hook is registered (torch.nn.modules.module.{g}); it can "
                             f"change every module's forward, which the engine does not compute")
    for name, m in model.named_modules():
        where = name or "the model"
        for kind, hooks in (("forward hook", m._forward_hooks), ("forward pre-hook", m._forward_pre_hooks)):
            bad = [h for h in hooks.values() if not _is_capture_hook(h)]
            if bad:
                raise ValueError(f"model: {where} ({_type_name(type(m))}) has a {kind} "
                                 f"({getattr(bad[0], '__qualname__', type(bad[0]).__name__)}); it can change the "
                                 f"forward, which the engine does not compute")
        if "forward" in vars(m):
            raise ValueError(f"model: {where} ({_type_name(type(m))}) has its forward replaced on the instance "
                             f"(e.g. an accelerate hook); the engine computes only the class's forward")


def _projection(lin, name: str, shape: tuple[int, int]) -> None:
    """A projection the engine computes: exactly a ``torch.nn.Linear``, a QAT ``QuantLinear`` (without its
    Arenas residual) or a packed ``PackedLinear``, of ``shape`` (out, in), without bias, finite."""
    _exact(lin, name, (torch.nn.Linear, qat.QuantLinear, qat.PackedLinear), _LINEARS)
    if getattr(lin, "bias", None) is not None:
        raise ValueError(f"model: {name} has a bias; the decoder has none")
    got = tuple(lin.dense_shape) if isinstance(lin, D.PackedWeights) else tuple(lin.weight.shape)
    if got != shape:
        raise ValueError(f"model: {name} is {got[0]} x {got[1]}, not the config's {shape[0]} x {shape[1]}")
    if type(lin) is qat.QuantLinear and lin.mode != "fp" and float(lin.lam) != 0:
        raise ValueError(f"model: {name} is a QuantLinear with the Arenas residual lam={lin.lam!r} (its forward adds "
                         f"lam * W to the ternary weight); the engine computes the ternary weight alone (lam 0)")
    if isinstance(lin, D.PackedWeights):
        _finite(f"{name}.scale", lin.scale)
    else:
        _finite(f"{name}.weight", lin.weight.detach())


def _norm(norm, name: str, hidden: int, cls: type) -> float:
    """An RMSNorm ``w * x / sqrt(mean(x^2) + eps)``: exactly the architecture's ``cls``, a finite (hidden,)
    weight and a finite eps >= 0 (``variance_epsilon``, what its forward adds); returns the eps."""
    _exact(norm, name, (cls,), "the engine computes only the architecture's RMSNorm")
    w = getattr(norm, "weight", None)
    if not isinstance(w, torch.Tensor) or tuple(w.shape) != (hidden,) or getattr(norm, "bias", None) is not None:
        raise ValueError(f"model: {name} is a {type(norm).__name__}, not an RMSNorm with a ({hidden},) weight")
    eps = getattr(norm, "variance_epsilon", None)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"model: {name}.variance_epsilon={eps!r} is not a finite number >= 0")
    _finite(f"{name}.weight", w.detach())
    return float(eps)


def _check_modules(model, cfg, mt: str, hd: int) -> float:
    """Every module the forward of ``model`` (a transformers causal LM of architecture ``mt``) runs is one whose
    maths the decoder implements: exactly the architecture's classes (decoder layer, attention, MLP, RMSNorm,
    rotary embedding), ``torch.nn.Embedding`` without ``max_norm``, ``torch.nn.Linear`` head, projections of
    :func:`_projection`, SiLU, the attention's own scale ``head_dim ** -0.5``, no attention dropout in
    training mode, no hooks (:func:`_check_hooks`). Returns the RMSNorms' eps (one for all of them); else a
    one-line ValueError naming the module by its dotted name in ``model`` and its type."""
    import transformers.activations as acts

    arch = _arch(mt)
    inner, layers = model.model, model.model.layers
    _exact(inner, "model", (arch["Model"],), f"the engine computes only {arch['Model'].__name__}'s forward")
    if inner.config is not cfg:
        raise ValueError("model: model.config is not the causal LM's config; the engine reads one config")
    if float(getattr(inner, "embedding_multiplier", 1.0)) != 1.0:
        raise ValueError(f"model: model.embedding_multiplier={inner.embedding_multiplier!r} is not implemented; "
                         f"the engine computes embedding_multiplier=1")
    if type(layers) is not torch.nn.ModuleList or len(layers) != cfg.num_hidden_layers:
        raise ValueError(f"model: model.layers ({_type_name(type(layers))} of {len(layers)}) must be a ModuleList of "
                         f"config.num_hidden_layers={cfg.num_hidden_layers} layers, all of which the forward runs")
    embed = inner.embed_tokens
    _exact(embed, "model.embed_tokens", (torch.nn.Embedding,), "the engine looks up a plain embedding table")
    if embed.max_norm is not None:
        raise ValueError(f"model: model.embed_tokens has max_norm={embed.max_norm!r} (its forward renormalises the "
                         f"rows it looks up), which the engine does not implement")
    _exact(model.lm_head, "lm_head", (torch.nn.Linear,), "the engine computes a plain linear output head")
    _exact(getattr(inner, "rotary_emb", None), "model.rotary_emb", (arch["RotaryEmbedding"],),
           "the engine computes only the architecture's rotary embedding")
    hidden, heads, kv, inter = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
    shapes = {"q": (heads * hd, hidden), "k": (kv * hd, hidden), "v": (kv * hd, hidden), "o": (hidden, heads * hd),
              "gate": (inter, hidden), "up": (inter, hidden), "down": (hidden, inter)}
    eps = {}
    for i, layer in enumerate(layers):
        at = f"model.layers.{i}"
        _exact(layer, at, (arch["DecoderLayer"],), "the engine computes only the architecture's decoder layer")
        if float(getattr(layer, "residual_multiplier", 1.0)) != 1.0:
            raise ValueError(f"model: {at}.residual_multiplier={layer.residual_multiplier!r} is not implemented; "
                             f"the engine computes plain residuals")
        attn, mlp = _get(layer, "self_attn"), _get(layer, "mlp")
        _exact(attn, f"{at}.self_attn", (arch["Attention"],), "the engine computes only the architecture's attention")
        if attn.config is not cfg:
            raise ValueError(f"model: {at}.self_attn.config is not the model's config; the engine reads one config")
        scaling = attn.scaling
        if (isinstance(scaling, bool) or not isinstance(scaling, (int, float))
                or not math.isclose(scaling, hd ** -0.5, rel_tol=1e-6)):
            raise ValueError(f"model: {at}.self_attn.scaling={attn.scaling!r} is not implemented; the engine scales "
                             f"attention scores by head_dim ** -0.5 = {hd ** -0.5:g}")
        if attn.head_dim != hd or attn.num_key_value_groups * kv != heads or attn.is_causal is not True:
            raise ValueError(f"model: {at}.self_attn (head_dim {attn.head_dim}, num_key_value_groups "
                             f"{attn.num_key_value_groups}, is_causal {attn.is_causal}) is not the config's causal "
                             f"attention of {heads} heads of {hd} over {kv} key/value heads")
        if attn.training and attn.attention_dropout:
            raise ValueError(f"model: {at}.self_attn is in training mode with attention_dropout="
                             f"{attn.attention_dropout!r}, so its forward drops attention weights at random; the "
                             f"engine does not (call model.eval())")
        _exact(mlp, f"{at}.mlp", (arch["MLP"],), "the engine computes only the architecture's SwiGLU MLP")
        _exact(getattr(mlp, "act_fn", None), f"{at}.mlp.act_fn", (acts.SiLUActivation, torch.nn.SiLU),
               "the MLP must be SwiGLU (SiLU)")
        for short, path in _PROJ.items():
            _projection(_get(layer, path), f"{at}.{path}", shapes[short])
        for path in ("input_layernorm", "post_attention_layernorm"):
            eps[f"{at}.{path}"] = _norm(_get(layer, path), f"{at}.{path}", hidden, arch["RMSNorm"])
    eps["model.norm"] = _norm(getattr(inner, "norm", None), "model.norm", hidden, arch["RMSNorm"])
    (first, e0), *rest = eps.items()
    for name, e in rest:
        if e != e0:
            raise ValueError(f"model: {name} has eps {e:g} but {first} {e0:g}; the decoder runs one RMSNorm eps")
    _check_hooks(model)
    return e0


def _llama_parts(model) -> tuple:
    """``(config, layers, embed, head, final_norm, inv_freq, rms_eps, limits)`` of a causal LM whose maths the
    decoder implements (see the module docstring), or a one-line ValueError naming what does not fit: the
    architecture or config feature (:func:`_check_config`), a module by its dotted name and type
    (:func:`_check_modules`). Every weight read is checked finite, the error naming the tensor by its name in
    ``model``."""
    cfg = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if (cfg is None or layers is None or not isinstance(model, torch.nn.Module) or not hasattr(inner, "embed_tokens")
            or not hasattr(model, "lm_head")):
        raise ValueError(f"model must be a transformers LLaMA-family causal LM (model.model.layers, embed_tokens, "
                         f"lm_head), got {type(model).__name__}")
    rope_type, hd, limits = _check_config(model, cfg)
    eps = _check_modules(model, cfg, cfg.model_type, hd)
    final_norm = inner.norm
    embed, head = inner.embed_tokens, model.lm_head
    rows = tuple(embed.weight.shape)
    if rows[1] != cfg.hidden_size:
        raise ValueError(f"model: the embedding table must be (vocab, {cfg.hidden_size}), got {rows}")
    if head.bias is not None or tuple(head.weight.shape) != rows:
        raise ValueError(f"model: lm_head must be a {rows} linear layer without bias, like the embedding table")
    if cfg.vocab_size > rows[0]:
        raise ValueError(f"model: config.vocab_size {cfg.vocab_size} exceeds the embedding table's {rows[0]} rows")
    _finite("model.embed_tokens.weight", embed.weight.detach())
    if head.weight.data_ptr() != embed.weight.data_ptr():
        _finite("lm_head.weight", head.weight.detach())
    rot = inner.rotary_emb
    if not isinstance(getattr(rot, "inv_freq", None), torch.Tensor):
        raise ValueError("model: no rotary embedding (model.model.rotary_emb.inv_freq)")
    if float(getattr(rot, "attention_scaling", 1.0)) != 1.0:
        raise ValueError(f"model: rotary attention scaling {rot.attention_scaling} (YaRN-style) is not implemented")
    # dynamic RoPE: transformers rescales rot.inv_freq in place once it has run past max_position_embeddings;
    # up to that length (all the engine runs) its frequencies are the original ones
    freq = getattr(rot, "original_inv_freq", None) if rope_type == "dynamic" else rot.inv_freq
    if not isinstance(freq, torch.Tensor):
        raise ValueError("model: dynamic RoPE without model.model.rotary_emb.original_inv_freq is not implemented")
    if tuple(freq.shape) != (hd // 2,):
        raise ValueError(f"model: {freq.numel()} rotary frequencies for a head of {hd} (partial rotary "
                         f"embedding) is not implemented; the engine rotates the whole head")
    _finite("model.model.rotary_emb.inv_freq", freq)
    return cfg, layers, embed, head, final_norm, freq.detach().double().numpy(), eps, limits


def check_model(model) -> int | None:
    """Whether :meth:`Engine.from_transformers` takes ``model``, without packing anything: the most positions
    one run may process (:attr:`Engine.max_positions`; None: no limit but memory), or the one-line ValueError
    that :meth:`Engine.from_transformers` raises for it (architecture, config feature, a module it does not
    compute, NaN or inf weights)."""
    with torch.no_grad():
        limits = _llama_parts(model)[-1]
    return min(limits)[0] if limits else None


class Engine:
    """A transformers LLaMA-family model decoded by :class:`~acl26.papers.sherry.decoder.Model` with its
    projections in ``fmt`` (see the module docstring); built by :meth:`from_transformers` (which refuses, in
    one line, any model whose maths the decoder does not implement) or :meth:`random`."""

    def __init__(self, model: D.Model, packed_blocks: list[int], limits: Sequence[tuple[int, str]] = ()):
        self.model = model
        self.packed_blocks = packed_blocks
        #: ``(max positions, why)`` of the features that hold only up to a length (see the module docstring)
        self.limits = sorted(limits)

    @property
    def max_positions(self) -> int | None:
        """The most positions one run may process (Mistral's sliding window, dynamic RoPE's trained length),
        or None: no limit but memory."""
        return self.limits[0][0] if self.limits else None

    @property
    def fmt(self) -> str:
        return self.model.fmt

    @classmethod
    def random(cls, shape, fmt: str, *, seed: int = 0, embedding: D.Embedding | None = None, fuse: bool = True,
               act8: bool = False, progress: bool = False) -> "Engine":
        """A random-weight decoder of ``shape`` (a :class:`~acl26.papers.sherry.decoder.Shape` or its name) in
        ``fmt`` (:func:`~acl26.papers.sherry.decoder.build_model`; what the speed table times), fused for
        decoding where ``fmt`` has a fused step and ``fuse`` is set; ``act8``: the fused step on 8-bit
        activations (:meth:`~acl26.papers.sherry.decoder.Model.fuse`; needs ``fuse`` and a packed ``fmt``).
        ValueError naming the argument for a ``fmt`` that is not one of the format names (a string), a bad
        ``shape``, ``seed``, ``embedding`` or ``act8``."""
        if act8 is not False and not (act8 is True and fuse and fmt in D.PACKED):
            raise ValueError(f"act8 must be False, or True with fuse=True and a packed fmt {D.PACKED}; got act8={act8!r}, "
                             f"fuse={fuse!r}, fmt={fmt!r}")
        m = D.build_model(shape, fmt, seed=seed, embedding=embedding, progress=progress)
        if fuse and fmt in D.FUSED:
            m.fuse(act8=act8)
        return cls(m, list(range(len(m.blocks))) if fmt in D.PACKED else [])

    @property
    def vocab(self) -> int:
        """The number of token ids: the embedding table's rows (token ids lie in ``[0, vocab)``)."""
        return self.model.shape.vocab

    @classmethod
    @torch.no_grad()
    def from_transformers(cls, model, fmt: str, *, blocks: Sequence[int] | None = None,
                          name: str = "transformers model", act8: bool = False) -> "Engine":
        """Pack ``model``'s projections in ``fmt`` (one of :data:`~acl26.papers.sherry.decoder.FORMATS`):
        those of ``blocks`` (decoder layer indices; default: every block), the others in bf16 (fp32 when
        ``fmt`` is fp32). ``act8``: decode (the fused step) on 8-bit activations, as BitNet b1.58 and
        llama.cpp's TQ types do (:func:`acl26.kernels.decode.with_act8`); it needs a packed ``fmt`` in every
        block, and the prompt's prefill keeps float32 activations.

        A one-line ValueError, before anything is packed: naming the argument for a bad ``fmt`` (a string
        among the formats), ``blocks``, ``name`` or ``act8``; naming the architecture or the config feature
        for a model whose maths the engine does not implement (see the module docstring: another
        ``config.model_type``, a multiplier, soft-capping, a RoPE type outside :data:`ROPE_TYPES`, biases, a
        ``config.vocab_size`` above the embedding table's rows); naming the module by its dotted name and type
        for a module that is not exactly the architecture's (a LoRA adapter, a ``Linear`` subclass, a
        ``LayerNorm`` for an RMSNorm, ...), an attention scale other than ``head_dim ** -0.5``, a hook, or
        attention dropout in training mode; naming the tensor for a weight holding NaN or inf. The vocabulary
        is the embedding table's rows (the width of transformers' logits)."""
        D.check_format(fmt, "fmt")
        if act8 is not False and not (act8 is True and fmt in D.PACKED):
            raise ValueError(f"act8 must be False, or True with a packed fmt {D.PACKED}; got act8={act8!r}, fmt={fmt!r}")
        if not isinstance(name, str):
            raise ValueError(f"name must be a string, got {name!r}")
        cfg, layers, embed, head, final_norm, inv_freq, eps, limits = _llama_parts(model)
        n = len(layers)
        packed = list(range(n)) if blocks is None else checks.layer_indices("blocks", blocks, n)
        if act8 and len(set(packed)) != n:
            raise ValueError(f"act8 needs every block packed (the fused step), got blocks={blocks!r} of {n}")
        tied = head.weight.data_ptr() == embed.weight.data_ptr()
        rope = getattr(cfg, "rope_parameters", None) or {}
        theta = rope.get("rope_theta") or getattr(cfg, "rope_theta", None) or 10000.0
        shape = D.Shape(name, cfg.hidden_size, cfg.intermediate_size, n, cfg.num_attention_heads,
                        cfg.num_key_value_heads, int(embed.weight.shape[0]), tied=tied, rope_theta=float(theta),
                        source=type(model).__name__)
        # the decoder's convention: float32 throughout for fp32, bf16 tables and dense layers otherwise
        dense_dtype = torch.float32 if fmt == "fp32" else torch.bfloat16
        out_blocks = []
        for i, layer in enumerate(layers):
            lins = {}
            for short, path in _PROJ.items():
                lin = layer.get_submodule(path)
                if i in packed and fmt in D.PACKED and isinstance(lin, D.PackedWeights) and lin.fmt == fmt:
                    lins[short] = D.PackedWeights(fmt, lin.packed, lin.scale)  # already packed: its own streams
                elif i in packed and fmt in D.PACKED:
                    T, s = ternary_of(lin, fmt)
                    lins[short] = D.PackedWeights(fmt, getattr(tn, f"pack_{fmt}")(T), s)
                else:
                    w = _dense_weight(lin)
                    if isinstance(lin, qat.QuantLinear) and lin.mode != "fp":
                        w = qat.quantize(w, lin.mode)  # what its forward computes (lambda 0)
                    lins[short] = D.TorchLinear(w.to(dense_dtype).contiguous())
            out_blocks.append(D.Block(layer.input_layernorm.weight.detach().float().numpy().copy(),
                                      layer.post_attention_layernorm.weight.detach().float().numpy().copy(), lins))
        table = embed.weight.detach().to(dense_dtype).contiguous()
        emb = D.Embedding(table, None if tied else head.weight.detach().to(dense_dtype).contiguous())
        m = D.Model(shape, fmt, out_blocks, emb, final_norm.weight.detach().float().numpy().copy(),
                    inv_freq=inv_freq, rms_eps=eps)
        if fmt == "bf16" or (fmt in D.PACKED and len(packed) == n):
            m.fuse(act8=act8)  # one format in every block: decode through the fused step
        return cls(m, packed, limits)

    def _ids(self, ids, what: str = "ids") -> np.ndarray:
        a = np.asarray(ids.detach().cpu().numpy() if torch.is_tensor(ids) else ids)
        if a.ndim == 2 and a.shape[0] == 1:
            a = a[0]
        if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{what} must be a non-empty 1-D sequence of token ids (or one row), got shape "
                             f"{a.shape} of {a.dtype}")
        bad = np.flatnonzero((a < 0) | (a >= self.vocab))
        if bad.size:
            raise ValueError(f"{what}: token id {a[bad[0]]} (position {bad[0]}) is outside the vocabulary of "
                             f"{self.vocab} ids [0, {self.vocab})")
        return a.astype(np.int64)

    def _check_positions(self, n: int, what: str, capacity: int | None = None) -> None:
        """Refuse a run over ``n`` positions past a feature's limit, or whose KV cache (``capacity`` positions,
        default ``n``) would not fit in memory, before anything is allocated."""
        for limit, why in self.limits:
            if n > limit:
                raise ValueError(f"{what} runs {n} positions, more than {limit}: {why}")
        s = self.model.shape
        capacity = n if capacity is None else capacity
        need = 2 * s.layers * s.kv_heads * capacity * s.head_dim * 4  # keys and values, float32
        avail = D.available_bytes()
        if avail is not None and need > 0.8 * avail:
            raise ValueError(f"{what} needs a KV cache of {need / 2**30:,.1f} GiB for {capacity} positions, more "
                             f"than 80% of the {avail / 2**30:,.1f} GiB of memory available")

    def logits(self, ids) -> np.ndarray:
        """The last position's logits ``(vocab,)`` float32 after ``ids`` (a prefill from an empty cache).
        ValueError for ids that are not a non-empty 1-D integer sequence (or one row), a token id outside
        ``[0, vocab)`` (naming it), more positions than :attr:`max_positions`, or a KV cache larger than
        80% of the memory available."""
        a = self._ids(ids)
        self._check_positions(len(a), f"logits: ids of length {len(a)}")
        return self.model.forward(a, self.model.new_cache(len(a)))[1]

    def _eos(self, eos_token_id) -> frozenset:
        """``eos_token_id`` as a set of token ids: None, one id or a non-empty list of ids in ``[0, vocab)``."""
        if eos_token_id is None:
            return frozenset()
        seq = isinstance(eos_token_id, (list, tuple)) or (isinstance(eos_token_id, np.ndarray)
                                                           and eos_token_id.ndim == 1)
        items = list(eos_token_id) if seq else [eos_token_id]
        if not items:
            raise ValueError(f"eos_token_id must be None, a token id or a non-empty list of them, got {eos_token_id!r}")
        return frozenset(checks.integer("eos_token_id", e, 0, self.vocab - 1) for e in items)

    def generate(self, ids, max_new_tokens: int, *, eos_token_id: int | Sequence[int] | None = None) -> np.ndarray:
        """Greedy decoding: ``ids`` followed by up to ``max_new_tokens`` new ids (stopping after any id of
        ``eos_token_id``, one id or a list of them, when given), as a 1-D int64 array. The run processes
        ``len(ids) + max_new_tokens - 1`` positions (the last new id is not fed back).

        ValueError, naming the argument, before anything is computed or allocated: ``ids`` as for
        :meth:`logits`; ``max_new_tokens`` not an integer >= 0; ``eos_token_id`` not None, an integer id in
        ``[0, vocab)`` (bool refused) or a non-empty list of them; more positions than
        :attr:`max_positions`; a KV cache (``2 x layers x kv_heads x positions x head_dim`` float32) larger
        than 80% of the memory available."""
        a = self._ids(ids)
        max_new_tokens = checks.integer("max_new_tokens", max_new_tokens, 0)
        eos = self._eos(eos_token_id)
        out = list(a)
        if max_new_tokens == 0:
            return np.asarray(out, np.int64)
        self._check_positions(len(a) + max_new_tokens - 1,
                              f"generate: ids of length {len(a)} and max_new_tokens={max_new_tokens}",
                              capacity=len(a) + max_new_tokens)
        cache = self.model.new_cache(len(a) + max_new_tokens)
        nxt = int(np.argmax(self.model.forward(a, cache)[1]))
        for step in range(max_new_tokens):
            out.append(nxt)
            if nxt in eos or step == max_new_tokens - 1:
                break
            nxt = self.model.next_token(nxt, cache)
        return np.asarray(out, np.int64)

    @property
    def fused(self) -> bool:
        """Whether decoding runs through the fused step (every block in one format of
        :data:`~acl26.papers.sherry.decoder.FUSED`; otherwise the numpy decoder)."""
        return self.model.fused is not None

    @property
    def nbytes(self) -> int:
        return self.model.total_bytes

    def __repr__(self) -> str:
        s = self.model.shape
        return (f"Engine({s.source}, {s.layers} layers, {self.fmt} in blocks {self.packed_blocks[:4]}"
                f"{'...' if len(self.packed_blocks) > 4 else ''}, {self.nbytes / 2**20:.1f} MiB)")
