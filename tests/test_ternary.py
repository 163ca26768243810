"""acl26.kernels.ternary against its plain-numpy twins (tests/naive/ternary/), bit-exact, on ragged shapes."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acl26.kernels import ternary as tn

from naive import ternary as naive

FMTS = ["sherry", "tl2", "i2"]
LEVELS = [name for name, level in tn.SIMD_LEVELS.items() if level <= tn.HOST_SIMD_LEVEL]


def _pack(fmt, T):
    return getattr(tn, f"pack_{fmt}")(T)


def _unpack(fmt, packed, shape=None):
    return getattr(tn, f"unpack_{fmt}")(packed, shape)


def _gemv(fmt, *args, **kw):
    return tn.gemv(fmt, *args, **kw)


def _gemm(fmt, *args, **kw):
    return tn.gemm(fmt, *args, **kw)


def _ternary(fmt, rng, rows, cols):
    """A random matrix the format can hold: 3:4 for sherry, any ternary (some all-zero groups) else."""
    if fmt == "sherry":
        return tn.sparse_ternarize(rng.standard_normal((rows, cols)).astype(np.float32))[0]
    T = rng.integers(-1, 2, (rows, cols)).astype(np.int8)
    T[:, : cols // 3] *= rng.random((rows, 1)) < 0.8  # some zero runs
    return T


@st.composite
def matrix(draw, fmt=None):
    fmt = fmt or draw(st.sampled_from(FMTS))
    rows = draw(st.integers(1, 70))
    groups = draw(st.integers(1, 40))
    cols = 4 * groups if fmt == "sherry" else draw(st.integers(max(1, 4 * groups - 3), 4 * groups))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return fmt, _ternary(fmt, rng, rows, cols), rng


def _scale(fmt, rng, rows, cols, kind):
    if kind == "tensor":
        return np.float32(rng.random() + 0.5)
    if kind == "row":
        return rng.random(rows).astype(np.float32) + 0.5
    gs = 2 * naive.GROUP[fmt]  # the smallest group that covers whole pairs
    if cols % gs:
        return rng.random(rows).astype(np.float32) + 0.5
    return rng.random((rows, cols // gs)).astype(np.float32) + 0.5


# --------------------------------------------------------------------------------------------
# quantizers


@given(st.integers(1, 70), st.integers(1, 40), st.sampled_from([None, 4, 8]), st.integers(0, 2**32 - 1),
       st.sampled_from([np.float32, np.float64]))
def test_sparse_ternarize_matches_twin(rows, groups, group_size, seed, dtype):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((rows, 4 * groups)).astype(dtype)
    if seed % 3 == 0:  # ties and zeros: coarse values
        W = np.round(W * 2) / 2
    if group_size == 8 and groups % 2:
        group_size = 4
    T, scale = tn.sparse_ternarize(W, group_size)
    T_ref, scale_ref = naive.sparse_ternarize(W, group_size)
    assert T.dtype == np.int8 and scale.dtype == np.float32
    assert np.array_equal(T, T_ref)
    assert np.array_equal(scale, scale_ref)
    assert ((T.reshape(rows, groups, 4) == 0).sum(axis=2) == 1).all()


@given(st.integers(1, 70), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_sparse_split_matches_twin_and_the_quantizer(rows, groups, seed):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((rows, 4 * groups)).astype(np.float32)
    if seed % 3 == 0:  # ties, zeros and signed zeros: coarse values
        W = np.round(W * 2) / 2
        W[rng.random(W.shape) < 0.2] = np.float32(-0.0)
    T, kept = tn.sparse_split(W)
    T_ref, kept_ref = naive.sparse_split(W)
    assert T.dtype == kept.dtype == np.float32
    assert np.array_equal(T.view(np.int32), T_ref.view(np.int32))  # bit for bit: the zeros' signs too
    assert np.array_equal(kept.view(np.int32), kept_ref.view(np.int32))
    assert np.array_equal(T.astype(np.int8), tn.sparse_ternarize(W)[0])  # the same zero as the quantizer's


def test_sparse_ternarize_tie_break_and_signs():
    W = np.array([[0.5, -0.5, 0.5, -0.5, -0.0, 0.0, 2.0, -3.0]], np.float32)
    T, scale = tn.sparse_ternarize(W)
    assert T.tolist() == [[0, -1, 1, -1, 0, 1, 1, -1]]  # first of the tied smallest is zeroed; +-0 kept -> +1
    assert scale[0] == np.float32((0.5 * 3 + 0 + 2 + 3) / 6)


def test_sparse_ternarize_group_scales():
    W = np.arange(1, 17, dtype=np.float32).reshape(1, 16)
    T, scale = tn.sparse_ternarize(W, group_size=8)
    assert scale.shape == (1, 2)
    assert scale.tolist() == [[(2 + 3 + 4 + 6 + 7 + 8) / 6, (10 + 11 + 12 + 14 + 15 + 16) / 6]]


@given(st.integers(1, 30), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_absmean_ternarize_matches_twin(rows, cols, seed):
    W = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    T, g = tn.absmean_ternarize(W)
    T_ref, g_ref = naive.absmean_ternarize(W)
    assert np.array_equal(T, T_ref) and g == g_ref and g.shape == ()


def test_absmean_rounds_half_to_even():
    W = np.array([[0.5, -0.5, 1.5, -1.5]], np.float32)  # mean |W| = 1: 0.5 -> 0, 1.5 -> 2 -> clipped to 1
    T, g = tn.absmean_ternarize(W)
    assert T.tolist() == [[0, 0, 1, -1]] and g == 1.0


# --------------------------------------------------------------------------------------------
# pack / unpack


@given(matrix())
def test_pack_matches_twin_and_round_trips(case):
    fmt, T, _ = case
    packed = _pack(fmt, T)
    codes, signs = {"sherry": naive.pack_sherry, "tl2": naive.pack_tl2, "i2": naive.pack_i2}[fmt](T)
    assert np.array_equal(packed.codes, codes)
    assert np.array_equal(packed.signs, signs)
    assert packed.shape == T.shape
    U = _unpack(fmt, packed, T.shape)
    assert U.dtype == np.int8 and np.array_equal(U, T)
    twin = {"sherry": naive.unpack_sherry, "tl2": naive.unpack_tl2, "i2": naive.unpack_i2}[fmt]
    assert np.array_equal(twin(packed.codes, packed.signs, T.shape), T)


@pytest.mark.parametrize("fmt", FMTS)
def test_every_code_round_trips(fmt):
    """Each index the format writes, with each sign, decodes to a group that packs back to it."""
    f = tn.FORMATS[fmt]
    groups = [f.patterns[i] * s for i in f.used for s in ((1, -1) if f.signed else (1,))]
    T = np.concatenate(groups).reshape(1, -1).astype(np.int8)
    assert np.array_equal(_unpack(fmt, _pack(fmt, T)), T)
    n_patterns = {"sherry": 32, "tl2": 27, "i2": 9}[fmt]
    assert len({g.tobytes() for g in groups}) == n_patterns


def test_sherry_docstring_example():
    packed = tn.pack_sherry(np.array([[0, -1, 1, -1]], np.int8))
    assert packed.codes[0, 0] == 4 and packed.signs[0, 0] == 1
    assert naive.decode_index("sherry", 4) == [0, 1, -1, 1]


def test_i2_bytes_hold_four_weights_two_bits_each():
    T = np.array([[-1, 0, 1, 1, 1, 0, -1, -1]], np.int8)
    packed = tn.pack_i2(T)
    assert packed.codes[0, 0] == 0b10_10_01_00 and packed.codes[0, 16] == 0b00_00_01_10
    assert packed.signs.shape == (1, 0)


def test_tl2_index_is_balanced_ternary():
    T = np.array([[1, -1, 0, -1, 1, 1, 0, 0, 0]], np.int8)  # 9-3+0=6; -(9-3-1)=-5 -> 5, sign; zero -> 0
    packed = tn.pack_tl2(T)
    assert packed.codes[0, 0] == 6 | 5 << 4 and packed.codes[0, 16] == 0
    assert packed.signs[0, 0:6].tolist() == [0, 0, 1, 0, 0, 0]


@pytest.mark.parametrize("bad,match", [
    ([[1, 1, 1, 1]], "exactly one"),
    ([[0, 0, 1, 1]], "2 zeros"),
    ([[0, 1, 2, 1]], "only -1, 0, 1"),
    ([[0, 1, -3, 1]], "only -1, 0, 1"),
])
def test_pack_sherry_rejects_what_is_not_3_4_ternary(bad, match):
    T = np.array([[0, 1, 1, 1]] * 20 + [[1, 0, 1, 1]], np.int8)
    T = np.concatenate([T, T], axis=1)
    T[17, 4:8] = bad[0]
    with pytest.raises(ValueError, match=match) as err:
        tn.pack_sherry(T)
    assert "row 17, columns 4..7" in str(err.value)


def test_pack_rejects_bad_inputs():
    with pytest.raises(ValueError, match="multiple of 4"):
        tn.pack_sherry(np.zeros((2, 6), np.int8))
    with pytest.raises(ValueError, match="integer"):
        tn.pack_i2(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="2-D"):
        tn.pack_tl2(np.zeros(4, np.int8))
    with pytest.raises(ValueError, match="only -1, 0, 1"):
        tn.pack_tl2(np.full((2, 3), 300, np.int64))
    with pytest.raises(ValueError, match="only -1, 0, 1"):
        tn.pack_i2(np.full((2, 3), 2, np.int8))


def test_pack_accepts_wider_integer_dtypes():
    T = np.array([[1, -1, 0, 1]], np.int64)
    assert np.array_equal(tn.unpack_sherry(tn.pack_sherry(T)), T)


def test_unpack_rejects_mismatched_inputs():
    packed = tn.pack_sherry(np.array([[0, 1, 1, 1]], np.int8))
    with pytest.raises(ValueError, match="shape"):
        tn.unpack_sherry(packed, (1, 8))
    with pytest.raises(ValueError, match="format 'sherry'"):
        tn.unpack_i2(packed)
    with pytest.raises(ValueError, match="packed.codes"):
        tn.unpack_sherry(packed._replace(codes=packed.codes[:, :8]))
    with pytest.raises(ValueError, match="Packed"):
        tn.unpack_sherry(packed.codes)


# --------------------------------------------------------------------------------------------
# GEMV / GEMM


@given(matrix(), st.sampled_from(["tensor", "row", "group"]), st.sampled_from(LEVELS), st.booleans())
def test_gemv_matches_twin_bit_exact(case, kind, simd, parallel):
    fmt, T, rng = case
    x = rng.standard_normal(T.shape[1]).astype(np.float32)
    scale = _scale(fmt, rng, *T.shape, kind)
    y = _gemv(fmt, _pack(fmt, T), scale, x, simd=simd, parallel=parallel)
    assert y.dtype == np.float32 and y.shape == (T.shape[0],)
    assert np.array_equal(y, naive.gemv(fmt, T, scale, x))


@given(matrix(), st.integers(1, 5), st.sampled_from(["row", "group"]), st.sampled_from(LEVELS), st.booleans())
def test_gemm_matches_twin_and_gemv(case, batch, kind, simd, parallel):
    fmt, T, rng = case
    X = rng.standard_normal((batch, T.shape[1])).astype(np.float32)
    scale = _scale(fmt, rng, *T.shape, kind)
    packed = _pack(fmt, T)
    Y = _gemm(fmt, packed, scale, X, simd=simd, parallel=parallel)
    assert Y.shape == (batch, T.shape[0])
    assert np.array_equal(Y, naive.gemm(fmt, T, scale, X))
    assert np.array_equal(Y[-1], _gemv(fmt, packed, scale, X[-1]))


@given(matrix(), st.sampled_from(["tensor", "row", "group"]), st.sampled_from(LEVELS), st.booleans(),
       st.sampled_from(["float32", "float64", "strided"]))
def test_prepare_gemv_is_gemv_bit_for_bit_and_keeps_the_matrix_it_was_given(case, kind, simd, parallel, xkind):
    fmt, T, rng = case
    packed = _pack(fmt, T)
    scale = _scale(fmt, rng, *T.shape, kind)
    product = tn.prepare_gemv(fmt, packed, scale, simd=simd, parallel=parallel)
    x = rng.standard_normal(T.shape[1]).astype(np.float32)
    x = {"float32": x, "float64": x.astype(np.float64), "strided": np.repeat(x, 2)[::2]}[xkind]
    want = tn.gemv(fmt, packed, scale, x, simd=simd, parallel=parallel)
    assert np.array_equal(want, naive.gemv(fmt, T, scale, x))
    packed.codes[...] = 0  # the caller's arrays change after the preparation: the product does not
    packed.signs[...] = 0
    if isinstance(scale, np.ndarray):
        scale[...] = 0
    y = product(x)
    assert y.dtype == np.float32 and y.shape == (T.shape[0],)
    assert np.array_equal(y, want)
    x_before = x.copy()
    product(x)
    assert np.array_equal(x, x_before)  # activations are read, never written


def test_prepare_gemv_checks_as_gemv_does():
    rng = np.random.default_rng(0)
    T = _ternary("sherry", rng, 20, 16)
    packed, scale = tn.pack_sherry(T), rng.random(20).astype(np.float32)
    with pytest.raises(ValueError, match="format 'sherry'"):
        tn.prepare_gemv("i2", packed, scale)
    with pytest.raises(ValueError, match="^scale must have shape"):
        tn.prepare_gemv("sherry", packed, scale[:5])
    with pytest.raises(ValueError, match="^scale must be finite"):
        tn.prepare_gemv("sherry", packed, np.float32(np.nan))
    product = tn.prepare_gemv("sherry", packed, scale)
    for bad in (np.nan, np.inf, 1e300):
        x = np.ones(16)
        x[3] = bad
        with pytest.raises(ValueError, match="^x must be finite"):
            product(x)
        with np.errstate(over="ignore"):
            x32 = x.astype(np.float32)  # 1e300 becomes inf
        with pytest.raises(ValueError, match="^x must be finite"):
            product(x32)
    with pytest.raises(ValueError, match=r"^x must have shape \(16,\)"):
        product(np.ones(12, np.float32))
    with pytest.raises(ValueError, match="^x must be float"):
        product(np.ones(16, np.int32))


@pytest.mark.parametrize("fmt", FMTS)
def test_gemv_close_to_float_matmul(fmt):
    rng = np.random.default_rng(0)
    T = _ternary(fmt, rng, 100, 256)
    scale = rng.random(100).astype(np.float32)
    x = rng.standard_normal(256).astype(np.float32)
    y = _gemv(fmt, _pack(fmt, T), scale, x)
    np.testing.assert_allclose(y, scale * (T.astype(np.float64) @ x), rtol=1e-5, atol=1e-4)


def test_every_simd_level_gives_the_same_bits():
    rng = np.random.default_rng(1)
    T = _ternary("sherry", rng, 67, 4 * 37)
    packed = tn.pack_sherry(T)
    X = rng.standard_normal((6, T.shape[1])).astype(np.float32)
    outs = [tn.gemm("sherry", packed, np.float32(1), X, simd=level) for level in LEVELS]
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_matmul_rejects_bad_arguments():
    T = np.array([[0, 1, 1, 1, 1, 0, 1, 1]] * 3, np.int8)
    packed = tn.pack_sherry(T)
    x = np.ones(8, np.float32)
    with pytest.raises(ValueError, match=r"x must have shape \(8,\)"):
        tn.gemv("sherry", packed, np.float32(1), np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"X must have shape \(batch, 8\)"):
        tn.gemm("sherry", packed, np.float32(1), x)
    with pytest.raises(ValueError, match="x must be float"):
        tn.gemv("sherry", packed, np.float32(1), np.ones(8, np.int32))
    with pytest.raises(ValueError, match="scale must have shape"):
        tn.gemv("sherry", packed, np.ones(4, np.float32), x)
    with pytest.raises(ValueError, match="whole pairs"):
        tn.gemv("sherry", packed, np.ones((3, 2), np.float32), x)
    with pytest.raises(ValueError, match="scale must be float"):
        tn.gemv("sherry", packed, np.ones(3, np.int64), x)
    with pytest.raises(ValueError, match="format 'sherry'"):
        tn.gemv("tl2", packed, np.float32(1), x)
    with pytest.raises(ValueError, match="simd must be one of"):
        tn.gemv("sherry", packed, np.float32(1), x, simd="neon")


# --------------------------------------------------------------------------------------------
# sizes


def test_bits_per_weight_at_the_benchmark_shape():
    sherry = tn.bits_per_weight("sherry", (4096, 4096))
    assert sherry["streams"] == 1.25 and sherry["index"] == 1.0 and sherry["sign"] == 0.25
    assert sherry["scales"] == 32 / 4096 and sherry["total"] == 1.25 + 32 / 4096
    assert tn.bits_per_weight("sherry", (4096, 4096), scales=128)["scales"] == 0.25
    assert tn.bits_per_weight("i2", (4096, 4096), scales="tensor")["streams"] == 2.0
    tl2 = tn.bits_per_weight("tl2", (4096, 4096))
    assert tl2["bits"]["streams"] == 4096 * 1366 * 5  # 4096 = 3*1365 + 1: one padded group per row
    assert tl2["streams"] == pytest.approx(5 / 3, abs=1e-3)


@given(matrix())
def test_bits_per_weight_counts_the_packed_bytes(case):
    fmt, T, _ = case
    packed = _pack(fmt, T)
    bits = tn.bits_per_weight(fmt, T.shape)["bits"]
    assert bits["index"] == 8 * packed.codes.nbytes and bits["sign"] == 8 * packed.signs.nbytes


def test_bits_per_weight_rejects_bad_arguments():
    with pytest.raises(ValueError, match="fmt"):
        tn.bits_per_weight("tq1", (4, 4))
    with pytest.raises(ValueError, match="scales"):
        tn.bits_per_weight("sherry", (4, 4), scales="block")


# --------------------------------------------------------------------------------------------
# quantizer rejections


@pytest.mark.parametrize("W,kw,match", [
    (np.zeros((2, 6), np.float32), {}, "multiple of 4"),
    (np.zeros((2, 8), np.float32), dict(group_size=6), "group_size"),
    (np.zeros((2, 8), np.float32), dict(group_size=16), "group_size"),
    (np.zeros(8, np.float32), {}, "2-D float"),
    (np.zeros((2, 8), np.int8), {}, "2-D float"),
    (np.full((2, 8), np.nan, np.float32), {}, "finite"),
])
def test_sparse_ternarize_rejects_bad_inputs(W, kw, match):
    with pytest.raises(ValueError, match=match):
        tn.sparse_ternarize(W, **kw)


def test_absmean_rejects_bad_inputs():
    with pytest.raises(ValueError, match="finite"):
        tn.absmean_ternarize(np.array([[np.inf]], np.float32))
    with pytest.raises(ValueError, match="2-D float"):
        tn.absmean_ternarize(np.zeros((0, 4), np.float32))


# --------------------------------------------------------------------------------------------
# the benchmark


@pytest.mark.slow
def test_quick_benchmark_reports_rows_and_goals():
    from acl26.papers.sherry import kernel_bench

    data = kernel_bench.time_kernels(quick=True)
    assert {"title", "rows", "goals", "note"} <= set(data)
    assert all(r["median_s"] > 0 for r in data["rows"])
    assert all({"goal", "target", "measured", "met"} <= set(g) for g in data["goals"])
    bits = [g for g in data["goals"] if g["goal"].startswith("bits per weight")]
    assert bits and bits[0]["met"]


def test_read_bandwidth_measures_and_checks_its_arguments():
    from acl26.kernels import ternary as tn
    from acl26.kernels.ternary import matmul

    a = np.random.default_rng(0).standard_normal((5000, 64)).astype(np.float32)
    assert matmul._stream_sum(a, 1024) == pytest.approx(float(a.astype(np.float64).sum()), abs=1e-2)  # it reads everything
    got = tn.read_bandwidth(8 * 2**20, repeats=2)
    assert got["bytes"] == 8 * 2**20 and len(got["runs"]) == 2 and got["gb_s"] > 0 and got["threads"] >= 1
    with pytest.raises(ValueError, match="nbytes"):
        tn.read_bandwidth(1024)
    with pytest.raises(ValueError, match="repeats"):
        tn.read_bandwidth(8 * 2**20, repeats=0)
