"""LoPT: synthetic results where every claim holds (``good``), and one change per claim that makes it
fail (``FAIL``)."""

from cases.rows import set_rows as _set


def good():
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


FAIL = {
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
