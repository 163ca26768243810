"""Merge benchmarks: time and peak memory of :func:`.merge.interpolate` (in memory) and
:func:`.merge.interpolate_files` (streamed), each in a fresh process so its peak RSS is its own.

Memory is reported in *model-sizes*: (peak RSS − RSS just before the models are read) / bytes of
one model's tensors. Before that baseline, each child runs the merge once on a 4×4 tensor, so the
one-time cost of loading code and allocator pools (about 1 MB at any model size) is not counted. In memory, the two inputs and the output are three model-sizes by
construction; streamed, only an output shard and the two current tensors are held. The goals:
≤ 10 s and ≤ 3 model-sizes in memory, ≤ 1.5 model-sizes streamed (two 135M models).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from acl26 import stats

_CHILD = r"""
import json, sys, time
from pathlib import Path
import torch
from safetensors.torch import load_file
from acl26.papers.model_interpolation import merge as M

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
def rss():
    return status("VmRSS")
mode, a, b, out, lam = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
size = sum(t.numel() * t.element_size() for t in load_file(next(Path(a).glob("*.safetensors"))).values()) \
    if len(list(Path(a).glob("*.safetensors"))) == 1 else None
# warm-up on a 4x4 tensor: the first load_file / lerp / dict build loads code and allocator pools once
# (about 1 MB, whatever the model's size); that fixed cost is not a model-size, so it is paid before the baseline
import tempfile as _tmp
with _tmp.TemporaryDirectory() as _d:
    from safetensors.torch import save_file as _save
    _save({"w": torch.zeros(4, 4)}, _d + "/w.safetensors")
    _w = load_file(_d + "/w.safetensors")
    _ = M.interpolate(_w, {"w": torch.ones(4, 4)}, lam)
    del _, _w
import gc; gc.collect()
before = rss()
t0 = time.perf_counter()
if mode == "memory":
    A = load_file(next(Path(a).glob("*.safetensors")))
    B = load_file(next(Path(b).glob("*.safetensors")))
    t1 = time.perf_counter()
    C = M.interpolate(A, B, lam)
    t2 = time.perf_counter()
else:
    t1 = time.perf_counter()
    M.interpolate_files(a, b, out, lam, shard_bytes=max(1, size // 4))
    t2 = time.perf_counter()
# VmHWM, this process's own high-water mark: getrusage's ru_maxrss is kept across exec, so a child of a
# large parent (acl26 book, after the other chapters) would report the parent's peak instead of its own
peak = status("VmHWM")
print(json.dumps({"merge_s": t2 - t1, "total_s": t2 - t0, "peak_over_before": peak - before, "model_bytes": size}))
"""


def _tiny_pair(folder: Path) -> tuple[Path, Path]:
    import torch

    from acl26 import models

    cfg = models.dense_config(4096, hidden=128, layers=4, heads=4, kv_heads=2, intermediate=256)
    from transformers import AutoModelForCausalLM

    models.quiet_transformers()
    out = []
    for i, name in enumerate(("a", "b")):
        torch.manual_seed(i)
        m = AutoModelForCausalLM.from_config(cfg)
        m.save_pretrained(folder / name)
        out.append(folder / name)
    return out[0], out[1]


def pair_folders(quick: bool, tmp: Path) -> tuple[Path, Path, str]:
    """The cached fine-tuned pair (book profile) if present and not ``quick``, else a tiny random pair."""
    if not quick:
        from acl26 import paths

        root = paths.cache_dir() / "models"
        found = {s: sorted(root.glob(f"mi-{s}-smollm2-*/train_log.json")) for s in ("instruct", "thinking")}
        if found["instruct"] and found["thinking"]:
            return found["instruct"][-1].parent, found["thinking"][-1].parent, "the chapter's SmolLM2-135M pair"
    a, b = _tiny_pair(tmp)
    return a, b, "a tiny random LLaMA pair (4 layers, hidden 128)"


def benchmarks(quick: bool = False) -> dict:
    """Rows (median time and peak memory over repeats, in rotated order) and the goals."""
    repeats = 2 if quick else 3
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        a, b, what = pair_folders(quick, tmp)
        runs: dict[str, list[dict]] = {"memory": [], "streamed": []}
        order = ["memory", "streamed"]
        for r in range(repeats):
            for mode in (order if r % 2 == 0 else order[::-1]):
                out = tmp / f"out-{mode}-{r}"
                res = subprocess.run([sys.executable, "-c", _CHILD, mode, str(a), str(b), str(out), "0.5"],
                                     capture_output=True, text=True, check=True)
                runs[mode].append(json.loads(res.stdout.strip().splitlines()[-1]))
    rows, goals = [], []
    for mode, rs in runs.items():
        t = stats.repeat_range([x["merge_s"] for x in rs])
        size = rs[0]["model_bytes"]
        mem = stats.repeat_range([x["peak_over_before"] / size for x in rs])
        rows.append({"merge": "in memory (interpolate)" if mode == "memory" else "streamed (interpolate_files)",
                     "model": what, "model MB": round(size / 2**20, 1), "seconds (median)": round(t.estimate, 3),
                     "seconds min": round(t.lo, 3), "seconds max": round(t.hi, 3),
                     "peak RSS over start (model-sizes, median)": round(mem.estimate, 3),
                     "model-sizes min": round(mem.lo, 3), "model-sizes max": round(mem.hi, 3), "repeats": len(rs)})
        limit_mem = 3.0 if mode == "memory" else 1.5
        goals.append({"goal": f"{mode} merge of two 135M models ≤ 10 s", "target": 10.0,
                      "measured": round(t.hi, 3), "met": bool(t.hi <= 10.0), "unit": "s (slowest repeat)"})
        goals.append({"goal": f"{mode} merge ≤ {limit_mem:g} model-sizes of RAM", "target": limit_mem,
                      "measured": round(mem.hi, 3), "met": bool(mem.hi <= limit_mem), "unit": "model-sizes (worst repeat)"})
    return {"title": "Merging two checkpoints: time and peak memory", "rows": rows, "goals": goals, "model": what,
            "note": "each repeat in a fresh process; the two modes alternate order; memory = peak RSS minus RSS "
                    "before the models are read (after a warm-up merge of a 4×4 tensor), over one model's tensor bytes"}
