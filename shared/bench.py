"""``acl26 bench``: run each chapter's benchmarks and write JSON for the Performance page.

A benchmark prints figures, it does not pass or fail a timed test: each chapter's
``benchmarks(quick)`` returns rows (medians, same-run ratios) and goals (target, measured, met),
written atomically to ``book/executed/bench/<paper>.json`` with the machine it ran on and its
cache key (:func:`acl26.execution.bench_key`). With ``cached=True`` a chapter whose key matches its
last file is not run again.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from acl26 import io, machine as _machine, paths, registry


def machine() -> dict:
    """CPUs, CPU model, Python and platform (:func:`acl26.machine.describe`)."""
    return _machine.describe()


def default_out() -> Path:
    root = paths.repo_root()
    return (root / paths.BOOK_EXECUTED if root else paths.out_dir()) / "bench"


def run(papers: list[str] | None = None, *, quick: bool = False, out_dir: str | os.PathLike | None = None,
        cached: bool = False, force: list[str] | bool = (), statuses: dict | None = None,
        overwrite: bool = False) -> list[Path]:
    """Run the benchmarks of ``papers`` (default: all with benchmarks); returns the files written or kept.

    ``cached``: keep a file whose key is unchanged (``force``: True, or the ids to run anyway).
    A file acl26 did not write (or that was changed since) is refused before its benchmark runs,
    unless ``overwrite`` or the chapter is forced (:mod:`acl26.io`).
    ``statuses``, if given, receives ``{paper: "executed" | "cached"}``.
    """
    from acl26 import execution

    chapters = registry.ordered(papers)  # unknown papers fail before any work
    forced = {c.id for c in chapters} if force is True else {registry.get(f).id for f in (force or ())}
    out = Path(out_dir) if out_dir else default_out()
    written = []
    for ch in chapters:
        if ch.benchmarks is None:
            continue
        key = execution.bench_key(ch, quick)
        target = out / f"{ch.id}.json"
        replace = overwrite or ch.id in forced
        if cached and ch.id not in forced and target.is_file():
            try:
                data = io.read_json(target)
                if isinstance(data, dict) and data.get("key") == key:
                    written.append(target)
                    if statuses is not None:
                        statuses[ch.id] = "cached"
                    continue
            except (OSError, ValueError):
                pass
        io.check_target(target, overwrite=replace)  # before the benchmark, not after it
        started = _dt.datetime.now(_dt.timezone.utc)
        result = ch.benchmarks(quick=quick)
        result.update(paper=ch.id, quick=quick, machine=machine(), started=started.isoformat(timespec="seconds"),
                      key=key)
        written.append(io.write_json(target, result, overwrite=replace))
        if statuses is not None:
            statuses[ch.id] = "executed"
    return written
