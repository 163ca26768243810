"""Alloc-MoE chapter (ACL 2026, arXiv 2604.08133): the tables, from what the study returned.

Pure functions of :func:`acl26.papers.alloc_moe.study.run_experiments`'s results (or parts of them) to
rows, intervals and the saved metrics; no I/O, deterministic (every bootstrap is seeded). The notebook
shows what these return and :mod:`.verdicts` decides the claims from them: the perplexity of per-block
NLLs (:func:`ppl`), the bootstrap of the allocation's shape over calibration segments
(:func:`allocation_bootstrap`), the quality table (:func:`quality_table`), the K_base sweep, the
calibration and seed tables, the token allocation against routing entropy (:func:`token_entropy`),
the ``profile_comparable`` control's figure (:func:`profile_spread`, its bootstrap and rows; issue 40, point 5),
the labelled log-perplexity deviation of Alloc-L (:func:`log_deviation_rows`; issue 40, point 7, never a claim),
the speed tables and :func:`metrics`, everything the notebook saves.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from acl26 import stats
from acl26.papers.alloc_moe.allocation import allocate

#: tokens per calibration segment: the unit the bootstrap of the allocation's shape resamples
SEGMENT = 32

#: each method's name in the tables
LABELS = {"uniform": "uniform top-k", "lexi": "LExI-style (data-free per-layer k)", "top-p": "top-p (Dynamic-MoE)",
          "skip": "dynamic skipping (NAEE-style)", "alloc-l": "Alloc-L", "alloc-t": "Alloc-T", "alloc-l+t": "Alloc-L+T (Alloc-MoE)",
          "full": "unconstrained (native top-k)"}


def ppl(nll: np.ndarray) -> float:
    """The perplexity of per-block (or per-segment) mean NLLs in nats: exp of their mean."""
    return float(math.exp(float(np.mean(nll))))


def allocation_bootstrap(parts: np.ndarray, weights: np.ndarray, budget: int, fn, *, n_resamples: int,
                         seed: int = 0, level: float = 0.95) -> stats.Interval:
    """A percentile bootstrap of ``fn(allocation)`` over the calibration segments of a profile: each
    resample draws the segments with replacement, re-derives S (the token-weighted mean NLL of the drawn
    segments, as a perplexity; +inf where the profile has none) and allocates ``budget`` by the DP.
    The estimate is ``fn`` of the allocation from all the segments."""
    L, K, n = parts.shape
    rng = np.random.default_rng(seed)

    def from_idx(ix):
        w = weights[ix]
        with np.errstate(invalid="ignore"):
            S = np.exp((parts[:, :, ix] * w).sum(axis=2) / w.sum())
        return fn(allocate(np.where(np.isnan(S), np.inf, S), budget))

    est = float(from_idx(np.arange(n)))
    draws = np.array([from_idx(rng.integers(0, n, n)) for _ in range(n_resamples)], dtype=np.float64)
    a = (1 - level) / 2
    lo, hi = (float(v) for v in np.quantile(draws, [a, 1 - a]))
    return stats.Interval(est, min(lo, est), max(hi, est), level, "bootstrap over calibration segments", n)


# --------------------------------------------------------------------------------------------
# the subject and the budgets


def subject_info(info: dict) -> dict:
    """The main subject's description as shown: ``info`` without its native-k table and its empty entries."""
    return {k: v for k, v in info.items() if k != "native_k_table" and v is not None}


def budget_rows(res: dict, budgets) -> list[dict]:
    """One row per budget (a uniform-equivalent k): Σk over the main subject's MoE layers and its share of
    the native top-k."""
    L, K = res["info"]["MoE layers"], res["info"]["native top-k"]
    return [{"k (uniform-equivalent)": k, "budget Σk": k * L, "share of native": k / K} for k in budgets]


# --------------------------------------------------------------------------------------------
# every method at every budget


def quality_table(grid: dict, *, n_resamples: int) -> list[dict]:
    """One row per (budget, method): perplexity, measured budget, load similarity and the paired
    bootstrap interval of its perplexity ratio to uniform top-k at the same budget."""
    L = len(grid["native"])
    rows = [{"budget k": max(grid["native"]), "budget (Σk)": round(grid["full_budget"], 3), "method": LABELS["full"],
             "key": "full", "ppl": ppl(grid["full_nll"]), "ratio to uniform": float("nan"), "ratio lo": float("nan"),
             "ratio hi": float("nan"), "measured Σk": round(grid["full_budget"], 3), "load similarity": 1.0}]
    for (k, m), nll in grid["nll"].items():
        u = grid["nll"][(k, "uniform")]
        iv = stats.paired_bootstrap(nll, u, "ppl_ratio", n_resamples=n_resamples) if m != "uniform" else None
        rows.append({"budget k": k, "budget (Σk)": k * L, "method": LABELS[m], "key": m, "ppl": ppl(nll),
                     "ratio to uniform": iv.estimate if iv else 1.0, "ratio lo": iv.lo if iv else 1.0,
                     "ratio hi": iv.hi if iv else 1.0, "measured Σk": round(grid["budget"][(k, m)], 3),
                     "load similarity": grid["load_sim"][(k, m)]})
    return rows


def allocation_rows(grid: dict) -> list[dict]:
    """One row per (budget, method, layer) of Alloc-L's and the LExI-style allocations: the layer's k."""
    L = len(grid["native"])
    return [{"budget": f"Σk={k * L}", "method": m, "layer": i, "k": kk}
            for (k, m), ks in grid["alloc"].items() if m in ("alloc-l", "lexi") for i, kk in enumerate(ks)]


def allocation_frame(grid: dict) -> pd.DataFrame:
    """Alloc-L's and the LExI-style allocations side by side: one column per (method, budget), one row per layer."""
    L = len(grid["native"])
    return pd.DataFrame({f"{m} @ Σk={k * L}": ks for (k, m), ks in grid["alloc"].items() if m in ("alloc-l", "lexi")},
                        index=[f"layer {i}" for i in range(L)])


def threshold_rows(grid: dict) -> list[dict]:
    """One row per budget: top-p's p and skipping's β matched to it, and the Σk each measured on held-out text."""
    L = len(grid["native"])
    return [{"budget Σk": k * L, "top-p p": v["top-p"], "skipping β": v["skip"],
             "top-p measured Σk": grid["budget"][(k, "top-p")], "skipping measured Σk": grid["budget"][(k, "skip")]}
            for k, v in grid["thresholds"].items()]


def k_base_rows(grid: dict, *, n_resamples: int) -> list[dict]:
    """One row per K_base of the sweep (Alloc-T at half budget): perplexity and the paired bootstrap of its
    ratio to uniform top-k at the same budget."""
    u = grid["nll"][(grid["half"], "uniform")]
    rows = []
    for b, nll in grid["k_base"].items():
        iv = stats.paired_bootstrap(nll, u, "ppl_ratio", n_resamples=n_resamples)
        rows.append({"K_base": b, "ppl": ppl(nll), "ratio to uniform": iv.estimate, "lo": iv.lo, "hi": iv.hi})
    return rows


def token_entropy(counter) -> list[dict]:
    """Per layer of an Alloc-T run's :class:`acl26.papers.alloc_moe.routing.Counter` (``per_token``): Spearman correlation of each token's Alloc-T expert count with its routing entropy."""
    from scipy import stats as sps

    rows = []
    for i in range(counter.n_layers):
        c = np.concatenate(counter.token_counts[i]) if counter.token_counts[i] else np.array([])
        h = np.concatenate(counter.token_entropy[i]) if counter.token_entropy[i] else np.array([])
        rho = float(sps.spearmanr(c, h).statistic) if len(c) > 2 and np.ptp(c) > 0 else float("nan")
        rows.append({"layer": i, "spearman": rho, "mean k": float(c.mean()) if len(c) else float("nan"),
                     "min k": int(c.min()) if len(c) else 0, "max k": int(c.max()) if len(c) else 0,
                     "_counts": c, "_entropy": h})
    return rows


def resampled_ranks(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``scipy.stats.rankdata(x[idx], axis=-1)`` (ranks within each row of resampled indices ``idx``, ties
    averaged), the same float64 values, without sorting each resample: a drawn value's rank is the count of
    drawn values below it plus (the count of drawn values equal to it + 1) / 2, counted per row over ``x``'s
    distinct values (sorted once)."""
    x, idx = np.asarray(x), np.asarray(idx)
    if idx.ndim != 2:
        raise ValueError(f"idx must be 2-D (resamples, draws), got shape {idx.shape}")
    _, code = np.unique(x, return_inverse=True)
    code = code.reshape(-1)
    u = int(code.max()) + 1 if code.size else 0
    drawn = code[idx]  # (rows, draws) value classes, in increasing order of value
    rows = idx.shape[0]
    cnt = np.bincount((drawn + u * np.arange(rows)[:, None]).ravel(), minlength=rows * u).reshape(rows, u)
    avg = (np.cumsum(cnt, axis=1) - cnt) + (cnt + 1) / 2.0
    return np.take_along_axis(avg, drawn, axis=1)


def entropy_link(grid: dict, n_resamples: int, seed: int = 0):
    """Alloc-T at half budget: the mean over MoE layers of the Spearman correlation of each token's allocated
    experts with its routing entropy, and its 95% percentile bootstrap interval over tokens (the same tokens
    resampled in every layer); layers where every token got the same count are left out. None where no layer
    varies (or Alloc-T did not run at half budget)."""
    from scipy import stats as sps

    rows = (grid.get("token_alloc") or {}).get(grid["half"]) or []
    pairs = [(np.asarray(r["_counts"], float), np.asarray(r["_entropy"], float)) for r in rows]
    pairs = [(c, h) for c, h in pairs if len(c) > 2 and len(c) == len(h) and np.ptp(c) > 0 and np.ptp(h) > 0]
    if not pairs:
        return None
    n = min(len(c) for c, _ in pairs)
    pairs = [(c[:n], h[:n]) for c, h in pairs]

    def pearson(rc, rh):  # rows of two rank arrays: one correlation per row (Spearman's, on ranks)
        rc, rh = rc - rc.mean(-1, keepdims=True), rh - rh.mean(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (rc * rh).sum(-1) / np.sqrt((rc * rc).sum(-1) * (rh * rh).sum(-1))

    est = float(np.mean([pearson(sps.rankdata(c), sps.rankdata(h)) for c, h in pairs]))
    rng = np.random.default_rng(seed)
    boot = []
    for start in range(0, n_resamples, 200):  # 200 resamples at a time: memory stays small at any n
        idx = rng.integers(0, n, (min(200, n_resamples - start), n))
        boot.append(np.mean([pearson(resampled_ranks(c, idx), resampled_ranks(h, idx)) for c, h in pairs], axis=0))
    boot = np.concatenate(boot) if boot else np.array([])
    boot = boot[np.isfinite(boot)]
    lo, hi = np.percentile(boot, [2.5, 97.5]) if len(boot) else (est, est)
    return stats.Interval(est, float(min(lo, est)), float(max(hi, est)), 0.95,
                          f"percentile bootstrap over tokens, mean of {len(pairs)} layers", n)


def entropy_rows(grid: dict) -> list[dict]:
    """One row per (budget, layer) of Alloc-T: the Spearman correlation of a token's expert count with its
    routing entropy (:func:`token_entropy`), and the mean, least and most experts a token got."""
    L = len(grid["native"])
    return [{"budget Σk": k * L, "layer": r["layer"], "spearman(k_t, entropy)": r["spearman"],
             "mean k": r["mean k"], "min k": r["min k"], "max k": r["max k"]}
            for k, layers in grid["token_alloc"].items() for r in layers]


def entropy_points(grid: dict) -> pd.DataFrame:
    """Alloc-T at half budget, one row per (layer, token): the experts the token got and its routing entropy."""
    return pd.concat([pd.DataFrame({"layer": r["layer"], "experts for the token": r["_counts"],
                                    "routing entropy (nats)": r["_entropy"]})
                      for r in grid["token_alloc"][grid["half"]]])


def calibration_rows(grid: dict, calib_source: str, calib_alt: str) -> list[dict]:
    """Alloc-L at half budget profiled on each calibration text (and on random token ids, the
    ``calib_matters`` control): its allocation, held-out perplexity and ratio to the first text's."""
    half_l = grid["nll"][(grid["half"], "alloc-l")]
    return [{"calibration text": name, "allocation": al, "ppl (held-out)": ppl(nll),
             "ratio to the first text": ppl(nll) / ppl(half_l)}
            for name, al, nll in ((calib_source, grid["alloc_main"], half_l),
                                  (calib_alt, grid["alloc_alt"], grid["nll_alt"]),
                                  ("random token ids", grid["alloc_rand"], grid["nll_rand"]))]


# --------------------------------------------------------------------------------------------
# the regime control: are the isolated profile's rows comparable? (issue 40, point 5)


def baseline_column(S: np.ndarray, native) -> np.ndarray:
    """Each row's baseline in Alloc-L's isolated profile ``S`` (L, K): ``S[i, native[i] - 1]``, row ``i``'s layer at
    its native top-k (every deeper layer at top-1, every shallower one at its native k)."""
    S = np.asarray(S, dtype=np.float64)
    return np.array([S[i, int(k) - 1] for i, k in enumerate(native)], dtype=np.float64)


def profile_spread(S: np.ndarray, native) -> float:
    """The ``profile_comparable`` control's figure: max_i S[i, K_orig] / min_i S[i, K_orig] (:func:`baseline_column`),
    how far apart the rows' baselines lie; 1 where every row sits on the same perplexity."""
    col = baseline_column(S, native)
    return float(col.max() / col.min())


def profile_spread_bootstrap(parts: np.ndarray, weights: np.ndarray, native, *, n_resamples: int, seed: int = 0,
                             level: float = 0.95) -> stats.Interval:
    """:func:`profile_spread`'s percentile bootstrap over the profile's calibration segments (``parts`` (L, K, n)
    and ``weights`` as :func:`allocation_bootstrap` takes them): each resample draws the segments with replacement
    and re-derives each row's baseline, the token-weighted mean NLL of the drawn segments as a perplexity."""
    parts = np.asarray(parts, dtype=np.float64)
    col = np.stack([parts[i, int(k) - 1] for i, k in enumerate(native)])  # (L, n): each row's baseline segments
    n = col.shape[1]
    rng = np.random.default_rng(seed)

    def spread(ix):
        w = weights[ix]
        logs = (col[:, ix] * w).sum(axis=1) / w.sum()
        return float(np.exp(logs.max() - logs.min()))

    est = spread(np.arange(n))
    draws = np.array([spread(rng.integers(0, n, n)) for _ in range(n_resamples)])
    a = (1 - level) / 2
    lo, hi = (float(v) for v in np.quantile(draws, [a, 1 - a]))
    return stats.Interval(est, min(lo, est), max(hi, est), level, "bootstrap over calibration segments", n)


def regime_rows(grid: dict) -> list[dict]:
    """One row per MoE layer of the main subject: its baseline in the isolated profile (``S[i, K_orig]``), that
    over the smallest baseline (the ``profile_comparable`` control reads the largest of these), and top-1's cost in
    its row (``S[i, 1] / S[i, K_orig]``)."""
    col = baseline_column(grid["S"], grid["native"])
    S = np.asarray(grid["S"], dtype=np.float64)
    return [{"layer": i, "K_orig": int(k), "S[i, K_orig]": float(col[i]), "over the smallest row": float(col[i] / col.min()),
             "S[i, 1] / S[i, K_orig]": float(S[i, 0] / col[i])} for i, k in enumerate(grid["native"])]


# --------------------------------------------------------------------------------------------
# a labelled deviation: Alloc-L's DP over log-perplexity (issue 40, point 7; never a claim)

#: the deviation arm's label wherever it is shown
LOG_DEVIATION = "deviation (not the paper's): Alloc-L, DP over the sum of log-perplexities"


def log_profile(S: np.ndarray) -> np.ndarray:
    """The deviation arm's cost matrix: the log of Alloc-L's profile (+inf, a count beyond a layer's native k, stays
    +inf). The DP over it minimises the sum of log-perplexities, a product of the rows' perplexities, which a row's
    scale no longer dominates; the paper's DP is over the raw perplexities (../shared/papers/alloc-moe.md)."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(S, dtype=np.float64))


def log_deviation_rows(grid: dict, *, n_resamples: int) -> list[dict]:
    """Alloc-L at half budget with the paper's DP (over the perplexities of S) and, labelled as a deviation, with the
    same DP over log S (:func:`log_profile`, the study's ``alloc_log`` / ``nll_log``): each one's allocation,
    held-out perplexity and paired bootstrap ratio to uniform top-k at the same budget. No claim reads the second
    row. Empty for results without the arm."""
    if "nll_log" not in grid:
        return []
    kh = grid["half"]
    u = grid["nll"][(kh, "uniform")]
    rows = []
    for label, al, nll in ((LABELS["alloc-l"] + " (the paper: DP over the sum of perplexities)", grid["alloc_main"],
                            grid["nll"][(kh, "alloc-l")]),
                           (LOG_DEVIATION, grid["alloc_log"], grid["nll_log"])):
        iv = stats.paired_bootstrap(nll, u, "ppl_ratio", n_resamples=n_resamples)
        rows.append({"arm": label, "allocation": list(al), "ppl (held-out)": ppl(nll), "ratio to uniform": iv.estimate,
                     "lo": iv.lo, "hi": iv.hi})
    return rows


# --------------------------------------------------------------------------------------------
# the headline on every model


def seed_table(seeds: dict, info: dict, n_resamples: int) -> list[dict]:
    """One row per model of a headline (``{seed: headline}``): perplexities, the Alloc-L+T / uniform
    ratio with its paired bootstrap over blocks, the top-1 / native ratio (``experts_matter``) and the
    allocation. ``info``: ``{seed: description}`` (its ``val_ppl``, where there is one)."""
    rows = []
    for s, r in seeds.items():
        iv = stats.paired_bootstrap(r["alloc-l+t"], r["uniform"], "ppl_ratio", n_resamples=n_resamples)
        rows.append({"seed": s, "val ppl (models page)": info.get(s, {}).get("val_ppl"),
                     "native ppl": ppl(r["full"]), "top-1 ppl": ppl(r["top1"]), "top-1 / native": ppl(r["top1"]) / ppl(r["full"]),
                     "uniform ppl": ppl(r["uniform"]), "Alloc-L+T ppl": ppl(r["alloc-l+t"]), "ratio": iv.estimate,
                     "lo": iv.lo, "hi": iv.hi, "allocation": r["alloc"]})
    return rows


def seed_rows(res: dict) -> list[dict]:
    """:func:`seed_table` of the main subject (its one model) then of the trained MoE's seeds."""
    nr = res["n_resamples"]
    return (seed_table(res["seeds"], {}, nr)
            + seed_table(res["second"]["seeds"], res["second"]["info"], nr))


def seed_frame(res: dict) -> pd.DataFrame:
    """:func:`seed_rows` as shown, indexed by subject and seed (the main subject's none shown as '—')."""
    df = pd.DataFrame(seed_rows(res))
    df.insert(0, "subject", ["main subject"] * len(res["seeds"]) + ["trained MoE"] * len(res["second"]["seeds"]))
    # the main subject has no training seed: '—' (pandas would turn None into NaN and the seeds into floats)
    df["seed"] = ["—" if s is None else str(s) for s in [*res["seeds"], *res["second"]["seeds"]]]
    return df.set_index(["subject", "seed"])


# --------------------------------------------------------------------------------------------
# speed at real shapes


def curve_rows(curve: dict) -> list[dict]:
    """One row per (path, phase, k) of the speed study's cost curve: ms per layer, median and range over rounds."""
    rows = []
    for who, label in (("ours", "ours (grouped, skips inactive experts)"), ("hf", "transformers grouped_mm")):
        for phase, per_k in curve.get(who, {}).items():
            for k, ts in per_k.items():
                sp = stats.repeat_range([1e3 * t for t in ts])
                rows.append({"path": label, "phase": phase, "k": k, "pairs": curve["pairs"][phase][k],
                             "ms (median)": sp.estimate, "ms min": sp.lo, "ms max": sp.hi})
    return rows


def speed_frame(sp: dict) -> pd.DataFrame:
    """The speed study's stack speed-ups, ours then transformers' ``grouped_mm`` (its allocation so
    marked), without the per-round ratios."""
    rows = sp["rows"] + [dict(r, allocation=r["allocation"] + " (HF grouped_mm)") for r in sp["hf_rows"]]
    return pd.DataFrame(rows).drop(columns=["_ratios"])


def rest_rows(sp: dict) -> list[dict]:
    """The rest of a decoder layer (attention projections) and the head: median ms per call in each phase."""
    curve = sp["curve"]
    return [{"phase": ph, "part": part, "ms per call (median)": 1e3 * np.median(curve[part][ph][0])}
            for part in ("attn", "head") for ph in curve.get(part, {})]


# --------------------------------------------------------------------------------------------
# what the notebook saves


def metrics(res: dict, params: dict) -> dict:
    """Every table of the chapter, as the notebook saves it beside the claims (``ledger.save(metrics=...)``)."""
    grid, info, sp = res["grid"], res["info"], res["speed"]
    nr = res["n_resamples"]
    return {"quality": pd.DataFrame(quality_table(grid, n_resamples=nr)).to_dict("records"),
            "seeds": seed_rows(res),
            "speed_curve": pd.DataFrame(curve_rows(sp["curve"])).to_dict("records"),
            "speed": speed_frame(sp).to_dict("records"),
            "k_base": pd.DataFrame(k_base_rows(grid, n_resamples=nr)).to_dict("records"),
            "calibration": pd.DataFrame(calibration_rows(grid, params["calib_source"], params["calib_alt"])).to_dict("records"),
            "entropy": pd.DataFrame(entropy_rows(grid)).to_dict("records"),
            "profile": grid["S"].tolist(), "profile_random": grid["S_rand"].tolist(), "lexi": grid["lexi"].tolist(),
            "regime": regime_rows(grid),
            # a labelled deviation (issue 40, point 7), never a claim: Alloc-L's DP over log-perplexity
            "deviation_log_dp": log_deviation_rows(grid, n_resamples=nr),
            "alloc": {f"{k}:{m}": v for (k, m), v in grid["alloc"].items()},
            "info": {k: v for k, v in info.items() if k != "seeds"}}
