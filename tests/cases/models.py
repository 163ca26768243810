"""The models page: synthetic results where every check holds (``good``), and one change per check that
makes it fail (``FAIL``)."""

from cases.rows import set_rows as _set


def good():
    return {"smollm2_ppl": 22.05, "ppl_chars": 0, "ppl_context": 2048, "ppl_stride": 1024,
            "moe_ppl": 255.2, "unigram": 889.2, "moe_top_k": 6,
            "top_k": [dict(top_k=k, val_ppl=v) for k, v in ((1, 332.9), (2, 282.0), (6, 256.2))]}


FAIL = {
    "smollm2_ppl": lambda r: r.update(smollm2_ppl=30.0),
    "moe_learns": lambda r: r.update(moe_ppl=450.0),
    "experts_matter": lambda r: _set(r["top_k"], dict(top_k=1), val_ppl=270.0),
}
