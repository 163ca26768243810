"""Execute a paper's notebook headlessly with papermill, atomically.

:func:`run` validates the parameters first, once (a bad one fails before anything is written), then
executes ``notebooks/<paper>.ipynb`` with the resolved profile into a staging folder, with the
notebook's outputs (results JSON) directed there too (``ACL26_OUT``). Only when every cell
succeeds are the executed notebook and its results moved into the output folder (by default the
book's ``book/executed``). A failed run leaves the output folder untouched; the failed notebook
is kept under ``$ACL26_CACHE/failed`` for inspection and its path is in the error. The run record
(``runs/<paper>.json``) holds what the page's "Run this yourself" box shows (:mod:`acl26.provenance`):
the command with every resolved parameter, the cache key, the git commit, the machine, the time. In the
executed notebook the parameters cell and papermill's injected one are folded away (tag ``hide-cell``).

:func:`run_all` runs several chapters in the registry's order, support pages (the shared models)
before the papers that build on them, whatever order they were asked for in, and skips a chapter
whose cache key (:func:`acl26.execution.notebook_key`) matches its last execution's.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acl26 import io, paths, registry
from acl26.errors import RunError  # noqa: F401  (re-exported: acl26.runner.RunError)


@dataclass
class RunResult:
    paper: str
    profile: str
    notebook: Path
    results: list[Path]
    wall_s: float
    params: dict[str, Any]
    #: "executed" in this call, or "cached": the last execution's outputs, whose key still matches
    status: str = "executed"
    key: str = ""
    finished: str = ""


def resolve(paper_id: str, profile: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate and resolve the parameters without running anything (raises ParamError)."""
    chapter = registry.get(paper_id)
    return chapter.spec.resolve(profile, overrides)


@contextlib.contextmanager
def _env(**values: str):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(paper_id: str, profile: str = "book", overrides: dict[str, Any] | None = None, *,
        out_dir: str | os.PathLike | None = None, root: str | os.PathLike | None = None,
        progress: bool = True, kernel_name: str | None = None, key: str | None = None,
        overwrite: bool = False, params: dict[str, Any] | None = None) -> RunResult:
    """Execute one paper's notebook; see the module docstring. ``key`` (default: the notebook's
    cache key for these parameters, :func:`acl26.execution.notebook_key`) is stored with the run,
    so that ``acl26 book`` takes an ``acl26 run`` of the same inputs from the cache. ``params``:
    the set :func:`resolve` already returned for ``profile`` and ``overrides``, passed on rather than
    resolved again (default: resolved here, first, once).

    The outputs (``<paper>.ipynb``, ``runs/<paper>.json``, ``results/<paper>-<profile>.json``)
    replace earlier ones that acl26 wrote; an existing file it did not write (or that was changed
    since) is refused before the notebook starts, unless ``overwrite`` (:mod:`acl26.io`)."""
    paper = registry.get(paper_id)
    paper_id = paper.id
    if params is None:
        params = resolve(paper_id, profile, overrides)
    root = Path(root) if root is not None else paths.repo_root()
    if root is None:
        raise RunError("run this from the acl26-repro checkout (its notebooks/ folder is needed)")
    source = root / paper.notebook
    if not source.is_file():
        raise RunError(f"{paper_id}: notebook {source} is missing")
    paths.writable_cache()  # an unwritable cache fails here, not minutes into the notebook
    if key is None:
        from acl26 import execution

        key = execution.notebook_key(paper, params, root)
    out = Path(out_dir) if out_dir is not None else root / paths.BOOK_EXECUTED
    from acl26 import claims

    final = out / f"{paper_id}.ipynb"
    record = out / "runs" / f"{paper_id}.json"
    expected = claims.result_path(paper_id, profile, out / "results")
    for target in (final, record, expected):  # fail before the run, not after it; never onto the notebook
        io.check_target(target, overwrite=overwrite, inputs=(source,))
    out.mkdir(parents=True, exist_ok=True)

    # papermill passes only what differs from the notebook's None defaults
    injected = {"profile": profile, **{name: params[name] for name in (overrides or {})}}
    with io.staging(out, paper_id) as staging:  # a killed run's staging folder goes with the next run
        return _execute(paper_id, profile, params, injected, source, staging, out, final, record, key, root,
                        overwrite=overwrite, progress=progress, kernel_name=kernel_name)


def _execute(paper_id, profile, params, injected, source, staging, out, final, record, key, root, *,
             overwrite, progress, kernel_name) -> RunResult:
    """:func:`run`'s execution in the staging folder ``staging``, and the move of its outputs into ``out``."""
    import papermill as pm

    target = staging / f"{paper_id}.ipynb"
    started = time.perf_counter()
    try:
        with _env(ACL26_OUT=str(staging), ACL26_PROFILE=profile, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1"):
            pm.execute_notebook(str(source), str(target), parameters=injected, progress_bar=progress,
                                cwd=str(source.parent), kernel_name=kernel_name, log_output=False)
    except BaseException as exc:  # includes KeyboardInterrupt: never leave a half-written result
        kept = _keep_failed(target, paper_id, profile)
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = getattr(exc, "ename", type(exc).__name__)
        evalue = getattr(exc, "evalue", str(exc)).strip().splitlines()
        where = f" in cell {exc.exec_count}" if getattr(exc, "exec_count", None) else ""
        msg = f"{paper_id} ({profile}) failed{where}: {detail}: {evalue[-1] if evalue else ''}"
        if kept:
            msg += f" (failed notebook kept at {kept})"
        raise RunError(msg) from exc

    wall = time.perf_counter() - started
    results = []
    _fold_parameters(target)
    files = sorted((staging / "results").glob("*.json")) if (staging / "results").is_dir() else []
    for file in files:  # check every target before moving any
        io.check_target(out / "results" / file.name, overwrite=overwrite, inputs=(source,))
    for file in files:
        results.append(io.move_file(file, out / "results" / file.name, overwrite=overwrite, inputs=(source,)))
    io.move_file(target, final, overwrite=overwrite, inputs=(source,))
    finished = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    from acl26 import provenance

    io.write_json(record, {
        "paper": paper_id, "profile": profile, "params": params, "wall_s": round(wall, 1),
        "finished": finished, "results": [p.name for p in results], "key": key,
        "command": provenance.command(paper_id, profile, params), "git": provenance.git_state(root),
        "machine": provenance.machine_facts(),
    }, overwrite=overwrite)
    return RunResult(paper_id, profile, final, results, wall, params, "executed", key, finished)


#: the tag that folds a cell away in the book (MyST-NB: input and output behind a toggle)
FOLD = "hide-cell"


def _fold_parameters(notebook: Path) -> None:
    """Fold the parameters cell and papermill's injected cell away from the book's reader (the page's
    "Run this yourself" box shows the resolved values instead)."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    changed = False
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if ("parameters" in tags or "injected-parameters" in tags) and FOLD not in tags:
            cell.metadata["tags"] = [*tags, FOLD]
            changed = True
    if changed:
        nbformat.write(nb, notebook)


def cached(paper_id: str, profile: str, out_dir: str | os.PathLike, key: str) -> RunResult | None:
    """The last execution in ``out_dir`` if its key is ``key`` and its outputs are all there, else None."""
    out = Path(out_dir)
    record = out / "runs" / f"{paper_id}.json"
    try:
        run = io.read_json(record)
    except (OSError, ValueError):
        return None
    if not (isinstance(run, dict) and isinstance(run.get("results", []), list)
            and all(isinstance(n, str) for n in run.get("results", []))
            and isinstance(run.get("wall_s", 0.0), (int, float)) and not isinstance(run.get("wall_s"), bool)
            and isinstance(run.get("finished", ""), str) and isinstance(run.get("params", {}), dict)):
        return None  # not a record acl26 wrote: run again (and the write then names the file)
    nb = out / f"{paper_id}.ipynb"
    files = [out / "results" / name for name in run.get("results", [])]
    if (not key or run.get("key") != key or run.get("profile") != profile or not nb.is_file()
            or not all(f.is_file() for f in files)):
        return None
    return RunResult(paper_id, profile, nb, files, run.get("wall_s", 0.0), run.get("params", {}), "cached", key,
                     run.get("finished", ""))


def resolve_all(ids: list[str] | None = None, profile: str = "book") -> dict[str, dict[str, Any]]:
    """``{chapter id: its parameter set for profile}`` for chapters ``ids`` (default: all), in the registry's
    order: each resolved once, so that a bad profile fails before any work (:func:`run_all` takes the result)."""
    return {c.id: c.spec.resolve(profile) for c in registry.ordered(ids)}


def run_all(ids: list[str] | None = None, profile: str = "book", *, out_dir: str | os.PathLike | None = None,
            root: str | os.PathLike | None = None, force: list[str] | bool = (), progress: bool = True,
            on_result=None, params: dict[str, dict[str, Any]] | None = None) -> list[RunResult]:
    """Run chapters ``ids`` (default: all) in the registry's order (support pages first); skip those
    whose key is unchanged unless ``force`` (True: all; a list: those ids), which also lets their
    outputs replace files acl26 did not write. ``on_result(res)`` is called after each chapter.

    ``params``: what :func:`resolve_all` returned for these ``ids`` and ``profile``, passed on rather than
    resolved again (default: resolved here, first, once)."""
    from acl26 import execution

    root = Path(root) if root is not None else paths.repo_root()
    if root is None:
        raise RunError("run this from the acl26-repro checkout (its notebooks/ folder is needed)")
    out = Path(out_dir) if out_dir is not None else root / paths.BOOK_EXECUTED
    chapters = registry.ordered(ids)
    forced = {c.id for c in chapters} if force is True else {registry.get(f).id for f in (force or ())}
    if params is None:
        params = resolve_all(ids, profile)  # once each; a bad profile fails before any work
    missing = [c.id for c in chapters if c.id not in params]
    if missing:
        raise ValueError(f"run_all: params lacks the parameter sets of {', '.join(missing)}")
    results = []
    for c in chapters:
        key = execution.notebook_key(c, params[c.id], root)
        res = None if c.id in forced else cached(c.id, profile, out, key)
        if res is None:
            res = run(c.id, profile, root=root, out_dir=out, progress=progress, key=key, overwrite=c.id in forced,
                      params=params[c.id])
        results.append(res)
        if on_result is not None:
            on_result(res)
    return results


def _keep_failed(target: Path, paper_id: str, profile: str) -> Path | None:
    """Move the failed notebook under ``$ACL26_CACHE/failed`` under a new name (never onto another)."""
    if not target.is_file():
        return None
    try:
        folder = paths.cache_dir() / "failed"
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f"{paper_id}-{profile}-{_dt.datetime.now():%Y%m%d-%H%M%S}-",
                                    suffix=".ipynb", dir=folder)
        os.close(fd)
        shutil.move(str(target), name)
    except OSError:  # an unwritable cache must not hide the notebook's own error
        return None
    return Path(name)
