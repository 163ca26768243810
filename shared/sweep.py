"""Parameter sweeps: one chapter's notebook at many parameter points, on this machine, a Dask cluster or SLURM.

``acl26 sweep PAPER`` turns a grid (``--grid name=v1,v2``; several flags give the product) and/or a
YAML file of whole parameter sets (``--points FILE``, for list-valued parameters such as ``lambdas``)
into points, each a full parameter set resolved and validated before anything runs (a bad point
fails the command in one line naming it). Each point is one ``acl26 run`` into its own folder
``<out>/<sweep>/<paper>/<key>/``, named by the first 16 hex digits of the notebook's cache key
(:func:`acl26.execution.notebook_key`), so:

* a re-run skips every point whose folder holds a finished run with that key (resume);
* a failed point leaves its folder untouched, its error in ``failed/<key>.json`` and its output in
  ``logs/<key>.log``; the other points go on, and the command ends with one line counting the
  failures (status 2). A later re-run tries the failed points again.

Executors (``--on``):

* ``local[N]`` (default ``local[1]``): at most N points at once, each in its own ``acl26 run``
  process (a crash in one point cannot take the others down); no dependency beyond the core;
* ``dask://HOST:PORT``: an existing Dask scheduler (``pip install acl26-repro[cluster]``), with
  ``--gpus N`` asking each point for N units of the workers' ``GPU`` resource;
* ``slurm``: a :class:`dask_jobqueue.SLURMCluster` (:func:`slurm_cluster`), one worker process per
  job, with the job's cores, memory, walltime, partition, account, GPUs and the number of jobs.

What a chapter builds once (its ``prepare`` hook, e.g. Sherry's llama.cpp build, and the models its
first point trains, the shared ones among them) is built by one task that runs before the points fan
out. Beyond that, :func:`acl26.training.train` holds a lock per model while it trains, so two points
that need the same model, anywhere on a shared cache, never train it twice.

Each point's process gets its share of the cores as its torch, numba and BLAS thread counts
(``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``NUMBA_NUM_THREADS``):
``local[N]``: this machine's cores over N (all of them for the first point, which runs alone); on Dask: ``$ACL26_THREADS`` where set (the SLURM job
script sets it to the job's cores), else the worker's host cores over the task slots of every worker
on that host.

``acl26 sweep collect DIR`` (:func:`collect`) gathers every point under DIR (parameters, wall time,
each claim's verdict and value, the results' scalar metrics, and the failed points with their error)
into ``DIR/collected.csv`` (and ``collected.parquet`` where pyarrow is installed), and with
``--metric M --by P`` a seaborn plot of M against P.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import json
import math
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acl26 import io, machine, params as params_mod, paths, registry
from acl26.errors import RunError

#: the hex digits of the cache key that name a point's folder
KEY_DIGITS = 16
#: the environment variables that set a point's thread counts
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
#: where a sweep goes by default (relative to the current folder)
DEFAULT_OUT = Path("sweeps")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class SweepError(RunError, ValueError):
    """A bad sweep request (grid, points file, executor) or failed points: one line, status 2."""


# ---- points


def parse_grid(items: Iterable[str] | None) -> list[dict[str, Any]]:
    """``["a=1,2", "b=x,y"]`` -> the product ``[{a: 1, b: 'x'}, {a: 1, b: 'y'}, ...]`` (one empty point
    for no items). Each value is read like ``-p`` (:func:`acl26.params.parse_cli_value`); a list value
    belongs in a points file."""
    axes: list[tuple[str, list[Any]]] = []
    for item in items or []:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise SweepError(f"--grid {item!r}: expected name=value1,value2,...")
        if name in dict(axes):
            raise SweepError(f"--grid {name}: given twice; put every value in one flag")
        parts = [v.strip() for v in values.split(",")]
        if not values.strip() or any(not v for v in parts):
            raise SweepError(f"--grid {item!r}: an empty value; expected name=value1,value2,...")
        parsed = [params_mod.parse_cli_value(v) for v in parts]
        if len({json.dumps(v, sort_keys=True, default=str) for v in parsed}) != len(parsed):
            raise SweepError(f"--grid {item!r}: a value is repeated")
        axes.append((name, parsed))
    return [dict(zip([n for n, _ in axes], combo)) for combo in itertools.product(*[v for _, v in axes])]


def _loader():
    """PyYAML's safe loader, reading ``1e-3`` and ``1E5`` as floats (YAML 1.2), as ``--grid`` does."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                    |\.[0-9_]+(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X),
        list("-+0123456789."))
    return Loader


def read_points(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The points of a YAML file: a list of mappings (each a whole or partial parameter set), or a
    mapping whose ``points`` is that list."""
    import yaml

    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_loader())
    except OSError as exc:
        raise SweepError(f"--points {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SweepError(f"--points {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        raise SweepError(f"--points {path}: not YAML ({' '.join(str(exc).split())})") from exc
    if isinstance(data, dict) and set(data) == {"points"}:
        data = data["points"]
    if not isinstance(data, list) or not data:
        raise SweepError(f"--points {path}: expected a non-empty list of parameter sets (mappings), or "
                         f"a mapping with one key 'points' holding that list")
    for i, point in enumerate(data):
        if not isinstance(point, dict) or not all(isinstance(k, str) for k in point):
            raise SweepError(f"--points {path}: point {i} is not a mapping of parameter names to values")
    return [dict(p) for p in data]


@dataclass(frozen=True)
class Point:
    """One parameter set of a sweep: what differs from the profile, the resolved set, its cache key, its folder."""

    overrides: dict[str, Any]
    params: dict[str, Any]
    key: str
    folder: Path

    @property
    def short(self) -> str:
        return self.key[:KEY_DIGITS]

    def label(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.overrides.items()) or "(the profile as it is)"


@dataclass
class Sweep:
    """A planned sweep: its points, in order, and where everything goes."""

    paper: str
    profile: str
    name: str
    out: Path
    points: list[Point]
    root: Path
    #: the folder the points were validated in: each point's ``acl26 run`` runs there, so a relative path
    #: given as a parameter names the same folder (on Dask and SLURM workers too: a shared file system)
    cwd: Path = field(default_factory=Path.cwd)

    @property
    def folder(self) -> Path:
        return self.out / self.name / self.paper

    def failed_record(self, point: Point) -> Path:
        return self.folder / "failed" / f"{point.short}.json"

    def log(self, point: Point) -> Path:
        return (self.folder / "logs" / f"{point.short}.log").resolve()

    def status(self, point: Point) -> str:
        """``done`` (a finished run with this key), ``failed`` (the last try failed) or ``to run``."""
        from acl26 import runner

        if runner.cached(self.paper, self.profile, point.folder, point.key) is not None:
            return "done"
        return "failed" if self.failed_record(point).is_file() else "to run"


def plan(paper: str, profile: str = "book", *, grid: Iterable[str] | None = None, points_file=None,
         fixed: dict[str, Any] | None = None, name: str = "main", out: str | os.PathLike | None = None,
         root: str | os.PathLike | None = None) -> Sweep:
    """Every point of a sweep, resolved and validated before anything runs (see the module docstring).

    The points are the product of the points file's sets (default: one empty set) and the grid; ``fixed``
    (``-p``) applies to all of them; a grid or ``-p`` value overrides a file's. Points that resolve to the
    same parameters (the same cache key) are run once."""
    from acl26 import execution

    chapter = registry.get(paper)
    if not _NAME.match(name or ""):
        raise SweepError(f"--name {name!r}: use letters, digits, '.', '_' and '-' (at most 64, starting with a "
                         f"letter or digit)")
    root = Path(root) if root is not None else paths.repo_root()
    if root is None:
        raise SweepError("run `acl26 sweep` from the acl26-repro checkout (its notebooks/ folder is needed)")
    chapter.spec.resolve(profile)  # a bad profile fails first
    base = read_points(points_file) if points_file is not None else [{}]
    axes = parse_grid(grid)
    fixed = dict(fixed or {})
    clash = sorted(set(fixed) & {k for g in axes[:1] for k in g})
    if clash:
        raise SweepError(f"{', '.join(clash)}: given both by -p and by --grid")
    out = Path(out) if out is not None else DEFAULT_OUT
    seen: dict[str, Point] = {}
    for i, (b, g) in enumerate(itertools.product(base, axes)):
        overrides = {**b, **fixed, **g}
        for k in overrides:
            if k == "profile":
                raise SweepError(f"point {i}: 'profile' is not a parameter; use --profile")
        try:
            resolved = chapter.spec.resolve(profile, overrides)
        except params_mod.ParamError as exc:
            raise SweepError(f"point {i} ({', '.join(f'{k}={v!r}' for k, v in overrides.items())}): {exc}") from exc
        key = execution.notebook_key(chapter, resolved, root)
        if key not in seen:
            seen[key] = Point(overrides, resolved, key, out / name / chapter.id / key[:KEY_DIGITS])
    return Sweep(chapter.id, profile, name, out, list(seen.values()), root, Path.cwd())


# ---- executors


@dataclass(frozen=True)
class Executor:
    kind: str  # "local", "dask" or "slurm"
    workers: int = 1
    address: str = ""


def parse_on(on: str) -> Executor:
    """``local[N]`` (or ``local``: one), ``dask://HOST:PORT`` or ``slurm``."""
    on = (on or "").strip()
    m = re.fullmatch(r"local(?:\[(\d+)\])?", on)
    if m:
        n = int(m.group(1) or 1)
        if n < 1:
            raise SweepError(f"--on {on}: N must be at least 1")
        return Executor("local", n)
    if on.startswith("dask://"):
        address = on[len("dask://"):]
        if not re.fullmatch(r"[^\s/:]+:\d{1,5}", address):
            raise SweepError(f"--on {on}: expected dask://HOST:PORT, the address of a running Dask scheduler")
        return Executor("dask", address=f"tcp://{address}")
    if on == "slurm":
        return Executor("slurm")
    raise SweepError(f"--on {on!r}: expected local[N], dask://HOST:PORT or slurm")


def thread_env(threads: int) -> dict[str, str]:
    return {v: str(int(threads)) for v in THREAD_VARS}


def _dask_threads() -> int:
    """A Dask task's share of its host's cores: ``$ACL26_THREADS``, else the host's cores over the task
    slots of every worker on the host (a LocalCluster of 2 single-threaded workers on 2 cores: 1 each)."""
    if os.environ.get("ACL26_THREADS", "").isdigit() and int(os.environ["ACL26_THREADS"]) > 0:
        return int(os.environ["ACL26_THREADS"])
    from distributed import get_worker

    worker = get_worker()
    host = worker.address.rsplit(":", 1)[0]
    try:
        infos = worker.client.scheduler_info(n_workers=-1)["workers"]
        slots = sum(int(w.get("nthreads", 1)) for addr, w in infos.items() if addr.rsplit(":", 1)[0] == host)
    except Exception:  # noqa: BLE001 - an unreachable scheduler: count this worker alone
        slots = int(worker.state.nthreads)
    return max(1, machine.cpu_count() // max(1, slots))


#: the point processes this process runs now (``local[N]``): an interrupted sweep stops them
_LIVE: set = set()
_LIVE_LOCK = threading.Lock()


def stop_points() -> int:
    """Send SIGTERM to every point process this process runs (each unwinds like Ctrl-C, leaving nothing
    half-written); returns how many."""
    with _LIVE_LOCK:
        live = [p for p in _LIVE if p.poll() is None]
    for proc in live:
        with contextlib.suppress(OSError):
            proc.terminate()
    return len(live)


def execute(commands: list[list[str]], cwd: str, log: str, threads: int | None = None) -> dict:
    """Run ``commands`` in turn (the task of one point, in whatever process the executor gives it); every
    command but the last may fail (a chapter's ``prepare`` that cannot be done here: the point then reports
    what needs it as not tested, as in the book). Output goes to ``log``. Returns what happened."""
    if threads is None:
        threads = _dask_threads()
    env = {**os.environ, **thread_env(threads), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1"}
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rc, last = 0, ""
    with open(log, "a", encoding="utf-8") as fh:
        for i, cmd in enumerate(commands):
            fh.write(f"$ {shlex.join(cmd)}   # threads {threads}, on {os.uname().nodename}\n")
            fh.flush()
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.PIPE, text=True)
            with _LIVE_LOCK:
                _LIVE.add(proc)
            try:
                _, err = proc.communicate()
            finally:
                with _LIVE_LOCK:
                    _LIVE.discard(proc)
            fh.write(err)
            fh.flush()
            lines = [ln for ln in err.splitlines() if ln.strip()]
            errors = [ln for ln in lines if ln.startswith("acl26: ")]
            last = (errors or lines or [f"exit status {proc.returncode}"])[-1]
            rc = proc.returncode
            if rc != 0 and i == len(commands) - 1:
                break
    return {"rc": rc, "error": last if rc else "", "wall_s": round(time.perf_counter() - started, 1),
            "threads": threads, "host": os.uname().nodename}


def _acl26() -> list[str]:
    return [sys.executable, "-m", "acl26.cli"]


def run_command(sweep: Sweep, point: Point) -> list[str]:
    """The ``acl26 run`` of one point: its profile and every parameter it sets, into its folder."""
    cmd = [*_acl26(), "run", sweep.paper, "--profile", sweep.profile, "--out", str(point.folder.resolve()), "-q"]
    for k, v in point.overrides.items():
        cmd += ["-p", f"{k}={v!r}"]
    return cmd


@dataclass
class Outcome:
    point: Point
    status: str  # "done" (skipped, already finished), "ok" (ran now), "failed"
    wall_s: float = 0.0
    error: str = ""
    host: str = ""


@dataclass
class SweepResult:
    sweep: Sweep
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]


def slurm_cluster(*, cores: int = 4, memory: str = "16GB", walltime: str = "02:00:00", gpus: int = 0,
                  partition: str | None = None, account: str | None = None, max_jobs: int = 4,
                  python: str | None = None, extra: Iterable[str] = (), scale: bool = True):
    """A :class:`dask_jobqueue.SLURMCluster`: one worker process per job with ``cores`` cores, running one point
    at a time on all of them (one task slot; ``ACL26_THREADS``), ``memory``, ``walltime``, ``gpus`` (``--gres=gpu:N`` and the
    worker's ``GPU`` resource), on ``partition`` / ``account``, at most ``max_jobs`` jobs (adaptive), the
    hub offline. ``cluster.job_script()`` shows the job script without SLURM."""
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as exc:
        raise SweepError("--on slurm needs dask-jobqueue: pip install 'acl26-repro[cluster]'") from exc
    for what, v in (("cores", cores), ("max_jobs", max_jobs)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SweepError(f"--slurm-{what.replace('_', '-')}: must be a whole number ≥ 1, got {v!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise SweepError(f"--gpus: must be a whole number ≥ 0, got {gpus!r}")
    directives = [*extra] + ([f"--gres=gpu:{gpus}"] if gpus else [])
    if account:
        directives.append(f"--account={account}")
    cluster = SLURMCluster(
        # one task slot per job (one point at a time), holding all the job's cores
        cores=1, job_cpu=cores, processes=1, memory=memory, walltime=walltime, queue=partition,
        job_extra_directives=directives, python=python or sys.executable,
        worker_extra_args=(["--resources", f"GPU={gpus}"] if gpus else []),
        job_script_prologue=[f"export ACL26_THREADS={cores}", "export HF_HUB_OFFLINE=1", "export HF_DATASETS_OFFLINE=1"],
    )
    if scale:
        cluster.adapt(minimum_jobs=0, maximum_jobs=max_jobs)
    return cluster


class _Local:
    """``local[N]``: a pool of N threads, each driving one point's ``acl26 run`` process at a time."""

    def __init__(self, workers: int):
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="acl26-sweep")
        self.threads = max(1, machine.cpu_count() // workers)

    def submit(self, commands, cwd, log, name, alone=False):
        """``alone``: the task runs with nothing beside it (the first point), on every core."""
        return self.pool.submit(execute, commands, cwd, log, machine.cpu_count() if alone else self.threads)

    @staticmethod
    def as_completed(futures):
        from concurrent.futures import as_completed

        return as_completed(futures)

    def close(self):
        self.pool.shutdown(wait=True, cancel_futures=True)


class _Dask:
    def __init__(self, client, gpus: int = 0, owned=()):
        self.client, self.gpus, self.owned = client, gpus, owned

    def submit(self, commands, cwd, log, name, alone=False):  # a worker's share is its share, alone or not
        return self.client.submit(execute, commands, cwd, log, None, key=f"acl26-{name}-{time.time_ns()}",
                                  pure=False, resources={"GPU": self.gpus} if self.gpus else None)

    @staticmethod
    def as_completed(futures):
        from distributed import as_completed

        return as_completed(futures)

    def close(self):
        for thing in self.owned:
            with contextlib.suppress(Exception):
                thing.close()


def _dask_client(address: str):
    try:
        from distributed import Client
    except ImportError as exc:
        raise SweepError("--on dask:// needs Dask distributed: pip install 'acl26-repro[cluster]'") from exc
    try:
        return Client(address, timeout="20s")
    except (OSError, TimeoutError) as exc:
        raise SweepError(f"--on dask://{address.removeprefix('tcp://')}: no Dask scheduler answers there "
                         f"({' '.join(str(exc).split())[:160]})") from exc


def executor_for(ex: Executor, *, gpus: int = 0, slurm: dict | None = None):
    if ex.kind == "local":
        if gpus:
            raise SweepError("--gpus is for Dask and SLURM workers; a local point sees this machine's devices as they are")
        return _Local(ex.workers)
    if ex.kind == "dask":
        client = _dask_client(ex.address)
        return _Dask(client, gpus, owned=(client,))  # the scheduler and its workers are the user's: left running
    cluster = slurm_cluster(gpus=gpus, **(slurm or {}))
    from distributed import Client

    client = Client(cluster)
    return _Dask(client, gpus, owned=(client, cluster))


def _record_failure(sweep: Sweep, point: Point, outcome: dict, command: list[str]) -> None:
    io.write_json(sweep.failed_record(point), overwrite=True, obj={  # ours by construction: the last try's error
        "paper": sweep.paper, "profile": sweep.profile, "key": point.key, "overrides": point.overrides,
        "params": point.params, "error": outcome.get("error", ""), "wall_s": outcome.get("wall_s"),
        "host": outcome.get("host", ""), "command": shlex.join(command), "log": str(sweep.log(point)),
        "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})


def run(sweep: Sweep, on: str = "local[1]", *, gpus: int = 0, slurm: dict | None = None, progress: bool = True,
        say: Callable[[str], None] | None = None, executor=None) -> SweepResult:
    """Run the points of ``sweep`` that are not finished yet (see the module docstring), saying one line per
    point (``say``, default: printed above the progress bar). ``executor``: an object like :class:`_Local` /
    :class:`_Dask`, instead of the one ``on`` names."""
    from tqdm.auto import tqdm

    say = say if say is not None else tqdm.write

    ex = parse_on(on)
    started = time.perf_counter()
    result = SweepResult(sweep)
    todo = []
    for p in sweep.points:
        if sweep.status(p) == "done":
            result.outcomes.append(Outcome(p, "done"))
            say(f"[done] {p.short}  {p.label()}  (finished earlier: {p.folder})")
        else:
            todo.append(p)
    if not todo:
        result.wall_s = time.perf_counter() - started
        return result
    chapter = registry.get(sweep.paper)
    own = executor is None
    executor = executor if executor is not None else executor_for(ex, gpus=gpus, slurm=slurm)
    cwd = str(sweep.cwd)
    bar = tqdm(total=len(todo), desc=f"sweep {sweep.name}/{sweep.paper}", unit="point", disable=not progress)

    def commands(point, first):
        cmds = [run_command(sweep, point)]
        if first and chapter.prepare is not None:
            cmds.insert(0, [*_acl26(), "prepare", sweep.paper])
        return cmds

    def finish(point, cmds, got):
        if got.get("rc") == 0:
            with contextlib.suppress(OSError):
                io.remove_file(sweep.failed_record(point))  # ours: the earlier try that failed
            out = Outcome(point, "ok", got.get("wall_s", 0.0), host=got.get("host", ""))
            say(f"[ok] {point.short}  {point.label()}  in {out.wall_s:.0f} s on {out.host}: {point.folder}")
        else:
            _record_failure(sweep, point, got, cmds[-1])
            out = Outcome(point, "failed", got.get("wall_s", 0.0), got.get("error", ""), got.get("host", ""))
            say(f"[FAILED] {point.short}  {point.label()}: {out.error} (log: {sweep.log(point)})")
        result.outcomes.append(out)
        bar.update(1)

    def gather(futures: dict):
        for fut in executor.as_completed(list(futures)):
            point, cmds = futures[fut]
            try:
                got = fut.result()
            except Exception as exc:  # noqa: BLE001 - the worker itself died (killed, lost): this point failed
                got = {"rc": -1, "error": f"the worker running it failed: {' '.join(str(exc).split())[:200]}"}
            finish(point, cmds, got)

    try:
        # one task first: the chapter's one-time build and the models its first point trains
        first = todo[0]
        cmds = commands(first, True)
        gather({executor.submit(cmds, cwd, str(sweep.log(first)), first.short, alone=True): (first, cmds)})
        futures = {}
        for p in todo[1:]:
            cmds = commands(p, False)
            futures[executor.submit(cmds, cwd, str(sweep.log(p)), p.short)] = (p, cmds)
        gather(futures)
    except BaseException:  # Ctrl-C, a SIGTERM to this process only: the points it started stop too
        stop_points()
        raise
    finally:
        bar.close()
        if own:
            executor.close()
    result.wall_s = time.perf_counter() - started
    return result


# ---- collect


def _scalar(v) -> bool:
    return v is None or (isinstance(v, (int, float, str, bool)) and not (isinstance(v, float) and math.isinf(v)))


def _flat(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}", v, out)
    elif _scalar(value):
        out[prefix] = value


def _cell(v):
    """A parameter value as a table cell: scalars as they are, lists as their JSON text."""
    return v if _scalar(v) else json.dumps(v)


def _sweep_name(paper_folder: Path, folder: Path) -> str:
    """The sweep a point belongs to: the name of the folder above its paper's (``<out>/<sweep>/<paper>/``),
    or "" where ``folder`` starts below it."""
    return paper_folder.parent.name if folder in paper_folder.parents else ""


def collect_rows(folder: str | os.PathLike) -> list[dict]:
    """One row per point found under ``folder``: finished runs (``<point>/runs/<paper>.json``) and
    failed points (``failed/<key>.json``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SweepError(f"sweep collect {folder}: not a folder")
    rows = []
    for record in sorted(folder.rglob("runs/*.json")):
        point = record.parent.parent
        try:
            run = io.read_json(record)
            paper, profile = run["paper"], run["profile"]
            res = io.read_json(point / "results" / f"{paper}-{profile}.json")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SweepError(f"sweep collect: {record} or its results file cannot be read ({exc})") from exc
        row = {"paper": paper, "profile": profile, "key": str(run.get("key", ""))[:KEY_DIGITS], "status": "ok",
               "wall_s": run.get("wall_s"), "finished": run.get("finished", ""),
               "sweep": _sweep_name(point.parent, folder), "folder": str(point.relative_to(folder)), "error": ""}
        row.update({k: _cell(v) for k, v in run.get("params", {}).items() if k != "profile"})
        for c in res.get("claims", []):
            cid = c.get("id")
            row[f"verdict.{cid}"] = c.get("holds?")
            if isinstance(c.get("value"), (int, float)) and not isinstance(c.get("value"), bool):
                row[f"value.{cid}"] = c["value"]
        flat: dict = {}
        _flat("metric", res.get("metrics", {}), flat)
        row.update(flat)
        rows.append(row)
    for record in sorted(folder.rglob("failed/*.json")):
        try:
            f = io.read_json(record)
            row = {"paper": f["paper"], "profile": f["profile"], "key": f["key"][:KEY_DIGITS], "status": "failed",
                   "wall_s": f.get("wall_s"), "finished": f.get("when", ""),
                   "sweep": _sweep_name(record.parent.parent, folder), "folder": "", "error": f.get("error", "")}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SweepError(f"sweep collect: {record} cannot be read ({exc})") from exc
        row.update({k: _cell(v) for k, v in f.get("params", {}).items() if k != "profile"})
        rows.append(row)
    finished = {(r["paper"], r["profile"], r["key"]) for r in rows if r["status"] == "ok"}
    # a failure record whose point has since finished (its record could not be removed): the run counts
    return [r for r in rows if r["status"] == "ok" or (r["paper"], r["profile"], r["key"]) not in finished]


def collect(folder: str | os.PathLike, *, metric: str | None = None, by: str | None = None, hue: str | None = None,
            overwrite: bool = False, rows: list[dict] | None = None) -> dict[str, Path]:
    """Write ``collected.csv`` (and ``collected.parquet`` where pyarrow is installed) in ``folder``, and with
    ``metric`` and ``by`` a plot ``<metric>-by-<by>.png``; returns what was written. ``rows``: the folder's
    :func:`collect_rows`, where the caller has read them already."""
    import pandas as pd

    folder = Path(folder)
    if (metric is None) != (by is None):
        raise SweepError("sweep collect: --metric and --by go together (the plot shows the metric against the parameter)")
    rows = collect_rows(folder) if rows is None else rows
    if not rows:
        raise SweepError(f"sweep collect {folder}: no finished or failed point under it")
    df = pd.DataFrame(rows)
    written = {"csv": io.write_text(folder / "collected.csv", df.to_csv(index=False), overwrite=overwrite)}
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass
    else:
        with io.atomic_path(folder / "collected.parquet", overwrite=overwrite) as tmp:
            df.astype({c: str for c in df.columns if df[c].dtype == object}).to_parquet(tmp, index=False)
        written["parquet"] = folder / "collected.parquet"
    if metric is not None:
        written["plot"] = plot(df, metric, by, hue, folder, overwrite=overwrite)
    return written


def _statement(df, metric: str) -> str:
    """For ``value.<claim>`` (the claim's measured value), the claim's statement on a second line."""
    import textwrap

    if not metric.startswith("value.") or df.empty:
        return ""
    try:
        chapter = registry.get(str(df["paper"].iloc[0]))
        claim = next(c for c in chapter.claims if c.id == metric[len("value."):])
    except (KeyError, StopIteration):
        return ""
    return "\n" + textwrap.shorten(claim.statement, 70)


def plot(df, metric: str, by: str, hue: str | None, folder: Path, *, overwrite: bool = False) -> Path:
    """A seaborn plot of ``metric`` against ``by`` over the finished points (mean and 95% CI where several
    points share a value), one line per ``hue`` value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    ok = df[df["status"] == "ok"]
    for what, col in (("--metric", metric), ("--by", by), ("--hue", hue)):
        if col is not None and col not in df.columns:
            numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
            raise SweepError(f"sweep collect {what} {col!r}: no such column; numeric ones: {', '.join(numeric)}")
    y = pd.to_numeric(ok[metric], errors="coerce")
    if y.notna().sum() == 0:
        raise SweepError(f"sweep collect --metric {metric!r}: no finished point has a number there")
    data = ok.assign(**{metric: y})
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.lineplot(data=data, x=by, y=metric, hue=hue, marker="o", errorbar=("ci", 95), ax=ax)
    if pd.api.types.is_integer_dtype(data[by]):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # seeds, steps, counts: no 0.2 ticks
    ax.set_xlabel(by)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} against {by} ({int(y.notna().sum())} points)" + _statement(ok, metric))
    fig.tight_layout()
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{metric}-by-{by}")
    path = folder / f"{safe}.png"
    with io.atomic_path(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    return path
