"""acl26.kernels.tokmerge against its plain-numpy twin (tests/naive/tokmerge.py), bit-exact, on ragged inputs."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acl26.kernels import tokmerge

from naive import tokmerge as naive


def _stream(draw, n, start0, vocab, dup_p):
    """A token array with non-decreasing starts, some shared (byte tokens of one character)."""
    rows, pos = [], start0
    for _ in range(n):
        if rows and draw(st.floats(0, 1)) < dup_p:
            s, e = rows[-1][0], rows[-1][1]
        else:
            s = pos
            e = s + draw(st.integers(0, 3))
            pos = max(e, s + 1)
        rows.append((s, e, draw(st.integers(0, vocab - 1)), draw(st.integers(0, 1))))
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


@st.composite
def chunk_pair(draw):
    """Two views of one token stream: a common core, with differing tokens at the edges."""
    vocab = draw(st.integers(1, 6))
    core = _stream(draw, draw(st.integers(0, 25)), 100, vocab, 0.2)
    a_pre = _stream(draw, draw(st.integers(0, 6)), 90, vocab, 0.2)
    b_post = _stream(draw, draw(st.integers(0, 6)), 200, vocab, 0.2)
    noise = draw(st.booleans())
    left = np.concatenate([a_pre, core]) if len(a_pre) else core
    right = np.concatenate([core, b_post]) if len(b_post) else core
    if noise and len(right):  # perturb some ids or flags in one view
        k = draw(st.integers(0, len(right) - 1))
        right = right.copy()
        right[k, draw(st.integers(2, 3))] ^= 1
    order_l = np.argsort(left[:, 0], kind="stable")
    order_r = np.argsort(right[:, 0], kind="stable")
    return left[order_l], right[order_r]


@given(chunk_pair(), st.integers(90, 210), st.integers(1, 4), st.sampled_from(["paper", "longest", "piece"]),
       st.one_of(st.none(), st.tuples(st.integers(85, 150), st.integers(100, 215))))
def test_kernel_matches_naive_twin(pair, center, min_run, rule, overlap):
    left, right = pair
    if overlap is not None and overlap[1] < overlap[0]:
        overlap = (overlap[1], overlap[0])
    got = tokmerge.find_cut(left, right, center=center, min_run=min_run, rule=rule, overlap=overlap)
    assert tuple(got) == naive.find_cut(left, right, center, min_run, rule, overlap)


@given(chunk_pair(), st.integers(90, 210))
def test_cut_keeps_agreeing_tokens(pair, center):
    """A found cut joins two tokens that both chunks have, at the same place."""
    left, right = pair
    cut = tokmerge.find_cut(left, right, center=center, rule="piece")
    if cut.found:
        assert np.array_equal(left[cut.ia], right[cut.ib])
        assert np.array_equal(left[cut.ia - 1], right[cut.ib - 1])
        assert left[cut.ia, tokmerge.PIECE] == 1
        assert cut.pos == left[cut.ia, tokmerge.START]


def test_identical_streams_cut_at_a_piece_start_nearest_the_center():
    toks = np.array([[i, i + 1, 7, 1] for i in range(10)], dtype=np.int64)
    cut = tokmerge.find_cut(toks, toks, center=5, rule="piece")
    assert (cut.ia, cut.ib, cut.run, cut.pos) == (5, 5, 10, 5)
    cut = tokmerge.find_cut(toks, toks, center=5, rule="paper")
    assert (cut.ia, cut.ib, cut.pos) == (10, 10, 10)


def test_ids_alone_do_not_match_when_positions_differ():
    left = np.array([[0, 4, 1, 1], [4, 8, 2, 1], [8, 12, 3, 1]], dtype=np.int64)
    right = left.copy()
    right[:, :2] += 1  # same ids, shifted by one character: no agreement
    assert not tokmerge.find_cut(left, right, center=6, rule="paper").found
    assert not tokmerge.find_cut(left, right, center=6, rule="longest").found
    assert not tokmerge.find_cut(left, right, center=6, rule="piece").found


def test_piece_rule_needs_a_whole_piece_on_both_sides():
    # one run of 4 tokens; piece starts only at its first and second token: no piece after the cut
    toks = np.array([[0, 1, 5, 1], [1, 2, 5, 1], [2, 3, 5, 0], [3, 4, 5, 0]], dtype=np.int64)
    assert not tokmerge.find_cut(toks, toks, center=2, rule="piece").found
    toks[3, 3] = 1
    cut = tokmerge.find_cut(toks, toks, center=2, rule="piece")
    assert (cut.ia, cut.pos) == (1, 1)


@pytest.mark.parametrize("n_left,n_right", [(0, 0), (0, 3), (3, 0), (1, 1)])
def test_empty_and_tiny_inputs(n_left, n_right):
    left = np.array([[i, i + 1, 1, 1] for i in range(n_left)], dtype=np.int64).reshape(-1, 4)
    right = np.array([[i, i + 1, 1, 1] for i in range(n_right)], dtype=np.int64).reshape(-1, 4)
    got = tokmerge.find_cut(left, right, center=0, rule="piece")
    assert tuple(got) == naive.find_cut(left, right, 0, 2, "piece")


def test_three_columns_accepted_for_the_paper_rule():
    toks = np.array([[0, 1, 5], [1, 2, 6]], dtype=np.int32)
    assert tokmerge.find_cut(toks, toks, center=1, rule="paper").found
    with pytest.raises(ValueError, match="shape"):
        tokmerge.find_cut(toks, toks, center=1, rule="piece")


@pytest.mark.parametrize("bad,match", [
    (dict(rule="nope"), "rule"),
    (dict(min_run=0), "min_run"),
])
def test_bad_settings_are_rejected(bad, match):
    toks = np.zeros((2, 4), dtype=np.int64)
    with pytest.raises(ValueError, match=match):
        tokmerge.find_cut(toks, toks, center=0, **bad)


def test_bad_arrays_are_rejected():
    good = np.zeros((2, 4), dtype=np.int64)
    with pytest.raises(ValueError, match="integers"):
        tokmerge.find_cut(good.astype(float), good, center=0)
    unsorted = np.array([[5, 6, 1, 1], [1, 2, 1, 1]], dtype=np.int64)
    with pytest.raises(ValueError, match="non-decreasing"):
        tokmerge.find_cut(unsorted, good, center=0)
    backwards = np.array([[5, 4, 1, 1]], dtype=np.int64)
    with pytest.raises(ValueError, match="START <= END"):
        tokmerge.find_cut(good, backwards, center=0)
