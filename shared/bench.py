"""``acl26 bench``: run each chapter's benchmarks and write JSON for the Performance page.

A benchmark prints figures, it does not pass or fail a timed test: each study module's
``benchmarks(quick)`` returns rows (medians, same-run ratios) and goals (target, measured, met),
written atomically to ``book/executed/bench/<paper>.json`` with the machine it ran on.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
from pathlib import Path

from acl26 import io, paths, registry


def machine() -> dict:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": cpus, "cpu": model, "python": platform.python_version(), "platform": platform.platform()}


def default_out() -> Path:
    root = paths.repo_root()
    return (root / paths.BOOK_EXECUTED if root else paths.out_dir()) / "bench"


def run(papers: list[str] | None = None, *, quick: bool = False, out_dir: str | os.PathLike | None = None) -> list[Path]:
    ids = papers or list(registry.PAPERS)
    mods = [(pid, registry.get(pid).module()) for pid in ids]  # unknown papers fail before any work
    out = Path(out_dir) if out_dir else default_out()
    written = []
    for pid, mod in mods:
        if not hasattr(mod, "benchmarks"):
            continue
        started = _dt.datetime.now(_dt.timezone.utc)
        result = mod.benchmarks(quick=quick)
        result.update(paper=pid, quick=quick, machine=machine(), started=started.isoformat(timespec="seconds"))
        written.append(io.write_json(out / f"{pid}.json", result))
    return written
