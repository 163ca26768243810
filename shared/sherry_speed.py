"""Sherry (ACL 2026, arXiv 2601.07892): decode speed and model size at real model shapes.

The paper's speed table (Intel i7-14700HX, bitnet.cpp-style kernels) gives tokens/s and model MB for
a 0.7B and a 3B model in BF16, I2_S (2-bit), TL2 (1.67-bit) and Sherry (1.25-bit). Timing needs no
trained weights, so this module builds transformer decoders of real shapes with RANDOM weights,
stores every linear layer in one format, and times greedy decoding (one token at a time, with a KV
cache) and a batched prefill. :func:`speed_table` returns one row per (shape, format);
:func:`paper_table` holds the paper's rows as data and :func:`compare` puts the two side by side as
same-machine ratios (Sherry vs I2, vs TL2, vs BF16), the only figures that carry across machines.

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
format. Weights are generated block by block (one float32 matrix at a time is the largest
transient); a (shape, format) whose model would not fit comfortably is skipped with the reason
recorded (:func:`skip_reason`).

Units: MB = 2**20 bytes (MiB), which is what the paper's sizes fit (see ``bitnet-0.7b`` above).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numba
import numpy as np
import torch
import torch.nn.functional as F

from acl26.kernels import ternary as tn

MB = 2 ** 20  # the paper's "MB" (see the module docstring)
PACKED = ("i2", "tl2", "sherry")

FORMATS: dict[str, str] = {
    "fp32": "PyTorch float32 linear layers; float32 embeddings and head",
    "bf16": "PyTorch bfloat16 linear layers (weights and activations bf16); bf16 embeddings and head",
    "i2": "packed ternary, 2 bits/weight (I2_S-like), lookup-table GEMV, float32 activations, per-row scales",
    "tl2": "packed ternary, 1.67 bits/weight (TL2-like, 3 weights in 5 bits), lookup-table GEMV, per-row scales",
    "sherry": "packed 3:4 ternary, 1.25 bits/weight (Sherry), lookup-table GEMV, per-row scales",
}
LABELS = {"fp32": "FP32", "bf16": "BF16", "i2": "I2_S", "tl2": "TL2", "sherry": "Sherry"}

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
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"hidden / heads (the head dimension, {self.head_dim}) must be even for RoPE")
        if self.hidden % 4 or self.intermediate % 4:
            raise ValueError(f"hidden and intermediate must be multiples of 4 (Sherry packs groups of 4 inputs), "
                             f"got {self.hidden} and {self.intermediate}")
        if not self.rope_theta > 0:
            raise ValueError(f"rope_theta must be positive, got {self.rope_theta!r}")

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
    _check_format(fmt, "fmt")
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
    _check_format(fmt, "fmt")
    if not (isinstance(max_gb, (int, float)) and max_gb > 0):
        raise ValueError(f"max_gb must be a positive number, got {max_gb!r}")
    if not 0 < ram_share <= 1:
        raise ValueError(f"ram_share must be in (0, 1], got {ram_share!r}")
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

    def dense(self) -> np.ndarray:
        return self.weight.float().numpy()


class PackedLinear:
    """``y = scale * (T x)`` through :mod:`acl26.kernels.ternary`'s lookup-table GEMV / GEMM."""

    def __init__(self, fmt: str, packed: tn.Packed, scale: np.ndarray):
        self.fmt, self.packed, self.scale = fmt, packed, scale
        self._gemv = getattr(tn, f"gemv_{fmt}")
        self._gemm = getattr(tn, f"gemm_{fmt}")

    def gemv(self, x: np.ndarray) -> np.ndarray:
        return self._gemv(self.packed, self.scale, x)

    def gemm(self, X: np.ndarray) -> np.ndarray:
        return self._gemm(self.packed, self.scale, X)

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.scale.nbytes

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
    linears: dict  # name -> TorchLinear | PackedLinear, in Shape.linears() order


@dataclass
class KVCache:
    """Keys and values of every layer, ``(layers, kv_heads, capacity, head_dim)`` float32; ``length`` filled."""

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
    def new_cache(self, capacity: int) -> KVCache:
        if not (isinstance(capacity, (int, np.integer)) and capacity > 0):
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        s = self.shape
        dims = (s.layers, s.kv_heads, int(capacity), s.head_dim)
        return KVCache(np.zeros(dims, np.float32), np.zeros(dims, np.float32))

    def _rope(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        hd = self.shape.head_dim
        inv = 1.0 / self.shape.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
        ang = np.outer(positions.astype(np.float64), inv)
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
            h = _rmsnorm(x, blk.attn_norm)
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
            h = _rmsnorm(x, blk.mlp_norm)
            x = x + mm(lin["down"], _silu(mm(lin["gate"], h)) * mm(lin["up"], h))
        cache.length = T
        hidden = _rmsnorm(x, self.final_norm)
        t0 = time.perf_counter()
        logits = self.embedding.logits(np.ascontiguousarray(hidden[-1]))
        self.head_seconds += time.perf_counter() - t0
        return hidden, logits

    def decode_step(self, token: int, cache: KVCache) -> tuple[np.ndarray, np.ndarray]:
        """One decode step: ``(hidden (hidden,), logits (vocab,))`` of ``token`` at position ``cache.length``."""
        hidden, logits = self.forward([token], cache)
        return hidden[0], logits

    def dequantized(self) -> "Model":
        """The same model with every linear layer as a float32 PyTorch weight (``scale * T`` for ternary).

        Embedding, head and norms are the same objects, so any difference in a forward pass comes
        from the linear layers' arithmetic alone.
        """
        blocks = [Block(b.attn_norm, b.mlp_norm, {k: TorchLinear(torch.from_numpy(np.ascontiguousarray(
            lin.dense(), np.float32))) for k, lin in b.linears.items()}) for b in self.blocks]
        return Model(self.shape, "fp32", blocks, self.embedding, self.final_norm)


# --------------------------------------------------------------------------------------------
# random models


def _check_format(fmt: str, argument: str) -> None:
    if fmt not in FORMATS:
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
    n_out, n_in = shape
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
    _check_format(fmt, "fmt")
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
    _check_format(fmt, "fmt")
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
                lins[name] = PackedLinear(fmt, getattr(tn, f"pack_{fmt}")(T), scale)
                del T
            else:
                lins[name] = TorchLinear(_torch_uniform((n_out, n_in), math.sqrt(3.0 / n_in), want, gen))
        norms = rng.uniform(0.8, 1.2, (2, s.hidden)).astype(np.float32)
        blocks.append(Block(norms[0].copy(), norms[1].copy(), lins))
    final = rng.uniform(0.8, 1.2, s.hidden).astype(np.float32)
    return Model(s, fmt, blocks, embedding, final)


# --------------------------------------------------------------------------------------------
# timing


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Numba and PyTorch on ``n`` threads (numba at most its pool size) for the duration."""
    old_numba, old_torch = numba.get_num_threads(), torch.get_num_threads()
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    torch.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old_numba)
        torch.set_num_threads(old_torch)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _run_once(model: Model, cache: KVCache, context: int, tokens: int, prefill: bool,
              rng: np.random.Generator) -> tuple[float | None, float, float]:
    """One repeat: fill the cache with ``context`` tokens (prefill, timed, or random keys/values),
    then decode ``tokens`` tokens greedily. Returns (prefill seconds or None, decode seconds, head seconds)."""
    cache.reset()
    prompt = rng.integers(0, model.shape.vocab, context)
    t_prefill = None
    if prefill:
        t0 = time.perf_counter()
        _, logits = model.forward(prompt, cache)
        t_prefill = time.perf_counter() - t0
        token = int(np.argmax(logits))
    else:
        cache.k[:, :, :context] = rng.standard_normal(cache.k[:, :, :context].shape, dtype=np.float32)
        cache.v[:, :, :context] = rng.standard_normal(cache.v[:, :, :context].shape, dtype=np.float32)
        cache.length = context
        token = int(prompt[-1])
    model.head_seconds = 0.0
    t0 = time.perf_counter()
    for _ in range(tokens):
        _, logits = model.decode_step(token, cache)
        token = int(np.argmax(logits))
    return t_prefill, time.perf_counter() - t0, model.head_seconds


def _check_int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(value)


def _size_fields(s: Shape, fmt: str) -> dict:
    b = model_bytes(s, fmt)
    return dict(weight_mb=b["linear"] / MB, embed_mb=b["embedding"] / MB, total_mb=b["total"] / MB,
                bits_per_weight=8 * b["linear"] / s.linear_params,
                stream_bits_per_weight=(8 * b["streams"] / s.linear_params) if fmt in PACKED else None,
                linear_params=s.linear_params, total_params=s.params)


def speed_table(shapes: Sequence[str | Shape], formats: Sequence[str] = tuple(FORMATS), *, tokens: int = 16,
                repeats: int = 3, context: int = 64, prefill: bool = True, n_threads: int = 2,
                max_gb: float = 10.0, interleave: bool = True, seed: int = 0,
                progress: bool = True) -> list[dict]:
    """Decode (and prefill) speed and size of every (shape, format); one row each.

    For each shape the formats that fit (:func:`skip_reason`) are built -- the ternary formats and
    bf16 share one bf16 embedding table -- and warmed up; then ``repeats`` rounds run, each timing
    every format in turn (``interleave``; so ratios compare runs under the same machine load) or
    each format alone and freed before the next (when ``interleave`` is False, or when all of a
    shape's models would not fit in memory together). A round fills the KV cache with a
    ``context``-token prompt through the GEMM path (timed: prefill tok/s; or, with ``prefill``
    False, with random keys and values) and then decodes ``tokens`` tokens greedily (timed: decode
    tok/s). Numba and PyTorch run on ``n_threads`` threads.

    Row keys: ``shape``, ``paper_row``, ``format``, ``label``, ``status`` ("ok" / "skipped"),
    ``reason`` (why skipped); medians over the rounds: ``decode_tok_s``, ``decode_ms`` (per token),
    ``head_ms`` (per token in the output head), ``blocks_ms`` (per token in everything else),
    ``prefill_tok_s`` (None without prefill), with every round's figures in ``decode_runs`` /
    ``prefill_runs``; sizes from :func:`model_bytes` (MB = 2**20 bytes): ``weight_mb`` (linear
    layers, with the ternary formats' row scales), ``embed_mb``, ``total_mb``, ``bits_per_weight``
    (linear layers, scales included), ``stream_bits_per_weight`` (packed streams alone; None for
    fp32 / bf16), ``linear_params``, ``total_params``; and ``tokens``, ``context``, ``repeats``,
    ``threads``, ``interleaved``, ``build_s`` (building and warming up).
    """
    from tqdm import tqdm

    if isinstance(shapes, (str, Shape)) or not isinstance(shapes, Sequence) or not shapes:
        raise ValueError(f"shapes must be a non-empty list of shape names or Shapes, got {shapes!r}")
    shape_objs = [get_shape(s, "shapes") for s in shapes]
    if len({s.name for s in shape_objs}) != len(shape_objs):
        raise ValueError(f"shapes must not repeat a shape (aliases count as the shape), got {list(shapes)}")
    if isinstance(formats, str) or not isinstance(formats, Sequence) or not formats:
        raise ValueError(f"formats must be a non-empty list of format names, got {formats!r}")
    for f in formats:
        _check_format(f, "formats")
    if len(set(formats)) != len(formats):
        raise ValueError(f"formats must not repeat a format, got {list(formats)}")
    tokens = _check_int("tokens", tokens, 1)
    repeats = _check_int("repeats", repeats, 1)
    context = _check_int("context", context, 1)
    n_threads = _check_int("n_threads", n_threads, 1)
    _check_int("seed", seed, 0)
    if not (isinstance(max_gb, (int, float)) and not isinstance(max_gb, bool) and max_gb > 0):
        raise ValueError(f"max_gb must be a positive number, got {max_gb!r}")

    rows = []
    jobs = [(s, f) for s in shape_objs for f in formats]
    bar = tqdm(total=len(jobs) * (repeats + 1), desc="speed table", disable=not progress)
    with threads(n_threads):
        for s in shape_objs:
            reasons = {f: skip_reason(s, f, max_gb=max_gb) for f in formats}
            todo = [f for f in formats if reasons[f] is None]
            bf16_emb = [f for f in todo if f != "fp32"]
            together = (sum(model_bytes(s, f)["total"] - (model_bytes(s, f)["embedding"] if f != "fp32" else 0)
                            for f in todo) + (model_bytes(s, "bf16")["embedding"] if bf16_emb else 0))
            avail = available_bytes()
            inter = interleave and (avail is None or together <= 0.8 * avail)
            results = {f: dict(prefill=[], decode=[], head=[], blocks=[], build_s=None) for f in todo}
            shared: dict[str, Embedding] = {}

            def build(f):
                if f != "fp32" and "bf16" not in shared:
                    shared["bf16"] = random_embedding(s, "bf16", seed=seed)
                t0 = time.perf_counter()
                m = build_model(s, f, seed=seed, embedding=shared.get("bf16") if f != "fp32" else None,
                                progress=progress)
                cache = m.new_cache(context + tokens)
                _run_once(m, cache, min(context, 4), min(tokens, 2), prefill, np.random.default_rng(seed))  # warm
                results[f]["build_s"] = time.perf_counter() - t0
                bar.update(1)
                return m, cache

            def time_round(f, m, cache, r):
                rng = np.random.default_rng([seed, r])
                tp, td, th = _run_once(m, cache, context, tokens, prefill, rng)
                if tp is not None:
                    results[f]["prefill"].append(context / tp)
                results[f]["decode"].append(tokens / td)
                results[f]["head"].append(th / tokens)
                results[f]["blocks"].append((td - th) / tokens)
                bar.update(1)

            if inter:
                built = {f: build(f) for f in todo}
                for r in range(repeats):
                    for f in todo:
                        time_round(f, *built[f], r)
                del built
            else:
                for f in todo:
                    m, cache = build(f)
                    for r in range(repeats):
                        time_round(f, m, cache, r)
                    del m, cache
            shared.clear()
            for f in formats:
                row = dict(shape=s.name, paper_row=s.paper_row, format=f, label=LABELS[f],
                           status="ok" if reasons[f] is None else "skipped", reason=reasons[f] or "",
                           tokens=tokens, context=context, repeats=repeats, threads=n_threads,
                           interleaved=inter if reasons[f] is None else None, **_size_fields(s, f))
                if reasons[f] is None:
                    res = results[f]
                    dec = _median(res["decode"])
                    row.update(decode_tok_s=dec, decode_ms=1e3 / dec, head_ms=1e3 * _median(res["head"]),
                               blocks_ms=1e3 * _median(res["blocks"]),
                               prefill_tok_s=_median(res["prefill"]) if res["prefill"] else None,
                               decode_runs=res["decode"], prefill_runs=res["prefill"], build_s=res["build_s"])
                else:
                    bar.update(repeats + 1)
                    row.update(decode_tok_s=None, decode_ms=None, head_ms=None, blocks_ms=None,
                               prefill_tok_s=None, decode_runs=[], prefill_runs=[], build_s=None)
                rows.append(row)
    bar.close()
    return rows


# --------------------------------------------------------------------------------------------
# the paper's table and the comparison


PAPER_MACHINE = "Intel i7-14700HX"
_PAPER = [("0.7B", "bf16", 34.01, 1360.0), ("0.7B", "i2", 132.13, 256.56), ("0.7B", "tl2", 116.83, 233.44),
          ("0.7B", "sherry", 148.27, 205.50), ("3B", "bf16", 7.55, 6190.0), ("3B", "i2", 41.87, 873.65),
          ("3B", "tl2", 38.80, 846.01), ("3B", "sherry", 45.55, 712.40)]
NOMINAL_BITS = {"fp32": 32.0, "bf16": 16.0, "i2": 2.0, "tl2": 5 / 3, "sherry": 1.25}


def _ratio(x, y):
    """x / y, or None when either is missing (a skipped format) or y is 0."""
    return x / y if x is not None and y not in (None, 0) else None


def _paper_speed_ratio(model: str, a: str, b: str) -> float:
    """The paper's decode-speed ratio of format ``a`` over ``b`` for its ``model`` row."""
    tok = {(m, f): t for m, f, t, _ in _PAPER}
    return tok[(model, a)] / tok[(model, b)]


def paper_table() -> list[dict]:
    """The paper's speed and size table (tokens/s and MB on an i7-14700HX), one row per (model, format)."""
    return [dict(model=m, format=f, label=LABELS[f], tok_s=t, mb=mb, nominal_bits=NOMINAL_BITS[f],
                 machine=PAPER_MACHINE) for m, f, t, mb in _PAPER]


COMPARISONS = (("sherry", "i2"), ("sherry", "tl2"), ("sherry", "bf16"))


def compare(rows: list[dict], paper: list[dict] | None = None) -> list[dict]:
    """Same-machine ratios, ours beside the paper's, for every shape in ``rows`` and each of Sherry
    vs I2 / TL2 / BF16: decode speed (Sherry's tok/s over the other's; also prefill, and the
    blocks alone without the output head) and size (Sherry's MB over the other's: whole model,
    and linear layers alone). The paper's ratios are those of the row the shape stands for
    (``paper_row``); shapes that stand for none (the LLaMA shapes) get None there."""
    paper = paper_table() if paper is None else paper
    pap = {(r["model"], r["format"]): r for r in paper}
    by = {(r["shape"], r["format"]): r for r in rows}
    out = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        prow = next(r["paper_row"] for r in rows if r["shape"] == shape)
        for a, b in COMPARISONS:
            ra, rb = by.get((shape, a)), by.get((shape, b))
            pa, pb = pap.get((prow, a)), pap.get((prow, b))

            ok = ra is not None and rb is not None
            out.append(dict(
                shape=shape, paper_row=prow, comparison=f"{LABELS[a]} vs {LABELS[b]}",
                paper_speed_ratio=_ratio(pa["tok_s"], pb["tok_s"]) if pa and pb else None,
                ours_speed_ratio=_ratio(ra["decode_tok_s"], rb["decode_tok_s"]) if ok else None,
                ours_prefill_ratio=_ratio(ra["prefill_tok_s"], rb["prefill_tok_s"]) if ok else None,
                ours_blocks_speed_ratio=_ratio(rb["blocks_ms"], ra["blocks_ms"]) if ok else None,
                paper_size_ratio=_ratio(pa["mb"], pb["mb"]) if pa and pb else None,
                ours_size_ratio=_ratio(ra["total_mb"], rb["total_mb"]) if ok else None,
                ours_weight_size_ratio=_ratio(ra["weight_mb"], rb["weight_mb"]) if ok else None))
    return out


def side_by_side(rows: list[dict], paper: list[dict] | None = None) -> list[dict]:
    """Paper | ours per (paper model, format), for the shapes that stand for a paper row:
    tok/s and MB, and the speedup over BF16 on each machine."""
    paper = paper_table() if paper is None else paper
    by = {(r["shape"], r["format"]): r for r in rows}
    out = []
    for p in paper:
        for shape in dict.fromkeys(r["shape"] for r in rows if r["paper_row"] == p["model"]):
            ours = by.get((shape, p["format"]))
            if ours is None:
                continue
            pb = next((q for q in paper if q["model"] == p["model"] and q["format"] == "bf16"), None)
            ob = by.get((shape, "bf16"))
            out.append(dict(model=p["model"], shape=shape, format=p["format"], label=p["label"],
                            paper_tok_s=p["tok_s"], ours_tok_s=ours["decode_tok_s"], paper_mb=p["mb"],
                            ours_mb=ours["total_mb"], ours_weight_mb=ours["weight_mb"],
                            paper_vs_bf16=p["tok_s"] / pb["tok_s"] if pb else None,
                            ours_vs_bf16=(ours["decode_tok_s"] / ob["decode_tok_s"]
                                          if ob and ours["decode_tok_s"] and ob["decode_tok_s"] else None),
                            status=ours["status"], reason=ours["reason"]))
    return out


# --------------------------------------------------------------------------------------------
# llama.cpp's ternary types, through the gguf package


def gguf_ternary_bits(shape: tuple[int, int] = (4096, 4096), *, seed: int = 0) -> list[dict]:
    """Exact storage of a ``shape`` ternary matrix in llama.cpp's TQ1_0 / TQ2_0, STQ1_0 and our formats.

    One row per format: ``bits_per_weight`` counts everything stored (scales included),
    ``stream_bits_per_weight`` the weight codes alone, ``scales`` says what the scales are.
    TQ1_0 and TQ2_0 are quantized with the ``gguf`` package's reference quantizers
    (``gguf.quants.quantize``) when it has them -- bits from the bytes it returns, and
    ``roundtrip_exact`` says whether dequantizing gives the ternary matrix back -- else computed
    from ``gguf.constants.GGML_QUANT_SIZES`` (weights and bytes per block; ``source`` says which).
    STQ1_0 (the paper's llama.cpp block, sherry.md: 32 index bytes + 8 sign bytes + an fp16 scale
    per 256 weights) is computed. Ours: :func:`acl26.kernels.ternary.bits_per_weight` with
    float32 row scales.
    """
    import gguf
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    n_out, n_in = (int(v) for v in shape)
    if n_out <= 0 or n_in <= 0 or n_in % 256:
        raise ValueError(f"shape must be positive with n_in a multiple of 256 (the TQ block), got {shape}")
    rng = np.random.default_rng(seed)
    T = rng.integers(-1, 2, (n_out, n_in), dtype=np.int8).astype(np.float32)
    n = n_out * n_in
    rows = []
    quants = getattr(gguf, "quants", None)
    for name in ("TQ1_0", "TQ2_0"):
        qtype = getattr(GGMLQuantizationType, name, None)
        if qtype is None or qtype not in GGML_QUANT_SIZES:
            continue
        block, block_bytes = GGML_QUANT_SIZES[qtype]
        row = dict(format=name, bits_per_weight=8 * block_bytes / block,
                   stream_bits_per_weight=8 * (block_bytes - 2) / block, scales=f"fp16 per {block} weights",
                   bytes=n // block * block_bytes, block_weights=block, block_bytes=block_bytes,
                   source="gguf.constants.GGML_QUANT_SIZES (no reference quantizer in this gguf)",
                   roundtrip_exact=None)
        if quants is not None and hasattr(quants, name):
            q = quants.quantize(T, qtype)
            row.update(source="gguf.quants.quantize (the reference quantizer)", bytes=int(q.nbytes),
                       bits_per_weight=8 * q.nbytes / n,
                       roundtrip_exact=bool(np.array_equal(quants.dequantize(q, qtype).reshape(T.shape), T)))
        rows.append(row)
    rows.append(dict(format="STQ1_0", bits_per_weight=42 * 8 / 256, stream_bits_per_weight=40 * 8 / 256,
                     scales="fp16 per 256 weights", bytes=n // 256 * 42, block_weights=256, block_bytes=42,
                     source="sherry.md (llama.cpp PR #22836): qs[32] + sign[8] + fp16 scale", roundtrip_exact=None))
    for fmt in ("sherry", "tl2", "i2"):
        b = tn.bits_per_weight(fmt, (n_out, n_in), "row")
        rows.append(dict(format=f"ours: {LABELS[fmt]}", bits_per_weight=b["total"],
                         stream_bits_per_weight=b["streams"], scales="fp32 per row", bytes=b["bits"]["total"] // 8,
                         block_weights=None, block_bytes=None, source="acl26.kernels.ternary.bits_per_weight",
                         roundtrip_exact=None))
    return rows


# --------------------------------------------------------------------------------------------
# benchmarks (acl26 bench sherry)


def benchmarks(quick: bool = False) -> dict:
    """Decode speed of every format at the LLaMA-3.2-1B shape (``quick``: the tiny shape), with goals.

    Same JSON shape as :func:`acl26.ternary_bench.benchmarks`: rows (medians; ratio = tok/s over
    BF16's) and goals (target, measured, met; time goals are not judged in a quick run). A format
    that had to be skipped (memory) is reported as such, and goals that need it are not judged.
    """
    shape = "tiny" if quick else "llama-3.2-1b"
    tokens, repeats, context = (16, 5, 16) if quick else (16, 3, 64)
    table = speed_table([shape], list(FORMATS), tokens=tokens, repeats=repeats, context=context, progress=False)
    t = {r["format"]: r for r in table}

    rows = []
    for key, what in (("decode_tok_s", "decode"), ("prefill_tok_s", f"prefill, {context} tokens")):
        for f, r in t.items():
            row = dict(benchmark=f"{what} {LABELS[f]}", shape=shape,
                       median_s=(1 / r[key] if key == "decode_tok_s" else context / r[key]) if r[key] else None,
                       ratio=_ratio(r[key], t["bf16"][key]), tok_s=r[key])
            if key == "decode_tok_s":
                row.update(head_ms=r["head_ms"], total_mb=r["total_mb"], weight_mb=r["weight_mb"])
            if r["status"] != "ok":
                row["note"] = f"skipped: {r['reason']}"
            rows.append(row)
    sh, i2, tl2, bf = (t[f]["decode_tok_s"] for f in ("sherry", "i2", "tl2", "bf16"))

    def judged(ok, *needed):
        return None if quick or any(v is None for v in needed) else bool(ok())

    def show(x):
        return "skipped" if x is None else f"{x:.2f}"

    sb, ib = model_bytes(shape, "sherry"), model_bytes(shape, "i2")
    goals = [
        dict(goal="Sherry decodes faster than TL2 (1.67-bit)", target="tok/s(Sherry) > tok/s(TL2)",
             measured=f"{show(sh)} vs {show(tl2)} tok/s ({show(_ratio(sh, tl2))}×; paper 0.7B "
                      f"{_paper_speed_ratio('0.7B', 'sherry', 'tl2'):.2f}×)", met=judged(lambda: sh > tl2, sh, tl2)),
        dict(goal="Sherry decodes at least as fast as I2 (2-bit)", target="tok/s(Sherry) ≥ tok/s(I2)",
             measured=f"{show(sh)} vs {show(i2)} tok/s ({show(_ratio(sh, i2))}×; paper 0.7B "
                      f"{_paper_speed_ratio('0.7B', 'sherry', 'i2'):.2f}×)", met=judged(lambda: sh >= i2, sh, i2)),
        dict(goal="Sherry weight bytes = 62.5% of I2's", target="62.5% (packed streams)",
             measured=f"{sb['streams'] / ib['streams']:.2%} of the streams; {sb['linear'] / ib['linear']:.2%} "
                      f"with per-row scales; {sb['total'] / ib['total']:.2%} of the whole model (bf16 "
                      f"embeddings and head)", met=abs(sb["streams"] / ib["streams"] - 0.625) < 1e-9),
        dict(goal="Sherry decode speedup over BF16", target=f"reported (paper 0.7B: {_paper_speed_ratio('0.7B', 'sherry', 'bf16'):.2f}×)",
             measured=f"{show(_ratio(sh, bf))}×", met=None),
    ]
    return {"title": "Sherry: decode speed at model shapes", "shape": shape, "rows": rows, "goals": goals,
            "note": (f"Greedy decoding of {tokens} tokens after a {context}-token prefill through random-weight "
                     f"models of the {shape} shape; medians of {repeats} rounds, each running every format in "
                     "turn. Numba and PyTorch on 2 threads. Ratio = tok/s over BF16's. The ternary formats keep "
                     "the embeddings and the output head in bf16."
                     + (" Quick run: the tiny shape, so the time goals are not judged." if quick else ""))}
