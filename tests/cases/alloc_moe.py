"""Alloc-MoE: synthetic results where every row holds at its best (``good``), and one change per row
that makes it fail (``FAIL``)."""

from cases.rows import set_rows as _set


def good():
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
    # Alloc-T at half budget: each layer's token counts rise with the tokens' routing entropy (t_follows_entropy)
    grid["token_alloc"] = {3: [{"layer": i, "_entropy": (h := rng.uniform(0.5, 2.0, 200)),
                                "_counts": np.clip(np.round(h + rng.normal(0, 0.2, 200)), 1, 6).astype(int)}
                               for i in range(L)]}
    # the profile's calibration segments (16 of 32 tokens): shallow layers lose more per expert dropped,
    # so the half-budget allocation gives them more (shallow_more), on every resample of the segments
    grid["S_parts"], grid["S_weights"] = _parts(rng, [0.3, 0.25, 0.2, 0.1, 0.05, 0.02]), np.full(16, 32.0)
    # the profile itself: every row's baseline (its layer at the native k) near e^5, so its rows are comparable
    # (profile_comparable)
    grid["S"] = _profile(grid["S_parts"])
    # the main subject is one model: its headline is read off its grid (study.from_grid)
    seeds = {None: {"uniform": nll[(3, "uniform")], "alloc-l+t": nll[(3, "alloc-l+t")], "full": grid["full_nll"],
                    "top1": grid["top1_nll"], "alloc": grid["alloc_main"]}}
    # the second subject, the trained MoE, on three training seeds
    second = {s: {"uniform": arm(0.15 + d), "alloc-l+t": arm(0.12 + d), "full": arm(d), "top1": arm(0.3 + d),
                  "alloc": [4, 4, 3, 3, 2, 2]} for s, d in ((0, 0.0), (1, 0.02), (2, -0.01))}
    speed = {"rows": [dict(phase=p, allocation=a, _ratios=r, scope=sc, **{"speed-up": r[1]})
                      for p, r in (("prefill", [1.6, 1.7, 1.65]), ("decode", [1.9, 2.0, 2.1])) for a in ("uniform", "Alloc-MoE")
                      for sc in ("MoE layers only", "MoE + attention projections + head")],
             "grouped_err": 1e-7, "layers": 26, "shape": "dsv2-lite", "allocs": {"Alloc-MoE": [4] * 13 + [2] * 13}}
    return {"grid": grid, "seeds": seeds, "second": {"seeds": second, "info": {}}, "speed": speed, "n_resamples": 999}


def _parts(rng, sens, n=16, K=6):
    import numpy as np

    drop = np.arange(K)[::-1]  # experts dropped at k = 1 .. K
    return (5.0 + np.asarray(sens)[:, None, None] * drop[None, :, None] + rng.normal(0, 0.01, (len(sens), K, n)))


def _profile(parts):
    import numpy as np

    return np.exp(parts.mean(axis=2))  # equal segment weights


def _shallow_row_higher(r, by):
    """The shallowest profile row sits ``by`` nats above the others at every k (its deeper layers at top-1 cost more)."""
    g = r["grid"]
    g["S_parts"] = g["S_parts"].copy()
    g["S_parts"][0] += by
    g["S"] = _profile(g["S_parts"])


def _worse(r, key, by):
    r["grid"]["nll"][key] = r["grid"]["nll"][(key[0], "uniform")] + by


def _alloc_t_gain(r, k, gain):
    r["grid"]["nll"][(k, "alloc-t")] = r["grid"]["nll"][(k, "uniform")] - gain


FAIL = {
    "lt_beats_uniform": lambda r: (_worse(r, (3, "alloc-l+t"), 0.03),
                                   [v.update({"alloc-l+t": v["uniform"] + 0.03}) for v in r["seeds"].values()]),
    # Alloc-L+T loses on the trained MoE's every seed (it still wins on the main subject)
    "across_models": lambda r: [v.update({"alloc-l+t": v["uniform"] + 0.03}) for v in r["second"]["seeds"].values()],
    "l_helps": lambda r: _worse(r, (3, "alloc-l"), 0.02),
    "t_helps": lambda r: _worse(r, (3, "alloc-t"), 0.02),
    "t_tight": lambda r: (_alloc_t_gain(r, 2, 0.001), _alloc_t_gain(r, 5, 0.03)),
    "beats_baselines": lambda r: r["grid"]["nll"].update({(3, "top-p"): r["grid"]["nll"][(3, "alloc-l+t")] - 0.02}),
    "k_base_1": lambda r: r["grid"]["k_base"].update({0: r["grid"]["nll"][(3, "uniform")] - 0.1}),
    "shallow_more": lambda r: (r["grid"].update(alloc_main=[2, 2, 3, 3, 4, 4], S_parts=r["grid"]["S_parts"][::-1].copy()),
                               [v.update(alloc=[2, 2, 3, 3, 4, 4]) for v in r["seeds"].values()]),
    "calib_robust": lambda r: r["grid"].update(nll_alt=r["grid"]["nll"][(3, "alloc-l")] + 0.05),
    # the counts fall with entropy: the allocation sends slots to confident tokens
    "t_follows_entropy": lambda r: [row.update(_counts=row["_counts"].max() + 1 - row["_counts"])
                                    for row in r["grid"]["token_alloc"][3]],
    "speed_prefill": lambda r: _set(r["speed"]["rows"], dict(phase="prefill"), _ratios=[1.05, 1.1, 1.08]),
    "speed_decode": lambda r: _set(r["speed"]["rows"], dict(phase="decode"), _ratios=[1.1, 1.2, 1.3]),
    "budget_exact": lambda r: r["grid"]["budget"].update({(3, "uniform"): 18.5}),
    "budget_matched": lambda r: r["grid"]["budget"].update({(3, "top-p"): 18 * 1.2}),
    "grouped_exact": lambda r: r["speed"].update(grouped_err=1e-2),
    # the controls: top-1 costs 1% on every seed; random-token calibration moves perplexity 0.5%; every K_base
    # within 0.3% of the others
    "experts_matter": lambda r: (r["grid"].update(top1_nll=r["grid"]["full_nll"] + 0.01),
                                 [v.update(top1=v["full"] + 0.01) for v in r["seeds"].values()]),
    "experts_matter_trained": lambda r: [v.update(top1=v["full"] + 0.01) for v in r["second"]["seeds"].values()],
    "calib_matters": lambda r: r["grid"].update(nll_rand=r["grid"]["nll"][(3, "alloc-l")] + 0.005),
    # the shallowest row's baseline e (2.7) times the others': the rows are not comparable
    "profile_comparable": lambda r: _shallow_row_higher(r, 1.0),
    "k_base_matters": lambda r: r["grid"].update(k_base={b: r["grid"]["k_base"][1] + 0.001 * b for b in range(4)}),
}
