"""LoPT: synthetic results where every claim holds (``good``), and one change per claim that makes it
fail (``FAIL``)."""

from cases.rows import set_rows as _set


def good():
    # the paper's rule in its regime (overlap 512 > longest pre-token piece 40); regex-BPE baselines lossy
    # somewhere; a SentencePiece tokenizer's splitting baselines lossy on every text (the fact sp_prefix)
    reg = dict(tokenizer="llama3", pretokenized=True, overlap_chars=512, longest_piece=40)
    ex = [dict(method="lopt", setting=s, exact=True, **reg) for s in ("default", "random", "adversarial")]
    ex += [dict(method="lopt-paper-rule", setting=s, exact=True, **reg) for s in ("default", "random", "adversarial")]
    ex += [dict(method=m, setting="random", exact=e, **reg) for m in ("naive", "overlap-ids", "delimiter")
           for e in (True, False)]
    ex += [dict(method=m, setting="default", exact=e, **reg) for m in ("naive", "overlap-ids", "delimiter")
           for e in (True, False)]
    ex += [dict(method=m, setting="default", exact=False, tokenizer="llama2", pretokenized=False, overlap_chars=512,
                longest_piece=1_000_000) for m in ("naive", "delimiter")]
    sw = [dict(rule=r, exact=True, tokenizer="llama3", overlap_chars=64, longest_piece=40) for r in ("piece", "paper")]
    n = 10_000_000

    def row(rep, method, workers, total, match):
        return dict(tokenizer="llama3", n_chars=n, repeat=rep, method=method, workers=workers, total=total, split=0.0,
                    encode=total - 2 * match, merge=2 * match, match=match, assemble=match, same=True)

    sp = []
    for rep, jitter in enumerate((1.0, 1.02, 0.98)):
        sp += [row(rep, "sequential", 1, 6.0 * jitter, 0.0), row(rep, "backend", 1, 5.0 * jitter, 0.0),
               row(rep, "lopt", 1, 4.0 * jitter, 0.02), row(rep, "lopt", 2, 2.0 * jitter, 0.01),
               row(rep, "lopt", 16, 1.2 * jitter, 0.01)]
    ex.append(dict(method="lopt", setting="adversarial", exact=True, sequential=True, **reg))  # counted apart
    return {"exactness": ex, "sweep": sw, "speed": sp}


FAIL = {
    "exact": lambda r: _set(r["exactness"], dict(method="lopt", setting="random"), exact=False),
    "paper_rule_default": lambda r: _set(r["exactness"], dict(method="lopt-paper-rule", setting="default"), exact=False),
    "paper_rule_any": lambda r: _set(r["sweep"], dict(rule="paper"), exact=False),
    # decided at the default settings alone, on the regex-BPE tokenizers: lossy elsewhere does not count
    "naive_lossy": lambda r: _set(r["exactness"], dict(method="naive", setting="default", pretokenized=True), exact=True),
    "ids_lossy": lambda r: _set(r["exactness"], dict(method="overlap-ids", setting="default"), exact=True),
    "delim_lossy": lambda r: _set(r["exactness"], dict(method="delimiter", setting="default", pretokenized=True),
                                  exact=True),
    "sp_prefix": lambda r: _set(r["exactness"], dict(method="naive", pretokenized=False), exact=True),
    "faster_2w": lambda r: _set(r["speed"], dict(method="sequential"), total=1.5),
    "speedup_many_cores": lambda r: _set(r["speed"], dict(method="lopt", workers=16), total=3.0),
    "speedup": lambda r: _set(r["speed"], dict(method="lopt", workers=2), total=3.0),
    "merge_cheap": lambda r: _set(r["speed"], dict(method="lopt", workers=2), match=0.1),
}
