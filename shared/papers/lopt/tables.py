"""LoPT chapter (ACL 2026, arXiv 2511.04952): the study's results as rows, intervals and the saved metrics.

Pure functions of what :func:`acl26.papers.lopt.study.run_experiments` returns (``{"exactness", "speed",
"sweep"}``) or of its parts: no I/O, no timing, deterministic. The notebook ``notebooks/lopt.ipynb`` displays
and plots what they return; :mod:`.verdicts` reads :func:`in_regime` and :func:`parallel_factors`.

* exactness: :func:`exact_summary`, :func:`exact_table`, :func:`exact_rates`, :func:`growing_table`, the
  paper's rule by regime (:func:`in_regime`, :func:`regime_of`, :func:`regime_table`,
  :func:`paper_rule_rows`), and the failing runs to decode (:func:`mismatch_cases`);
* speed: medians (:func:`speed_summary`), phases (:func:`phase_rows`), chunking against parallelism
  (:func:`decomposition`), same-repeat ratios with their range over repeats (:func:`parallel_factors`,
  :func:`factor_table`);
* the overlap sweep: :func:`sweep_table`, :func:`sweep_failures`;
* :func:`metrics`, what the notebook saves with the ledger.
"""

from __future__ import annotations

import pandas as pd

from acl26 import stats

# --------------------------------------------------------------------------------------------
# exactness


def exact_summary(rows: list[dict]) -> pd.DataFrame:
    """Exact-match rate and runs per (setting, method) of :func:`.study.exactness` rows."""
    ex = pd.DataFrame(rows)
    return (ex.groupby(["setting", "method"])["exact"].agg(["mean", "size"])
              .rename(columns={"mean": "exact-match rate", "size": "runs"}))


def exact_table(rows: list[dict], methods: list[str]) -> pd.DataFrame:
    """Method x tokenizer x text: the exact-match rate over every setting (a column per method, in the order of
    ``methods``), and the runs per method (counted on the first method)."""
    ex = pd.DataFrame(rows)
    table = ex.pivot_table(index=["tokenizer", "text"], columns="method", values="exact", aggfunc="mean")[methods]
    table["runs per method"] = ex[ex.method == methods[0]].groupby(["tokenizer", "text"]).size()
    return table


def exact_rates(rows: list[dict]) -> pd.DataFrame:
    """Exact-match rate per (method, text), over every tokenizer and setting: columns method, text, exact."""
    return pd.DataFrame(rows).groupby(["method", "text"])["exact"].mean().reset_index()


def growing_table(rows: list[dict]) -> pd.DataFrame:
    """LoPT's boundaries, failed boundaries, growing rounds, fallbacks and sequential runs, summed per (method,
    setting), for both cut rules."""
    ex = pd.DataFrame(rows)
    lp = ex[ex.method.isin(["lopt", "lopt-paper-rule"])]
    return (lp.groupby(["method", "setting"])[["boundaries", "failed_boundaries", "retries", "fallback", "sequential"]]
              .sum().astype(int))


def in_regime(row: dict) -> bool:
    """The run's overlap is longer than the longest pre-token piece of its text (the paper's regime)."""
    return row.get("longest_piece") is not None and row["overlap_chars"] > row["longest_piece"]


#: the regimes :func:`regime_table` reports outside the paper's, by overlap ÷ longest pre-token piece (upper
#: bounds, inclusive)
REGIMES = ((0.1, "outside: overlap ≤ 0.1 × longest piece"), (0.5, "outside: 0.1–0.5 × longest piece"),
           (1.0, "outside: 0.5–1 × longest piece (equal included)"))
#: :func:`regime_table`'s label of the runs in the paper's regime (:data:`.spec.PAPER_REGIME` says what it is)
PAPER_REGIME_LABEL = "paper's regime: overlap > longest piece"


def regime_of(row: dict) -> str:
    """The :func:`regime_table` label of one run: :data:`PAPER_REGIME_LABEL`, or one of :data:`REGIMES`."""
    if in_regime(row):
        return PAPER_REGIME_LABEL
    ratio = row["overlap_chars"] / max(1, row.get("longest_piece") or 0) if row.get("longest_piece") else 0.0
    return next((label for hi, label in REGIMES if ratio <= hi), REGIMES[-1][1])


def regime_table(rows: list[dict]) -> list[dict]:
    """Exact-match rate of runs by regime (overlap ÷ longest pre-token piece): the paper's regime, where its
    exactness claim is decided, and the settings outside it, shown apart (a table, not a verdict)."""
    out = {}
    for r in rows:
        t = out.setdefault(regime_of(r), dict(regime=regime_of(r), runs=0, merged=0, exact_runs=0))
        t["runs"] += 1
        t["merged"] += not r.get("sequential", False)
        t["exact_runs"] += bool(r["exact"])
    order = [PAPER_REGIME_LABEL] + [label for _, label in reversed(REGIMES)]
    table = [out[k] for k in order if k in out]
    for t in table:
        t["exact"] = t.pop("exact_runs") / t["runs"]
    return table


def paper_rule_rows(results: dict) -> list[dict]:
    """Every run of the paper's cut rule: its exactness rows (every setting), then its overlap-sweep rows."""
    return ([r for r in results["exactness"] if r["method"] == "lopt-paper-rule"]
            + [r for r in results["sweep"] if r["rule"] == "paper"])


def mismatch_cases(rows: list[dict], params: dict) -> dict[str, list[dict]]:
    """Per method compared with sequential encoding (all of ``params["methods"]`` but ``lopt``), up to five failing
    runs to decode, the shortest input first: the arguments of :func:`.study.mismatch_example` (an adversarial
    run's own string, else a text prefix: ``full_chars`` characters at the default setting, ``sweep_chars``
    otherwise). An empty list: no mismatch in these runs."""
    ex = pd.DataFrame(rows)
    out: dict[str, list[dict]] = {}
    for method in [m for m in params["methods"] if m not in ("lopt",)]:
        bad = ex[(ex.method == method) & (~ex.exact)]
        out[method] = [
            dict(tokenizer=row.tokenizer, text_name=row.text, method=method, chunk_chars=int(row.chunk_chars),
                 overlap_chars=int(row.overlap_chars),
                 n_chars=(params["full_chars"] or None) if row.setting == "default" else params["sweep_chars"],
                 text=row["sample"] if row.setting == "adversarial" else None)
            for _, row in bad.sort_values(["n_chars"]).head(5).iterrows()]
    return out


# --------------------------------------------------------------------------------------------
# speed: medians, speed-ups, and chunking against parallelism


def speed_summary(rows: list[dict]) -> list[dict]:
    """Median times per (tokenizer, length, method, workers) of :func:`.study.speed` rows, with the speed-up
    over sequential ``encode`` and the merge share of LoPT's wall time."""
    sp = pd.DataFrame(rows)
    parts = [c for c in ("total", "split", "encode", "merge", "match", "assemble") if c in sp.columns]
    med = sp.groupby(["tokenizer", "n_chars", "method", "workers"])[parts].median().reset_index()
    seq = med[med.method == "sequential"].set_index(["tokenizer", "n_chars"])["total"]
    labels = {"sequential": "HF tokenizer.encode (sequential)", "backend": "backend encode, whole text (sequential)"}
    med["label"] = [labels.get(m, f"LoPT, {w} worker(s)") for m, w in zip(med.method, med.workers)]
    med["speed-up"] = [seq[(t, n)] / tot for t, n, tot in zip(med.tokenizer, med.n_chars, med.total)]
    if (med.method == "backend").any():
        bk = med[med.method == "backend"].set_index(["tokenizer", "n_chars"])["total"]
        med["speed-up over backend"] = [bk.get((t, n), float("nan")) / tot
                                        for t, n, tot in zip(med.tokenizer, med.n_chars, med.total)]
    med["merge share"] = med["merge"] / med["total"]
    return med.to_dict("records")


def phase_rows(summary: list[dict]) -> pd.DataFrame:
    """LoPT's median split / encode / merge times at the longest length timed, one row per (tokenizer, workers,
    phase): columns tokenizer, workers, phase, seconds, and ``run`` ("llama3, 2 worker(s)")."""
    med = pd.DataFrame(summary)
    largest = med[(med.n_chars == med.n_chars.max()) & (med.method == "lopt")]
    parts = largest.melt(id_vars=["tokenizer", "workers"], value_vars=["split", "encode", "merge"],
                         var_name="phase", value_name="seconds")
    parts["run"] = parts.tokenizer + ", " + parts.workers.astype(str) + " worker(s)"
    return parts


def decomposition(summary: list[dict]) -> list[dict]:
    """At the longest length timed, per tokenizer: the total speed-up of LoPT at the most workers
    over sequential ``encode``, split into chunking alone (sequential over LoPT with 1 worker)
    and the parallel gain (1 worker over the most workers), with a sentence reading each."""
    if not summary:
        return []
    top = max(r["n_chars"] for r in summary)
    wmax = max(r["workers"] for r in summary if r["method"] == "lopt")
    out = []
    for tname in dict.fromkeys(r["tokenizer"] for r in summary):
        t = {(r["method"], r["workers"]): r["total"] for r in summary
             if r["tokenizer"] == tname and r["n_chars"] == top}
        seq, many, one = t[("sequential", 1)], t[("lopt", wmax)], t.get(("lopt", 1))
        bk = t.get(("backend", 1))
        row = dict(tokenizer=tname, n_chars=top, workers=wmax, sequential_s=seq, backend_s=bk, lopt_1_s=one,
                   lopt_s=many, speedup=seq / many, speedup_backend=bk / many if bk else None,
                   chunking=None, parallel=None, reading="")
        if one is not None and wmax >= 2:
            row["chunking"], row["parallel"] = seq / one, one / many
            if row["chunking"] > 1.05:
                text = (f"one worker on the same chunks is already {row['chunking']:.2f}× faster than sequential "
                        "encode, so the sequential encoder is slower per character on one long string than on chunks")
            else:
                text = f"chunking alone changes little ({row['chunking']:.2f}×); the speed-up is parallelism"
            if row["parallel"] <= wmax * 1.05:
                text += f"; parallel gain {row['parallel']:.2f}× with {wmax} workers (at most the worker count, as it must be)."
            else:
                text += (f"; parallel gain {row['parallel']:.2f}× with {wmax} workers, above the worker count: the "
                         "one-worker runs were slowed by something other than parallelism (run-to-run noise on this "
                         "shared machine, or memory allocation); read the decomposition as approximate.")
            row["reading"] = text
        out.append(row)
    return out


def parallel_factors(rows: list[dict]) -> dict[str, dict]:
    """Per tokenizer, at the longest length timed, per repeat (the same repeat's runs are paired; their order
    rotated with the repeat, :func:`.study.speed`), with the median and range over repeats
    (:func:`acl26.stats.repeat_range`):

    * ``parallel``: LoPT with 1 worker over LoPT with the most workers (what parallelism adds);
    * ``parallel_2``: the same, 1 → 2 workers; ``faster_2``: ``tokenizer.encode`` over LoPT with 2 workers;
    * ``speedup`` / ``speedup_backend``: ``tokenizer.encode`` / the backend's encode over LoPT with the most
      workers;
    * ``match_share``: the cut search's share of LoPT's wall time with 2 workers (the merge proper), and
      ``assemble_share``, assembling the output ids, timed apart (rows without them: None).
    """
    if not rows:
        return {}
    top = max(r["n_chars"] for r in rows)
    wmax = max(r["workers"] for r in rows if r["method"] == "lopt")
    out = {}
    for tname in dict.fromkeys(r["tokenizer"] for r in rows):
        by_rep: dict[int, dict] = {}
        for r in rows:
            if r["tokenizer"] == tname and r["n_chars"] == top:
                by_rep.setdefault(r["repeat"], {})[(r["method"], r["workers"])] = r
        vals: dict[str, list] = {k: [] for k in ("parallel", "parallel_2", "faster_2", "speedup", "speedup_backend",
                                                 "match_share", "assemble_share")}
        for t in by_rep.values():
            tot = {k: v["total"] for k, v in t.items()}
            if ("lopt", 1) in tot and ("lopt", wmax) in tot and wmax >= 2:
                vals["parallel"].append(tot[("lopt", 1)] / tot[("lopt", wmax)])
            if ("lopt", 1) in tot and ("lopt", 2) in tot:
                vals["parallel_2"].append(tot[("lopt", 1)] / tot[("lopt", 2)])
            if ("sequential", 1) in tot and ("lopt", 2) in tot:
                vals["faster_2"].append(tot[("sequential", 1)] / tot[("lopt", 2)])
            if ("sequential", 1) in tot and ("lopt", wmax) in tot:
                vals["speedup"].append(tot[("sequential", 1)] / tot[("lopt", wmax)])
            if ("backend", 1) in tot and ("lopt", wmax) in tot:
                vals["speedup_backend"].append(tot[("backend", 1)] / tot[("lopt", wmax)])
            two = t.get(("lopt", 2))
            if two is not None and two.get("match") is not None and two["total"] > 0:
                vals["match_share"].append(two["match"] / two["total"])
                vals["assemble_share"].append(two.get("assemble", 0.0) / two["total"])
        out[tname] = dict(n_chars=top, workers=wmax,
                          **{k: stats.repeat_range(v) if v else None for k, v in vals.items()})
    return out


def factor_table(rows: list[dict]) -> pd.DataFrame:
    """:func:`parallel_factors` of :func:`.study.speed` rows as a table, one row per tokenizer: the parallel
    factor (1 → the most workers) and the speed-ups over ``tokenizer.encode`` and over the backend's encode,
    each "median× [min, max], n = repeats" ("—" where not timed)."""
    names = {"parallel": "parallel factor (1 → max workers)", "speedup": "over tokenizer.encode",
             "speedup_backend": "over backend encode"}
    return pd.DataFrame([{"tokenizer": t, **{names[k]: (f"{iv.estimate:.2f}× [{iv.lo:.2f}, {iv.hi:.2f}], n = {iv.n}"
                                                        if iv else "—")
                                             for k, iv in f.items() if k in names}}
                         for t, f in parallel_factors(rows).items()]).set_index("tokenizer")


# --------------------------------------------------------------------------------------------
# the overlap sweep


def sweep_table(rows: list[dict]) -> pd.DataFrame:
    """Per (rule, overlap) of :func:`.study.overlap_sweep` rows: the mean first-round failure rate, the growing
    rounds and fallbacks (sums), and the fraction of exact outputs."""
    sw = pd.DataFrame(rows)
    return (sw.groupby(["rule", "overlap_chars"])[["failed_rate", "retries", "fallback", "exact"]]
              .agg({"failed_rate": "mean", "retries": "sum", "fallback": "sum", "exact": "mean"}))


def sweep_failures(rows: list[dict]) -> pd.DataFrame:
    """The mean first-round failure rate per (rule, overlap): columns rule, overlap_chars, failed_rate."""
    return pd.DataFrame(rows).groupby(["rule", "overlap_chars"])["failed_rate"].mean().reset_index()


# --------------------------------------------------------------------------------------------
# the saved metrics


def metrics(results: dict) -> dict:
    """What the notebook saves with the ledger: ``exact_summary`` (:func:`exact_summary`), ``speed`` (the
    :func:`speed_summary` medians without their labels) and ``sweep`` (:func:`sweep_failures`), as records."""
    return {
        "exact_summary": exact_summary(results["exactness"]).reset_index().to_dict("records"),
        "speed": pd.DataFrame(speed_summary(results["speed"])).drop(columns=["label"]).to_dict("records"),
        "sweep": sweep_failures(results["sweep"]).to_dict("records"),
    }
