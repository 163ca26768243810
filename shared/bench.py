"""``acl26 bench``: run each chapter's benchmarks and write JSON for the Performance page.

A benchmark prints figures, it does not pass or fail a timed test: each chapter's
``benchmarks(quick)`` returns rows (medians, same-run ratios) and goals (target, measured, met),
written atomically to ``book/executed/bench/<paper>.json`` with the machine it ran on (its CPU model,
SIMD level and a read-bandwidth probe taken just before that chapter's benchmarks: :func:`run_machine`) and its
cache key (:func:`acl26.execution.bench_key`). With ``cached=True`` a chapter whose key matches its
last file is not run again.
"""

from __future__ import annotations

import datetime as _dt
import inspect
import os
from pathlib import Path

from acl26 import io, machine as _machine, paths, registry


def machine() -> dict:
    """CPUs, CPU model, SIMD level, Python and platform (:func:`acl26.machine.describe`)."""
    return _machine.describe()


#: bytes the read-bandwidth probe streams (far beyond any cache), full and quick mode
PROBE_BYTES = {False: 512 * 2**20, True: 128 * 2**20}


def run_machine(quick: bool = False) -> dict:
    """:func:`machine` with the streaming read bandwidth measured now
    (:func:`acl26.kernels.ternary.read_bandwidth`, median and range of 7 passes over
    :data:`PROBE_BYTES` on numba's threads): the figure a benchmark's bytes-per-second rows are read
    against, taken in the same run because these machines are shared and noisy."""
    from acl26.kernels import ternary as tn

    bw = tn.read_bandwidth(PROBE_BYTES[bool(quick)])
    return {**machine(), "read_gb_s": round(bw["gb_s"], 2),
            "read_gb_s_range": [round(min(bw["runs"]), 2), round(max(bw["runs"]), 2)],
            "probe_bytes": bw["bytes"], "probe_threads": bw["threads"]}


def default_out() -> Path:
    root = paths.repo_root()
    return (root / paths.BOOK_EXECUTED if root else paths.out_dir()) / "bench"


def takes_workers(chapter) -> bool:
    """Whether ``chapter``'s benchmarks run workers in parallel (their function takes ``workers``)."""
    return chapter.benchmarks is not None and "workers" in inspect.signature(chapter.benchmarks).parameters


def run_benchmarks(papers: list[str] | None = None, *, quick: bool = False, out_dir: str | os.PathLike | None = None,
        cached: bool = False, force: list[str] | bool = (), statuses: dict | None = None,
        overwrite: bool = False, workers: int | None = None) -> list[Path]:
    """Run the benchmarks of ``papers`` (default: all with benchmarks); returns the files written or kept.

    ``workers`` (an integer ≥ 1, or None for each benchmark's default): the worker count of the benchmarks
    that run workers in parallel (:func:`takes_workers`); the others run as they always do. Naming papers
    none of whose benchmarks takes it is a ValueError, before any work.

    ``cached``: keep a file whose key is unchanged (``force``: True, or the ids to run anyway).
    A file acl26 did not write (or that was changed since) is refused before its benchmark runs,
    unless ``overwrite`` or the chapter is forced (:mod:`acl26.io`).
    ``statuses``, if given, receives ``{paper: "executed" | "cached"}``.
    """
    from acl26 import execution

    from acl26 import checks

    chapters = registry.ordered(papers)  # unknown papers fail before any work
    if workers is not None:
        workers = checks.integer("workers", workers, 1)
        if papers and not any(takes_workers(c) for c in chapters):
            raise ValueError(f"workers: no benchmark of {', '.join(c.id for c in chapters)} runs workers in parallel")
    forced = {c.id for c in chapters} if force is True else {registry.get(f).id for f in (force or ())}
    out = Path(out_dir) if out_dir else default_out()
    written = []
    for ch in chapters:
        if ch.benchmarks is None:
            continue
        parallel = workers is not None and takes_workers(ch)
        key = execution.bench_key(ch, quick, workers if parallel else None)
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
        probed = run_machine(quick)
        result = ch.benchmarks(quick=quick, workers=workers) if parallel else ch.benchmarks(quick=quick)
        result.update(paper=ch.id, quick=quick, machine=probed, started=started.isoformat(timespec="seconds"),
                      key=key)
        written.append(io.write_json(target, result, overwrite=replace))
        if statuses is not None:
            statuses[ch.id] = "executed"
    return written
