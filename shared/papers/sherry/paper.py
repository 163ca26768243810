"""Sherry (ACL 2026, arXiv 2601.07892): the paper's speed and size table, and ours beside it.

The paper's figures (tokens/s and MB on an Intel i7-14700HX, bitnet.cpp-style kernels) are data
here, typed once; :func:`.tables.compare` and :func:`.tables.side_by_side` put a speed table of
:mod:`acl26.papers.sherry.speed` beside them as same-machine ratios, the only figures that carry
across machines.
"""

from __future__ import annotations


# --------------------------------------------------------------------------------------------
# the paper's table


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
