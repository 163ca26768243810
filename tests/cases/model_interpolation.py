"""Model interpolation: synthetic sweep results (a clear three-stage curve) where every row holds
(``good``, also ``synthetic``), and one change per row that makes it fail (``FAIL``)."""

import numpy as np

from acl26.papers.model_interpolation import spec, stages, tables


def rec(correct, think, tokens, k):
    return {"k": k, "correct": correct, "think": think, "tokens": tokens, "answers": [["1"] * k for _ in correct],
            "golds": ["1"] * len(correct), "finished": [[True] * k for _ in correct], "seconds": 0.0, "examples": []}


def synthetic(n=120, k=4, seed=0):
    # 120 problems, and one draw per rollout shared across λ (a problem is as hard at every λ): enough that
    # the "matches" claims' paired intervals resolve their 0.05 margin (Claim.needs)
    rng = np.random.default_rng(seed)
    lams = [0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0]
    think_p = {0.0: 0, 0.2: 0, 0.4: 0.02, 0.5: 0.5, 0.6: 0.97, 0.8: 1, 1.0: 1}
    acc_p = {0.0: 0.2, 0.2: 0.2, 0.4: 0.35, 0.5: 0.6, 0.6: 0.85, 0.8: 0.9, 1.0: 0.72}
    tok = {0.0: 5, 0.2: 5, 0.4: 6, 0.5: 20, 0.6: 30, 0.8: 40, 1.0: 55}
    sw = {}
    u = rng.random((n, k))
    for lam in lams:
        c = (u < acc_p[lam]).tolist()
        t = (rng.random((n, k)) < think_p[lam]).tolist()
        tk = rng.poisson(tok[lam], (n, k)).tolist()
        sw[lam] = rec(c, t, tk, k)
    false, true = [[False] * k] * n, [[True] * k] * n
    var = {
        "TA": rec((rng.random((n, k)) < 0.3).tolist(), false, [[5] * k] * n, k),
        spec.ties_name(0.2): rec((rng.random((n, k)) < 0.35).tolist(), false, [[6] * k] * n, k),
        spec.ties_name(0.8): rec((rng.random((n, k)) < 0.4).tolist(), false, [[6] * k] * n, k),
        # the paper's ablations (§5.3): one part left at Instruct, everything else interpolated
        spec.ONLY_FIRST: rec(false, false, [[5] * k] * n, k),
        spec.ONLY_LATE: rec(true, true, [[40] * k] * n, k),
        spec.SKIP_MLP: rec(false, false, [[5] * k] * n, k),
        spec.SKIP_ATTN: rec(true, true, [[40] * k] * n, k),
    }
    # the decoding grid at the band's lower end (0.4): no decoding effect (the default's own rollouts)
    grid = [spec.grid_name(0.4, t, p) for t in (0.6, 0.7) for p in (0.8, 0.95)]
    for g in grid:
        var[g] = sw[0.4]
    var["λ 0.4, T 2 (must matter)"] = rec((rng.random((n, k)) < 0.02).tolist(), sw[0.4]["think"], sw[0.4]["tokens"], k)
    gsm_acc, gsm_tok = {0.0: 0.1, 0.8: 0.6, 1.0: 0.6}, {0.0: 8, 0.8: 30, 1.0: 50}
    ug = rng.random((n, k))
    gsm = {lam: rec((ug < gsm_acc[lam]).tolist(), [[lam > 0] * k] * n,
                    rng.poisson(gsm_tok[lam], (n, k)).tolist(), k) for lam in gsm_acc}
    # the decisive λ (0, the band's ends 0.4 and 0.6, best 0.8 = 0.6 + 0.2, 1): here the sweep's own records
    return {"sweep": sw, "decisive": {lam: sw[lam] for lam in (0.0, 0.4, 0.6, 0.8, 1.0)},
            "band": stages.band(lams, [tables.summary(sw[x])["think"] for x in lams]), "grid_lambda": 0.4,
            "ablation_lambda": 0.8, "ablation_offset": 0.2, "variants": var,
            "grid": grid, "grid_default": "λ 0.4, T 0.6, top-p 0.95", "grid_control": "λ 0.4, T 2 (must matter)",
            "ties": [spec.ties_name(0.2), spec.ties_name(0.8)],
            "gsm8k": gsm, "best_lambda": 0.8, "sigma": 0.02, "sigma_pooled": 0.02, "endpoint_error": 0.0,
            "n_resamples": 499}


good = synthetic


def _mi_set(r, where, lam, **change):
    """Replace the record at ``r[where][lam]`` by a copy with ``change`` (records may be shared)."""
    r[where][lam] = {**r[where][lam], **change}


def _mi_const(r, where, lam, value):
    rec = r[where][lam]
    return [[value] * rec["k"] for _ in rec["correct"]]


def _cut(where, *names):
    def change(r):
        for x in names:
            _mi_set(r, where, x, finished=_mi_const(r, where, x, False))
    return change


FAIL = {
    "think_sigmoid": lambda r: [_mi_set(r, "sweep", lam, think=_mi_const(r, "sweep", lam, False)) for lam in r["sweep"]],
    "mean_jumps": lambda r: (_mi_set(r, "decisive", 0.4, correct=_mi_const(r, "decisive", 0.4, False)),
                             _mi_set(r, "decisive", 0.6, correct=[[True, False, False, False]] * len(r["decisive"][0.6]["correct"]))),
    "length_grows": lambda r: _mi_set(r, "decisive", 1.0, tokens=_mi_const(r, "decisive", 1.0, 10)),
    "matches_at_fewer_tokens": lambda r: _mi_set(r, "decisive", 0.8, tokens=_mi_const(r, "decisive", 0.8, 100)),
    "beats_merging": lambda r: _mi_set(r, "variants", spec.ties_name(0.8),
                                       correct=_mi_const(r, "variants", spec.ties_name(0.8), True)),
    "mlp_drives": lambda r: (_mi_set(r, "variants", spec.SKIP_ATTN, think=_mi_const(r, "variants", spec.SKIP_ATTN, False)),
                             _mi_set(r, "variants", spec.SKIP_MLP, think=_mi_const(r, "variants", spec.SKIP_MLP, True))),
    "late_layers": lambda r: _mi_set(r, "variants", spec.ONLY_LATE,
                                     think=_mi_const(r, "variants", spec.ONLY_LATE, False)),
    "decoding_robust": lambda r: _mi_set(r, "variants", "λ 0.4, T 0.7, top-p 0.8",
                                         correct=_mi_const(r, "variants", "λ 0.4, T 0.7, top-p 0.8", True)),
    "matches_at_fewer_tokens_gsm8k": lambda r: _mi_set(r, "gsm8k", 0.8, correct=_mi_const(r, "gsm8k", 0.8, False)),
    "thinking_thinks": lambda r: _mi_set(r, "decisive", 1.0, think=_mi_const(r, "decisive", 1.0, False)),
    "thinking_better": lambda r: _mi_set(r, "decisive", 1.0, correct=_mi_const(r, "decisive", 1.0, False)),
    "cut_off_sweep": _cut("sweep", 0.5),
    "cut_off_band": _cut("decisive", 0.4),
    "cut_off_length": _cut("decisive", 1.0),
    "cut_off_best": _cut("decisive", 0.8),
    "cut_off_merging": _cut("variants", "TA"),
    "cut_off_modules": _cut("variants", spec.SKIP_MLP),
    "cut_off_layers": _cut("variants", spec.ONLY_FIRST),
    "cut_off_grid": _cut("variants", "λ 0.4, T 0.7, top-p 0.95"),
    "decoding_matters": lambda r: _mi_set(r, "variants", "λ 0.4, T 2 (must matter)",
                                          correct=r["decisive"][0.4]["correct"]),
    "full_merge_thinks": lambda r: _mi_set(r, "decisive", 0.8, think=_mi_const(r, "decisive", 0.8, False)),
    "thinking_better_gsm8k": lambda r: _mi_set(r, "gsm8k", 1.0, correct=_mi_const(r, "gsm8k", 1.0, False)),
    "few_cut_off_gsm8k": _cut("gsm8k", 0.8),
    "endpoints_exact": lambda r: r.update(endpoint_error=1e-3),
    "pair_close": lambda r: r.update(sigma=0.5),
}
