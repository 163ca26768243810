"""Sherry (ACL 2026, arXiv 2601.07892): transformer decoders of real shapes in each weight format.

The model behind the decode-speed table (:mod:`acl26.papers.sherry.speed`): a LLaMA-architecture
decoder whose linear layers are stored in one format, with random weights (timing needs no trained
weights), its sizes predicted from the formats' layouts, and the rule for skipping a model that
would not fit in memory.

Shapes (:data:`SHAPES`)
-----------------------
* ``bitnet-0.7b`` -- the paper's 0.7B row. bitnet.cpp's 0.7B model is BitNet b1.58-large
  (1bitLLM/bitnet_b1_58-large, a LLaMA-architecture model: hidden 1536, intermediate 4096, 24
  layers, 16 heads without GQA, vocabulary 32002), and the paper's sizes fit it: 679.5M linear
  weights at 2 bits plus one float16 32002 x 1536 table is 255.8 MiB against the paper's I2_S
  256.56 MB, with TL2 and Sherry a few MiB above the bare streams (padding, scales, the STQ1_0
  block's scale). Its BF16 size, 728.6M x 2 bytes = 1390 MiB, is 2% above the paper's 1360, the
  same 2% as at 3B. One vocabulary table (tied embeddings) fits the sizes; two would not.
  Alias: ``llama-0.7b``.
* ``bitnet-3b`` -- the paper's 3B row by the same arithmetic (1bitLLM/bitnet_b1_58-3B: 3200, 8640,
  26 layers, 32 heads, vocabulary 32002; TL2 835 MiB against 846.01, Sherry 675-699 MiB against
  712.40, BF16 6340 MiB against 6190).
* ``llama-3.2-1b`` and ``llama-3.2-3b`` -- the models of the paper's accuracy tables (GQA, a 128256
  vocabulary, tied embeddings). Their vocabulary head is large: for LLaMA-3.2-1B it is 21% of
  the parameters, and in the ternary formats (head in bf16) most of the bytes read per token.
* ``tiny`` -- a small shape for quick benchmarks and tests.

Formats (:data:`FORMATS`)
-------------------------
``fp32`` and ``bf16`` are PyTorch linear layers (bf16: weights and activations bf16, float32
results). ``i2``, ``tl2`` and ``sherry`` are the packed ternary formats of
:mod:`acl26.kernels.ternary` with their lookup-table GEMV (decode) and GEMM (prefill), float32
activations and per-row float32 scales. Random ternary weights are valid for their format: uniform
over the 32 3:4 patterns of a group of 4 for Sherry, uniform over {-1, 0, +1} for I2 and TL2. In the
ternary formats the embedding table and the output head stay in bf16, as bitnet.cpp keeps them in
higher precision (float16 there); sizes are reported with and without them.

The decode step
---------------
Per block: RMSNorm, q/k/v projections, RoPE (rotate-half, LLaMA), attention over the cached keys
and values (float32, GQA), o projection, residual, RMSNorm, gate/up projections, SiLU(gate) * up,
down projection, residual; then the final RMSNorm and the output head over the vocabulary; the next
token is the argmax (greedy). The 7 projections of every block go through the format's GEMV; all
the rest is the same numpy float32 code for every format, so the comparison isolates the weight
format. That is :meth:`Model.forward` (prefill, and decoding before :meth:`Model.fuse`). After
:meth:`Model.fuse` (bf16 and the packed formats, :data:`FUSED`), :meth:`Model.next_token` runs the
same step as :func:`acl26.kernels.decode.step`: the blocks in one Numba call (q|k|v and gate|up
stacked, one lookup table per input vector, no allocation), the head and its argmax in a second;
the speed table decodes that way. Weights are generated block by block (one float32 matrix at a time
is the largest transient); a (shape, format) whose model would not fit comfortably is skipped with
the reason recorded (:func:`skip_reason`).

Units: MB = 2**20 bytes (MiB), which is what the paper's sizes fit (see ``bitnet-0.7b`` above).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from acl26 import checks
from acl26.kernels import decode as kd
from acl26.kernels import ternary as tn

MB = 2 ** 20  # the paper's "MB" (see the module docstring)
PACKED = ("i2", "tl2", "sherry")
#: formats with a fused decode step (:mod:`acl26.kernels.decode`); fp32 runs through PyTorch only
FUSED = ("bf16",) + PACKED
#: the KV cache's element types (:meth:`Model.new_cache`): the fused step's
KV_DTYPES = kd.KV_DTYPES

FORMATS: dict[str, str] = {
    "fp32": "PyTorch float32 linear layers; float32 embeddings and head",
    "bf16": "PyTorch bfloat16 linear layers (weights and activations bf16); bf16 embeddings and head",
    "i2": "packed ternary, 2 bits/weight (I2_S-like), lookup-table GEMV, float32 activations, per-row scales",
    "tl2": "packed ternary, 1.67 bits/weight (TL2-like, 3 weights in 5 bits), lookup-table GEMV, per-row scales",
    "sherry": "packed 3:4 ternary, 1.25 bits/weight (Sherry), lookup-table GEMV, per-row scales",
}
#: our formats' names in tables: our 2-bit and 1.67-bit formats are lookup-table kernels of the same
#: design as Sherry's, not bitnet.cpp's I2_S (a direct decode-and-multiply kernel) and TL2
LABELS = {"fp32": "FP32", "bf16": "BF16", "i2": "I2 (ours, lookup table)", "tl2": "TL2 (ours, lookup table)",
          "sherry": "Sherry"}

# --------------------------------------------------------------------------------------------
# shapes


@dataclass(frozen=True)
class Shape:
    """A LLaMA-architecture decoder's shape (the sizes that matter for speed and memory)."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool = True  # the output head is the embedding table
    rope_theta: float = 500000.0
    paper_row: str | None = None  # the row of the paper's speed table this shape stands for
    source: str = ""

    def __post_init__(self):
        for name in ("hidden", "intermediate", "layers", "heads", "kv_heads", "vocab"):
            checks.integer(name, getattr(self, name), 1)
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"hidden / heads (the head dimension, {self.head_dim}) must be even for RoPE")
        if self.hidden % 4 or self.intermediate % 4:
            raise ValueError(f"hidden and intermediate must be multiples of 4 (Sherry packs groups of 4 inputs), "
                             f"got {self.hidden} and {self.intermediate}")
        checks.number("rope_theta", self.rope_theta, 0.0, lo_open=True)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def linears(self) -> list[tuple[str, tuple[int, int]]]:
        """The 7 projections of one block as ``(name, (n_out, n_in))``."""
        h, i, hd = self.hidden, self.intermediate, self.head_dim
        return [("q", (self.heads * hd, h)), ("k", (self.kv_heads * hd, h)), ("v", (self.kv_heads * hd, h)),
                ("o", (h, self.heads * hd)), ("gate", (i, h)), ("up", (i, h)), ("down", (h, i))]

    @property
    def linear_params(self) -> int:
        return self.layers * sum(a * b for _, (a, b) in self.linears())

    @property
    def embedding_params(self) -> int:
        """Embedding table plus output head (one table when tied)."""
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def norm_params(self) -> int:
        return self.hidden * (2 * self.layers + 1)

    @property
    def params(self) -> int:
        return self.linear_params + self.embedding_params + self.norm_params


SHAPES: dict[str, Shape] = {s.name: s for s in [
    Shape("bitnet-0.7b", 1536, 4096, 24, 16, 16, 32002, rope_theta=10000.0, paper_row="0.7B",
          source="BitNet b1.58-large (1bitLLM/bitnet_b1_58-large), bitnet.cpp's 0.7B model"),
    Shape("llama-3.2-1b", 2048, 8192, 16, 32, 8, 128256, source="meta-llama/Llama-3.2-1B"),
    Shape("llama-3.2-3b", 3072, 8192, 28, 24, 8, 128256, source="meta-llama/Llama-3.2-3B"),
    Shape("bitnet-3b", 3200, 8640, 26, 32, 32, 32002, rope_theta=10000.0, paper_row="3B",
          source="BitNet b1.58-3B (1bitLLM/bitnet_b1_58-3B), bitnet.cpp's 3B model"),
    Shape("tiny", 256, 704, 4, 4, 2, 2048, source="a small shape for quick runs and tests"),
]}
ALIASES = {"llama-0.7b": "bitnet-0.7b"}


def get_shape(shape: str | Shape, argument: str = "shapes") -> Shape:
    """A :class:`Shape` from itself or a name in :data:`SHAPES` (or :data:`ALIASES`)."""
    if isinstance(shape, Shape):
        return shape
    if isinstance(shape, str) and ALIASES.get(shape, shape) in SHAPES:
        return SHAPES[ALIASES.get(shape, shape)]
    raise ValueError(f"{argument}: unknown shape {shape!r}; known: {sorted(SHAPES) + sorted(ALIASES)}")


# --------------------------------------------------------------------------------------------
# sizes and the skip rule


def model_bytes(shape: str | Shape, fmt: str) -> dict[str, int]:
    """Bytes of a ``fmt`` model of ``shape``, predicted from the formats' layouts without building it.

    ``linear`` (the 7 projections of every block; packed streams plus per-row float32 scales for
    the ternary formats, of which ``streams`` are the streams alone), ``embedding`` (embedding
    table and head, float32 for fp32 and bf16 otherwise), ``norms`` (float32) and ``total``.
    """
    s = get_shape(shape, "shape")
    check_format(fmt, "fmt")
    streams = linear = 0
    for _, (n_out, n_in) in s.linears():
        if fmt in PACKED:
            lay = tn.layout(fmt, (n_out, n_in))
            st = lay.blocks * (lay.code_bytes + lay.sign_bytes)
            streams += st
            linear += st + 4 * n_out
        else:
            linear += n_out * n_in * (4 if fmt == "fp32" else 2)
    streams = streams * s.layers if fmt in PACKED else 0
    linear *= s.layers
    embedding = s.embedding_params * (4 if fmt == "fp32" else 2)
    norms = 4 * s.norm_params
    return {"linear": linear, "streams": streams, "embedding": embedding, "norms": norms,
            "total": linear + embedding + norms}


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where it cannot be read)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def skip_reason(shape: str | Shape, fmt: str, *, max_gb: float = 10.0, available: int | None = None,
                ram_share: float = 0.8) -> str | None:
    """Why a ``fmt`` model of ``shape`` is not built, or None when it fits.

    It is skipped when its bytes (:func:`model_bytes` total plus the largest float32 matrix, the
    transient of building it) exceed ``max_gb`` (10**9 bytes) or ``ram_share`` of the available
    memory (``available`` bytes; by default MemAvailable now).
    """
    s = get_shape(shape, "shape")
    check_format(fmt, "fmt")
    checks.number("max_gb", max_gb, 0.0, lo_open=True)
    checks.probability("ram_share", ram_share, lo_open=True)
    if available is not None:
        checks.integer("available", available, 0)
    need = model_bytes(s, fmt)["total"] + 4 * max(a * b for _, (a, b) in s.linears())
    if need > max_gb * 1e9:
        return f"needs {need / 1e9:.1f} GB (weights and embeddings), above the {max_gb:g} GB limit (max_gb)"
    avail = available_bytes() if available is None else available
    if avail is not None and need > ram_share * avail:
        return (f"needs {need / 1e9:.1f} GB, more than {ram_share:.0%} of the {avail / 1e9:.1f} GB of memory "
                f"available")
    return None


# --------------------------------------------------------------------------------------------
# layers


class TorchLinear:
    """``y = W x`` with a PyTorch weight; activations are cast to the weight's dtype, results are float32."""

    def __init__(self, weight: torch.Tensor):
        self.weight = weight

    def gemv(self, x: np.ndarray) -> np.ndarray:
        return self.gemm(x[None])[0]

    def gemm(self, X: np.ndarray) -> np.ndarray:
        xt = torch.from_numpy(X)
        if self.weight.dtype != torch.float32:
            xt = xt.to(self.weight.dtype)
        return F.linear(xt, self.weight).float().numpy()

    @property
    def nbytes(self) -> int:
        return self.weight.numel() * self.weight.element_size()

    @property
    def dense_shape(self) -> tuple[int, int]:
        return tuple(self.weight.shape)

    def dense(self) -> np.ndarray:
        return self.weight.float().numpy()


class PackedWeights:
    """A packed ternary weight ``T`` (in ``fmt``) and its per-row ``scale``, run as ``y = scale * (T x)``
    through :mod:`acl26.kernels.ternary`'s lookup-table GEMV / GEMM (numpy in and out).
    :class:`acl26.papers.sherry.qat.PackedLinear`, the torch module of QAT deployment, is one of these too."""

    def __init__(self, fmt: str, packed: tn.Packed, scale: np.ndarray):
        self.fmt, self.packed, self.scale = fmt, packed, scale

    def gemv(self, x: np.ndarray) -> np.ndarray:
        return tn.gemv(self.fmt, self.packed, self.scale, x)

    def gemm(self, X: np.ndarray) -> np.ndarray:
        return tn.gemm(self.fmt, self.packed, self.scale, X)

    @property
    def nbytes(self) -> int:
        return int(self.packed.nbytes + self.scale.nbytes)

    @property
    def dense_shape(self) -> tuple[int, int]:
        return self.packed.shape

    def dense(self) -> np.ndarray:
        """The dequantized float32 weight ``scale[:, None] * T``."""
        T = getattr(tn, f"unpack_{self.fmt}")(self.packed)
        return self.scale[:, None] * T.astype(np.float32)


class Embedding:
    """Token embedding table and output head (the same table when tied), in a PyTorch dtype."""

    def __init__(self, table: torch.Tensor, head: torch.Tensor | None = None):
        self.table = table
        self.head = table if head is None else head

    @property
    def tied(self) -> bool:
        return self.head is self.table

    def lookup(self, tokens: np.ndarray) -> np.ndarray:
        return self.table[torch.from_numpy(np.asarray(tokens, np.int64))].float().numpy()

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Head over the vocabulary for one float32 hidden state (cast to the head's dtype)."""
        xt = torch.from_numpy(x[None])
        if self.head.dtype != torch.float32:
            xt = xt.to(self.head.dtype)
        return F.linear(xt, self.head)[0].float().numpy()

    @property
    def nbytes(self) -> int:
        n = self.table.numel() * self.table.element_size()
        return n if self.tied else n + self.head.numel() * self.head.element_size()


@dataclass
class Block:
    attn_norm: np.ndarray
    mlp_norm: np.ndarray
    linears: dict  # name -> TorchLinear | PackedWeights, in Shape.linears() order


@dataclass
class KVCache:
    """Keys and values of every layer, ``(layers, kv_heads, capacity, head_dim)``, float32 or float16 (keys and
    values stored rounded to float16, read back exactly); ``length`` filled."""

    k: np.ndarray
    v: np.ndarray
    length: int = 0

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    def reset(self) -> None:
        self.length = 0


# --------------------------------------------------------------------------------------------
# the model


def _rmsnorm(x: np.ndarray, w: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    return x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps))) * w


def _silu(g: np.ndarray) -> np.ndarray:
    return g * (np.float32(0.5) + np.float32(0.5) * np.tanh(np.float32(0.5) * g))  # = g * sigmoid(g), no overflow


@dataclass
class Model:
    """A decoder of ``shape`` whose linear layers are in ``fmt``; see the module docstring for the step."""

    shape: Shape
    fmt: str
    blocks: list
    embedding: Embedding
    final_norm: np.ndarray
    head_seconds: float = field(default=0.0, repr=False)  # time in the output head, summed over calls
    #: RoPE frequencies (head_dim / 2,), e.g. a transformers model's (LLaMA-3 scaling included); None:
    #: ``1 / rope_theta ** (2i / head_dim)``
    inv_freq: np.ndarray | None = field(default=None, repr=False)
    rms_eps: float = 1e-5
    #: the stacked weights of the fused decode step once :meth:`fuse` has run (then
    #: :meth:`next_token` decodes through :func:`acl26.kernels.decode.step`)
    fused: kd.Weights | None = field(default=None, repr=False)
    _fused_state: kd.State | None = field(default=None, repr=False)

    # sizes -------------------------------------------------------------------------------
    @property
    def linear_bytes(self) -> int:
        return sum(lin.nbytes for b in self.blocks for lin in b.linears.values())

    @property
    def norm_bytes(self) -> int:
        return self.final_norm.nbytes + sum(b.attn_norm.nbytes + b.mlp_norm.nbytes for b in self.blocks)

    @property
    def total_bytes(self) -> int:
        return self.linear_bytes + self.embedding.nbytes + self.norm_bytes

    # running -----------------------------------------------------------------------------
    def new_cache(self, capacity: int, dtype: str = "float32") -> KVCache:
        """An empty cache for ``capacity`` positions; ``dtype``: one of :data:`KV_DTYPES` ("float16" halves the
        attention's reads, as llama.cpp's default cache does; numpy's prefill then reads it widened)."""
        capacity = checks.integer("capacity", capacity, 1)
        if dtype not in KV_DTYPES:
            raise ValueError(f"dtype must be one of {KV_DTYPES}, got {dtype!r}")
        s = self.shape
        dims = (s.layers, s.kv_heads, int(capacity), s.head_dim)
        return KVCache(np.zeros(dims, dtype), np.zeros(dims, dtype))

    def _rope(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ang = np.outer(positions.astype(np.float64), self.rope_inv_freq())
        return np.cos(ang).astype(np.float32)[:, None, :], np.sin(ang).astype(np.float32)[:, None, :]

    @staticmethod
    def _apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def forward(self, tokens: Sequence[int] | np.ndarray, cache: KVCache) -> tuple[np.ndarray, np.ndarray]:
        """Run ``tokens`` at positions ``cache.length ...`` and append them to the cache.

        One token goes through the formats' GEMV (decode), several through their GEMM (prefill,
        causal attention). Returns the final-normed hidden states ``(n, hidden)`` and the logits of
        the last token ``(vocab,)``.
        """
        toks = np.asarray(tokens, np.int64).reshape(-1)
        n = toks.shape[0]
        s = self.shape
        if n == 0:
            raise ValueError("tokens must not be empty")
        if toks.min() < 0 or toks.max() >= s.vocab:
            raise ValueError(f"tokens must lie in [0, {s.vocab}), got {toks.min()} .. {toks.max()}")
        if (not isinstance(cache, KVCache) or cache.k.shape[:2] != (s.layers, s.kv_heads)
                or cache.k.shape[3] != s.head_dim):
            raise ValueError("cache must be a KVCache from this model's new_cache()")
        p0 = cache.length
        if p0 + n > cache.capacity:
            raise ValueError(f"cache: {p0} + {n} tokens exceed its capacity {cache.capacity}")
        H, KV, hd = s.heads, s.kv_heads, s.head_dim
        g = H // KV
        cos, sin = self._rope(np.arange(p0, p0 + n))
        T = p0 + n
        mask = None
        if n > 1:  # query i (position p0 + i) sees keys 0 .. p0 + i
            mask = np.arange(T)[None, :] > (p0 + np.arange(n))[:, None]  # (n, T)
        inv_sqrt = np.float32(1.0 / math.sqrt(hd))
        x = self.embedding.lookup(toks)  # (n, hidden) float32
        mm = (lambda L, a: L.gemv(a[0])[None]) if n == 1 else (lambda L, a: L.gemm(a))
        for li, blk in enumerate(self.blocks):
            lin = blk.linears
            h = _rmsnorm(x, blk.attn_norm, self.rms_eps)
            q = self._apply_rope(mm(lin["q"], h).reshape(n, H, hd), cos, sin)
            k = self._apply_rope(mm(lin["k"], h).reshape(n, KV, hd), cos, sin)
            v = mm(lin["v"], h).reshape(n, KV, hd)
            cache.k[li, :, p0:T] = k.transpose(1, 0, 2)
            cache.v[li, :, p0:T] = v.transpose(1, 0, 2)
            K, V = cache.k[li, :, :T], cache.v[li, :, :T]  # (KV, T, hd)
            qg = q.reshape(n, KV, g, hd).transpose(1, 0, 2, 3).reshape(KV, n * g, hd)
            sc = np.matmul(qg, K.transpose(0, 2, 1)) * inv_sqrt  # (KV, n*g, T)
            if mask is not None:
                sc = np.where(mask[None, :, None, :], np.float32(-np.inf), sc.reshape(KV, n, g, T))
                sc = sc.reshape(KV, n * g, T)
            sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
            sc /= sc.sum(axis=-1, keepdims=True)
            att = np.matmul(sc, V).reshape(KV, n, g, hd).transpose(1, 0, 2, 3).reshape(n, H * hd)
            x = x + mm(lin["o"], att)
            h = _rmsnorm(x, blk.mlp_norm, self.rms_eps)
            x = x + mm(lin["down"], _silu(mm(lin["gate"], h)) * mm(lin["up"], h))
        cache.length = T
        hidden = _rmsnorm(x, self.final_norm, self.rms_eps)
        t0 = time.perf_counter()
        logits = self.embedding.logits(np.ascontiguousarray(hidden[-1]))
        self.head_seconds += time.perf_counter() - t0
        return hidden, logits

    def decode_step(self, token: int, cache: KVCache) -> tuple[np.ndarray, np.ndarray]:
        """One decode step: ``(hidden (hidden,), logits (vocab,))`` of ``token`` at position ``cache.length``."""
        hidden, logits = self.forward([token], cache)
        return hidden[0], logits

    def rope_inv_freq(self) -> np.ndarray:
        """The RoPE frequencies (head_dim / 2,) float64."""
        hd = self.shape.head_dim
        return (1.0 / self.shape.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd) if self.inv_freq is None
                else np.asarray(self.inv_freq, np.float64))

    def fuse(self, head: str = "bf16", act8: bool = False) -> "Model":
        """Stack the weights for the fused decode step (:func:`fused_weights`); :meth:`next_token` then
        runs a token through :func:`acl26.kernels.decode.step`. The blocks' layers are rebound to views of
        the stacked arrays where the rows allow (whole blocks of 16 rows for a packed format; always for
        bf16), so the model is not held twice and :meth:`forward` (prefill) reads the same bytes.
        ``head``: "bf16" (the table as it is) or "q8_0" (an 8-bit copy of it in ggml's Q8_0 layout,
        :func:`acl26.kernels.decode.q8_head`, read by the fused step instead; prefill keeps the bf16 head).
        ``act8`` (packed formats): the fused step multiplies 8-bit activations
        (:func:`acl26.kernels.decode.with_act8`; a second copy of the streams, in its layout), while prefill
        keeps float32 activations. Returns the model."""
        self.fused = fused_weights(self, rebind=True, head=head, act8=act8)
        self._fused_state = None
        return self

    def next_token(self, token: int, cache: KVCache) -> int:
        """Decode ``token`` at position ``cache.length`` and return the greedy next token: through the
        fused step after :meth:`fuse` (its logits in :attr:`fused_logits`), else through
        :meth:`decode_step` and ``np.argmax``."""
        if self.fused is None:
            return int(np.argmax(self.decode_step(token, cache)[1]))
        if not isinstance(cache, KVCache):
            raise ValueError("cache must be a KVCache from this model's new_cache()")
        st = self._fused_state
        if st is None or st.k is not cache.k or st.v is not cache.v:
            st = self._fused_state = kd.new_state(self.fused, cache.k, cache.v)
        if cache.length >= cache.capacity:
            raise ValueError(f"cache: {cache.length} + 1 tokens exceed its capacity {cache.capacity}")
        head0 = st.head_seconds
        nxt = kd.step(self.fused, st, token, cache.length)
        self.head_seconds += st.head_seconds - head0
        cache.length += 1
        return nxt

    @property
    def fused_logits(self) -> np.ndarray | None:
        """The logits of the last fused :meth:`next_token` (a buffer it overwrites), or None."""
        return None if self._fused_state is None else self._fused_state.logits

    def dequantized(self) -> "Model":
        """The same model with every linear layer as a float32 PyTorch weight (``scale * T`` for ternary).

        Embedding, head and norms are the same objects, so any difference in a forward pass comes
        from the linear layers' arithmetic alone.
        """
        blocks = [Block(b.attn_norm, b.mlp_norm, {k: TorchLinear(torch.from_numpy(np.ascontiguousarray(
            lin.dense(), np.float32))) for k, lin in b.linears.items()}) for b in self.blocks]
        return Model(self.shape, "fp32", blocks, self.embedding, self.final_norm, inv_freq=self.inv_freq,
                     rms_eps=self.rms_eps)


# --------------------------------------------------------------------------------------------
# the fused decode step's weights

#: the fused step's four matrices per block, each the rows of these projections stacked
FUSED_MATRICES = (("q", "k", "v"), ("o",), ("gate", "up"), ("down",))


def _stack_packed(fmt: str, lins: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(codes, signs, scale per row)`` of the row-wise concatenation of packed layers."""
    for lin in lins:
        if np.ndim(lin.scale) > 1:
            raise ValueError("model: per-group scales cannot be fused (one scale per row or per tensor)")
    scale = np.concatenate([np.broadcast_to(np.asarray(lin.scale, np.float32), (lin.packed.shape[0],))
                            for lin in lins])
    if all(lin.packed.shape[0] % tn.BLOCK_ROWS == 0 for lin in lins[:-1]):  # whole blocks: the streams concatenate
        return (np.concatenate([lin.packed.codes for lin in lins]), np.concatenate([lin.packed.signs for lin in lins]),
                scale)
    p = getattr(tn, f"pack_{fmt}")(np.concatenate([getattr(tn, f"unpack_{fmt}")(lin.packed) for lin in lins]))
    return p.codes, p.signs, scale


#: heads of the fused step: the model's bf16 table, or an 8-bit copy (ggml's Q8_0 layout)
HEADS = ("bf16", "q8_0")


def fused_weights(model: Model, *, rebind: bool = False, head: str = "bf16", act8: bool = False) -> kd.Weights:
    """The weights of ``model`` stacked for :func:`acl26.kernels.decode.step`: per block q|k|v, o,
    gate|up and down (:data:`FUSED_MATRICES`) as single matrices, every block in the model's format
    (one of :data:`FUSED`; bf16 tables). ValueError, naming what does not fit, otherwise.

    ``rebind`` (:meth:`Model.fuse`): each block's layers are pointed at row slices of the stacked arrays
    as soon as that block is copied (for a packed format where the parts start on whole blocks of 16
    rows; always for bf16), so the old arrays are freed block by block and the model is never held twice.
    ``act8``: the weights for 8-bit activations (:func:`acl26.kernels.decode.with_act8`; packed formats)."""
    fmt, s = model.fmt, model.shape
    if not isinstance(act8, bool) or (act8 and fmt not in PACKED):
        raise ValueError(f"act8 must be True or False, and True only for a packed format {PACKED}; got {act8!r} "
                         f"for {fmt!r}")
    if fmt not in FUSED:
        raise ValueError(f"model: the fused step runs {FUSED}, not {fmt!r}")
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}, got {head!r}")
    for t in (model.embedding.table, model.embedding.head):
        if t.dtype != torch.bfloat16:
            raise ValueError(f"model: the fused step needs bf16 embedding and head tables, got {t.dtype}")
    L = len(model.blocks)
    for blk in model.blocks:
        for lin in blk.linears.values():
            if fmt == "bf16" and not (isinstance(lin, TorchLinear) and lin.weight.dtype == torch.bfloat16):
                raise ValueError(f"model: every projection must be a bf16 weight to be fused, got "
                                 f"{getattr(lin, 'fmt', None) or getattr(getattr(lin, 'weight', None), 'dtype', '')}")
            if fmt != "bf16" and not (isinstance(lin, PackedWeights) and lin.fmt == fmt):
                raise ValueError(f"model: every projection must be packed in {fmt} to be fused, got "
                                 f"{getattr(lin, 'fmt', None) or type(lin).__name__}")
    shapes = dict(s.linears())
    rows = [sum(shapes[n][0] for n in names) for names in FUSED_MATRICES]
    cols = [shapes[names[0]][1] for names in FUSED_MATRICES]
    if fmt == "bf16":
        dense = tuple(np.empty((L, r, c), np.uint16) for r, c in zip(rows, cols))
        codes = signs = (np.zeros((L, 0, 0), np.uint8),) * 4
        scales = (np.zeros((L, 0), np.float32),) * 4
    else:
        lays = [tn.layout(fmt, (r, c)) for r, c in zip(rows, cols)]
        dense = (np.zeros((L, 0, 0), np.uint16),) * 4
        codes = tuple(np.empty((L, lay.blocks, lay.code_bytes), np.uint8) for lay in lays)
        signs = tuple(np.empty((L, lay.blocks, lay.sign_bytes), np.uint8) for lay in lays)
        scales = tuple(np.empty((L, r), np.float32) for r in rows)
    for li, blk in enumerate(model.blocks):
        for k, names in enumerate(FUSED_MATRICES):
            lins = [blk.linears[n] for n in names]
            if fmt == "bf16":
                dense[k][li] = kd.bf16_bits(torch.cat([x.weight for x in lins]))
            else:
                codes[k][li], signs[k][li], scales[k][li] = _stack_packed(fmt, lins)
            if rebind:
                _rebind(blk, fmt, names, k, li, dense, codes, signs, scales)
    embed = kd.bf16_bits(model.embedding.table)
    head_bits = embed if model.embedding.tied else kd.bf16_bits(model.embedding.head)
    norms = np.ascontiguousarray(np.stack([np.stack([b.attn_norm, b.mlp_norm]) for b in model.blocks]), np.float32)
    q8 = kd.q8_head(model.embedding.head) if head == "q8_0" else (None, None)
    w = kd.Weights(fmt, s.heads, s.kv_heads, s.head_dim, s.intermediate, float(model.rms_eps), embed, head_bits,
                   norms, np.ascontiguousarray(model.final_norm, np.float32), model.rope_inv_freq(), dense, codes,
                   signs, scales, *q8)
    return kd.with_act8(w) if act8 else kd.check_weights(w)


def _rebind(blk: Block, fmt: str, names, k: int, li: int, dense, codes, signs, scales) -> None:
    """Point ``blk``'s layers ``names`` at their rows of the stacked matrix ``k`` of block ``li``."""
    starts = np.concatenate([[0], np.cumsum([blk.linears[n].dense_shape[0] for n in names])])
    if fmt == "bf16":
        for n, r0, r1 in zip(names, starts[:-1], starts[1:]):
            blk.linears[n] = TorchLinear(torch.from_numpy(dense[k][li][r0:r1].view(np.int16)).view(torch.bfloat16))
    elif all(r0 % tn.BLOCK_ROWS == 0 for r0 in starts[:-1]):
        for n, r0, r1 in zip(names, starts[:-1], starts[1:]):
            b0, b1 = r0 // tn.BLOCK_ROWS, -(-r1 // tn.BLOCK_ROWS)
            packed = tn.Packed(fmt, blk.linears[n].packed.shape, codes[k][li][b0:b1], signs[k][li][b0:b1])
            blk.linears[n] = PackedWeights(fmt, packed, scales[k][li][r0:r1])


# --------------------------------------------------------------------------------------------
# random models


def check_format(fmt: str, argument: str) -> None:
    if not isinstance(fmt, str) or fmt not in FORMATS:  # a list (unhashable) is refused, not a TypeError
        raise ValueError(f"{argument}: unknown format {fmt!r}; known: {list(FORMATS)}")


def _code_table(fmt: str) -> np.ndarray:
    """uint32 table: each entry is 4 int8 weights of one group of 4 inputs the format may hold."""
    if fmt == "sherry":  # all 32 3:4 patterns: 16 canonical (first nonzero +1) and their negatives
        pat = tn.FORMATS["sherry"].patterns
        groups = np.concatenate([pat, -pat]).astype(np.int8)
    else:  # any 4 ternary weights: 81 groups
        grid = np.stack(np.meshgrid(*[np.arange(-1, 2)] * 4, indexing="ij"), -1).reshape(-1, 4)
        groups = grid.astype(np.int8)
    return np.ascontiguousarray(groups).view(np.uint32).ravel()


def random_ternary(fmt: str, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """A random int8 ternary matrix the packed format ``fmt`` can hold.

    Sherry: every group of 4 inputs is one of the 32 3:4 patterns, uniformly. I2 / TL2: every
    weight uniform over {-1, 0, +1}.
    """
    if fmt not in PACKED:
        raise ValueError(f"fmt must be one of {PACKED}, got {fmt!r}")
    n_out, n_in = (checks.integer(f"shape[{i}]", v, 0) for i, v in enumerate(shape))
    if n_in % 4:
        if fmt == "sherry":
            raise ValueError(f"shape: sherry needs the input dimension to be a multiple of 4, got {n_in}")
        return rng.integers(-1, 2, (n_out, n_in), dtype=np.int8)
    table = _code_table(fmt)
    codes = rng.integers(0, table.shape[0], (n_out, n_in // 4), dtype=np.uint8)
    return table[codes].view(np.int8).reshape(n_out, n_in)


def _torch_uniform(shape: tuple[int, int], bound: float, dtype: torch.dtype, gen: torch.Generator,
                   chunk_rows: int = 8192) -> torch.Tensor:
    """Uniform(-bound, bound) in ``dtype``, drawn in float32 a slab of rows at a time."""
    out = torch.empty(shape, dtype=dtype)
    for r0 in range(0, shape[0], chunk_rows):
        slab = torch.empty((min(chunk_rows, shape[0] - r0), shape[1]), dtype=torch.float32)
        slab.uniform_(-bound, bound, generator=gen)
        out[r0:r0 + slab.shape[0]] = slab
    return out


def random_embedding(shape: str | Shape, fmt: str, *, seed: int = 0) -> Embedding:
    """The embedding table (and head) of a ``fmt`` model: float32 for fp32, bf16 for the others."""
    s = get_shape(shape, "shape")
    check_format(fmt, "fmt")
    seed = checks.seed("seed", seed)
    dtype = torch.float32 if fmt == "fp32" else torch.bfloat16
    gen = torch.Generator().manual_seed(seed * 1000 + 7)
    bound = math.sqrt(3.0)  # unit variance
    table = _torch_uniform((s.vocab, s.hidden), bound, dtype, gen)
    head = None if s.tied else _torch_uniform((s.vocab, s.hidden), bound / math.sqrt(s.hidden), dtype, gen)
    return Embedding(table, head)


def build_model(shape: str | Shape, fmt: str, *, seed: int = 0, embedding: Embedding | None = None,
                progress: bool = False) -> Model:
    """A ``fmt`` model of ``shape`` with random weights, generated block by block.

    Float weights are Uniform(+-sqrt(3 / n_in)) (unit-variance outputs); ternary weights come from
    :func:`random_ternary` with per-row scales ``Uniform(0.5, 1.5) / sqrt(density * n_in)``.
    ``embedding`` (bf16 for all formats but fp32) may be passed to share one table between models.
    """
    from tqdm import tqdm

    s = get_shape(shape, "shape")
    check_format(fmt, "fmt")
    seed = checks.seed("seed", seed)
    if embedding is None:
        embedding = random_embedding(s, fmt, seed=seed)
    want = torch.float32 if fmt == "fp32" else torch.bfloat16
    if embedding.table.dtype != want or tuple(embedding.table.shape) != (s.vocab, s.hidden):
        raise ValueError(f"embedding must be a {want} ({s.vocab}, {s.hidden}) table for {fmt}, got "
                         f"{embedding.table.dtype} {tuple(embedding.table.shape)}")
    if embedding.tied != s.tied:
        raise ValueError(f"embedding: tied={embedding.tied} does not match the shape's tied={s.tied}")
    rng = np.random.default_rng([seed, 1])
    gen = torch.Generator().manual_seed(seed * 1000 + 11)
    density = 0.75 if fmt == "sherry" else 2.0 / 3.0
    blocks = []
    for _ in tqdm(range(s.layers), desc=f"build {s.name} {fmt}", disable=not progress, leave=False):
        lins = {}
        for name, (n_out, n_in) in s.linears():
            if fmt in PACKED:
                T = random_ternary(fmt, (n_out, n_in), rng)
                scale = (rng.uniform(0.5, 1.5, n_out) / math.sqrt(density * n_in)).astype(np.float32)
                lins[name] = PackedWeights(fmt, getattr(tn, f"pack_{fmt}")(T), scale)
                del T
            else:
                lins[name] = TorchLinear(_torch_uniform((n_out, n_in), math.sqrt(3.0 / n_in), want, gen))
        norms = rng.uniform(0.8, 1.2, (2, s.hidden)).astype(np.float32)
        blocks.append(Block(norms[0].copy(), norms[1].copy(), lins))
    final = rng.uniform(0.8, 1.2, s.hidden).astype(np.float32)
    return Model(s, fmt, blocks, embedding, final)
