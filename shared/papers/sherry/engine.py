"""Sherry (ACL 2026, arXiv 2601.07892): a real transformers model through the packed decoder.

:class:`Engine` takes any LLaMA-family causal LM of ``transformers`` (LLaMA-3.2, SmolLM2: RMSNorm,
rotary positions with or without LLaMA-3's frequency scaling, grouped-query attention, SwiGLU MLP,
tied or separate embeddings; no biases, no query/key norms) and runs it through
:class:`acl26.papers.sherry.decoder.Model`, the decoder the speed table times: every projection of
the chosen blocks packed in one weight format and multiplied by its kernel, the rest in numpy.

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


def _llama_parts(model) -> tuple:
    """``(config, layers, embed, head, final_norm)`` of a LLaMA-family causal LM, or a ValueError
    saying what does not fit."""
    cfg = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if cfg is None or layers is None or not hasattr(inner, "embed_tokens") or not hasattr(model, "lm_head"):
        raise ValueError(f"model must be a transformers LLaMA-family causal LM (model.model.layers, embed_tokens, "
                         f"lm_head), got {type(model).__name__}")
    if getattr(cfg, "hidden_act", "silu") != "silu":
        raise ValueError(f"model: the MLP must be SwiGLU (hidden_act 'silu'), got {cfg.hidden_act!r}")
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if hd * cfg.num_attention_heads != cfg.hidden_size:
        raise ValueError(f"model: head_dim {hd} x {cfg.num_attention_heads} heads must equal hidden_size "
                         f"{cfg.hidden_size}")
    for i, layer in enumerate(layers):
        for short, path in _PROJ.items():
            lin = layer.get_submodule(path)
            if getattr(lin, "bias", None) is not None:
                raise ValueError(f"model: layer {i} {path} has a bias; the decoder has none")
        attn = layer.self_attn
        if hasattr(attn, "q_norm") or hasattr(attn, "k_norm"):
            raise ValueError(f"model: layer {i} normalises queries and keys (Qwen3-style); the decoder does not")
        if getattr(layer, "mlp", None) is None or not hasattr(layer.mlp, "gate_proj"):
            raise ValueError(f"model: layer {i} has no dense SwiGLU MLP (gate_proj, up_proj, down_proj)")
    return cfg, layers, inner.embed_tokens, model.lm_head, inner.norm


class Engine:
    """A transformers LLaMA-family model decoded by :class:`~acl26.papers.sherry.decoder.Model` with its
    projections in ``fmt`` (see the module docstring); built by :meth:`from_transformers`."""

    def __init__(self, model: D.Model, packed_blocks: list[int]):
        self.model = model
        self.packed_blocks = packed_blocks

    @property
    def fmt(self) -> str:
        return self.model.fmt

    @classmethod
    def random(cls, shape, fmt: str, *, seed: int = 0, embedding: D.Embedding | None = None, fuse: bool = True,
               act8: bool = False, progress: bool = False) -> "Engine":
        """A random-weight decoder of ``shape`` (a :class:`~acl26.papers.sherry.decoder.Shape` or its name) in
        ``fmt`` (:func:`~acl26.papers.sherry.decoder.build_model`; what the speed table times), fused for
        decoding where ``fmt`` has a fused step and ``fuse`` is set; ``act8``: the fused step on 8-bit
        activations (:meth:`~acl26.papers.sherry.decoder.Model.fuse`; needs ``fuse`` and a packed ``fmt``)."""
        if act8 is not False and not (act8 is True and fuse and fmt in D.PACKED):
            raise ValueError(f"act8 must be False, or True with fuse=True and a packed fmt {D.PACKED}; got act8={act8!r}, "
                             f"fuse={fuse!r}, fmt={fmt!r}")
        m = D.build_model(shape, fmt, seed=seed, embedding=embedding, progress=progress)
        if fuse and fmt in D.FUSED:
            m.fuse(act8=act8)
        return cls(m, list(range(len(m.blocks))) if fmt in D.PACKED else [])

    @property
    def vocab(self) -> int:
        return self.model.shape.vocab

    @classmethod
    @torch.no_grad()
    def from_transformers(cls, model, fmt: str, *, blocks: Sequence[int] | None = None,
                          name: str = "transformers model", act8: bool = False) -> "Engine":
        """Pack ``model``'s projections in ``fmt`` (one of :data:`~acl26.papers.sherry.decoder.FORMATS`):
        those of ``blocks`` (decoder layer indices; default: every block), the others in bf16 (fp32 when
        ``fmt`` is fp32). ``act8``: decode (the fused step) on 8-bit activations, as BitNet b1.58 and
        llama.cpp's TQ types do (:func:`acl26.kernels.decode.with_act8`); it needs a packed ``fmt`` in every
        block, and the prompt's prefill keeps float32 activations. ValueError, naming the argument, for a
        model the decoder cannot run or a bad ``fmt``, ``blocks`` or ``act8``."""
        D._check_format(fmt, "fmt")
        if act8 is not False and not (act8 is True and fmt in D.PACKED):
            raise ValueError(f"act8 must be False, or True with a packed fmt {D.PACKED}; got act8={act8!r}, fmt={fmt!r}")
        cfg, layers, embed, head, final_norm = _llama_parts(model)
        n = len(layers)
        packed = list(range(n)) if blocks is None else checks.layer_indices("blocks", blocks, n)
        if act8 and len(set(packed)) != n:
            raise ValueError(f"act8 needs every block packed (the fused step), got blocks={blocks!r} of {n}")
        tied = head.weight.data_ptr() == embed.weight.data_ptr()
        shape = D.Shape(name, cfg.hidden_size, cfg.intermediate_size, n, cfg.num_attention_heads,
                        cfg.num_key_value_heads, cfg.vocab_size, tied=tied,
                        rope_theta=float(getattr(cfg, "rope_theta", None) or 10000.0), source=type(model).__name__)
        rot = getattr(model.model, "rotary_emb", None)
        if rot is None or not hasattr(rot, "inv_freq"):
            raise ValueError("model: no rotary embedding (model.model.rotary_emb.inv_freq)")
        if float(getattr(rot, "attention_scaling", 1.0)) != 1.0:
            raise ValueError(f"model: rotary attention scaling {rot.attention_scaling} (YaRN-style) is not supported")
        inv_freq = rot.inv_freq.detach().double().numpy()
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
        return cls(m, packed)

    def _ids(self, ids, what: str = "ids") -> np.ndarray:
        a = np.asarray(ids.detach().cpu().numpy() if torch.is_tensor(ids) else ids)
        if a.ndim == 2 and a.shape[0] == 1:
            a = a[0]
        if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{what} must be a non-empty 1-D sequence of token ids (or one row), got shape "
                             f"{a.shape} of {a.dtype}")
        if a.min() < 0 or a.max() >= self.vocab:
            raise ValueError(f"{what} must lie in [0, {self.vocab}), got {a.min()} .. {a.max()}")
        return a.astype(np.int64)

    def logits(self, ids) -> np.ndarray:
        """The last position's logits ``(vocab,)`` float32 after ``ids`` (a prefill from an empty cache)."""
        a = self._ids(ids)
        return self.model.forward(a, self.model.new_cache(len(a)))[1]

    def generate(self, ids, max_new_tokens: int, *, eos_token_id: int | None = None) -> np.ndarray:
        """Greedy decoding: ``ids`` followed by up to ``max_new_tokens`` new ids (stopping after
        ``eos_token_id`` when given), as a 1-D int64 array."""
        a = self._ids(ids)
        max_new_tokens = checks.integer("max_new_tokens", max_new_tokens, 0)
        out = list(a)
        if max_new_tokens == 0:
            return np.asarray(out, np.int64)
        cache = self.model.new_cache(len(a) + max_new_tokens)
        nxt = int(np.argmax(self.model.forward(a, cache)[1]))
        for step in range(max_new_tokens):
            out.append(nxt)
            if (eos_token_id is not None and nxt == eos_token_id) or step == max_new_tokens - 1:
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
