"""Sherry (ACL 2026, arXiv 2601.07892): the paper's speed and size table, and ours beside it.

The paper's figures (tokens/s and MB on an Intel i7-14700HX, bitnet.cpp-style kernels) are data
here, typed once; :func:`compare` and :func:`side_by_side` put a speed table of
:mod:`acl26.papers.sherry.speed` beside them as same-machine ratios, the only figures that carry
across machines.
"""

from __future__ import annotations


# --------------------------------------------------------------------------------------------
# the paper's table and the comparison


PAPER_MACHINE = "Intel i7-14700HX"
_PAPER = [("0.7B", "bf16", 34.01, 1360.0), ("0.7B", "i2", 132.13, 256.56), ("0.7B", "tl2", 116.83, 233.44),
          ("0.7B", "sherry", 148.27, 205.50), ("3B", "bf16", 7.55, 6190.0), ("3B", "i2", 41.87, 873.65),
          ("3B", "tl2", 38.80, 846.01), ("3B", "sherry", 45.55, 712.40)]
#: the paper's formats (bitnet.cpp's kernels)
PAPER_LABELS = {"bf16": "BF16", "i2": "I2_S", "tl2": "TL2", "sherry": "Sherry"}
NOMINAL_BITS = {"fp32": 32.0, "bf16": 16.0, "i2": 2.0, "tl2": 5 / 3, "sherry": 1.25}


def ratio_or_none(x, y):
    """x / y, or None when either is missing (a skipped format) or y is 0."""
    return x / y if x is not None and y not in (None, 0) else None


def paper_table() -> list[dict]:
    """The paper's speed and size table (tokens/s and MB on an i7-14700HX), one row per (model, format)."""
    return [dict(model=m, format=f, label=PAPER_LABELS[f], tok_s=t, mb=mb, nominal_bits=NOMINAL_BITS[f],
                 machine=PAPER_MACHINE) for m, f, t, mb in _PAPER]


COMPARISONS = (("sherry", "i2"), ("sherry", "tl2"), ("sherry", "bf16"))


def compare(rows: list[dict], paper: list[dict] | None = None) -> list[dict]:
    """Same-machine ratios, ours beside the paper's, for every shape in ``rows`` and each of Sherry
    vs I2 / TL2 / BF16: decode speed (Sherry's tok/s over the other's; also prefill, and the
    blocks alone without the output head) and size (Sherry's MB over the other's: whole model,
    and linear layers alone). The paper's ratios are those of the row the shape stands for
    (``paper_row``); shapes that stand for none (the LLaMA shapes) get None there."""
    paper = paper_table() if paper is None else paper
    pap = {(r["model"], r["format"]): r for r in paper}
    by = {(r["shape"], r["format"]): r for r in rows}
    out = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        prow = next(r["paper_row"] for r in rows if r["shape"] == shape)
        for a, b in COMPARISONS:
            ra, rb = by.get((shape, a)), by.get((shape, b))
            pa, pb = pap.get((prow, a)), pap.get((prow, b))

            ok = ra is not None and rb is not None
            out.append(dict(
                shape=shape, paper_row=prow, comparison=f"{PAPER_LABELS[a]} vs {PAPER_LABELS[b]}",
                paper_speed_ratio=ratio_or_none(pa["tok_s"], pb["tok_s"]) if pa and pb else None,
                ours_speed_ratio=ratio_or_none(ra["decode_tok_s"], rb["decode_tok_s"]) if ok else None,
                ours_prefill_ratio=ratio_or_none(ra["prefill_tok_s"], rb["prefill_tok_s"]) if ok else None,
                ours_blocks_speed_ratio=ratio_or_none(rb["blocks_ms"], ra["blocks_ms"]) if ok else None,
                paper_size_ratio=ratio_or_none(pa["mb"], pb["mb"]) if pa and pb else None,
                ours_size_ratio=ratio_or_none(ra["total_mb"], rb["total_mb"]) if ok else None,
                ours_weight_size_ratio=ratio_or_none(ra["weight_mb"], rb["weight_mb"]) if ok else None))
    return out


def side_by_side(rows: list[dict], paper: list[dict] | None = None) -> list[dict]:
    """Paper | ours per (paper model, format), for the shapes that stand for a paper row:
    tok/s and MB, and the speedup over BF16 on each machine."""
    paper = paper_table() if paper is None else paper
    by = {(r["shape"], r["format"]): r for r in rows}
    out = []
    for p in paper:
        for shape in dict.fromkeys(r["shape"] for r in rows if r["paper_row"] == p["model"]):
            ours = by.get((shape, p["format"]))
            if ours is None:
                continue
            pb = next((q for q in paper if q["model"] == p["model"] and q["format"] == "bf16"), None)
            ob = by.get((shape, "bf16"))
            out.append(dict(model=p["model"], shape=shape, format=p["format"], label=p["label"],
                            paper_tok_s=p["tok_s"], ours_tok_s=ours["decode_tok_s"], paper_mb=p["mb"],
                            ours_mb=ours["total_mb"], ours_weight_mb=ours["weight_mb"],
                            paper_vs_bf16=p["tok_s"] / pb["tok_s"] if pb else None,
                            ours_vs_bf16=(ours["decode_tok_s"] / ob["decode_tok_s"]
                                          if ob and ours["decode_tok_s"] and ob["decode_tok_s"] else None),
                            status=ours["status"], reason=ours["reason"]))
    return out
