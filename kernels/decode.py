"""Sherry's fused decode step: a token in two Numba calls (the blocks, then the head) for a LLaMA-architecture decoder.

:mod:`acl26.papers.sherry.decoder` runs a token as a Python loop over blocks with numpy temporaries,
one kernel call per projection. Here :func:`step` runs the embedding lookup and every block in one
call -- per block RMSNorm, the q|k|v projection (one matrix), RoPE from precomputed tables, the new
key and value written to the cache, attention over the cache, the o projection and the residual,
RMSNorm, the gate|up projection (one matrix), SiLU(gate) * up, the down projection and the residual,
then the final RMSNorm -- and the output head over the vocabulary, fused with the argmax of the next
token, in a second call (so that its time is measured apart: ``State.head_seconds``). No array is
allocated per token: every buffer lives in a :class:`State`.

Weights (:class:`Weights`) are stacked over the blocks, four matrices per block in the order
``qkv``, ``o``, ``gate|up``, ``down``, in one format:

* a packed ternary format of :mod:`acl26.kernels.ternary` (``sherry``, ``tl2``, ``i2``): the streams
  of every block, ``(layers, blocks, bytes)``, and one float32 scale per row. Each input vector gets
  one lookup table (the 16 signed sums of each group of inputs), shared by every row that reads it
  (q, k and v read one; gate and up read one), and the rows are multiplied by the same lookup-table
  intrinsic as :func:`acl26.kernels.ternary.gemv`, :data:`TILE_BLOCKS` blocks of 16 rows per task
  (independent accumulators, and more memory streams in flight than the GEMV's two);
* ``bf16``: the bits of bfloat16 matrices ``(layers, rows, cols)`` as uint16.

A bf16 matrix or head multiplies its float32 input in one of two ways, fixed by the CPU
(:data:`~acl26.kernels.ternary.intrinsics.BF16_INPUTS`): with AVX512-BF16, the input is rounded to bf16
once and ``vdpbf16ps`` takes 32 weight pairs per instruction (as a bf16 matrix product in PyTorch
rounds its input); elsewhere each weight is widened to float32 exactly (``bits << 16``) and multiplied
by the float32 input with 16-lane FMAs. Sums are float32 either way.

With :attr:`Weights.act8` (:func:`with_act8`) a packed format multiplies 8-bit activations instead:
each projection's input is quantized to int8 with one absmax scale (BitNet b1.58's activations, and
what llama.cpp's TQ1_0/TQ2_0 multiply), and the rows sum byte-table lookups exactly in int32, 64 per
``vpermi2b`` (:mod:`acl26.kernels.ternary.act8`, whose layout of the same streams the weights then
hold). That kernel needs about half the vector instructions per weight of the float32 one, whose
ports, not memory, bound it. The numerics differ from the float32 path by the activations' rounding.

SiLU uses a polynomial ``exp`` (:func:`_expf`, within 2 ulp; Cephes' expf) so that its loop vectorizes.

The head is the bf16 table, or an 8-bit copy in ggml's Q8_0 layout (:func:`q8_head`: int8 weights,
a float16 scale per block of 32, 8.5 bits per weight) multiplied by the hidden state quantized to
int16 (one scale per token; exact int32 sums per block with ``vpmaddwd`` where the CPU has
AVX-512 BW). The embedding lookup reads the bf16 table. Activations, norms and all other sums are
float32. The KV cache is float32 or float16 (the caller's choice, by the arrays it gives :func:`new_state`;
llama.cpp's default is float16): a float16 cache stores each new key and value rounded to float16 (to nearest,
ties to even) and attention widens them back exactly, so its reads halve.

Parallel regions (numba ``prange``, on numba's thread count): per block one for q|k|v, one for
attention (over heads), one for o, one for gate|up and one for down; one for the head. That is
``5 * layers + 1`` per token (:func:`regions_per_token`); everything between them (norms, RoPE, SiLU,
the lookup tables, residual adds) runs on the calling thread.

Summation order differs from the numpy decoder's (sequential float32 sums here, numpy's pairwise
sums and BLAS there), so logits agree to float32 rounding, not bit for bit; the twin
``tests/naive/decode.py`` and its tests state the tolerances.

This module holds the step and its jitted loops; the SIMD intrinsics they call (the bf16 and Q8 row
dot products, attention's 16-lane loops, the bit casts) are :mod:`acl26.kernels.ternary.intrinsics`',
shared with the ternary kernels.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np
from numba import prange

from acl26 import checks
from acl26.kernels import ternary as tn
from acl26.kernels._jit import njit
from acl26.kernels.ternary import act8 as a8
from acl26.kernels.ternary.formats import PATTERNS_T
from acl26.kernels.ternary.intrinsics import (BF16_INPUTS, Q8_BLOCK, ROUND, dot64_bf16, dot_q8_blocks, f32_bits,
                                              f32_of_bf16, f32_of_bits, f32_of_f16, kv_get, kv_put, vaxpy,
                                              vdot)
from acl26.kernels.ternary.simd import lut_fill, lut_tile

#: public functions of this module that are not kernels (no jitted core of their own)
NOT_KERNELS = ("new_state", "regions_per_token", "bf16_bits", "q8_head", "check_weights",
               "profile_parts", "with_act8")  # numpy or timing only

FORMATS = ("bf16",) + tuple(tn.FORMATS)  # bf16 and the packed ternary formats
MATRICES = ("qkv", "o", "gate_up", "down")
#: the KV cache's element types (:func:`new_state`)
KV_DTYPES = ("float32", "float16")
#: the parts :func:`profile_parts` times
PARTS = ("projections", "attention", "head")
#: blocks of 16 rows per task of a packed GEMV (measured at the 0.7B shape, 2 threads: projections read
#: 10.9 / 13.5 / 14.8 / 14.5 GB/s with 2 / 4 / 8 / 16)
TILE_BLOCKS = 8
HEAD_CHUNKS = 256  # vocabulary rows per task of the head


class Weights(NamedTuple):
    """A decoder's weights for :func:`step` (see the module docstring).

    ``dense[k]`` is ``(layers, rows, cols)`` uint16 (bf16 bits) for ``fmt == "bf16"`` and
    ``(layers, 0, 0)`` otherwise; ``codes[k]`` / ``signs[k]`` are ``(layers, blocks, bytes)`` uint8
    streams of :mod:`acl26.kernels.ternary` and ``scales[k]`` ``(layers, rows)`` float32 for a packed
    ``fmt`` (``(layers, 0, 0)`` / ``(layers, 0)`` for bf16); ``k`` runs over :data:`MATRICES`.
    """

    fmt: str
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    embed: np.ndarray  # (vocab, hidden) uint16, bf16 bits
    head: np.ndarray  # (vocab, hidden) uint16, bf16 bits (the same array when tied)
    norms: np.ndarray  # (layers, 2, hidden) float32: attention norm, MLP norm
    final_norm: np.ndarray  # (hidden,) float32
    inv_freq: np.ndarray  # (head_dim / 2,) float64
    dense: tuple
    codes: tuple
    signs: tuple
    scales: tuple
    #: the 8-bit head (:func:`q8_head`) read instead of ``head`` when given: int8 (vocab, hidden) and the
    #: float16 bits (uint16) of one scale per block of :data:`Q8_BLOCK` inputs, (vocab, ceil(hidden / 32))
    head_q8: np.ndarray | None = None
    head_q8_scale: np.ndarray | None = None
    #: 8-bit activations (:mod:`acl26.kernels.ternary.act8`; packed formats only): each projection's input is
    #: quantized to int8 (one absmax scale per vector) and ``codes[k]`` holds the act8 streams of every
    #: block, ``(layers, tiles, bytes)``, with ``signs[k]`` empty ``(layers, 0, 0)`` (:func:`with_act8`)
    act8: bool = False

    @property
    def head_bytes(self) -> int:
        """Bytes the head reads per token."""
        return self.head.nbytes if self.head_q8 is None else self.head_q8.nbytes + self.head_q8_scale.nbytes

    @property
    def layers(self) -> int:
        return self.norms.shape[0]

    @property
    def hidden(self) -> int:
        return self.norms.shape[2]

    @property
    def vocab(self) -> int:
        return self.head.shape[0]

    def rows(self) -> tuple[int, ...]:
        """Rows of the four matrices."""
        H, KV, hd, inter = self.heads, self.kv_heads, self.head_dim, self.intermediate
        return ((H + 2 * KV) * hd, self.hidden, 2 * inter, self.hidden)

    def cols(self) -> tuple[int, ...]:
        return (self.hidden, self.heads * self.head_dim, self.hidden, self.intermediate)

    @property
    def nbytes(self) -> int:
        n = self.embed.nbytes + self.norms.nbytes + self.final_norm.nbytes
        n += 0 if self.head is self.embed else self.head.nbytes
        n += 0 if self.head_q8 is None else self.head_q8.nbytes + self.head_q8_scale.nbytes
        return n + sum(a.nbytes for a in (*self.dense, *self.codes, *self.signs, *self.scales))


def bf16_bits(a) -> np.ndarray:
    """uint16 bfloat16 bits of a torch bfloat16 tensor (a view, no copy) or of a float32 array (rounded
    to nearest even)."""
    import torch

    if isinstance(a, torch.Tensor):
        if a.dtype != torch.bfloat16:
            raise ValueError(f"bf16_bits: want a bfloat16 tensor, got {a.dtype}")
        return a.contiguous().view(torch.int16).numpy().view(np.uint16)
    a = np.ascontiguousarray(a, np.float32)
    return torch.from_numpy(a).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def q8_head(table) -> tuple[np.ndarray, np.ndarray]:
    """An 8-bit head in ggml's Q8_0 layout: per row, each block of :data:`Q8_BLOCK` inputs (the last may be
    shorter) gets the scale ``d = max|w| / 127`` rounded to float16 and ``q = round(w / d)`` (half away
    from zero, as ggml), int8 in [-127, 127]; ``d = 0`` for an all-zero block. ``table``: a bfloat16
    torch tensor or a float array, (vocab, hidden). Returns ``(q int8, float16 bits of d as uint16)``:
    8.5 bits per weight, as Q8_0."""
    import torch

    w = table.float().numpy() if isinstance(table, torch.Tensor) else np.asarray(table, np.float32)
    if w.ndim != 2 or w.size == 0 or not np.isfinite(w).all():
        raise ValueError(f"q8_head: want a finite non-empty (vocab, hidden) table, got shape {w.shape}")
    V, H = w.shape
    nb = -(-H // Q8_BLOCK)
    pad = np.zeros((V, nb * Q8_BLOCK), np.float32)
    pad[:, :H] = w
    blocks = pad.reshape(V, nb, Q8_BLOCK)
    d = (np.abs(blocks).max(axis=2) / 127.0).astype(np.float16)
    inv = np.where(d > 0, 1.0 / np.maximum(d.astype(np.float32), np.finfo(np.float32).tiny), 0.0)
    x = blocks * inv[..., None]
    q = np.clip(np.sign(x) * np.floor(np.abs(x) + 0.5), -127, 127).astype(np.int8)
    return np.ascontiguousarray(q.reshape(V, -1)[:, :H]), d.view(np.uint16)


def with_act8(w: Weights) -> Weights:
    """``w`` (a packed format) with 8-bit activations: its streams re-laid for
    :mod:`acl26.kernels.ternary.act8` (copies; ``w`` is unchanged). The numerics change: each projection's
    input is quantized to int8 first (see :attr:`Weights.act8`)."""
    check_weights(w)
    if w.fmt not in tn.FORMATS or w.act8:
        raise ValueError(f"with_act8: want packed weights with float32 activations, got {w.fmt} (act8={w.act8})")
    codes = tuple(np.stack([a8.relayout(w.fmt, w.codes[k][layer], w.signs[k][layer], tn.layout(w.fmt, (r, c)).groups)
                            for layer in range(w.layers)])
                  for k, (r, c) in enumerate(zip(w.rows(), w.cols())))
    return w._replace(codes=codes, signs=tuple(np.zeros((w.layers, 0, 0), np.uint8) for _ in MATRICES), act8=True)


def check_weights(w: Weights) -> Weights:
    """``w`` if every array has the shape and dtype :func:`step` needs, else ValueError naming it."""
    if not isinstance(w, Weights):
        raise ValueError(f"weights must be a decode.Weights, got {type(w).__name__}")
    if w.fmt not in FORMATS:
        raise ValueError(f"weights.fmt must be one of {FORMATS}, got {w.fmt!r}")
    if not isinstance(w.act8, bool) or (w.act8 and w.fmt == "bf16"):
        raise ValueError(f"weights.act8 must be True or False, and False for bf16; got {w.act8!r} for {w.fmt}")
    for name in ("heads", "kv_heads", "head_dim", "intermediate"):
        checks.integer(f"weights.{name}", getattr(w, name), 1)
    if w.heads % w.kv_heads or w.head_dim % 2:
        raise ValueError(f"weights: heads ({w.heads}) must be a multiple of kv_heads ({w.kv_heads}) and head_dim "
                         f"({w.head_dim}) even")
    checks.number("weights.eps", w.eps, 0.0)

    def need(name, a, dtype, shape):
        if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.shape == shape and a.flags.c_contiguous):
            raise ValueError(f"weights.{name} must be C-contiguous {np.dtype(dtype).name} {shape}, got "
                             f"{getattr(a, 'dtype', type(a).__name__)} {getattr(a, 'shape', '')}")

    if not (isinstance(w.norms, np.ndarray) and w.norms.ndim == 3 and w.norms.shape[1] == 2):
        raise ValueError(f"weights.norms must be (layers, 2, hidden), got {getattr(w.norms, 'shape', w.norms)}")
    L, hidden = w.layers, w.hidden
    if hidden != w.heads * w.head_dim:
        raise ValueError(f"weights: hidden ({hidden}) must equal heads x head_dim ({w.heads} x {w.head_dim})")
    need("norms", w.norms, np.float32, (L, 2, hidden))
    need("final_norm", w.final_norm, np.float32, (hidden,))
    need("inv_freq", w.inv_freq, np.float64, (w.head_dim // 2,))
    need("head", w.head, np.uint16, (w.head.shape[0] if isinstance(w.head, np.ndarray) else 1, hidden))
    need("embed", w.embed, np.uint16, (w.vocab, hidden))
    if (w.head_q8 is None) != (w.head_q8_scale is None):
        raise ValueError("weights.head_q8 and weights.head_q8_scale come together (both or neither)")
    if w.head_q8 is not None:
        need("head_q8", w.head_q8, np.int8, (w.vocab, hidden))
        need("head_q8_scale", w.head_q8_scale, np.uint16, (w.vocab, -(-hidden // Q8_BLOCK)))
    for name in ("dense", "codes", "signs", "scales"):
        if not (isinstance(getattr(w, name), tuple) and len(getattr(w, name)) == 4):
            raise ValueError(f"weights.{name} must be a tuple of 4 arrays ({', '.join(MATRICES)})")
    for k, (m, rows, cols) in enumerate(zip(MATRICES, w.rows(), w.cols())):
        if w.fmt == "bf16":
            need(f"dense[{k}] ({m})", w.dense[k], np.uint16, (L, rows, cols))
            need(f"codes[{k}] ({m})", w.codes[k], np.uint8, (L, 0, 0))
            need(f"signs[{k}] ({m})", w.signs[k], np.uint8, (L, 0, 0))
            need(f"scales[{k}] ({m})", w.scales[k], np.float32, (L, 0))
        else:
            lay = tn.layout(w.fmt, (rows, cols))
            need(f"dense[{k}] ({m})", w.dense[k], np.uint16, (L, 0, 0))
            if w.act8:
                width = a8.quads(w.fmt, cols) * a8.TILE * a8.stride(w.fmt)
                need(f"codes[{k}] ({m})", w.codes[k], np.uint8, (L, -(-lay.blocks // a8.TILE), width))
                need(f"signs[{k}] ({m})", w.signs[k], np.uint8, (L, 0, 0))
            else:
                need(f"codes[{k}] ({m})", w.codes[k], np.uint8, (L, lay.blocks, lay.code_bytes))
                need(f"signs[{k}] ({m})", w.signs[k], np.uint8, (L, lay.blocks, lay.sign_bytes))
            need(f"scales[{k}] ({m})", w.scales[k], np.float32, (L, rows))
            if not np.isfinite(w.scales[k]).all():
                raise ValueError(f"weights.scales[{k}] ({m}) must be finite")
    return w


def _state_key(w: Weights) -> tuple:
    """What a :class:`State`'s buffer sizes depend on."""
    return (w.fmt, w.act8, w.layers, w.hidden, w.heads, w.kv_heads, w.head_dim, w.intermediate, w.vocab)


def _check_state(w: Weights, state) -> None:
    """ValueError unless ``state`` came from :func:`new_state` for weights of ``w``'s format, activations and
    shape (its buffers are sized for those; the kernels do not check bounds)."""
    if not isinstance(state, State):
        raise ValueError(f"state must come from new_state(), got {type(state).__name__}")
    if state.made_for != _state_key(w):
        raise ValueError(f"state was made for other weights ({state.made_for[0]}, act8={state.made_for[1]}, ...); make "
                         f"one for these with new_state(w, k, v)")


class State:
    """The buffers of :func:`step` for one :class:`Weights` and one KV cache (``k``, ``v``: float32 or float16
    ``(layers, kv_heads, capacity, head_dim)``, written at each step's position): activations, the
    lookup table, per-task outputs, attention scores, RoPE tables for positions ``0 .. capacity-1``
    and ``logits`` (float32 ``(vocab,)``, the last step's)."""

    def __init__(self, w: Weights, k: np.ndarray, v: np.ndarray):
        self.k, self.v = k, v
        # what the jitted code reads: float32 as it is, float16 as its bits (uint16; kv_get / kv_put convert)
        self.kc, self.vc = (a.view(np.uint16) if a.dtype == np.float16 else a for a in (k, v))
        self.made_for = _state_key(w)  # the buffers' sizes follow these (see _check_state)
        cap = k.shape[2]
        hidden, inter = w.hidden, w.intermediate
        rows = w.rows()
        ang = np.outer(np.arange(cap, dtype=np.float64), w.inv_freq)
        self.cos = np.cos(ang).astype(np.float32)
        self.sin = np.sin(ang).astype(np.float32)
        f32 = np.float32
        self.x, self.h, self.y = np.zeros(hidden, f32), np.zeros(hidden, f32), np.zeros(hidden, f32)
        self.qkv, self.att = np.zeros(rows[0], f32), np.zeros(w.heads * w.head_dim, f32)
        self.gu, self.act = np.zeros(2 * inter, f32), np.zeros(inter, f32)
        width = max(hidden, inter) + 8
        self.xpad = np.zeros(width, f32)
        self.lut = np.zeros((1, 16 * (width // 2 + 2)), f32)
        self.scratch = np.zeros((max(rows) // (16 * TILE_BLOCKS) + 2, 16 * TILE_BLOCKS), f32)
        self.scores = np.zeros((w.heads, cap), f32)
        self.logits = np.zeros(w.vocab, f32)
        chunks = -(-w.vocab // HEAD_CHUNKS)
        self.cmax, self.carg = np.zeros(chunks, f32), np.zeros(chunks, np.int64)
        self.pt = PATTERNS_T[w.fmt] if w.fmt in tn.FORMATS else np.zeros((2, 16), f32)
        self.xb = np.zeros(width, np.uint16)  # bf16 inputs (AVX512-BF16)
        self.xq = np.zeros(hidden, np.int16)  # the 8-bit head's int16 activations
        # 8-bit activations (Weights.act8): int8 inputs, byte tables, a tile's int32 sums, the code weights
        G = tn.FORMATS[w.fmt].group if w.fmt in tn.FORMATS else 1
        nq = max(a8.quads(w.fmt, c) for c in w.cols()) if w.act8 else 1
        self.xq8 = np.zeros(a8.QUAD * G * nq, np.int8)
        self.tab8 = np.zeros(256 * nq, np.uint8)
        self.acc8 = np.zeros(((max(rows) // 16 + a8.TILE) // a8.TILE if w.act8 else 1, 16 * a8.TILE), np.int32)
        self.dec16 = a8.DEC16[w.fmt] if w.act8 else np.zeros((1, 32), np.int16)
        self.a8buf = (self.xq8, self.tab8, self.acc8, self.dec16)
        self.head_seconds = 0.0  # time in the output head (and its argmax), summed over steps

    @property
    def capacity(self) -> int:
        return self.k.shape[2]


def new_state(w: Weights, k: np.ndarray, v: np.ndarray) -> State:
    """A :class:`State` for ``w`` decoding into the cache ``k``, ``v`` (ValueError if they do not fit): float32,
    or float16 (keys and values stored rounded to float16, see the module docstring), both of one dtype."""
    check_weights(w)
    want = (w.layers, w.kv_heads)
    for name, a in (("k", k), ("v", v)):
        if not (isinstance(a, np.ndarray) and a.dtype.name in KV_DTYPES and a.ndim == 4 and a.shape[:2] == want
                and a.shape[3] == w.head_dim and a.shape[2] >= 1 and a.flags.c_contiguous):
            raise ValueError(f"{name} must be a C-contiguous float32 or float16 cache (layers {w.layers}, kv_heads "
                             f"{w.kv_heads}, capacity, head_dim {w.head_dim}), got {getattr(a, 'dtype', '')} "
                             f"{getattr(a, 'shape', a)}")
    if k.shape != v.shape or k.dtype != v.dtype:
        raise ValueError(f"k and v must have one shape and dtype, got {k.dtype} {k.shape} and {v.dtype} {v.shape}")
    return State(w, k, v)


def regions_per_token(w: Weights) -> int:
    """Parallel regions one :func:`step` opens (see the module docstring)."""
    return 5 * w.layers + 1


def step(w: Weights, state: State, token: int, pos: int, *, simd: str | None = None) -> int:
    """Decode ``token`` at position ``pos``: write its keys and values into ``state``'s cache at ``pos``,
    attend over positions ``0 .. pos``, leave the logits in ``state.logits`` and return their argmax
    (the first on a tie, as ``np.argmax``). ``simd`` picks a lower SIMD path for the packed formats
    (see :func:`acl26.kernels.ternary.simd_level`)."""
    _check_state(w, state)
    token = checks.integer("token", token, 0)
    if token >= w.vocab:
        raise ValueError(f"token must lie in [0, {w.vocab}), got {token}")
    pos = checks.integer("pos", pos, 0)
    if pos >= state.capacity:
        raise ValueError(f"pos {pos} is past the cache's capacity {state.capacity}")
    level = tn.simd_level(simd)
    s = state
    _blocks(token, pos, w.embed, w.norms, w.final_norm, s.cos, s.sin, w.dense, w.codes, w.signs, w.scales, s.pt, level,
            w.fmt in ("sherry", "tl2"), w.heads, w.kv_heads, np.float32(w.eps), s.kc, s.vc, s.x, s.h, s.y, s.qkv, s.att,
            s.gu, s.act, s.xpad, s.xb, s.lut, s.scratch, w.act8, s.a8buf, s.scores)
    t0 = time.perf_counter()
    nxt = _head(w, s)
    s.head_seconds += time.perf_counter() - t0
    return nxt


def _head(w: Weights, s: State) -> int:
    if w.head_q8 is None:
        return int(_head_argmax(w.head, s.h, s.xb, s.logits, s.cmax, s.carg))
    return int(_head_argmax_q8(w.head_q8, w.head_q8_scale, s.h, s.xq, s.logits, s.cmax, s.carg))


def profile_parts(w: Weights, state: State, context: int, *, repeats: int = 5, simd: str | None = None,
                  parts=PARTS) -> dict:
    """Seconds per token of the step's parts, each timed alone over every block in turn (so the weights
    stream from memory as they do in a step): ``projections`` (the four matrices of every block, their
    lookup tables included), ``attention`` (every block over ``context`` cached positions; the cache's
    contents are whatever ``state`` holds) and ``head`` (the head and its argmax over ``state.h``).
    Medians of ``repeats`` after a warm-up; ``state``'s buffers are overwritten. ``parts``: which of :data:`PARTS`
    to time (all by default)."""
    check_weights(w)
    _check_state(w, state)
    context = checks.integer("context", context, 1)
    if context > state.capacity:
        raise ValueError(f"context {context} is past the cache's capacity {state.capacity}")
    repeats = checks.integer("repeats", repeats, 1)
    if isinstance(parts, str) or not parts or any(p not in PARTS for p in parts):
        raise ValueError(f"parts must be a non-empty list of {PARTS}, got {parts!r}")
    level, signed, s = tn.simd_level(simd), w.fmt in ("sherry", "tl2"), state

    def projections():
        _all_projections(w.dense, w.codes, w.signs, w.scales, s.pt, level, signed, s.xpad, s.xb, s.lut, s.scratch, w.act8,
                         s.a8buf, s.h, s.att, s.act, s.qkv, s.y, s.gu, w.layers)

    def attention():
        _all_attention(s.qkv, s.kc, s.vc, context, s.att, s.scores, w.heads // w.kv_heads,
                       np.float32(1.0 / math.sqrt(w.head_dim)))

    def head():
        _head(w, s)

    out = {}
    for name, f in (("projections", projections), ("attention", attention), ("head", head)):
        if name not in parts:
            continue
        f()
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            f()
            runs.append(time.perf_counter() - t0)
        out[name] = float(np.median(runs))
    return out


# --------------------------------------------------------------------------------------------
# the jitted step


_LOG2E, _LN2_HI, _LN2_LO = np.float32(1.44269504088896341), np.float32(0.693359375), np.float32(-2.12194440e-4)


@njit(cache=True, inline="always")
def _expf(v):
    """``exp(v)`` in float32 for ``v`` clamped to [-87, 88] (Cephes' expf: ``v = n ln2 + r``, a degree-7
    polynomial in ``r``, times ``2**n`` built in the exponent bits): within 2 ulp of ``exp``, and
    branch-free, so loops over it vectorize (numba's ``np.exp`` calls libm one value at a time)."""
    v = min(max(v, np.float32(-87.0)), np.float32(88.0))
    n = (v * _LOG2E + ROUND) - ROUND
    r = v - n * _LN2_HI - n * _LN2_LO
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    p = p * r * r + r + np.float32(1.0)
    return p * f32_of_bits((np.int32(n) + 127) << 23)


@njit(cache=True, error_model="numpy")  # no ZeroDivisionError branch: the loop vectorizes
def _silu_mul(gu, act):
    """``act = SiLU(gate) * up`` with ``gate | up = gu``: ``g / (1 + exp(-g)) * u`` (:func:`_expf`)."""
    inter = act.shape[0]
    for j in range(inter):
        g = gu[j]
        act[j] = g / (np.float32(1.0) + _expf(-g)) * gu[inter + j]


@njit(cache=True)
def _round_bf16(x, xb):
    """``xb`` = bf16 bits of ``x`` rounded to nearest even (only where :data:`BF16_INPUTS`; finite ``x``)."""
    if BF16_INPUTS:
        for j in range(x.shape[0]):
            u = f32_bits(x[j])
            xb[j] = np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


@njit(cache=True)
def _dot_bf16(W, r, x, xb):
    """``sum_j W[r, j] * x[j]`` (see :func:`dot64_bf16`; the last ``n % 64`` one by one, on the same inputs)."""
    n = x.shape[0]
    m = n - n % 64
    acc = dot64_bf16(W, r, x, xb, m)
    for j in range(m, n):
        acc += f32_of_bf16(W[r, j]) * (f32_of_bf16(xb[j]) if BF16_INPUTS else x[j])
    return acc


@njit(cache=True, parallel=True)
def _gemv_bf16(W, x, xb, y):
    _round_bf16(x, xb)
    rows = W.shape[0]
    for c in prange((rows + 15) // 16):
        for r in range(16 * c, min(rows, 16 * c + 16)):
            y[r] = _dot_bf16(W, r, x, xb)


@njit(cache=True)
def _packed_tile(t, codes, signs, scale, lut, y, out, level, signed):
    """Rows ``TILE_BLOCKS * 16 * t ..`` of ``y``: TILE_BLOCKS blocks in one pass over the lookup table, each
    with its own accumulators (independent add chains); a last partial tile block by block."""
    b0 = TILE_BLOCKS * t
    npairs = codes.shape[1] // 16
    if b0 + TILE_BLOCKS <= codes.shape[0]:
        lut_tile(codes, signs, lut, out, b0, 0, npairs, 0, level, signed, TILE_BLOCKS, 1)
    else:
        for b in range(b0, codes.shape[0]):
            lut_tile(codes, signs, lut, out[16 * (b - b0):], b, 0, npairs, 0, level, signed, 1, 1)
    r0 = 16 * b0
    for i in range(min(16 * TILE_BLOCKS, y.shape[0] - r0)):
        y[r0 + i] = out[i] * scale[r0 + i]


@njit(cache=True, parallel=True)
def _gemv_packed(codes, signs, scale, lut, y, scratch, level, signed):
    for t in prange((codes.shape[0] + TILE_BLOCKS - 1) // TILE_BLOCKS):
        _packed_tile(t, codes, signs, scale, lut, y, scratch[t], level, signed)


@njit(cache=True)
def _fill_lut(xin, xpad, PT, lut, groups):
    G = PT.shape[0]
    n = xin.shape[0]
    for j in range(n):
        xpad[j] = xin[j]
    for j in range(n, G * groups):
        xpad[j] = 0.0
    if G == 4:
        lut_fill(xpad, PT, lut[0], groups, 4)
    elif G == 3:
        lut_fill(xpad, PT, lut[0], groups, 3)
    else:
        lut_fill(xpad, PT, lut[0], groups, 2)


@njit(cache=True)
def _mv(k, layer, xin, y, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf):
    if dense[k].shape[1] > 0:
        _gemv_bf16(dense[k][layer], xin, xb, y)
    elif act8:  # int8 inputs, byte tables (acl26.kernels.ternary.act8)
        xq8, tab8, acc8, dec16 = a8buf
        nq = codes[k].shape[2] // (a8.TILE * (a8.SIGNED_STRIDE if signed else a8.STRIDE))
        sx = a8.quantize_int8(xin, xq8[:a8.QUAD * dec16.shape[0] * nq])
        a8.fill_tables(xq8, dec16, tab8, nq)
        a8.gemv_par(codes[k][layer], scales[k][layer], tab8, sx, y, acc8, signed, nq, level)
    else:
        _fill_lut(xin, xpad, PT, lut, codes[k].shape[2] // 8)
        _gemv_packed(codes[k][layer], signs[k][layer], scales[k][layer], lut, y, scratch, level, signed)


@njit(cache=True)
def _rmsnorm(x, w, out, eps):
    ss = np.float32(0.0)
    for j in range(x.shape[0]):
        ss += x[j] * x[j]
    inv = np.float32(1.0) / np.sqrt(ss / np.float32(x.shape[0]) + eps)
    for j in range(x.shape[0]):
        out[j] = x[j] * inv * w[j]


@njit(cache=True)
def _rope(v, off, hd, cos, sin, pos):
    half = hd // 2
    for i in range(half):
        a, b = v[off + i], v[off + half + i]
        c, s = cos[pos, i], sin[pos, i]
        v[off + i] = a * c - b * s
        v[off + half + i] = b * c + a * s


@njit(cache=True, fastmath=True)
def _attend(h, qkv, K, V, T, out, scores, group, inv_sqrt):
    """Head ``h``: softmax(q K^T / sqrt(hd)) V over positions ``0 .. T-1`` into ``out[h*hd : (h+1)*hd]``.
    ``K`` and ``V`` are one layer's cache, flat: position ``t`` of kv head ``g`` starts at ``(g*cap + t)*hd``;
    float32, or float16 bits (uint16) widened exactly as they are read."""
    hd = out.shape[0] // scores.shape[0]
    cap = scores.shape[1]
    kv = h // group
    q0 = h * hd
    m16 = hd - hd % 16
    m = np.float32(-np.inf)
    for t in range(T):
        k0 = (kv * cap + t) * hd
        s = vdot(qkv, q0, K, k0, m16)
        for d in range(m16, hd):
            s += qkv[q0 + d] * kv_get(K, k0 + d)
        s *= inv_sqrt
        scores[h, t] = s
        if s > m:
            m = s
    tot = np.float32(0.0)
    for t in range(T):
        e = np.exp(scores[h, t] - m)
        scores[h, t] = e
        tot += e
    for d in range(hd):
        out[q0 + d] = 0.0
    inv = np.float32(1.0) / tot
    for t in range(T):
        p = scores[h, t] * inv
        v0 = (kv * cap + t) * hd
        vaxpy(out, q0, V, v0, p, m16)
        for d in range(m16, hd):
            out[q0 + d] += p * kv_get(V, v0 + d)


@njit(cache=True, parallel=True)
def _attention(qkv, K, V, T, out, scores, group, inv_sqrt):
    for h in prange(scores.shape[0]):
        _attend(h, qkv, K, V, T, out, scores, group, inv_sqrt)


@njit(cache=True)
def _dot_q8(Q, S, r, xq, n):
    """``sum_b d[r, b] * sum_{j in block b} Q[r, j] * xq[j]`` over the ``n`` inputs of the 8-bit head's row
    ``r`` (a last partial block one by one)."""
    full = n // Q8_BLOCK
    acc = dot_q8_blocks(Q, S, r, xq, full)
    if full < S.shape[1]:
        s = 0
        for j in range(full * Q8_BLOCK, n):
            s += np.int32(Q[r, j]) * np.int32(xq[j])
        acc += np.float32(s) * f32_of_f16(S[r, full])
    return acc


@njit(cache=True)
def _quantize_x(x, xq):
    """``xq = round(x / sx)`` int16 with ``sx = max|x| / 32767`` (1 for a zero ``x``); returns ``sx``."""
    m = np.float32(0.0)
    for j in range(x.shape[0]):
        m = max(m, abs(x[j]))
    sx = m / np.float32(32767.0) if m > 0 else np.float32(1.0)
    inv = np.float32(1.0) / sx
    for j in range(x.shape[0]):
        xq[j] = np.int16(np.round(x[j] * inv))
    return sx


@njit(cache=True)
def _argmax_chunk(c, logits, cmax, carg):
    """The largest logit of chunk ``c`` (the first on a tie; NaN counts as the largest, as np.argmax)."""
    best = np.float32(-np.inf)
    arg = -1
    for r in range(c * HEAD_CHUNKS, min(logits.shape[0], (c + 1) * HEAD_CHUNKS)):
        v = logits[r]
        if arg < 0 or v > best or (v != v and best == best):
            best, arg = v, r
    cmax[c], carg[c] = best, arg


@njit(cache=True)
def _argmax_chunks(cmax, carg):
    best, arg = cmax[0], carg[0]
    for c in range(1, cmax.shape[0]):
        if cmax[c] > best or (cmax[c] != cmax[c] and best == best):
            best, arg = cmax[c], carg[c]
    return arg


@njit(cache=True, parallel=True)
def _head_argmax(E, x, xb, logits, cmax, carg):
    vocab = E.shape[0]
    _round_bf16(x, xb)
    for c in prange(cmax.shape[0]):
        for r in range(c * HEAD_CHUNKS, min(vocab, (c + 1) * HEAD_CHUNKS)):
            logits[r] = _dot_bf16(E, r, x, xb)
        _argmax_chunk(c, logits, cmax, carg)  # while the chunk's logits are in cache
    return _argmax_chunks(cmax, carg)


@njit(cache=True, parallel=True)
def _head_argmax_q8(Q, S, x, xq, logits, cmax, carg):
    vocab = Q.shape[0]
    n = x.shape[0]
    sx = _quantize_x(x, xq)
    for c in prange(cmax.shape[0]):
        for r in range(c * HEAD_CHUNKS, min(vocab, (c + 1) * HEAD_CHUNKS)):
            logits[r] = sx * _dot_q8(Q, S, r, xq, n)
        _argmax_chunk(c, logits, cmax, carg)
    return _argmax_chunks(cmax, carg)


@njit(cache=True)
def _all_projections(dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf, h, att, act, qkv,
                     y, gu, L):
    """The four matrices of every block in turn (:func:`profile_parts`)."""
    for layer in range(L):
        _mv(0, layer, h, qkv, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf)
        _mv(1, layer, att, y, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf)
        _mv(2, layer, h, gu, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf)
        _mv(3, layer, act, y, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf)


@njit(cache=True)
def _all_attention(qkv, Kc, Vc, T, att, scores, group, inv_sqrt):
    """Attention of every block in turn over ``T`` positions (:func:`profile_parts`)."""
    for layer in range(Kc.shape[0]):
        _attention(qkv, Kc[layer].reshape(-1), Vc[layer].reshape(-1), T, att, scores, group, inv_sqrt)


@njit(cache=True)
def _blocks(tok, pos, embed, norms, fnorm, cos, sin, dense, codes, signs, scales, PT, level, signed, H, KV, eps,
            Kc, Vc, x, h, y, qkv, att, gu, act, xpad, xb, lut, scratch, act8, a8buf, scores):
    """Everything of a step but the head: the final-normed hidden state is left in ``h``."""
    hd, cap = Kc.shape[3], Kc.shape[2]
    qd, kvd = H * hd, KV * hd
    inv_sqrt = np.float32(1.0 / math.sqrt(hd))
    for j in range(x.shape[0]):
        x[j] = f32_of_bf16(embed[tok, j])
    for layer in range(norms.shape[0]):
        _rmsnorm(x, norms[layer, 0], h, eps)
        _mv(0, layer, h, qkv, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf)
        for a in range(H):
            _rope(qkv, a * hd, hd, cos, sin, pos)
        Kl, Vl = Kc[layer].reshape(-1), Vc[layer].reshape(-1)
        for a in range(KV):
            _rope(qkv, qd + a * hd, hd, cos, sin, pos)
            for d in range(hd):
                kv_put(Kl, (a * cap + pos) * hd + d, qkv[qd + a * hd + d])
                kv_put(Vl, (a * cap + pos) * hd + d, qkv[qd + kvd + a * hd + d])
        _attention(qkv, Kl, Vl, pos + 1, att, scores, H // KV, inv_sqrt)
        _mv(1, layer, att, y, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf)
        for j in range(x.shape[0]):
            x[j] += y[j]
        _rmsnorm(x, norms[layer, 1], h, eps)
        _mv(2, layer, h, gu, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf)
        _silu_mul(gu, act)
        _mv(3, layer, act, y, dense, codes, signs, scales, PT, level, signed, xpad, xb, lut, scratch, act8, a8buf)
        for j in range(x.shape[0]):
            x[j] += y[j]
    _rmsnorm(x, fnorm, h, eps)
