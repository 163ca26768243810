"""Each chapter's synthetic cases for its ``record_claims``: ``cases.<id>.good()`` (results where every row
reaches its best verdict) and ``cases.<id>.FAIL`` (one change per row that makes it fail)."""

import importlib

IDS = ("lopt", "sherry", "models", "alloc_moe", "model_interpolation", "mta")  # every chapter (a test checks)


def all_cases() -> dict:
    """``{chapter id: (good, FAIL)}``."""
    out = {}
    for cid in IDS:
        mod = importlib.import_module(f"cases.{cid}")
        out[cid] = (mod.good, mod.FAIL)
    return out
