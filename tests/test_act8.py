"""The 8-bit-activation GEMV (acl26.kernels.ternary.act8) against its numpy twin, on every path."""

import numpy as np
import pytest

from acl26.kernels import ternary as tn
from acl26.kernels.ternary import act8
from acl26.kernels.ternary.formats import DECODE
from naive.ternary import act8 as naive_act8

FORMATS = ("sherry", "tl2", "i2")
# odd shapes: rows past a tile and within a block, a partial quad, an odd last pair, one group, wide rows
SHAPES = [(1, 4), (16, 8), (17, 12), (130, 52), (257, 96), (129, 4096), (48, 36)]


def _random_ternary(rng, fmt, rows, cols):
    """A random matrix every code of ``fmt`` can hold (Sherry: 3:4 groups; TL2, I2: any ternary)."""
    f = tn.FORMATS[fmt]
    used = list(f.used) + ([c | 16 for c in f.used] if f.signed else [])
    dec = DECODE[fmt]
    groups = -(-cols // f.group)
    return np.ascontiguousarray(dec[rng.choice(used, (rows, groups))].reshape(rows, -1)[:, :cols])


def _packed(rng, fmt, rows, cols):
    if fmt == "sherry" and cols % 4:
        cols += 4 - cols % 4
    T = _random_ternary(rng, fmt, rows, cols)
    return T, getattr(tn, f"pack_{fmt}")(T)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rows,cols", SHAPES)
def test_gemv_act8_matches_the_twin_bit_for_bit(fmt, rows, cols):
    rng = np.random.default_rng(rows * 1000 + cols)
    T, p = _packed(rng, fmt, rows, cols)
    a = tn.to_act8(p)
    x = (rng.standard_normal(T.shape[1]) * 3).astype(np.float32)
    scale = (rng.random(rows) + 0.5).astype(np.float32)
    want = naive_act8.gemv_act8(fmt, T, scale, x)
    for parallel in (True, False):
        for simd in (None, "portable"):
            got = tn.gemv_act8(a, scale, x, parallel=parallel, simd=simd)
            np.testing.assert_array_equal(got, want, err_msg=f"parallel={parallel} simd={simd}")


def test_the_simd_path_runs_here_when_the_cpu_has_it():
    """On this CPU the default path is the VBMI/VNNI kernel whenever the features are there (the test above
    then compares it with the portable one)."""
    feats = tn.HOST_FEATURES
    assert act8.SIMD == (tn.HOST_SIMD_LEVEL == 2 and {"+avx512bw", "+avx512vbmi", "+avx512vnni"} <= feats)


def test_the_sum_is_exact_for_extreme_activations():
    """Every activation at +-max|x| and every weight +-1: the sums reach the planes' extremes (|T| = 3*127)."""
    rows, cols = 32, 256
    T = np.tile(np.array([[0, 1, 1, 1]], np.int8), (rows, cols // 4))
    T[::2] *= -1
    p = tn.pack_sherry(T)
    x = np.where(np.arange(cols) % 2, 5.0, -5.0).astype(np.float32)
    x[::4] = 5.0
    got = tn.gemv_act8(tn.to_act8(p), np.float32(0.5), x)
    np.testing.assert_array_equal(got, naive_act8.gemv_act8("sherry", T, np.float32(0.5), x))


def test_zero_activations_give_zero_and_scalar_scale_broadcasts():
    rng = np.random.default_rng(1)
    T, p = _packed(rng, "tl2", 40, 30)
    y = tn.gemv_act8(tn.to_act8(p), 2.0, np.zeros(30, np.float32))
    np.testing.assert_array_equal(y, np.zeros(40, np.float32))


def test_quantization_is_close_to_the_float_gemv():
    """Not a bit-for-bit check: 8-bit activations stay within a few hundredths of the float32 product's scale."""
    rng = np.random.default_rng(2)
    T, p = _packed(rng, "sherry", 256, 1536)
    x = rng.standard_normal(1536).astype(np.float32)
    s = (rng.random(256) + 0.5).astype(np.float32)
    y8 = tn.gemv_act8(tn.to_act8(p), s, x)
    y = tn.gemv("sherry", p, s, x)
    assert np.abs(y8 - y).max() < 0.02 * np.abs(y).max()


@pytest.mark.parametrize("bad,match", [
    (lambda a, x, s: tn.gemv_act8(a.streams, s, x), "Act8"),
    (lambda a, x, s: tn.gemv_act8(a, s, x[:-1]), "x must be"),
    (lambda a, x, s: tn.gemv_act8(a, s, np.where(np.arange(x.size) == 3, np.nan, x)), "finite"),
    (lambda a, x, s: tn.gemv_act8(a, s, np.full(x.size, np.inf)), "finite"),
    (lambda a, x, s: tn.gemv_act8(a, s, x.astype(np.int32)), "x must be"),
    (lambda a, x, s: tn.gemv_act8(a, s[:-1], x), "scale must"),
    (lambda a, x, s: tn.gemv_act8(a, np.float32(np.inf), x), "finite"),
    (lambda a, x, s: tn.gemv_act8(a._replace(streams=a.streams[:, :-1]), s, x), "streams"),
    (lambda a, x, s: tn.gemv_act8(a, s, x, simd="sse"), "simd"),
    (lambda a, x, s: tn.to_act8(a), "Packed"),
])
def test_bad_input_is_refused_in_one_line(bad, match):
    rng = np.random.default_rng(3)
    T, p = _packed(rng, "sherry", 20, 16)
    a = tn.to_act8(p)
    with pytest.raises(ValueError, match=match) as e:
        bad(a, rng.standard_normal(16).astype(np.float32), np.ones(20, np.float32))
    assert "\n" not in str(e.value)


def test_the_layout_keeps_the_streams_bytes_up_to_padding():
    rng = np.random.default_rng(4)
    for fmt in FORMATS:
        _, p = _packed(rng, fmt, 16 * act8.TILE * 3, 4 * 3 * 64)
        assert tn.to_act8(p).nbytes == p.nbytes  # full tiles and quads: the same bytes, reordered


def test_tiny_activations_count_as_zero_and_bad_shapes_are_refused():
    """max|x| < 2**-100 quantizes to zero (1 / sx would overflow float32), on every path and in the twin."""
    rng = np.random.default_rng(5)
    T, p = _packed(rng, "sherry", 20, 32)
    a = tn.to_act8(p)
    for x in (np.full(32, 1e-38, np.float32), np.full(32, 2.0 ** -101, np.float32)):
        want = naive_act8.gemv_act8("sherry", T, 1.0, x)
        np.testing.assert_array_equal(want, np.zeros(20, np.float32))
        for simd in (None, "portable"):
            np.testing.assert_array_equal(tn.gemv_act8(a, 1.0, x, simd=simd), want)
    x = np.full(32, 2.0 ** -99, np.float32)  # just above: quantized as usual (xq = 127)
    np.testing.assert_array_equal(tn.gemv_act8(a, 1.0, x), naive_act8.gemv_act8("sherry", T, 1.0, x))
    assert naive_act8.quantize(x)[0].max() == 127
    for shape, match in (((16,), "shape must be"), ((16.0, 32), "rows"), ((20, 31), "multiple of 4")):
        with pytest.raises(ValueError, match=match):
            tn.gemv_act8(a._replace(shape=shape), 1.0, np.ones(32, np.float32))
