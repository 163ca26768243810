"""``acl26 bench lopt`` (ACL 2026, arXiv 2511.04952): LoPT's speed goals at 10 M characters.

Sequential ``encode``, LoPT with 1 worker (chunking alone), 2 threads and 2 processes, and the
offsets mode, interleaved in one process with the order rotated every repeat; medians over
repeats and same-run ratios, written for the book's Performance page.
"""

from __future__ import annotations

import time

import numpy as np

from acl26 import texts, timing, tokenization
from acl26.papers.lopt import method as lopt
from acl26.papers.lopt.study import _text_of_length

def benchmarks(quick: bool = False) -> dict:
    """The goals of the LoPT issue, measured: speedup, merge share, offsets mode, executors."""
    n = 1_000_000 if quick else 10_000_000
    repeats = 2 if quick else 5
    base = texts.load("sotu")
    text = _text_of_length(base, n)
    rows, goals = [], []
    for tname in (["llama3"] if quick else ["llama3", "llama2"]):
        tok = tokenization.load(tname)
        for executor in ("threads", "processes"):  # start the pools and load the kernel first
            lopt.encode(tok, text[:200_000], executor=executor, workers=2)
        t_seq, t_w1, t_w2, t_proc, merge_share, same = [], [], [], [], [], True
        t_seq_off, t_w2_off, same_off = [], [], True
        for _ in range(repeats):
            t0 = time.perf_counter()
            ref = tok.encode(text, add_special_tokens=False)
            t_seq.append(time.perf_counter() - t0)
            for w, acc in ((1, t_w1), (2, t_w2)):
                ids, st = lopt.encode(tok, text, workers=w, return_stats=True)
                acc.append(st.time_total)
                same &= ids == ref
                if w == 2:
                    merge_share.append(st.time_merge / st.time_total)
            ids, st = lopt.encode(tok, text, workers=2, executor="processes", return_stats=True)
            t_proc.append(st.time_total)
            same &= ids == ref
            # ids + offsets, against transformers' return_offsets_mapping
            t0 = time.perf_counter()
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            ref_off = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
            t_seq_off.append(time.perf_counter() - t0)
            ids, offs, st = lopt.encode(tok, text, workers=2, return_offsets=True, return_stats=True)
            t_w2_off.append(st.time_total)
            same_off &= ids == enc["input_ids"] and np.array_equal(offs, ref_off)
        med = {k: timing.median(v) for k, v in dict(seq=t_seq, w1=t_w1, w2=t_w2, proc=t_proc, seq_off=t_seq_off,
                                               w2_off=t_w2_off).items()}
        speedup = med["seq"] / med["w2"]
        rows += [
            dict(benchmark=f"{tname}: HF encode (sequential)", chars=n, median_s=med["seq"], ratio=1.0),
            dict(benchmark=f"{tname}: LoPT, 1 worker (chunking alone)", chars=n, median_s=med["w1"], ratio=med["seq"] / med["w1"]),
            dict(benchmark=f"{tname}: LoPT, 2 threads", chars=n, median_s=med["w2"], ratio=speedup),
            dict(benchmark=f"{tname}: LoPT, 2 processes", chars=n, median_s=med["proc"], ratio=med["seq"] / med["proc"]),
            dict(benchmark=f"{tname}: HF encode with offsets", chars=n, median_s=med["seq_off"], ratio=1.0),
            dict(benchmark=f"{tname}: LoPT with offsets, 2 threads", chars=n, median_s=med["w2_off"],
                 ratio=med["seq_off"] / med["w2_off"]),
        ]
        goals += [
            dict(goal=f"{tname}: identical ids (and offsets) in every run", target="yes",
                 measured="yes" if (same and same_off) else "no", met=bool(same and same_off)),
            dict(goal=f"{tname}: speedup over HF encode, ids only, 2 threads", target="≥ 1.9×",
                 measured=f"{speedup:.2f}×", met=speedup >= 1.9),
            dict(goal=f"{tname}: speedup with offsets, 2 threads", target="reported",
                 measured=f"{med['seq_off'] / med['w2_off']:.2f}×", met=None),
            dict(goal=f"{tname}: parallel gain, 2 threads over 1 worker", target="≤ 2× on 2 cores",
                 measured=f"{med['w1'] / med['w2']:.2f}×", met=None),
            dict(goal=f"{tname}: merge share of wall time", target="≤ 2%",
                 measured=f"{timing.median(merge_share):.2%}", met=timing.median(merge_share) <= 0.02),
        ]
    return {"title": "LoPT: parallel tokenization", "chars": n, "repeats": repeats, "rows": rows, "goals": goals,
            "note": ("Medians over repeats, sequential and parallel runs interleaved in the same process. "
                     "Text: State of the Union, first " + f"{n:,}" + " characters.")}
