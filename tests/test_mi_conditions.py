"""Model interpolation under the paper's conditions (issue 39): the paper's ablations (one part left at
Instruct, everything else interpolated), decoding_robust's decision rule, and the conjunctive
"reaches Thinking's accuracy at fewer tokens"."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from acl26 import claims as C
from acl26.papers.model_interpolation import merge as M
from acl26.papers.model_interpolation import spec, verdicts


def _pair(n_layers=3):
    """Two toy state dicts shaped like a LLaMA: embeddings, per-layer attention, MLP and norms, final norm, head."""
    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    for i in range(n_layers):
        names += [f"model.layers.{i}.self_attn.q_proj.weight", f"model.layers.{i}.self_attn.k_norm.weight",
                  f"model.layers.{i}.mlp.up_proj.weight", f"model.layers.{i}.input_layernorm.weight",
                  f"model.layers.{i}.post_attention_layernorm.weight"]
    a = {n: torch.zeros(2, 2) for n in names}
    b = {n: torch.ones(2, 2) for n in names}
    return a, b


def _moved(out):
    """Names of the tensors that were interpolated (0 → 0.5)."""
    return {n for n, t in out.items() if float(t[0, 0]) == 0.5}


def test_skip_a_module_interpolates_everything_else():
    """Paper §5.3: "we either skip all the MHA or FFN sublayers"; embeddings, norms, head are interpolated."""
    a, b = _pair()
    out = M.interpolate(a, b, 0.5, skip="attn")
    moved = _moved(out)
    assert not any(".self_attn." in n for n in moved)  # attention (and its q/k norms) at Instruct
    assert {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"} <= moved
    assert all(f"model.layers.{i}.{p}" in moved for i in range(3)
               for p in ("mlp.up_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"))
    out = M.interpolate(a, b, 0.5, skip=["mlp"])
    assert not any(".mlp." in n for n in _moved(out)) and "lm_head.weight" in _moved(out)
    assert all(torch.equal(out[n], a[n]) for n in a if ".mlp." in n)


def test_skip_layers_interpolates_every_other_tensor():
    """Table 3's rows: a layer range interpolated, the rest of the layers at Instruct, the non-layer tensors
    interpolated (its [0, 35] row equals the full merge)."""
    a, b = _pair()
    out = M.interpolate(a, b, 0.5, skip_layers=[1, 2])
    moved = _moved(out)
    assert {n for n in a if ".layers.0." in n} <= moved and not any(".layers.1." in n or ".layers.2." in n for n in moved)
    assert {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"} <= moved
    full = M.interpolate(a, b, 0.5)
    # skipping nothing would be the full merge; the restriction keywords stay as they were (non-layer at Instruct)
    assert _moved(M.interpolate(a, b, 0.5, layers=[0])) == {n for n in a if ".layers.0." in n}
    assert _moved(full) == set(a)
    both = M.interpolate(a, b, 0.5, skip="mlp", skip_layers=[0])
    assert _moved(both) == {n for n in a if ".mlp." not in n and ".layers.0." not in n}


@pytest.mark.parametrize("kw,match", [
    ({"skip": "ffn"}, "skip must be a non-empty subset"),
    ({"skip": []}, "skip must be a non-empty subset"),
    ({"skip": 3}, "skip must be a non-empty subset"),
    ({"skip": {"attn": 1}}, "skip must be a non-empty subset"),
    ({"skip_layers": []}, "skip_layers must not be empty"),
    ({"skip_layers": "01"}, "skip_layers must be an iterable"),
    ({"skip_layers": [-1]}, "skip_layers"),
    ({"skip_layers": [0.5]}, "skip_layers"),
    ({"skip_layers": [7]}, r"skip_layers \[7\] are not layers of these models \(they have 3\)"),
])
def test_bad_skips_fail_in_one_line(kw, match, tmp_path):
    a, b = _pair()
    with pytest.raises(ValueError, match=match) as e:
        M.interpolate(a, b, 0.5, **kw)
    assert "\n" not in str(e.value)


def test_interpolate_files_takes_the_skips(tmp_path):
    from safetensors.torch import load_file, save_file

    a, b = _pair()
    for name, sd in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp_path / name / "model.safetensors"))
        (tmp_path / name / "config.json").write_text("{}")
    for kw in ({"skip": "attn"}, {"skip_layers": [0]}, {"skip": "mlp", "skip_layers": [2]}):
        out = M.interpolate_files(tmp_path / "a", tmp_path / "b", tmp_path / f"out{len(kw)}{sorted(kw)[0]}", 0.5, **kw)
        got = load_file(str(out / "model.safetensors"))
        ref = M.interpolate(a, b, 0.5, **kw)
        assert all(torch.equal(got[k], ref[k]) for k in ref), kw
    with pytest.raises(ValueError, match="skip_layers"):
        M.interpolate_files(tmp_path / "a", tmp_path / "b", tmp_path / "bad", 0.5, skip_layers=[9])


# ---- decoding_robust: the largest shift from the default on simultaneous intervals


def _simulate(n, k, m, effect, rng, p_range=(0.15, 0.6)):
    """Per-problem Mean@k of the default decoding and ``m`` other decodings, each drawn independently (no
    shared random numbers); the last decoding's accuracy is lower by ``effect``."""
    p = rng.uniform(*p_range, n)
    default = rng.binomial(k, p) / k
    others = [rng.binomial(k, np.clip(p - (effect if j == m - 1 else 0.0), 0, 1)) / k for j in range(m)]
    return default, others


def _verdicts(n, k, effect, runs=60, seed=0):
    test = next(c for c in spec.CLAIMS if c.id == "decoding_robust").test
    rng = np.random.default_rng(seed)
    got = []
    for _ in range(runs):
        d, o = _simulate(n, k, 11, effect, rng)  # the paper's grid: 12 decodings, the default one of them
        iv, _ = verdicts.largest_shift(d, o, n_resamples=499)
        got.append(test.decide(iv))
    return {v: got.count(v) / runs for v in (C.HOLDS, C.FAILS, C.INCONCLUSIVE)}


@pytest.mark.slow
def test_decoding_robust_can_hold_where_nothing_moves():
    """With no decoding effect at all, at the paper profile's size (400 problems, 16 rollouts), it holds in
    most simulated runs (the first rule, the bootstrapped range of the grid's means, held in 0–3%)."""
    share = _verdicts(400, 16, 0.0)
    assert share[C.HOLDS] > 0.5 and share[C.FAILS] <= 0.05, share


def test_decoding_robust_rarely_fails_where_nothing_moves_and_fails_where_something_does():
    """At the book's size (96 problems, 4 rollouts) with no effect it almost never says "does not hold" (it is
    inconclusive: under-powered, not a false "no"); a grid point 30 points off is found in most runs."""
    share = _verdicts(96, 4, 0.0, runs=30)
    assert share[C.FAILS] <= 0.1, share
    share = _verdicts(96, 4, 0.3, runs=30, seed=1)
    assert share[C.FAILS] > 0.5, share


def test_largest_shift_interval_bounds():
    d = np.full(50, 0.5)
    iv, each = verdicts.largest_shift(d, [d.copy(), d + 0.2], n_resamples=199)
    assert iv.estimate == pytest.approx(0.2) and iv.lo == pytest.approx(0.2) and iv.hi == pytest.approx(0.2)
    assert len(each) == 2 and "2 comparisons" in iv.method
    with pytest.raises(ValueError, match="at least one"):
        verdicts.largest_shift(d, [])


# ---- matches_at_fewer_tokens: one claim, two parts


def test_deciding_picks_the_part_that_decides_the_whole():
    """claims.deciding: the intersection-union rule every "both" / "every" claim uses."""
    from acl26 import stats

    test = next(c for c in spec.CLAIMS if c.id == "matches_at_fewer_tokens").test
    iv = lambda lo, hi: stats.Interval((lo + hi) / 2, lo, hi, 0.95, "t", 10)  # noqa: E731
    # both hold: the least favourable decides
    assert C.deciding({"a": iv(0.1, 0.3), "t": iv(0.02, 0.4)}, test) == "t"
    # one fails: it decides, whatever the other says
    assert C.deciding({"a": iv(0.1, 0.3), "t": iv(-0.4, -0.1)}, test) == "t"
    assert C.deciding({"a": iv(-0.3, 0.3), "t": iv(-0.4, -0.1)}, test) == "t"
    # none fails, some open: the coarsest for its own resolution decides
    assert C.deciding({"a": iv(-0.01, 0.3), "t": iv(0.1, 0.4)}, test) == "a"
    assert C.deciding({"a": iv(-0.05, 0.05), "t": iv(-0.1, 0.3)}, test, {"a": 0.01, "t": 0.5}) == "a"
    with pytest.raises(ValueError, match="no parts"):
        C.deciding({}, test)


def test_fewer_tokens_alone_does_not_make_the_claim_hold():
    """A λ that answers in fewer tokens but far below Thinking's accuracy does not "reach Thinking's accuracy
    at fewer tokens" (the first run's fewer_tokens_gsm8k held alone on such a pair)."""
    from cases import model_interpolation as mi_cases

    r = mi_cases.synthetic()
    g = r["gsm8k"][0.8]
    r["gsm8k"][0.8] = {**g, "correct": [[False] * g["k"] for _ in g["correct"]]}
    led = C.Ledger("model_interpolation", "book", list(spec.CLAIMS))
    verdicts.record_claims(led, r)
    e = led.entries["matches_at_fewer_tokens_gsm8k"]
    assert e.measured == C.FAILS and "decided by the accuracy part" in e.note and "tokens 0.6" in e.shown
