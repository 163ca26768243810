"""The shared-models page: the checks' verdicts, decided from :func:`acl26.papers.models.study.run_experiments`'s results."""

from __future__ import annotations

import numpy as np

from acl26 import claims as C


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide the page's checks from its results.

    ``results``: ``smollm2_ppl``, ``ppl_chars``, ``ppl_context``, ``ppl_stride`` (SmolLM2's
    perplexity and how it was measured; checked only over the whole document, ``ppl_chars == 0``),
    ``moe_ppl`` and ``unigram`` (validation perplexities of the seed the chapters use), ``top_k``
    (rows of :func:`top_k_sweep`), ``moe_top_k`` (the k the MoE was trained at) and ``seeds`` (rows of :func:`seed_rows`). With two or more seeds the learning check and the
    top-1 cost are decided on the t-interval across seeds, so a verdict built on one trained
    model must survive the spread of a re-run.
    """
    ppl = results["smollm2_ppl"]
    if results["ppl_chars"] == 0:
        ledger.record("smollm2_ppl", ppl, shown=f"{ppl:.2f} (context {results['ppl_context']}, stride {results['ppl_stride']})")
    else:
        ledger.untested("smollm2_ppl", f"this profile scores only the first {results['ppl_chars']:,} characters",
                        shown=f"{ppl:.2f}")
    seeds = results.get("seeds") or []
    uni = results["unigram"]
    v = results["moe_ppl"]
    per_seed = [r["moe / unigram"] for r in seeds]
    shown = f"{v:.1f} vs unigram {uni:.1f} ({v / uni:.2f}×)" + (
        f"; mean over {len(per_seed)} seeds {np.mean(per_seed):.2f}×" if len(per_seed) >= 2 else "")
    ledger.record_noisy("moe_learns", per_seed=per_seed, point=v / uni, shown=shown)
    by_k = {r["top_k"]: r["val_ppl"] for r in results["top_k"]}
    k = results["moe_top_k"]
    if 1 in by_k and k in by_k:
        top1, full = by_k[1], by_k[k]
        per_seed = [r["top-1 cost"] for r in seeds]
        shown = f"top-1 {top1:.1f} vs top-{k} {full:.1f} (+{top1 / full - 1:.0%})" + (
            f"; mean over {len(per_seed)} seeds +{np.mean(per_seed):.0%}" if len(per_seed) >= 2 else "")
        ledger.record_noisy("experts_matter", per_seed=per_seed, point=top1 / full - 1, shown=shown)
    else:
        ledger.untested("experts_matter", "the top-k sweep lacks top-1 or the trained k")
