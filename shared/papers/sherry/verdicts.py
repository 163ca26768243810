"""Sherry chapter (ACL 2026, arXiv 2601.07892): the verdicts, decided from :func:`acl26.papers.sherry.study.run_experiments`'s
results, the controls first."""

from __future__ import annotations

import numpy as np

from acl26 import claims as C
from acl26.papers.sherry import tables
from acl26.papers.sherry.spec import (ARENAS_FADED, CLAIMS, PAPER_MB, PAPER_SIZE_RATIO, PAPER_SIZE_SHARE,  # noqa: F401
                                      PPL_RESOLUTION, RANK_RESOLUTION, SPEED_SHERRY, SPEED_TL2,
                                      TWO_BIT_PEERS)


def _ratio_inputs(results: dict, a: str, b: str) -> dict | None:
    """The inputs of :meth:`acl26.claims.Ledger.record_noisy` for the perplexity ratio of variant ``a``
    over ``b``: per-seed ratios (seeds paired: all variants of one seed see the same batches), the
    per-block NLLs of the first seed (a paired bootstrap of the ratio of perplexities), the first
    seed's ratio; None where either variant is missing."""
    ppl = results.get("qat_ppl") or {}
    if not {a, b} <= set(ppl):
        return None
    by_seed = results.get("qat_seeds") or {}
    nll = results.get("qat_block_nll") or {}
    common = sorted(set(by_seed.get(a, {})) & set(by_seed.get(b, {})), key=str)
    return dict(per_seed=[by_seed[a][s] / by_seed[b][s] for s in common] if len(common) >= 2 else None,
                paired=(nll[a], nll[b]) if a in nll and b in nll else None, point=ppl[a] / ppl[b],
                statistic="ppl_ratio")


RANK = tables.INPUT_RANK


def _rank_ratio_inputs(results: dict, a: str, b: str, key: str = RANK) -> dict | None:
    """The inputs of ``record_noisy`` for the ratio of a gradient effective rank (``key``: dL/dX's, or
    :data:`.tables.WEIGHT_RANK`), variant ``a`` over ``b`` (each the mean over the tracked layers and the
    snapshots of training): per seed where two or more seeds have both (seeds paired), else a paired
    bootstrap over the first seed's snapshots (``rank_snapshots``, dL/dX's: the same layers at the same steps
    in every variant), and the ratio of the means over everything; None where either variant has no finite rank."""
    per = _trapping_means(results, key, lambda row: (row["variant"], row.get("seed")))
    if not {a, b} <= {v for v, _ in per}:
        return None
    seeds = sorted(({s for v, s in per if v == a} & {s for v, s in per if v == b}) - {None}, key=str)
    mean = _variant_means(results, key)
    snaps = (results.get("rank_snapshots") or {}) if key == RANK else {}
    paired = None
    if a in snaps and b in snaps and len(snaps[a]) == len(snaps[b]) >= 2:
        paired = (snaps[a], snaps[b])
    return dict(per_seed=[per[(a, s)] / per[(b, s)] for s in seeds] if len(seeds) >= 2 else None,
                paired=paired, point=mean[a] / mean[b], statistic="ratio_of_means", means=mean, unit="snapshots")


def _trapping_means(results: dict, key: str, group) -> dict:
    """The mean of a trapping statistic ``key`` over the rows of each ``group(row)`` (NaN left out)."""
    acc: dict = {}
    for row in results.get("trapping") or []:
        if np.isfinite(row.get(key, np.nan)):
            acc.setdefault(group(row), []).append(row[key])
    return {g: float(np.mean(x)) for g, x in acc.items()}


def _variant_means(results: dict, key: str) -> dict[str, float]:
    """The mean of a trapping statistic per variant, over its tracked layers and seeds (NaN left out)."""
    return _trapping_means(results, key, lambda row: row["variant"])


def _noisy(inputs: dict):
    """``acl26.stats.noisy`` on :func:`_ratio_inputs` / :func:`_diff_inputs`: ``(value, interval, how)``."""
    from acl26 import stats

    return stats.noisy(inputs["per_seed"], inputs["paired"], inputs["point"], statistic=inputs["statistic"],
                       unit=inputs.get("unit", "blocks"))


def _record(ledger: C.Ledger, cid: str, inputs: dict, shown: str, note: str = "", needs: float | None = None) -> None:
    """Decide ``cid`` on its interval; with ``needs`` (a claim's resolution), a claim measured on one run with no
    per-seed, per-block or per-snapshot figures has no interval and is not testable here (a point decides
    nothing noisy), naming any of its controls that do not hold too."""
    if needs is not None and inputs["per_seed"] is None and inputs["paired"] is None:
        failed = [c for c in ledger.entries[cid].claim.controls if ledger.entries[c].holds != C.HOLDS]
        ledger.not_testable(cid, f"one seed and no per-{inputs.get('unit', 'blocks').rstrip('s')} figures: no interval, "
                            "and a single run cannot decide a noisy ratio"
                            + "".join(f"; control {c}: {ledger.entries[c].holds}" for c in failed), shown=shown)
        return
    ledger.record_noisy(cid, per_seed=inputs["per_seed"], paired=inputs["paired"], point=inputs["point"],
                        statistic=inputs["statistic"], shown=shown, note=note, unit=inputs.get("unit", "blocks"),
                        needs=needs)


def _settled(ledger: C.Ledger, results: dict) -> None:
    """``arenas_settled`` on :func:`.tables.arenas_settle`: the largest |relative change| of the Arenas run's
    perplexity over its last two evaluations (a full evaluation interval apart), over the seeds. Untested, saying
    that the control's condition is not met, where those evaluations do not both lie where lambda <
    :data:`ARENAS_FADED` (the residual had not faded), and where no run has such a pair; the claims naming it are
    then not testable here."""
    rows = tables.arenas_settle(results)
    if not rows:
        ledger.untested("arenas_settled", "no Arenas run with two evaluations a full interval apart during training")
        return
    early = [r for r in rows if not r["faded"]]
    worst = max(rows, key=lambda r: abs(r["relative change"]))
    shown = (f"largest change {worst['relative change']:+.2%} (seed {worst['seed']}: ppl {worst['ppl before']:.2f} → "
             f"{worst['ppl last']:.2f} at steps {worst['steps']}, λ {worst['lambda']}); "
             + ", ".join(f"seed {r['seed']} {r['relative change']:+.2%}" for r in rows))
    note = "evaluations during training on the first held-out blocks (at most 4), Arenas' residual at 0"
    if early:  # the control's condition is not met: nothing to decide the change on
        ledger.untested("arenas_settled", f"the control's condition is not met: the residual had not faded (λ ≥ "
                        f"{ARENAS_FADED:g}) at the last two evaluations of "
                        + "; ".join(f"seed {r['seed']} (steps {r['steps']}, λ {r['lambda']})" for r in early), shown=shown)
        return
    ledger.record("arenas_settled", abs(worst["relative change"]), shown=shown, note=note)


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every Sherry row from :func:`.study.run_experiments`'s results (see its docstring for the keys).

    * ``bits`` (a fact): the stream bits per weight of the 4096 x 4096 layer.
    * ``size`` on the bytes of the whole-model files of ``paper_file`` (the paper's 0.7B shape with
      random 3:4 weights, Sherry's format over the 2-bit format), untested where the files did not load
      back bit-exact; its control ``size_subject`` on the share of the 2-bit file held by the
      quantized layers, against :data:`SIZE_SHARE_MIN`. ``size_trained`` (a check): the same ratio on the
      files of the trained subject (``model_file``), below 1. ``file_exact`` (a check): the tensors that
      differ on reading both sets of files back.
    * The speed claims at the first shape of the speed table where Sherry and TL2 were timed on 8-bit
      activations (:data:`.spec.SPEED_SHERRY`, :data:`.spec.SPEED_TL2`: the paper's kernels multiply 8-bit
      activations, and so do the peers), on the range over rounds of the per-round tok/s ratio of Sherry's
      8-bit row: ``speed_vs_tl2`` against our TL2 on 8-bit activations (a lookup kernel, as bitnet.cpp's TL2
      is), ``speed_vs_i2`` against the fastest direct 2-bit peer timed with an f16 head
      (:data:`.spec.TWO_BIT_PEERS`: llama.cpp's TQ2_0, ik_llama.cpp's IQ2_BN / IQ2_BN_R4, 2-bit kernels as
      bitnet.cpp's I2_S is; untested without any); the float32-activation rows are shown beside;
      ``speed_vs_ggml`` on the range over rounds of the faster TQ kernel's time over ours for one
      decode step's projections (``llamacpp_model_gemv``: every projection shape of the 0.7B model,
      summed over a step); results without it fall back to the first matrix shape of ``llamacpp_gemv``.
    * ``ptq_collapses`` (a check): 3:4 PTQ perplexity over full precision.
    * The accuracy rows by the one rule for noisy figures (:meth:`acl26.claims.Ledger.record_noisy`:
      the t-interval over seeds of the seed-paired ratio or difference with two or more seeds, else a
      paired bootstrap over the first seed's validation blocks; with neither, not testable here). Controls first:
      ``qat_separates`` (absmean ternary over full precision > 1) and ``arenas_settled``
      (:func:`_settled`); a claim whose controls do not all hold is not testable here. Each claim needs
      its own resolution (``needs``: :data:`PPL_RESOLUTION` of the perplexity ratios, :data:`RANK_RESOLUTION`
      of the rank ratios), which only explains an inconclusive interval. ``trapping`` and ``arenas_frees``
      are decided on the effective rank of dL/dX; dL/dW's ratio and the stuck-weight shares are shown beside.
    * ``packed_exact`` (a check): the packed model's perplexity against the fake-quantized one's.
    """
    from acl26 import stats

    b = results["bits"]["sherry"]
    ledger.record("bits", float(b["streams"]), shown=f"{b['streams']:.4f} (streams) + {b['scales']:.4f} (scales)")

    # ---- size: measured on whole-model files, of the paper's 0.7B shape (the claim) and of the trained subject
    pf, mf = results.get("paper_file"), results.get("model_file")
    if pf:
        nb, lb = pf["bytes"], pf["layer_bytes"]
        share = lb["i2"] / nb["i2"]
        ledger.record("size_subject", share,
                      shown=f"{share:.1%} of the 2-bit file of the {pf['shape']} shape ({lb['i2']:,} of {nb['i2']:,} "
                            f"bytes; the rest is embeddings, norms and the header in bf16); the paper's 0.7B "
                            f"≈ {PAPER_SIZE_SHARE:.0%}")
        if pf["exact"]:
            whole = nb["sherry"] / nb["i2"]
            bf16 = (f"; of the BF16 file {nb['sherry'] / nb['bf16']:.1%} (paper {PAPER_MB['sherry'] / PAPER_MB['bf16']:.1%})"
                    if "bf16" in nb else "")
            ledger.record("size", whole,
                          shown=f"{whole:.1%} ({nb['sherry']:,} / {nb['i2']:,} bytes: files of the {pf['shape']} shape, "
                                f"random 3:4 weights, bf16 embeddings){bf16}; quantized layers alone "
                                f"{lb['sherry'] / lb['i2']:.1%} of the 2-bit ones")
        else:
            ledger.untested("size", f"the files did not load back bit-exact ({len(pf['mismatched'])} tensors differ), "
                                    "so their bytes measure nothing")
    else:
        for cid in ("size_subject", "size"):
            ledger.untested(cid, "no file of the paper's shape was written")
    if mf:
        nb, lb = mf["bytes"], mf["layer_bytes"]
        if mf["exact"]:
            whole = nb["sherry"] / nb["i2"]
            ledger.record("size_trained", whole,
                          shown=f"{whole:.1%} ({nb['sherry']:,} / {nb['i2']:,} bytes: the whole model in 3:4, its QAT'd "
                                f"blocks from {mf['variant']}); its quantized layers hold {lb['i2'] / nb['i2']:.1%} of "
                                f"the 2-bit file (the paper's 0.7B ≈ {PAPER_SIZE_SHARE:.0%}), so against the paper's "
                                f"{PAPER_SIZE_RATIO:.1%} this ratio measures the embedding's share, not the format")
        else:
            ledger.untested("size_trained", f"the files did not load back bit-exact ({len(mf['mismatched'])} tensors "
                                            "differ), so their bytes measure nothing")
    else:
        ledger.untested("size_trained", "no 3:4 variant was trained, so no model file was written")
    sets = [(what, f) for what, f in ((pf and f"the {pf['shape']} shape", pf),
                                      (mf and f"the subject (QAT'd blocks from {mf['variant']})", mf)) if f]
    if sets:
        bad = [m for _, f in sets for m in f["mismatched"]]
        label = {"sherry": "Sherry", "i2": "2-bit", "bf16": "BF16"}
        files = "; ".join(f"{', '.join(label[k] for k in f['bytes'])} of {w} ({f['layers']} packed layers)" for w, f in sets)
        ledger.record("file_exact", len(bad),
                      shown=f"{sum(f['tensors'] for _, f in sets)} tensors read back from the files: {files}: "
                            + ("all equal" if not bad else f"{len(bad)} differ: {', '.join(bad[:3])}"))
    else:
        ledger.untested("file_exact", "no model file was written")

    # ---- speed
    rows = results["speed"]
    ok = [r for r in rows if r["status"] == "ok"]
    by = {(r["shape"], r["format"]): r for r in ok}
    # on 8-bit activations, as the paper's kernels and the peers multiply (spec.SPEED_SHERRY, spec.SPEED_TL2)
    shape = next((r["shape"] for r in ok if all((r["shape"], f) in by for f in (SPEED_SHERRY, SPEED_TL2))), None)

    def round_ratios(a, b):
        """Per-round tok/s ratios a / b (the rounds ran both, in a rotating order)."""
        n = min(len(a["decode_runs"]), len(b["decode_runs"]))
        return [x / y for x, y in zip(a["decode_runs"][:n], b["decode_runs"][:n])] or [a["decode_tok_s"] / b["decode_tok_s"]]

    def tok(r):
        return f"{r['decode_tok_s']:.2f} tok/s"

    def name(r):
        return r.get("label") or r["format"]

    beside_names = {"sherry": "Sherry on float32 activations", "tl2": "our TL2 on float32 activations",
                    "i2": "our lookup-table I2"}

    def beside(*fmts):
        """The same shape's rows of ``fmts`` (keys of ``beside_names``), where timed, to show beside a verdict."""
        got = [f"{beside_names[f]} {tok(by[(shape, f)])}" for f in fmts if (shape, f) in by]
        return "; " + ", ".join(got) if got else ""

    if shape:
        s, tl2 = by[(shape, SPEED_SHERRY)], by[(shape, SPEED_TL2)]
        tq1 = by.get((shape, "ggml-tq1_0"))
        # the fastest 2-bit peer timed with an f16 head (issue 41, point 1): llama.cpp's TQ2_0 or ik_llama.cpp's
        # IQ2_BN / IQ2_BN_R4 (2 bits per weight, as bitnet.cpp's I2_S; spec.TWO_BIT_PEERS)
        tq2 = max((by[(shape, k)] for k in TWO_BIT_PEERS if (shape, k) in by), key=lambda r: r["decode_tok_s"],
                  default=None)
        iv = stats.repeat_range(round_ratios(s, tl2))
        ledger.record("speed_vs_tl2", iv.estimate, interval=iv,
                      shown=f"{name(s)} {tok(s)} vs {name(tl2)} {tok(tl2)} ({shape}, {s['threads']} threads)"
                            + (f"; llama.cpp TQ1_0 (1.69-bit) {tok(tq1)}" if tq1 else "")
                            + beside("sherry", "tl2"),
                      note="both on 8-bit activations, as the paper's kernels (bitnet.cpp's TL2, Sherry's) multiply; "
                           "TL2 is our lookup-table kernel, a lookup kernel as bitnet.cpp's TL2 is; per-round ratios, "
                           "range over rounds" + ("" if tq1 else "; llama.cpp's TQ1_0 was not timed"))
        if tq2:
            iv = stats.repeat_range(round_ratios(s, tq2))
            others = [f"{name(by[(shape, k)])} {tok(by[(shape, k)])}" for k in TWO_BIT_PEERS
                      if (shape, k) in by and by[(shape, k)] is not tq2]
            ledger.record("speed_vs_i2", iv.estimate, interval=iv,
                          shown=f"{name(s)} {tok(s)} vs {name(tq2)} {tok(tq2)} ({shape}, {s['threads']} threads), the "
                                f"fastest 2-bit peer timed" + (f" (also: {'; '.join(others)})" if others else "")
                                + beside("sherry", "i2"),
                          note="decided against the fastest direct 2-bit peer of the run (llama.cpp's TQ2_0, "
                               "ik_llama.cpp's IQ2_BN / IQ2_BN_R4: 2-bit decode-and-multiply kernels on 8-bit "
                               "activations, as bitnet.cpp's I2_S is), Sherry on 8-bit activations, with embeddings "
                               "and head in f16 as ours are in bf16; per-round ratios, range over rounds")
        else:
            miss = [r for r in rows if r["shape"] == shape and r["format"] in TWO_BIT_PEERS and r.get("reason")]
            ledger.untested("speed_vs_i2", "no direct 2-bit peer (llama.cpp's TQ2_0, ik_llama.cpp's IQ2_BN) was timed"
                            + (": " + "; ".join(f"{r['format']}: {r['reason']}" for r in miss) if miss else "")
                            + f"; {name(s)} {tok(s)}" + beside("i2"))
    else:
        for cid in ("speed_vs_tl2", "speed_vs_i2"):
            ledger.untested(cid, f"the speed table lacks a shape with Sherry and TL2 on 8-bit activations "
                                 f"({SPEED_SHERRY}, {SPEED_TL2}): the paper's kernels multiply 8-bit activations")

    model = results.get("llamacpp_model_gemv")
    peer = results.get("llamacpp_gemv")
    if model:  # one decode step's projections, summed
        peer = [dict(r, us=r["us_per_token"], shape=f"{r['shape']} decode step: {r['shapes']}") for r in model]
    elif peer:
        peer = [r for r in peer if r["shape"] == peer[0]["shape"]]  # decided at the first shape timed
    if peer:
        by_round: dict = {}
        for row in peer:
            by_round.setdefault(row["round"], {})[row["format"]] = row["us"]
        ratios = [min(t["TQ1_0"], t["TQ2_0"]) / t["sherry"] for t in by_round.values()
                  if {"TQ1_0", "TQ2_0", "sherry"} <= set(t)]
        if ratios:
            iv = stats.repeat_range(ratios)
            med = {f: float(np.median([r["us"] for r in peer if r["format"] == f])) for f in ("sherry", "TQ1_0", "TQ2_0")}
            ledger.record("speed_vs_ggml", iv.estimate, interval=iv,
                          shown=f"Sherry {med['sherry']:.0f} µs vs TQ2_0 {med['TQ2_0']:.0f} µs and TQ1_0 {med['TQ1_0']:.0f} µs "
                                f"({peer[0]['shape']}, {peer[0]['threads']} thread(s))")
        else:
            ledger.untested("speed_vs_ggml", "the llama.cpp comparison lacks Sherry, TQ1_0 or TQ2_0")
    else:
        ledger.untested("speed_vs_ggml", results.get("llamacpp_reason") or "llama.cpp was not built here "
                        "(`acl26 prepare sherry`)")

    # ---- post-training ternarization (our check)
    ptq = {r["mode"]: r["ppl"] for r in results["ptq"]}
    if {"fp", "sparse34"} <= set(ptq):
        fp_ppl, s34 = ptq["fp"], ptq["sparse34"]
        ledger.record("ptq_collapses", s34 / fp_ppl,
                      shown=f"3:4 PTQ ppl {s34:,.0f} vs full precision {fp_ppl:.1f} ({s34 / fp_ppl:,.0f}×)")
    else:
        ledger.untested("ptq_collapses", "full precision and 3:4 PTQ are both needed")

    # ---- accuracy: controls first, then the claims, all by the one rule for noisy figures
    ppl = results.get("qat_ppl") or {}
    seeds_note = "seeds paired: all variants of one seed see the same batches"

    names = {"fp": "full precision", "absmean": "absmean ternary", "sparse34": "3:4",
             "sparse34+arenas": "3:4 with Arenas"}

    def ratio_shown(inputs, a, b):
        value, _, _ = _noisy(inputs)
        text = f"ppl {ppl[a]:.1f} ({names[a]}) vs {ppl[b]:.1f} ({names[b]}), first seed: {inputs['point']:.3f}×"
        if inputs["per_seed"]:
            text += f"; mean ratio over {len(inputs['per_seed'])} seeds {value:.3f}×"
        return text

    sep = _ratio_inputs(results, "absmean", "fp")
    if sep:
        _record(ledger, "qat_separates", sep, ratio_shown(sep, "absmean", "fp"),
                note=seeds_note if sep["per_seed"] else "")
    else:
        ledger.untested("qat_separates", "the full-precision and absmean variants are both needed")

    _settled(ledger, results)
    pairs = {"arenas_gain": ("sparse34+arenas", "sparse34"), "matches_158": ("sparse34+arenas", "absmean")}
    for cid, (a, b) in pairs.items():
        x = _ratio_inputs(results, a, b)
        if x:
            _record(ledger, cid, x, ratio_shown(x, a, b), note=seeds_note if x["per_seed"] else "", needs=PPL_RESOLUTION)
        else:
            ledger.untested(cid, f"the variants {a} and {b} are both needed")

    stuck = _variant_means(results, "stuck share")
    trap_pairs = {"trapping": ("sparse34", "absmean", "under 3:4", "under absmean"),
                  "arenas_frees": ("sparse34+arenas", "sparse34", "with Arenas", "without")}
    for cid, (a, b, la, lb) in trap_pairs.items():
        x = _rank_ratio_inputs(results, a, b)
        if not x:
            ledger.untested(cid, f"the input-gradient (∂L/∂X) effective ranks of {a} and {b} are both needed")
            continue
        value, _, _ = _noisy(x)
        shown = f"∂L/∂X effective rank {x['means'][a]:.1f} {la} vs {x['means'][b]:.1f} {lb}"
        if x["per_seed"]:
            shown += f"; mean ratio over {len(x['per_seed'])} seeds {value:.3f}×"
        w = _rank_ratio_inputs(results, a, b, tables.WEIGHT_RANK)
        if w:
            shown += f"; ∂L/∂W rank {w['means'][a]:.1f} vs {w['means'][b]:.1f} ({w['point']:.3f}×)"
        if a in stuck and b in stuck:
            shown += f"; stuck share {stuck[a]:.1%} vs {stuck[b]:.1%}"
        _record(ledger, cid, x, shown, note=seeds_note if x["per_seed"] else "", needs=RANK_RESOLUTION)

    pk = results.get("packed")
    if pk:
        rel = abs(pk["packed_ppl"] - pk["fake_ppl"]) / pk["fake_ppl"]
        ledger.record("packed_exact", rel,
                      shown=f"{pk['packed_ppl']:.4f} packed vs {pk['fake_ppl']:.4f} fake-quantized (rel. {rel:.1e})")
    else:
        ledger.untested("packed_exact", "no 3:4 variant was trained")
