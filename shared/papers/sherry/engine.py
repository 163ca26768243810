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
biases, an activation other than SiLU, a vocabulary (``config.vocab_size``) larger than the embedding
table, and NaN or inf in any weight (the error names the tensor, e.g.
``model.layers.3.mlp.down_proj.weight holds NaN``, in every format). Two features hold only up to a
length, :attr:`Engine.max_positions`: Mistral's sliding window (``config.sliding_window`` W: every
position must see all the earlier ones, so at most W positions) and dynamic RoPE (at most
``config.max_position_embeddings``); :meth:`Engine.logits` and :meth:`Engine.generate` refuse a longer
run before computing anything.

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
    if isinstance(layer, D.PackedLinear):
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
    if not isinstance(model, cls):
        raise ValueError(f"model: {type(model).__name__} is not a {cls.__name__} (config.model_type {mt!r}); the "
                         f"engine runs the causal LMs of {sorted(ARCHITECTURES)}")
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


def _module(parent, path: str, where: str):
    try:
        return parent.get_submodule(path)
    except AttributeError:
        raise ValueError(f"model: {where} has no {path}; the engine runs {sorted(ARCHITECTURES)}") from None


def _finite(name: str, t) -> None:
    """A one-line ValueError naming the tensor ``name`` when ``t`` holds NaN or inf."""
    t = torch.as_tensor(t)
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        what = "NaN" if bool(torch.isnan(t).any()) else "inf"
        raise ValueError(f"model: {name} holds {what}; the engine refuses non-finite weights")


def _llama_parts(model) -> tuple:
    """``(config, layers, embed, head, final_norm, inv_freq, limits)`` of a causal LM whose maths the decoder
    implements (see the module docstring), or a one-line ValueError naming what does not fit. Every weight
    read is checked finite, the error naming the tensor by its name in ``model``."""
    cfg = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if (cfg is None or layers is None or not isinstance(model, torch.nn.Module) or not hasattr(inner, "embed_tokens")
            or not hasattr(model, "lm_head")):
        raise ValueError(f"model must be a transformers LLaMA-family causal LM (model.model.layers, embed_tokens, "
                         f"lm_head), got {type(model).__name__}")
    rope_type, hd, limits = _check_config(model, cfg)
    names = {id(m): n for n, m in model.named_modules()}
    for i, layer in enumerate(layers):
        for path in ("input_layernorm", "post_attention_layernorm", "self_attn", "mlp", *_PROJ.values()):
            _module(layer, path, f"layer {i}")
        for path in _PROJ.values():
            lin = layer.get_submodule(path)
            if getattr(lin, "bias", None) is not None:
                raise ValueError(f"model: layer {i} {path} has a bias; the decoder has none")
            if isinstance(lin, D.PackedLinear):
                _finite(f"{names[id(lin)]}.scale", lin.scale)
            elif isinstance(getattr(lin, "weight", None), torch.Tensor):
                _finite(f"{names[id(lin)]}.weight", lin.weight.detach())
            else:
                raise ValueError(f"model: layer {i} {path} is a {type(lin).__name__}, not a linear layer")
        attn = layer.self_attn
        if hasattr(attn, "q_norm") or hasattr(attn, "k_norm"):
            raise ValueError(f"model: layer {i} normalises queries and keys (Qwen3-style); the decoder does not")
        for path in ("input_layernorm", "post_attention_layernorm"):
            norm = layer.get_submodule(path)
            _norm(norm, names[id(norm)], cfg.hidden_size)
    final_norm = getattr(inner, "norm", None)
    _norm(final_norm, names.get(id(final_norm), "model.model.norm"), cfg.hidden_size)
    embed, head = inner.embed_tokens, model.lm_head
    rows = tuple(getattr(getattr(embed, "weight", None), "shape", ()))
    if len(rows) != 2 or rows[1] != cfg.hidden_size:
        raise ValueError(f"model: the embedding table must be (vocab, {cfg.hidden_size}), got {rows}")
    if getattr(head, "bias", None) is not None or tuple(getattr(getattr(head, "weight", None), "shape", ())) != rows:
        raise ValueError(f"model: lm_head must be a {rows} linear layer without bias, like the embedding table")
    if cfg.vocab_size > rows[0]:
        raise ValueError(f"model: config.vocab_size {cfg.vocab_size} exceeds the embedding table's {rows[0]} rows")
    _finite(f"{names[id(embed)]}.weight", embed.weight.detach())
    if head.weight.data_ptr() != embed.weight.data_ptr():
        _finite(f"{names[id(head)]}.weight", head.weight.detach())
    rot = getattr(inner, "rotary_emb", None)
    if rot is None or not isinstance(getattr(rot, "inv_freq", None), torch.Tensor):
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
    return cfg, layers, embed, head, final_norm, freq.detach().double().numpy(), limits


def check_model(model) -> int | None:
    """Whether :meth:`Engine.from_transformers` takes ``model``, without packing anything: the most positions
    one run may process (:attr:`Engine.max_positions`; None: no limit but memory), or the one-line ValueError
    that :meth:`Engine.from_transformers` raises for it (architecture, config feature, NaN or inf weights)."""
    with torch.no_grad():
        limits = _llama_parts(model)[-1]
    return min(limits)[0] if limits else None


def _norm(norm, name: str, hidden: int) -> None:
    """An RMSNorm ``w * x / rms(x)``: a (hidden,) weight, no bias, finite."""
    w = getattr(norm, "weight", None)
    if not isinstance(w, torch.Tensor) or tuple(w.shape) != (hidden,) or getattr(norm, "bias", None) is not None:
        raise ValueError(f"model: {name} is a {type(norm).__name__}, not an RMSNorm with a ({hidden},) weight")
    _finite(f"{name}.weight", w.detach())


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
        ``config.vocab_size`` above the embedding table's rows); naming the tensor for a weight holding NaN
        or inf. The vocabulary is the embedding table's rows (the width of transformers' logits)."""
        D._check_format(fmt, "fmt")
        if act8 is not False and not (act8 is True and fmt in D.PACKED):
            raise ValueError(f"act8 must be False, or True with a packed fmt {D.PACKED}; got act8={act8!r}, fmt={fmt!r}")
        if not isinstance(name, str):
            raise ValueError(f"name must be a string, got {name!r}")
        cfg, layers, embed, head, final_norm, inv_freq, limits = _llama_parts(model)
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
                if i in packed and fmt in D.PACKED and isinstance(lin, D.PackedLinear) and lin.fmt == fmt:
                    lins[short] = D.PackedLinear(fmt, lin.packed, lin.scale)  # already packed: its own streams
                elif i in packed and fmt in D.PACKED:
                    T, s = ternary_of(lin, fmt)
                    lins[short] = D.PackedLinear(fmt, getattr(tn, f"pack_{fmt}")(T), s)
                else:
                    w = _dense_weight(lin)
                    if isinstance(lin, qat.QuantLinear) and lin.mode != "fp":
                        w = qat.quantize(w, lin.mode)  # what its forward computes (lambda 0)
                    lins[short] = D.TorchLinear(w.to(dense_dtype).contiguous())
            out_blocks.append(D.Block(layer.input_layernorm.weight.detach().float().numpy().copy(),
                                      layer.post_attention_layernorm.weight.detach().float().numpy().copy(), lins))
        table = embed.weight.detach().to(dense_dtype).contiguous()
        emb = D.Embedding(table, None if tied else head.weight.detach().to(dense_dtype).contiguous())
        eps = float(getattr(cfg, "rms_norm_eps", 1e-5))
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
