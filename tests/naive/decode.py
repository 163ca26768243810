"""Plain-numpy twin of acl26.kernels.decode.step: the decode step written out in float64 from its
definition (module docstring there), the packed matrices read back through naive.ternary.unpack."""

from __future__ import annotations

import numpy as np

from naive.ternary import act8 as naive_act8
from naive.ternary import unpack


def bf16_float(bits: np.ndarray) -> np.ndarray:
    """float64 values of bfloat16 bits (uint16)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def bf16_round(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16 (nearest even), as float64."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return bf16_float(((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16))


def bf16_input(x: np.ndarray) -> np.ndarray:
    """What a bf16 matrix multiplies: ``x`` itself, or ``x`` rounded to bf16 where the kernel uses
    AVX512-BF16 (``acl26.kernels.decode.BF16_INPUTS``)."""
    from acl26.kernels.decode import BF16_INPUTS

    return bf16_round(x) if BF16_INPUTS else np.asarray(x, np.float32).astype(np.float64)


def head_logits(w, h: np.ndarray) -> np.ndarray:
    """The head over the float32 hidden state ``h``: bf16 (see :func:`bf16_input`), or the 8-bit head with
    ``h`` quantized to int16 (``sx = max|h| / 32767``, round half to even)."""
    h32 = np.asarray(h, np.float32)
    if w.head_q8 is None:
        return bf16_float(w.head) @ bf16_input(h32)
    m = float(np.abs(h32).max())
    sx = np.float32(m / np.float32(32767.0)) if m > 0 else np.float32(1.0)
    xq = np.round(h32 * (np.float32(1.0) / sx)).astype(np.float64)
    d = w.head_q8_scale.view(np.float16).astype(np.float64)
    V, H = w.head_q8.shape
    out = np.zeros(V)
    for b in range(d.shape[1]):
        sl = slice(32 * b, min(H, 32 * b + 32))
        out += d[:, b] * (w.head_q8[:, sl].astype(np.float64) @ xq[sl])
    return float(sx) * out


def matrix(w, k: int, layer: int) -> np.ndarray:
    """Dense float64 matrix ``k`` (q|k|v, o, gate|up, down) of block ``layer``."""
    rows, cols = w.rows()[k], w.cols()[k]
    if w.fmt == "bf16":
        return bf16_float(w.dense[k][layer])
    T = _unpacked(w.fmt, w.codes[k][layer], w.signs[k][layer], (rows, cols))
    return w.scales[k][layer].astype(np.float64)[:, None] * T


_UNPACKED: dict = {}


def _unpacked(fmt, codes, signs, shape) -> np.ndarray:
    """``unpack`` as float64, kept by the streams' bytes: the twin's pure-Python unpack took about 90% of a
    step-over-positions test when every position unpacked every matrix again. The key is the content
    (not the array's identity), so new weights with the same id are never served stale."""
    key = (fmt, shape, codes.shape, signs.shape, codes.tobytes(), signs.tobytes())
    if key not in _UNPACKED:
        if len(_UNPACKED) >= 64:
            _UNPACKED.clear()
        T = unpack(fmt, codes, signs, shape).astype(np.float64)
        T.flags.writeable = False
        _UNPACKED[key] = T
    return _UNPACKED[key]


def _in(w, x, act8=False):
    """A matrix's input: bf16-rounded for bf16 matrices where the kernel rounds them (:func:`bf16_input`);
    with ``act8``, ``x`` in float32 quantized to int8 and back (``naive.ternary.act8.quantize``)."""
    if act8:
        xq, sx = naive_act8.quantize(np.asarray(x, np.float32))
        return xq.astype(np.float64) * float(sx)
    return bf16_input(x) if w.fmt == "bf16" else x


def _rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x) + eps) * g


def _rope(v, pos, inv_freq):
    half = v.shape[-1] // 2
    ang = pos * inv_freq
    c, s = np.cos(ang), np.sin(ang)
    a, b = v[..., :half], v[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def step(w, state, token: int, pos: int, act8: bool = False) -> int:
    """The twin of ``acl26.kernels.decode.step``: writes keys and values into ``state.k`` / ``state.v`` at
    ``pos`` (in their dtype: float32, or float16 rounded by numpy to nearest, ties to even) and the logits into ``state.logits``; returns their argmax. ``act8``: the twin of
    weights made by ``decode.with_act8(w)`` (``w`` itself holds the float-activation streams)."""
    H, KV, hd, inter = w.heads, w.kv_heads, w.head_dim, w.intermediate
    eps = float(w.eps)
    x = bf16_float(w.embed[token])
    for layer in range(w.layers):
        h = _rmsnorm(x, w.norms[layer, 0].astype(np.float64), eps)
        qkv = matrix(w, 0, layer) @ _in(w, h, act8)
        q = _rope(qkv[:H * hd].reshape(H, hd), pos, w.inv_freq)
        k = _rope(qkv[H * hd:(H + KV) * hd].reshape(KV, hd), pos, w.inv_freq)
        v = qkv[(H + KV) * hd:].reshape(KV, hd)
        state.k[layer, :, pos] = k
        state.v[layer, :, pos] = v
        K = state.k[layer, :, :pos + 1].astype(np.float64)
        V = state.v[layer, :, :pos + 1].astype(np.float64)
        att = np.empty((H, hd))
        for a in range(H):
            g = a // (H // KV)
            sc = K[g] @ q[a] / np.sqrt(hd)
            p = np.exp(sc - sc.max())
            att[a] = (p / p.sum()) @ V[g]
        x = x + matrix(w, 1, layer) @ _in(w, att.reshape(-1), act8)
        h = _rmsnorm(x, w.norms[layer, 1].astype(np.float64), eps)
        gu = matrix(w, 2, layer) @ _in(w, h, act8)
        gate, up = gu[:inter], gu[inter:]
        x = x + matrix(w, 3, layer) @ _in(w, gate / (1.0 + np.exp(-gate)) * up, act8)
    h = _rmsnorm(x, w.final_norm.astype(np.float64), eps)
    logits = head_logits(w, h)
    state.logits[:] = logits
    return int(np.argmax(logits))
