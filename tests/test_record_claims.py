"""Every chapter's verdicts are decided by its record_claims, tested on synthetic results: for each
claim one case where it holds and one where it fails (thresholds are fixed in acl26, not here)."""

import copy

import pytest

from acl26 import claims as C
from acl26 import registry

import mi_cases
import mta_cases

# --------------------------------------------------------------------------------------------
# synthetic results where every claim holds, and one change per claim that makes it fail


def lopt_good():
    ex = [dict(method="lopt", setting=s, exact=True) for s in ("default", "random", "adversarial")]
    ex += [dict(method="lopt-paper-rule", setting=s, exact=True) for s in ("default", "random", "adversarial")]
    ex += [dict(method=m, setting="random", exact=e) for m in ("naive", "overlap-ids", "delimiter") for e in (True, False)]
    ex += [dict(method=m, setting="default", exact=e) for m in ("naive", "overlap-ids", "delimiter") for e in (True, False)]
    sw = [dict(rule=r, exact=True) for r in ("piece", "paper")]
    n = 10_000_000

    def row(method, workers, total, merge):
        return dict(tokenizer="llama3", n_chars=n, repeat=0, method=method, workers=workers, total=total, split=0.0,
                    encode=total - merge, merge=merge, same=True)

    sp = [row("sequential", 1, 6.0, 0.0), row("backend", 1, 5.0, 0.0), row("lopt", 1, 4.0, 0.04),
          row("lopt", 2, 2.0, 0.02)]
    ex.append(dict(method="lopt", setting="adversarial", exact=True, sequential=True))  # counted apart
    return {"exactness": ex, "sweep": sw, "speed": sp}


def _set(rows, where, **change):
    for r in rows:
        if all(r.get(k) == v for k, v in where.items()):
            r.update(change)


LOPT_FAIL = {
    "exact": lambda r: _set(r["exactness"], dict(method="lopt", setting="random"), exact=False),
    "paper_rule_default": lambda r: _set(r["exactness"], dict(method="lopt-paper-rule", setting="default"), exact=False),
    "paper_rule_any": lambda r: _set(r["sweep"], dict(rule="paper"), exact=False),
    # decided at the default settings alone: lossy elsewhere does not count
    "naive_lossy": lambda r: _set(r["exactness"], dict(method="naive", setting="default"), exact=True),
    "ids_lossy": lambda r: _set(r["exactness"], dict(method="overlap-ids", setting="default"), exact=True),
    "delim_lossy": lambda r: _set(r["exactness"], dict(method="delimiter", setting="default"), exact=True),
    "speedup": lambda r: _set(r["speed"], dict(method="lopt", workers=2), total=3.0),
    "merge_cheap": lambda r: _set(r["speed"], dict(method="lopt", workers=2), merge=0.1),
}


def sherry_good():
    def speed_row(fmt, tok_s, stream_bits, weight_mb, total_mb):
        return dict(shape="bitnet-0.7b", paper_row="0.7B", format=fmt, status="ok", decode_tok_s=tok_s,
                    decode_runs=[tok_s * 0.98, tok_s * 1.02, tok_s], threads=2,
                    stream_bits_per_weight=stream_bits, weight_mb=weight_mb, total_mb=total_mb)

    # three seeds, paired: absmean 2% above full precision, 3:4 with Arenas 0.4% below 3:4 without
    qat_seeds = {"fp": {0: 237.0, 1: 238.0, 2: 236.5}, "absmean": {0: 242.0, 1: 243.0, 2: 241.5},
                 "sparse34": {0: 241.0, 1: 242.0, 2: 240.5}, "sparse34+arenas": {0: 240.0, 1: 241.1, 2: 239.4}}
    return {
        "bits": {"sherry": {"streams": 1.25, "scales": 0.0078}},
        "speed": [speed_row("sherry", 50.0, 1.25, 100.0, 190.0), speed_row("i2", 40.0, 2.0, 160.0, 250.0),
                  speed_row("tl2", 45.0, 5 / 3, 135.0, 225.0), speed_row("ggml-tq2_0", 42.0, None, 170.0, 260.0),
                  speed_row("ggml-tq1_0", 38.0, None, 140.0, 230.0),
                  dict(shape="bitnet-3b", format="sherry", status="skipped")],
        "ptq": [dict(mode="fp", ppl=23.8), dict(mode="absmean", ppl=6.7e7), dict(mode="sparse34", ppl=1.5e6)],
        "qat_ppl": {v: x[0] for v, x in qat_seeds.items()},
        "qat_seeds": qat_seeds,
        "trapping": [dict(variant=v, seed=sd, layer=l, **{"stuck share": sh + 0.001 * sd + (0.0005 * sd if l == "up_proj" else 0),
                                                          "grad effective rank (mean)": 30.0})
                     for v, sh in (("absmean", 0.80), ("sparse34", 0.83), ("sparse34+arenas", 0.80))
                     for sd in (0, 1, 2) for l in ("q_proj", "up_proj")],
        "packed": {"fake_ppl": 240.0, "packed_ppl": 240.00001},
        # files of the trained 3:4 model: quantized layers 48% of the 2-bit file; Sherry's file 80% of it
        "model_file": {"variant": "sparse34+arenas", "exact": True, "mismatched": [], "tensors": 90, "layers": 42,
                       "weights": 4_349_952, "bytes": {"sherry": 2_000_000, "i2": 2_500_000, "bf16": 12_000_000},
                       "layer_bytes": {"sherry": 700_000, "i2": 1_200_000, "bf16": 8_700_000}},
        "llamacpp_gemv": [dict(format=f, round=r, us=us, shape="4096x14336", threads=1)
                          for r in (0, 1) for f, us in (("sherry", 800.0), ("TQ2_0", 970.0), ("TQ1_0", 2000.0))],
    }


def _seeds(r, variant, f):
    """Replace a variant's per-seed perplexities by ``f(seed, old)`` (the first seed's is also ``qat_ppl``)."""
    r["qat_seeds"][variant] = {s: f(s, v) for s, v in r["qat_seeds"][variant].items()}
    r["qat_ppl"][variant] = r["qat_seeds"][variant][0]


def _stuck(r, variant, f):
    for row in r["trapping"]:
        if row["variant"] == variant:
            row["stuck share"] = f(row["seed"], row["stuck share"])


SHERRY_FAIL = {
    "bits": lambda r: r["bits"]["sherry"].update(streams=1.3125),
    "size_subject": lambda r: r["model_file"]["layer_bytes"].update(i2=300_000),  # 12% of the 2-bit file
    "size": lambda r: r["model_file"]["bytes"].update(sherry=2_400_000),
    "speed_vs_tl2": lambda r: _set(r["speed"], dict(format="tl2"), decode_tok_s=55.0, decode_runs=[55.0, 54.0, 56.0]),
    "speed_vs_i2": lambda r: _set(r["speed"], dict(format="ggml-tq2_0"), decode_tok_s=55.0, decode_runs=[55.0, 54.0, 56.0]),
    "speed_vs_ggml": lambda r: _set(r["llamacpp_gemv"], dict(format="TQ2_0"), us=700.0),
    "ptq_collapses": lambda r: _set(r["ptq"], dict(mode="sparse34"), ppl=50.0),
    # absmean ternary 1% *better* than full precision on every seed: QAT does not separate them
    "qat_separates": lambda r: _seeds(r, "absmean", lambda s, v: r["qat_seeds"]["fp"][s] * 0.99),
    # the Arenas model 4% better on one seed, 3% worse on another: the ratios' interval is about ±0.09
    "ppl_resolves": lambda r: _seeds(r, "sparse34+arenas", lambda s, v: r["qat_seeds"]["sparse34"][s] * (0.96, 1.03, 1.0)[s]),
    # 3:4's stuck share 3 points above absmean's on one seed, 0 and 6 on the others
    "trap_resolves": lambda r: _stuck(r, "sparse34", lambda s, v: v + (0.0, -0.03, 0.03)[s]),
    "arenas_gain": lambda r: _seeds(r, "sparse34+arenas", lambda s, v: r["qat_seeds"]["sparse34"][s] * 1.02),
    "matches_158": lambda r: (_seeds(r, "sparse34+arenas", lambda s, v: r["qat_seeds"]["absmean"][s] * 1.08),
                              _seeds(r, "sparse34", lambda s, v: r["qat_seeds"]["absmean"][s] * 1.09)),
    "trapping": lambda r: _stuck(r, "sparse34", lambda s, v: v - 0.04),  # 1 point below absmean on every seed
    "arenas_frees": lambda r: _stuck(r, "sparse34+arenas", lambda s, v: v + 0.025),  # only 0.5 point below 3:4
    "packed_exact": lambda r: r["packed"].update(packed_ppl=241.0),
    "file_exact": lambda r: r["model_file"].update(exact=False, mismatched=["sherry: model.layers.0.mlp.up_proj.weight"]),
}


def models_good():
    return {"smollm2_ppl": 22.05, "ppl_chars": 0, "ppl_context": 2048, "ppl_stride": 1024, "dense_ppl": 251.5,
            "moe_ppl": 255.2, "unigram": 889.2, "moe_top_k": 6,
            "top_k": [dict(top_k=k, val_ppl=v) for k, v in ((1, 332.9), (2, 282.0), (6, 256.2))]}


MODELS_FAIL = {
    "smollm2_ppl": lambda r: r.update(smollm2_ppl=30.0),
    "dense_learns": lambda r: r.update(dense_ppl=500.0),
    "moe_learns": lambda r: r.update(moe_ppl=450.0),
    "experts_matter": lambda r: _set(r["top_k"], dict(top_k=1), val_ppl=270.0),
}

def alloc_moe_good():
    import numpy as np

    rng = np.random.default_rng(0)
    n, L = 24, 6
    base = rng.normal(5.5, 0.3, n)

    def arm(offset):
        return base + offset + rng.normal(0, 1e-3, n)

    gain_t = {2: 0.03, 3: 0.02, 4: 0.01, 5: 0.004}
    nll, budget, alloc = {}, {}, {}
    for k in (2, 3, 4, 5):
        u = (6 - k) * 0.05
        offs = {"uniform": u, "lexi": u - 0.004, "top-p": u - 0.004, "skip": u - 0.004, "alloc-l": u - 0.01,
                "alloc-t": u - gain_t[k], "alloc-l+t": u - gain_t[k] - 0.01}
        for m, o in offs.items():
            nll[(k, m)] = arm(o)
            budget[(k, m)] = k * L * (1.01 if m in ("top-p", "skip") else 1.0)
            if m not in ("top-p", "skip"):
                alloc[(k, m)] = [k] * L
    alloc[(3, "alloc-l")] = alloc[(3, "alloc-l+t")] = [4, 4, 3, 3, 2, 2]
    grid = {"native": [6] * L, "nll": nll, "budget": budget, "alloc": alloc, "alloc_main": [4, 4, 3, 3, 2, 2],
            "alloc_alt": [4, 3, 4, 3, 2, 2], "half": 3, "full_nll": arm(0.0), "nll_alt": nll[(3, "alloc-l")] + 0.001,
            # controls: top-1 costs 35% (experts_matter); random-token calibration costs 5% (calib_matters);
            # K_base 0, an end of the sweep, is 5% worse than the best K_base 1 (k_base_matters)
            "top1_nll": arm(0.3), "alloc_rand": [2, 2, 3, 3, 4, 4], "nll_rand": nll[(3, "alloc-l")] + 0.05,
            "k_base": {0: arm(0.15 - 0.02 + 0.05), 1: nll[(3, "alloc-t")], 2: arm(0.15 - 0.01), 3: nll[(3, "uniform")]}}
    seeds = {s: {"uniform": arm(0.15 + d), "alloc-l+t": arm(0.12 + d), "full": arm(d), "top1": arm(0.3 + d),
                 "alloc": [4, 4, 3, 3, 2, 2]} for s, d in ((0, 0.0), (1, 0.02), (2, -0.01))}
    speed = {"rows": [dict(phase=p, allocation=a, _ratios=r, scope=sc, **{"speed-up": r[1]})
                      for p, r in (("prefill", [1.6, 1.7, 1.65]), ("decode", [1.9, 2.0, 2.1])) for a in ("uniform", "Alloc-MoE")
                      for sc in ("MoE layers only", "MoE + attention projections + head")],
             "grouped_err": 1e-7, "layers": 26, "shape": "dsv2-lite", "allocs": {"Alloc-MoE": [4] * 13 + [2] * 13}}
    return {"grid": grid, "seeds": seeds, "speed": speed, "n_resamples": 999}


def _worse(r, key, by):
    r["grid"]["nll"][key] = r["grid"]["nll"][(key[0], "uniform")] + by


def _alloc_t_gain(r, k, gain):
    r["grid"]["nll"][(k, "alloc-t")] = r["grid"]["nll"][(k, "uniform")] - gain


ALLOC_MOE_FAIL = {
    "lt_beats_uniform": lambda r: [v.update({"alloc-l+t": v["uniform"] + 0.03}) for v in r["seeds"].values()],
    "l_helps": lambda r: _worse(r, (3, "alloc-l"), 0.02),
    "t_helps": lambda r: _worse(r, (3, "alloc-t"), 0.02),
    "t_tight": lambda r: (_alloc_t_gain(r, 2, 0.001), _alloc_t_gain(r, 5, 0.03)),
    "beats_baselines": lambda r: r["grid"]["nll"].update({(3, "top-p"): r["grid"]["nll"][(3, "alloc-l+t")] - 0.02}),
    "k_base_1": lambda r: r["grid"]["k_base"].update({0: r["grid"]["nll"][(3, "uniform")] - 0.1}),
    "shallow_more": lambda r: (r["grid"].update(alloc_main=[2, 2, 3, 3, 4, 4]),
                               [v.update(alloc=[2, 2, 3, 3, 4, 4]) for v in r["seeds"].values()]),
    "calib_robust": lambda r: r["grid"].update(nll_alt=r["grid"]["nll"][(3, "alloc-l")] + 0.05),
    "speed_prefill": lambda r: _set(r["speed"]["rows"], dict(phase="prefill"), _ratios=[1.05, 1.1, 1.08]),
    "speed_decode": lambda r: _set(r["speed"]["rows"], dict(phase="decode"), _ratios=[1.1, 1.2, 1.3]),
    "budget_exact": lambda r: r["grid"]["budget"].update({(3, "uniform"): 18.5}),
    "budget_matched": lambda r: r["grid"]["budget"].update({(3, "top-p"): 18 * 1.2}),
    "grouped_exact": lambda r: r["speed"].update(grouped_err=1e-2),
    # the controls: top-1 costs 1% on every seed; random-token calibration moves perplexity 0.5%; every K_base
    # within 0.3% of the others
    "experts_matter": lambda r: (r["grid"].update(top1_nll=r["grid"]["full_nll"] + 0.01),
                                 [v.update(top1=v["full"] + 0.01) for v in r["seeds"].values()]),
    "calib_matters": lambda r: r["grid"].update(nll_rand=r["grid"]["nll"][(3, "alloc-l")] + 0.005),
    "k_base_matters": lambda r: r["grid"].update(k_base={b: r["grid"]["k_base"][1] + 0.001 * b for b in range(4)}),
}


def _mi_set(r, where, lam, **change):
    """Replace the record at ``r[where][lam]`` by a copy with ``change`` (records may be shared)."""
    r[where][lam] = {**r[where][lam], **change}


def _mi_const(r, where, lam, value):
    rec = r[where][lam]
    return [[value] * rec["k"] for _ in rec["correct"]]


MODEL_INTERPOLATION_FAIL = {
    "think_sigmoid": lambda r: [_mi_set(r, "sweep", lam, think=_mi_const(r, "sweep", lam, False)) for lam in r["sweep"]],
    "mean_jumps": lambda r: (_mi_set(r, "sweep", 0.4, correct=_mi_const(r, "sweep", 0.4, False)),
                             _mi_set(r, "sweep", 0.6, correct=[[True, False, False, False]] * 30)),
    "length_grows": lambda r: _mi_set(r, "sweep", 1.0, tokens=_mi_const(r, "sweep", 1.0, 10)),
    "matches_thinking": lambda r: _mi_set(r, "sweep", 0.8, correct=_mi_const(r, "sweep", 0.8, False)),
    "fewer_tokens": lambda r: _mi_set(r, "sweep", 0.8, tokens=_mi_const(r, "sweep", 0.8, 100)),
    "beats_merging": lambda r: _mi_set(r, "variants", "TA", correct=_mi_const(r, "variants", "TA", True)),
    "mlp_drives": lambda r: (_mi_set(r, "variants", "mlp only", think=_mi_const(r, "variants", "mlp only", False)),
                             _mi_set(r, "variants", "attn only", think=_mi_const(r, "variants", "attn only", True))),
    "late_layers": lambda r: _mi_set(r, "variants", "layers: last two thirds",
                                     think=_mi_const(r, "variants", "layers: last two thirds", False)),
    "decoding_robust": lambda r: _mi_set(r, "variants", "λ 0.5, T 1, top-p 0.95",
                                         correct=_mi_const(r, "variants", "λ 0.5, T 1, top-p 0.95", True)),
    "thinking_thinks": lambda r: _mi_set(r, "sweep", 1.0, think=_mi_const(r, "sweep", 1.0, False)),
    "thinking_better": lambda r: _mi_set(r, "sweep", 1.0, correct=_mi_const(r, "sweep", 1.0, False)),
    "few_cut_off": lambda r: _mi_set(r, "sweep", 1.0, finished=_mi_const(r, "sweep", 1.0, False)),
    "endpoints_exact": lambda r: r.update(endpoint_error=1e-3),
    "pair_close": lambda r: r.update(sigma=0.5),
}


MTA_FAIL = {
    "improves_sfkl": lambda r: mta_cases.set_mean(r, "MTA", 16.0),
    "improves_fkl": lambda r: _mta_worse(r, "fkl"),
    "improves_srkl": lambda r: _mta_worse(r, "srkl"),
    "dsa_over_hid": lambda r: mta_cases.set_mean(r, "+Hid only", 26.0),
    "word_and_phrase": lambda r: mta_cases.set_mean(r, "phrase units only", 28.0),
    "importance_helps": lambda r: mta_cases.set_mean(r, "no importance weights", 28.0),
    "overhead": lambda r: r["timing"].update(MTA=[2.0, 2.2, 1.9, 2.1]),
    "student_recovers": lambda r: r["recovery"]["log"]["final"].update(val_ppl=2e7),
    "kd_learns": lambda r: r["evals"]["start"].update(nll=[1.0] * mta_cases.N_PAIRS),
    "teacher_ahead": lambda r: r["evals"].update(teacher=mta_cases.rec(5.0, 9)),
    "trl_agrees": lambda r: r.update(trl_diff=1e-3),
}


def _mta_worse(r, base):
    """MTA worse than the base loss ``base`` on every seed."""
    for s in r["seeds"]:
        r["runs"][f"{base}|MTA|{s}"] = mta_cases.rec(15.0, s, noise=0.5, salt=77)


CASES = {"lopt": (lopt_good, LOPT_FAIL), "sherry": (sherry_good, SHERRY_FAIL), "models": (models_good, MODELS_FAIL),
         "alloc_moe": (alloc_moe_good, ALLOC_MOE_FAIL),
         "model_interpolation": (mi_cases.synthetic, MODEL_INTERPOLATION_FAIL),
         "mta": (mta_cases.synthetic, MTA_FAIL)}


def verdicts(chapter_id, results):
    ch = registry.get(chapter_id)
    ledger = C.Ledger(ch.id, "book", list(ch.claims))
    ch.record_claims(ledger, results)
    assert not ledger.missing(), f"{chapter_id}: record_claims left claims unrecorded: {ledger.missing()}"
    return {cid: e.holds for cid, e in ledger.entries.items()}


def test_every_chapter_has_cases_for_every_claim():
    assert set(CASES) == set(registry.CHAPTERS), "a chapter without synthetic cases for its record_claims"
    for cid, (_, fail) in CASES.items():
        assert set(fail) == {c.id for c in registry.get(cid).claims}, f"{cid}: a claim without a failing case"


@pytest.mark.parametrize("chapter_id", list(CASES))
def test_every_claim_holds_on_good_results(chapter_id):
    """Every claim reaches the best verdict its measurement allows: holds, or, where our figure only
    bounds the claimed one from one side (Claim.one_sided), inconclusive."""
    good, _ = CASES[chapter_id]
    best = {c.id: C.INCONCLUSIVE if c.one_sided == C.FAILS else C.HOLDS for c in registry.get(chapter_id).claims}
    assert verdicts(chapter_id, good()) == best


@pytest.mark.parametrize("chapter_id,claim_id", [(c, k) for c, (_, fail) in CASES.items() for k in fail])
def test_each_claim_fails_on_its_failing_case(chapter_id, claim_id):
    good, fail = CASES[chapter_id]
    results = copy.deepcopy(good())
    fail[claim_id](results)
    got = verdicts(chapter_id, results)
    assert got[claim_id] == C.FAILS, f"{chapter_id}.{claim_id}: expected 'no', got {got[claim_id]!r}"


def test_untested_when_the_profile_cannot_test_a_claim():
    r = lopt_good()
    for row in r["speed"]:
        row["n_chars"] = 300_000
    got = verdicts("lopt", r)
    assert got["speedup"] == got["merge_cheap"] == C.UNTESTED
    m = models_good()
    m["ppl_chars"] = 3000
    assert verdicts("models", m)["smollm2_ppl"] == C.UNTESTED
    s = sherry_good()
    s["speed"] = [row for row in s["speed"] if row["format"] != "tl2"]
    s["packed"] = None
    s["llamacpp_gemv"] = None
    assert verdicts("sherry", s)["speed_vs_ggml"] == C.UNTESTED
    got = verdicts("sherry", s)
    assert got["speed_vs_i2"] == got["packed_exact"] == C.UNTESTED and got["size"] == C.HOLDS
    s["speed"] = [row for row in s["speed"] if row["format"] != "i2"]
    assert verdicts("sherry", s)["size"] == C.HOLDS  # measured on the files, not the speed table
    s["model_file"] = None
    got = verdicts("sherry", s)
    assert got["size"] == got["file_exact"] == C.UNTESTED and got["size_subject"] == C.UNTESTED


def test_sherry_speed_vs_i2_is_decided_against_llamacpp_tq2_0_not_our_lookup_i2():
    r = sherry_good()
    _set(r["speed"], dict(format="i2"), decode_tok_s=60.0, decode_runs=[60.0, 61.0, 59.0])  # our I2 faster: ignored
    assert verdicts("sherry", r)["speed_vs_i2"] == C.HOLDS
    r["speed"] = [row for row in r["speed"] if row["format"] != "ggml-tq2_0"]
    r["speed"].append(dict(shape="bitnet-0.7b", format="ggml-tq2_0", status="skipped", reason="llama.cpp is not built"))
    ch = registry.get("sherry")
    ledger = C.Ledger("sherry", "book", list(ch.claims))
    ch.record_claims(ledger, r)
    e = ledger.entries["speed_vs_i2"]
    assert e.holds == C.UNTESTED and "llama.cpp is not built" in e.note and "lookup-table I2" in e.note


def test_sherry_speed_claims_are_decided_on_per_round_ratios():
    r = sherry_good()
    # Sherry ahead in two rounds, behind in one: the range over rounds straddles 1
    _set(r["speed"], dict(format="tl2"), decode_tok_s=45.0, decode_runs=[45.0, 44.0, 52.0])
    _set(r["speed"], dict(format="sherry"), decode_tok_s=50.0, decode_runs=[50.0, 51.0, 49.0])
    assert verdicts("sherry", r)["speed_vs_tl2"] == C.INCONCLUSIVE


def test_sherry_accuracy_ratios_are_decided_on_a_block_bootstrap_when_given():
    import numpy as np

    rng = np.random.default_rng(1)
    base = rng.normal(5.5, 0.2, 64)
    r = sherry_good()
    r["qat_seeds"] = {v: {0: x} for v, x in r["qat_ppl"].items()}  # one seed: the blocks decide
    r["qat_block_nll"] = {"sparse34": list(base), "absmean": list(base + 0.002 + rng.normal(0, 0.003, 64)),
                          "sparse34+arenas": list(base - 0.01 + rng.normal(0, 0.003, 64))}
    got = verdicts("sherry", r)
    assert got["arenas_gain"] == C.HOLDS and got["matches_158"] == C.HOLDS
    r["qat_block_nll"]["sparse34+arenas"] = list(base + rng.normal(0, 0.02, 64))  # no consistent difference
    assert verdicts("sherry", r)["arenas_gain"] == C.INCONCLUSIVE


def _sherry_ledger(r):
    ch = registry.get("sherry")
    ledger = C.Ledger("sherry", "book", list(ch.claims))
    ch.record_claims(ledger, r)
    return ledger


@pytest.mark.parametrize("control", [c.id for c in registry.get("sherry").claims if c.kind == "control"])
def test_sherry_a_failing_control_makes_the_claims_naming_it_not_testable(control):
    named = [c.id for c in registry.get("sherry").claims if control in c.controls]
    assert named, f"the control {control} is named by no claim"
    r = copy.deepcopy(sherry_good())
    SHERRY_FAIL[control](r)
    ledger = _sherry_ledger(r)
    assert ledger.entries[control].holds == C.FAILS
    for cid in named:
        e = ledger.entries[cid]
        assert e.holds == C.NOT_TESTABLE, f"{cid}: {e.holds}"
        assert e.note.startswith(f"not testable here: control {control}") and e.shown not in ("", "—")


def test_sherry_kinds_and_controls():
    kinds = {c.id: (c.kind, c.controls) for c in registry.get("sherry").claims}
    assert kinds["bits"] == ("fact", ()) and kinds["ptq_collapses"][0] == kinds["packed_exact"][0] == "check"
    assert kinds["size"] == ("claim", ("size_subject",))
    assert kinds["arenas_gain"][1] == kinds["matches_158"][1] == ("qat_separates", "ppl_resolves")
    assert kinds["trapping"][1] == kinds["arenas_frees"][1] == ("trap_resolves",)


def test_sherry_one_seed_without_blocks_leaves_the_accuracy_claims_not_testable():
    r = sherry_good()
    r["qat_seeds"] = {v: {0: x} for v, x in r["qat_ppl"].items()}
    r["trapping"] = [row for row in r["trapping"] if row["seed"] == 0]
    ledger = _sherry_ledger(r)
    got = {cid: e.holds for cid, e in ledger.entries.items()}
    # the separation is decided on the first seed's point; the resolutions have no interval to be measured on
    assert got["qat_separates"] == C.HOLDS and got["ppl_resolves"] == got["trap_resolves"] == C.UNTESTED
    assert "no interval" in ledger.entries["ppl_resolves"].note
    assert all(got[c] == C.NOT_TESTABLE for c in ("arenas_gain", "matches_158", "trapping", "arenas_frees"))
    # the 3:4 model's measurement still shows beside the verdict
    assert "240.0" in ledger.entries["arenas_gain"].shown


def test_sherry_size_is_decided_on_the_files_only_when_they_load_back_exact():
    r = sherry_good()
    ledger = _sherry_ledger(r)
    e = ledger.entries["size"]
    assert e.holds == C.HOLDS and e.ours == pytest.approx(0.8) and "BF16 file" in e.shown
    assert ledger.entries["size_subject"].ours == pytest.approx(0.48)
    SHERRY_FAIL["file_exact"](r)
    ledger = _sherry_ledger(r)
    assert ledger.entries["file_exact"].holds == C.FAILS
    assert ledger.entries["size"].holds == C.UNTESTED and "bit-exact" in ledger.entries["size"].note


def test_sherry_noisy_rows_show_half_width_against_margin():
    ledger = _sherry_ledger(sherry_good())
    for cid in ("qat_separates", "arenas_gain", "matches_158", "trapping", "arenas_frees"):
        e = ledger.entries[cid]
        assert e.interval is not None and e.half_width is not None and e.margin is not None, cid
        assert "t-interval over 3 seeds" in e.note, cid


def test_models_checks_are_decided_across_seeds_when_there_are_several():
    m = models_good()
    m["seeds"] = [{"dense / unigram": 0.28, "moe / unigram": 0.29, "top-1 cost": c} for c in (0.30, 0.13, 0.2)]
    got = verdicts("models", m)
    assert got["experts_matter"] == C.INCONCLUSIVE  # mean 0.21, but three seeds spread it below 0.10
    m["seeds"] = [{"dense / unigram": 0.28, "moe / unigram": 0.29, "top-1 cost": c} for c in (0.30, 0.28, 0.31)]
    assert verdicts("models", m)["experts_matter"] == C.HOLDS


def test_lopt_exactness_counts_only_merged_runs_and_speed_can_be_inconclusive():
    r = lopt_good()
    r["exactness"].append(dict(method="lopt", setting="random", exact=False, sequential=True))
    ch = registry.get("lopt")
    ledger = C.Ledger("lopt", "book", list(ch.claims))
    ch.record_claims(ledger, r)
    e = ledger.entries["exact"]
    assert e.holds == C.HOLDS and "merged runs" in e.shown and "counted apart" in e.note
    # a second repeat whose parallel factor is below the threshold: the range straddles it
    extra = [dict(row, repeat=1) for row in r["speed"]]
    _set(extra, dict(method="lopt", workers=2), total=2.4)  # 4.0 / 2.4 = 1.67
    r["speed"] += extra
    assert verdicts("lopt", r)["speedup"] == C.INCONCLUSIVE


def test_sherry_claims_across_seeds_are_decided_on_the_seed_interval():
    r = sherry_good()
    r["qat_seeds"] = {"absmean": {0: 242.0, 1: 243.0, 2: 241.0}, "sparse34": {0: 241.0, 1: 242.0, 2: 240.0},
                      "sparse34+arenas": {0: 240.0, 1: 241.0, 2: 239.0}}
    r["trapping"] = [dict(variant=v, seed=s, layer="q_proj", **{"stuck share": sh + 0.001 * s,
                                                                "grad effective rank (mean)": 30.0})
                     for v, sh in (("absmean", 0.80), ("sparse34", 0.83), ("sparse34+arenas", 0.80)) for s in (0, 1, 2)]
    got = verdicts("sherry", r)
    assert got["arenas_gain"] == got["matches_158"] == got["trapping"] == got["arenas_frees"] == C.HOLDS
    r["qat_seeds"]["sparse34+arenas"] = {0: 239.0, 1: 243.0, 2: 241.5}  # better on one seed, worse on another
    assert verdicts("sherry", r)["arenas_gain"] == C.INCONCLUSIVE


def test_alloc_moe_untested_and_one_seed_cases():
    r = alloc_moe_good()
    r["speed"] = None
    r["speed_reason"] = "skipped here"
    r["seeds"] = {0: r["seeds"][0]}
    got = verdicts("alloc_moe", r)
    assert got["speed_prefill"] == got["speed_decode"] == got["grouped_exact"] == C.UNTESTED
    assert got["lt_beats_uniform"] == C.HOLDS  # one model: decided on the paired bootstrap over blocks
    r["grid"]["k_base"] = {3: r["grid"]["k_base"][3]}
    got = verdicts("alloc_moe", r)
    assert got["k_base_1"] == got["k_base_matters"] == C.UNTESTED


@pytest.mark.parametrize("control", ["experts_matter", "k_base_matters", "calib_matters"])
def test_alloc_moe_claims_are_not_testable_when_their_control_fails(control):
    ch = registry.get("alloc_moe")
    kinds = {c.id: c.kind for c in ch.claims}
    assert kinds[control] == "control"
    naming = {c.id for c in ch.claims if control in c.controls}
    assert naming, f"no claim names the control {control}"
    if control == "experts_matter":  # every claim about perplexity names it
        assert naming == {"lt_beats_uniform", "l_helps", "t_helps", "t_tight", "beats_baselines", "shallow_more",
                          "k_base_1", "calib_robust"}
    r = copy.deepcopy(alloc_moe_good())
    ALLOC_MOE_FAIL[control](r)
    ledger = C.Ledger(ch.id, "book", list(ch.claims))
    ch.record_claims(ledger, r)
    for cid, e in ledger.entries.items():
        if cid == control:
            assert e.holds == C.FAILS
        elif cid in naming:
            assert e.holds == C.NOT_TESTABLE and e.measured == C.HOLDS, cid
            assert e.note.startswith(f"not testable here: control {control}"), e.note
        else:  # the one-sided speed claims can at best be inconclusive
            assert e.holds == (C.INCONCLUSIVE if e.claim.one_sided == C.FAILS else C.HOLDS), cid


def test_alloc_moe_one_seed_controls_use_the_block_bootstrap_and_speed_is_moe_only():
    r = alloc_moe_good()
    r["seeds"] = {0: r["seeds"][0]}
    ch = registry.get("alloc_moe")
    ledger = C.Ledger(ch.id, "book", list(ch.claims))
    ch.record_claims(ledger, r)
    e = ledger.entries["experts_matter"]
    assert e.holds == C.HOLDS and e.interval.method == "paired bootstrap over blocks"
    assert ledger.entries["shallow_more"].interval is None  # one seed: the allocation is a point
    # the speed claims read the MoE-only stack at Alloc-MoE's allocation, not uniform k or the stack with the rest
    _set(r["speed"]["rows"], dict(allocation="uniform"), _ratios=[1.0, 1.0, 1.0])
    _set(r["speed"]["rows"], dict(scope="MoE + attention projections + head"), _ratios=[1.0, 1.0, 1.0])
    got = verdicts("alloc_moe", r)  # an upper bound above the paper's figure shows nothing either way
    assert got["speed_prefill"] == got["speed_decode"] == C.INCONCLUSIVE
    _set(r["speed"]["rows"], dict(allocation="Alloc-MoE", scope="MoE layers only"), _ratios=[1.0, 1.05, 1.1])
    assert verdicts("alloc_moe", r)["speed_prefill"] == C.FAILS  # below it: the whole model cannot reach it


def test_mta_untested_base_losses_and_local_student():
    r = mta_cases.synthetic()
    r["recovery"] = None
    r["base_losses"] = ["sfkl"]  # the book profile: the other base losses did not run
    got = verdicts("mta", r)
    assert got["improves_fkl"] == got["improves_srkl"] == got["student_recovers"] == C.UNTESTED
    assert got["improves_sfkl"] == C.HOLDS


def test_mta_main_comparison_is_inconclusive_when_the_seeds_disagree():
    r = mta_cases.synthetic()
    mta_cases.set_mean(r, "MTA", 26.0, seeds=[0])
    mta_cases.set_mean(r, "MTA", 14.0, seeds=[1])
    assert verdicts("mta", r)["improves_sfkl"] == C.INCONCLUSIVE


def test_lopt_baselines_are_decided_at_the_defaults_and_the_paper_rule_leads():
    r = lopt_good()
    r["exactness"] = [x for x in r["exactness"] if not (x["setting"] == "default" and x["method"] != "lopt"
                                                         and x["method"] != "lopt-paper-rule")]
    got = verdicts("lopt", r)  # lossy only at small chunks and hostile strings: not decided
    assert got["naive_lossy"] == got["ids_lossy"] == got["delim_lossy"] == C.UNTESTED
    kinds = [(c.id, c.kind) for c in registry.get("lopt").claims]
    assert kinds[0] == ("paper_rule_default", "claim") and ("exact", "check") in kinds
