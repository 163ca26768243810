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
* a failure record or log is written like every other file of acl26 (:mod:`acl26.io`): it replaces
  only the one acl26 wrote (the last try's); a file of the user's in the way stops the sweep before
  anything runs, in one line naming it (``overwrite``, ``--force``, replaces it).

A sweep's size and its input are bounded before anything is planned: at most :data:`MAX_POINTS` points
(the points file's sets times the grid's values, counted first; ``max_points`` / ``--max-points`` raises
the limit), and a points file is a regular file of at most :data:`MAX_POINTS_FILE_BYTES` bytes, plain
YAML: anchors, aliases, merge keys (``<<``) and a key given twice in one mapping are refused, naming the
file and the line.

Executors (``--on``):

* ``local[N]`` (default ``local[1]``): at most N points at once, each in its own ``acl26 run``
  process (a crash in one point cannot take the others down); no dependency beyond the core;
* ``dask://HOST:PORT``: an existing Dask scheduler (``pip install acl26-repro[cluster]``), with
  ``--gpus N`` asking each point for N units of the workers' ``GPU`` resource;
* ``slurm``: a :class:`dask_jobqueue.SLURMCluster` (:func:`slurm_cluster`), one worker process per
  job, with the job's cores, memory, walltime, partition, account, GPUs and the number of jobs; it
  needs SLURM's ``sbatch`` on the PATH, checked first, and asks SLURM whether it takes the job script
  (``sbatch --test-only``) before the cluster submits any job.

Every option is checked before anything is planned (:func:`check_options`). A Dask or SLURM sweep never
waits silently: before it submits a point it waits for a worker that offers what a point needs (a task
slot; ``GPU=N`` with ``--gpus N``), saying so on stderr, and gives up in one line after
:data:`DASK_WAIT_S` (Dask) or :data:`SLURM_WAIT_S` (SLURM: a job may queue) seconds
(``worker_timeout``, ``--worker-timeout``).

What a chapter builds once (its ``prepare`` hook, e.g. a build of the tools it times, and the models its
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
import errno
import itertools
import json
import math
import os
import re
import reprlib
import shlex
import shutil
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
#: the most points a sweep plans unless the caller raises the limit (``max_points``, ``--max-points``): each point is
#: a notebook run (minutes), so a sweep that size is rarely meant; planning 10,000 takes about 2 s
MAX_POINTS = 10_000
#: the largest points file (``--points``) read, in bytes (1 MiB: some 10,000 points of a few parameters)
MAX_POINTS_FILE_BYTES = 1 << 20
#: the largest record or results file ``sweep collect`` reads, in bytes
MAX_RECORD_BYTES = 256 << 20
#: how long a Dask sweep waits for a worker that offers what its points need, in seconds (``--worker-timeout``)
DASK_WAIT_S = 300.0
#: the same for SLURM, whose first job may wait in the queue
SLURM_WAIT_S = 3600.0
#: how often a waiting sweep asks the scheduler again, in seconds
POLL_S = 1.0
#: the submit command ``--on slurm`` needs
SBATCH = "sbatch"
#: names (``--name``), matched whole (``re.fullmatch``: ``$`` would let a trailing newline through)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: a profile's name in a record ``sweep collect`` reads
_PROFILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_short = reprlib.Repr()
_short.maxstring, _short.maxother = 60, 60


class SweepError(RunError, ValueError):
    """A bad sweep request (grid, points file, executor) or failed points: one line, status 2."""


# ---- points


def grid_axes(items: Iterable[str] | None) -> list[tuple[str, list[Any]]]:
    """``["a=1,2", "b=x,y"]`` -> ``[("a", [1, 2]), ("b", ["x", "y"])]``, each value read like ``-p``
    (:func:`acl26.params.parse_cli_value`); a list value belongs in a points file."""
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
    return axes


def parse_grid(items: Iterable[str] | None) -> list[dict[str, Any]]:
    """``["a=1,2", "b=x,y"]`` -> the product ``[{a: 1, b: 'x'}, {a: 1, b: 'y'}, ...]`` (one empty point
    for no items); see :func:`grid_axes`."""
    axes = grid_axes(items)
    return [dict(zip([n for n, _ in axes], combo)) for combo in itertools.product(*[v for _, v in axes])]


class _Refused(Exception):
    """YAML that a points file may not use (an alias, a key twice), at a line (1-based)."""

    def __init__(self, mark, message: str):
        super().__init__(message)
        self.line = mark.line + 1 if mark is not None else None


def _loader():
    """PyYAML's safe loader, reading ``1e-3`` and ``1E5`` as floats (YAML 1.2), as ``--grid`` does, and refusing
    anchors and aliases (a 1 KB file of them expands to gigabytes), merge keys and a key given twice in one
    mapping (which would otherwise merge silently, the last one winning)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise _Refused(event.start_mark, f"YAML aliases and anchors are not accepted (found the alias "
                                                 f"*{event.anchor}); write each value out")
            if getattr(event, "anchor", None) is not None:
                raise _Refused(event.start_mark, f"YAML anchors and aliases are not accepted (found the anchor "
                                                 f"&{event.anchor}); write each value out")
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                first: dict = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        raise _Refused(key_node.start_mark, "YAML merge keys ('<<') are not accepted; write each "
                                                            "key out")
                    key = self.construct_object(key_node, deep=True)
                    try:
                        seen = first.get(key)
                    except TypeError:  # an unhashable key: the constructor says so below
                        continue
                    if seen is not None:
                        raise _Refused(key_node.start_mark, f"the key {_short.repr(key)} is given twice in one "
                                                            f"mapping (first on line {seen})")
                    first[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                    |\.[0-9_]+(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X),
        list("-+0123456789."))
    return Loader


def read_capped(path: str | os.PathLike, cap: int, what: str) -> bytes:
    """The bytes of the regular file ``path`` (symbolic links followed), at most ``cap`` of them
    (:func:`acl26.io.read_bytes`). Anything else (a named pipe, a device such as ``/dev/zero``, a folder) or
    a larger file is refused in one line starting with ``what``, without being read."""
    try:
        return io.read_bytes(path, max_bytes=cap)
    except OSError as exc:
        raise SweepError(f"{what}: {exc.strerror or exc}") from exc


def read_points(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The points of a YAML file: a list of mappings (each a whole or partial parameter set), or a
    mapping whose ``points`` is that list. The file is untrusted input: a regular file of at most
    :data:`MAX_POINTS_FILE_BYTES` bytes, UTF-8, plain YAML (see :func:`_loader`); anything else fails in one
    line naming the file (and the line, where YAML knows it)."""
    import yaml

    path = Path(path)
    what = f"--points {path}"
    raw = read_capped(path, MAX_POINTS_FILE_BYTES, what)
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=_loader())  # noqa: S506 - a SafeLoader, stricter still
    except UnicodeDecodeError as exc:
        raise SweepError(f"{what}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except _Refused as exc:
        raise SweepError(f"{what}: line {exc.line}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise SweepError(f"{what}: not YAML ({' '.join(str(exc).split())})") from exc
    except RecursionError as exc:
        raise SweepError(f"{what}: nested too deeply to read") from exc
    except (ValueError, TypeError, OverflowError) as exc:  # a value YAML resolves but Python cannot hold: 2020-13-45
        raise SweepError(f"{what}: a value cannot be read ({' '.join(str(exc).split())})") from exc
    if isinstance(data, dict) and set(data) == {"points"}:
        data = data["points"]
    if not isinstance(data, list) or not data:
        raise SweepError(f"{what}: expected a non-empty list of parameter sets (mappings), or "
                         f"a mapping with one key 'points' holding that list")
    for i, point in enumerate(data):
        if not isinstance(point, dict) or not all(isinstance(k, str) for k in point):
            raise SweepError(f"{what}: point {i} is not a mapping of parameter names to values")
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


def check_name(name: str) -> str:
    """A sweep's name (``--name``): one folder name, matched whole."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SweepError(f"--name {name!r}: use letters, digits, '.', '_' and '-' (at most 64, starting with a "
                         f"letter or digit)")
    return name


def check_max_points(value: int | str | None) -> int:
    """``--max-points``: a whole number ≥ 1 (None: :data:`MAX_POINTS`)."""
    if value is None:
        return MAX_POINTS
    try:
        n = int(value) if isinstance(value, str) and re.fullmatch(r"\s*\d[\d_]*\s*", value, re.ASCII) else value
    except ValueError:
        n = value
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SweepError(f"--max-points: must be a whole number ≥ 1, got {_short.repr(value)}")
    return n


def count_points(n_sets: int, axes: list[tuple[str, list[Any]]], *, from_file: bool = False,
                 max_points: int | str | None = None) -> int:
    """The number of points a sweep would plan (the points file's ``n_sets`` times each grid axis's values),
    refused above ``max_points`` (default :data:`MAX_POINTS`) before any is planned."""
    limit = check_max_points(max_points)
    count = n_sets * math.prod(len(values) for _, values in axes)
    if count > limit:
        factors = ([f"{n_sets:,} from --points"] if from_file else []) + [f"{len(v):,} {n}" for n, v in axes]
        raise SweepError(f"{count:,} points ({' × '.join(factors) or count}) are more than the limit of {limit:,} "
                         f"(each point is a notebook run); pass --max-points {count} to plan and "
                         f"run them all")
    return count


def plan(paper: str, profile: str = "book", *, grid: Iterable[str] | None = None, points_file=None,
         fixed: dict[str, Any] | None = None, name: str = "main", out: str | os.PathLike | None = None,
         root: str | os.PathLike | None = None, max_points: int | None = None) -> Sweep:
    """Every point of a sweep, resolved and validated before anything runs (see the module docstring).

    The points are the product of the points file's sets (default: one empty set) and the grid; ``fixed``
    (``-p``) applies to all of them; a grid or ``-p`` value overrides a file's. Points that resolve to the
    same parameters (the same cache key) are run once. More than ``max_points`` (default :data:`MAX_POINTS`)
    are refused, counted before any is planned."""
    from acl26 import execution

    chapter = registry.get(paper)
    check_name(name)
    check_max_points(max_points)
    root = Path(root) if root is not None else paths.repo_root()
    if root is None:
        raise SweepError("run `acl26 sweep` from the acl26-repro checkout (its notebooks/ folder is needed)")
    chapter.spec.check_profile(profile)  # a bad profile fails first; each point is resolved once, below
    axes = grid_axes(grid)
    base = read_points(points_file) if points_file is not None else [{}]
    count_points(len(base), axes, from_file=points_file is not None, max_points=max_points)
    fixed = dict(fixed or {})
    clash = sorted(set(fixed) & {n for n, _ in axes})
    if clash:
        raise SweepError(f"{', '.join(clash)}: given both by -p and by --grid")
    out = Path(out) if out is not None else DEFAULT_OUT
    names = [n for n, _ in axes]
    keyer = execution.notebook_keyer(chapter, root)  # what every point shares, read once
    seen: dict[str, Point] = {}
    for i, (b, combo) in enumerate(itertools.product(base, itertools.product(*[v for _, v in axes]))):
        overrides = {**b, **fixed, **dict(zip(names, combo))}
        for k in overrides:
            if k == "profile":
                raise SweepError(f"point {i}: 'profile' is not a parameter; use --profile")
        try:
            resolved = chapter.spec.resolve(profile, overrides)
        except params_mod.ParamError as exc:
            raise SweepError(f"point {i} ({', '.join(f'{k}={v!r}' for k, v in overrides.items())}): {exc}") from exc
        key = keyer(resolved)
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
    m = re.fullmatch(r"local(?:\[(\d+)\])?", on, re.ASCII)
    if m:
        n = int(m.group(1) or 1)
        if n < 1:
            raise SweepError(f"--on {on}: N must be at least 1")
        return Executor("local", n)
    if on.startswith("dask://"):
        address = on[len("dask://"):]
        m = re.fullmatch(r"[A-Za-z0-9_.-]+:(\d{1,5})", address, re.ASCII)
        if not m:
            raise SweepError(f"--on {on!r}: expected dask://HOST:PORT, the address of a running Dask scheduler")
        if not 1 <= int(m.group(1)) <= 65535:
            raise SweepError(f"--on {on}: the port must be 1 to 65535")
        return Executor("dask", address=f"tcp://{address}")
    if on == "slurm":
        return Executor("slurm")
    raise SweepError(f"--on {on!r}: expected local[N], dask://HOST:PORT or slurm")


def _no_control(flag: str, value) -> str:
    """A text option that goes into a job script or a command: a string without control characters (a
    newline would start a line of its own there)."""
    if not isinstance(value, str) or re.search(r"[\x00-\x1f\x7f]", value):
        raise SweepError(f"{flag}: {_short.repr(value)} holds a control character (a newline, a tab, ...)"
                         if isinstance(value, str) else f"{flag}: expected text, got {_short.repr(value)}")
    return value


def _whole(flag: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise SweepError(f"{flag}: must be a whole number ≥ {lo}, got {_short.repr(value)}")
    return value


#: SLURM's time formats: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_SLURM_TIME = re.compile(r"(?:(?P<d>\d{1,4})-(?P<dh>\d{1,2})(?::(?P<dm>\d{1,2})(?::(?P<ds>\d{1,2}))?)?"
                         r"|(?P<a>\d{1,7})(?::(?P<b>\d{1,2})(?::(?P<c>\d{1,2}))?)?)", re.ASCII)
#: a memory size as dask (``parse_bytes``) and SLURM take it: 16GB, 16 GiB, 1.5T, 512M
_MEMORY = re.compile(r"(\d{1,9}(?:\.\d{1,6})?) ?([KkMmGgTtPp][Ii]?[Bb]?|[Bb])?", re.ASCII)
#: a partition (or a comma-separated list of them) or an account
_SLURM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,127}(?:,[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,127}){0,15}")


def slurm_seconds(walltime: str) -> int:
    """``--slurm-time`` in seconds, from one of SLURM's formats (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
    D-HH:MM:SS); anything else (``forever``, ``1:61:00``, zero) fails in one line."""
    m = _SLURM_TIME.fullmatch(_no_control("--slurm-time", walltime))
    bad = SweepError(f"--slurm-time {walltime!r}: expected a SLURM time greater than zero: MM, MM:SS, HH:MM:SS, "
                     f"D-HH, D-HH:MM or D-HH:MM:SS")
    if not m:
        raise bad
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if "d" in g:
        parts = [g["d"] * 24 + g["dh"], g.get("dm", 0), g.get("ds", 0)]
        small = [g["dh"] < 24, g.get("dm", 0) < 60, g.get("ds", 0) < 60]
    elif "c" in g:  # HH:MM:SS
        parts, small = [g["a"], g["b"], g["c"]], [g["b"] < 60, g["c"] < 60]
    else:  # MM or MM:SS
        parts, small = [0, g["a"], g.get("b", 0)], [g.get("b", 0) < 60]
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    if not all(small) or seconds <= 0:
        raise bad
    return seconds


def check_slurm(*, cores: int = 4, memory: str = "16GB", walltime: str = "02:00:00", partition: str | None = None,
                account: str | None = None, max_jobs: int = 4, python: str | None = None,
                extra: Iterable[str] = ()) -> None:
    """Every SLURM option, as :func:`slurm_cluster` takes them, checked before a job script is written: cores
    and jobs ≥ 1, a SLURM time, a memory size, plain partition and account names, and no control character
    anywhere (each value becomes part of a line of the job script)."""
    _whole("--slurm-cores", cores, 1)
    _whole("--max-jobs", max_jobs, 1)
    slurm_seconds(walltime)
    m = _MEMORY.fullmatch(_no_control("--slurm-memory", memory))
    if not m or float(m.group(1)) <= 0:
        raise SweepError(f"--slurm-memory {memory!r}: expected a size such as 16GB, 64 GiB or 512M")
    for flag, value in (("--slurm-partition", partition), ("--slurm-account", account)):
        if value is not None and not _SLURM_NAME.fullmatch(_no_control(flag, value)):
            raise SweepError(f"{flag} {value!r}: expected a name of letters, digits and '_', '.', '@', '+', '-'"
                             + (" (several: comma-separated)" if flag == "--slurm-partition" else ""))
    if python is not None:
        _no_control("python", python)
    if isinstance(extra, str):
        raise SweepError(f"extra: expected a list of #SBATCH directives, got the text {extra!r}")
    for directive in extra:
        _no_control("extra", directive)


def _need_sbatch() -> None:
    if shutil.which(SBATCH) is None:
        raise SweepError(f"--on slurm: SLURM's submit command `{SBATCH}` is not on the PATH here; run the sweep on "
                         f"a SLURM login node, or use --on local[N] or dask://HOST:PORT")


def check_worker_timeout(value: float | str | None) -> float | None:
    """``--worker-timeout``: seconds > 0, finite (None: the executor's default)."""
    if value is None:
        return None
    try:
        seconds = float(value) if isinstance(value, str) else value
    except ValueError:
        seconds = None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds <= 0:
        raise SweepError(f"--worker-timeout: expected seconds > 0, got {_short.repr(value)}")
    return float(seconds)


def check_options(on: str | Executor, *, gpus: int = 0, slurm: dict | None = None,
                  worker_timeout: float | str | None = None, submit: bool = True) -> Executor:
    """Every executor option, checked before anything is planned or run; returns the executor ``on`` names.
    ``submit``: also check that the executor can start here (the ``[cluster]`` extra; for SLURM, ``sbatch``
    on the PATH), not wanted for a dry run."""
    ex = on if isinstance(on, Executor) else parse_on(on)
    _whole("--gpus", gpus, 0)
    slurm = dict(slurm or {})
    if ex.kind == "local":
        if gpus:
            raise SweepError("--gpus is for Dask and SLURM workers; a local point sees this machine's devices as "
                             "they are")
        if worker_timeout is not None:
            raise SweepError(f"--worker-timeout is for Dask and SLURM workers, not --on {on}")
    if slurm and ex.kind != "slurm":
        raise SweepError(f"--slurm-* and --max-jobs are for --on slurm, not --on {on}")
    unknown = sorted(set(slurm) - {"cores", "memory", "walltime", "partition", "account", "max_jobs", "python",
                                   "extra"})
    if unknown:
        raise SweepError(f"slurm: unknown option(s) {', '.join(unknown)}")
    if ex.kind == "slurm":
        check_slurm(**slurm)
    check_worker_timeout(worker_timeout)
    if submit and ex.kind != "local":
        try:
            import distributed  # noqa: F401
            if ex.kind == "slurm":
                import dask_jobqueue  # noqa: F401
        except ImportError as exc:
            raise SweepError(f"--on {ex.kind}:// needs Dask (distributed, dask-jobqueue): "
                             f"pip install 'acl26-repro[cluster]'" if ex.kind == "dask" else
                             "--on slurm needs dask-jobqueue: pip install 'acl26-repro[cluster]'") from exc
        if ex.kind == "slurm":
            _need_sbatch()
    return ex


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


def execute(commands: list[list[str]], cwd: str, log: str, threads: int | None = None,
            overwrite: bool = False) -> dict:
    """Run ``commands`` in turn (the task of one point, in whatever process the executor gives it); every
    command but the last may fail (a chapter's ``prepare`` that cannot be done here: the point then reports
    what needs it as not tested, as in the book). Output goes to ``log``, written like any file of acl26:
    into a temporary file beside it, then moved onto it, which replaces only the log acl26 wrote (the last
    try's); a file of the user's there is never appended to or replaced (unless ``overwrite``): the point
    fails without running, naming it. Returns what happened."""
    if threads is None:
        threads = _dask_threads()
    host = os.uname().nodename
    log = Path(log)
    try:
        io.check_target(log, overwrite=overwrite, name="its log")
        log.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _new_file(log.parent, f".{log.name}.")
    except (OSError, ValueError) as exc:  # a file in the way (io.OutputExistsError), an unwritable folder
        return {"rc": 2, "error": _one_line(exc), "wall_s": 0.0, "threads": threads, "host": host}
    env = {**os.environ, **thread_env(threads), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    rc, last = 0, ""
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for i, cmd in enumerate(commands):
                fh.write(f"$ {shlex.join(cmd)}   # threads {threads}, on {host}\n")
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
        note = _keep_log(Path(tmp), log, overwrite)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    error = last if rc else ""
    if note:
        error = f"{error}; {note}" if error else ""
    return {"rc": rc, "error": error, "wall_s": round(time.perf_counter() - started, 1), "threads": threads,
            "host": host, **({"warning": note} if note else {})}


def _keep_log(tmp: Path, log: Path, overwrite: bool) -> str:
    """Move the finished log ``tmp`` onto ``log`` under :mod:`acl26.io`'s rules; returns why not, or "". (The
    folder's ledger is shared by every point; :mod:`acl26.io` records each file under the folder's lock.)"""
    try:
        io.move_file(tmp, log, overwrite=overwrite)
    except (OSError, ValueError) as exc:  # a file of the user's put there meanwhile
        return f"its log was not kept: {_one_line(exc)}"
    return ""


def _new_file(folder: Path, prefix: str) -> tuple[int, str]:
    """A new file ``<prefix><random>.tmp`` in ``folder``, open for writing, with the permissions the umask gives."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = folder / f"{prefix}{os.urandom(4).hex()}.tmp"
        try:
            return os.open(path, flags, 0o666), str(path)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))


def _one_line(exc: BaseException) -> str:
    """An error as one line: an OSError with its path."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return " ".join(str(exc).split()) or type(exc).__name__


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
    worker's ``GPU`` resource), on ``partition`` / ``account``, at most ``max_jobs`` jobs (adaptive, one started
    at once), the hub offline. Every option is checked first (:func:`check_slurm`), and with ``scale`` that
    ``sbatch`` is on the PATH. ``cluster.job_script()`` shows the job script without SLURM (``scale=False``)."""
    _whole("--gpus", gpus, 0)
    check_slurm(cores=cores, memory=memory, walltime=walltime, partition=partition, account=account,
                max_jobs=max_jobs, python=python, extra=extra)
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as exc:
        raise SweepError("--on slurm needs dask-jobqueue: pip install 'acl26-repro[cluster]'") from exc
    if scale:
        _need_sbatch()
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
        try:
            _sbatch_test(cluster.job_script())
        except BaseException:
            cluster.close()
            raise
        # one job at once, so that the sweep can wait for its worker before it submits a point
        cluster.adapt(minimum_jobs=1, maximum_jobs=max_jobs)
    return cluster


def _sbatch_test(script: str, timeout_s: float = 120.0) -> None:
    """Ask SLURM whether it would take the job script (``sbatch --test-only``: nothing is submitted), so that a
    job it refuses (a partition, account or time it does not know) fails in one line with SLURM's reason,
    before the cluster submits jobs in the background, where a refusal is only a logged traceback."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="acl26-sbatch-") as tmp:
        path = Path(tmp) / "job.sh"
        path.write_text(script, encoding="utf-8")
        try:
            proc = subprocess.run([SBATCH, "--test-only", str(path)], capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise SweepError(f"--on slurm: `{SBATCH} --test-only` did not answer in {timeout_s:g} s") from exc
        except OSError as exc:
            raise SweepError(f"--on slurm: `{SBATCH}` cannot be run ({_one_line(exc)})") from exc
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error" in ln.lower()] or lines or [f"exit status {proc.returncode}"]
        raise SweepError(f"--on slurm: SLURM refuses the job ({errors[0][:300]}); check --slurm-partition, "
                         f"--slurm-account, --slurm-time, --slurm-memory and --gpus")


class _Local:
    """``local[N]``: a pool of N threads, each driving one point's ``acl26 run`` process at a time."""

    def __init__(self, workers: int, overwrite: bool = False):
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="acl26-sweep")
        self.threads = max(1, machine.cpu_count() // workers)
        self.overwrite = overwrite

    def submit(self, commands, cwd, log, name, alone=False):
        """``alone``: the task runs with nothing beside it (the first point), on every core."""
        return self.pool.submit(execute, commands, cwd, log, machine.cpu_count() if alone else self.threads,
                                self.overwrite)

    @staticmethod
    def as_completed(futures):
        from concurrent.futures import as_completed

        return as_completed(futures)

    def close(self):
        self.pool.shutdown(wait=True, cancel_futures=True)


class _Dask:
    def __init__(self, client, gpus: int = 0, owned=(), overwrite: bool = False):
        self.client, self.gpus, self.owned, self.overwrite = client, gpus, owned, overwrite

    def submit(self, commands, cwd, log, name, alone=False):  # a worker's share is its share, alone or not
        return self.client.submit(execute, commands, cwd, log, None, self.overwrite,
                                  key=f"acl26-{name}-{time.time_ns()}", pure=False,
                                  resources={"GPU": self.gpus} if self.gpus else None)

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


def _offers(worker: dict, gpus: int) -> bool:
    """Whether a worker (as the scheduler describes it) can run a point that needs ``gpus`` GPUs."""
    if not gpus:
        return True
    try:
        return float((worker.get("resources") or {}).get("GPU", 0)) >= gpus
    except (TypeError, ValueError, AttributeError):
        return False


def wait_for_workers(client, *, gpus: int = 0, timeout_s: float = DASK_WAIT_S, where: str = "dask",
                     poll_s: float | None = None) -> int:
    """Wait until a worker of ``client``'s scheduler offers what a point needs (``gpus`` units of its ``GPU``
    resource; with none, any worker), saying on stderr, once, that it waits and for what; returns how many
    workers do. None after ``timeout_s`` seconds: a one-line :class:`SweepError` naming what was missing.
    ``where``: the ``--on`` value, for the messages; ``poll_s``: how often to ask (default :data:`POLL_S`)."""
    need = f"a worker offering GPU={gpus}" if gpus else "a worker"
    poll = POLL_S if poll_s is None else poll_s
    deadline = time.monotonic() + timeout_s
    said = False
    while True:
        try:
            workers = dict(client.scheduler_info(n_workers=-1).get("workers") or {})
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"--on {where}: the Dask scheduler stopped answering ({_one_line(exc)[:160]})") from exc
        fit = sum(_offers(w, gpus) for w in workers.values())
        if fit:
            if said:
                print(f"[acl26] {where}: {fit} worker(s) ready", file=sys.stderr, flush=True)
            return fit
        left = deadline - time.monotonic()
        if left <= 0:
            raise SweepError(_no_worker(where, gpus, workers, timeout_s))
        if not said:
            there = f"the scheduler has {len(workers)} worker(s), none with GPU={gpus}" if workers and gpus else \
                "the scheduler has no worker yet"
            print(f"[acl26] waiting: {where}: for {need} ({there}); giving up after {timeout_s:g} s "
                  f"(--worker-timeout)", file=sys.stderr, flush=True)
            said = True
        time.sleep(max(0.0, min(poll, left)))


def _no_worker(where: str, gpus: int, workers: dict, timeout_s: float) -> str:
    if where == "slurm":
        return (f"--on slurm: no SLURM job started a Dask worker in {timeout_s:g} s (queued, or failed to start: "
                f"see `squeue --me` and the jobs' output files); raise --worker-timeout for a busy queue")
    if gpus and workers:
        offered = sorted({str((w.get("resources") or {}).get("GPU", 0)) for w in workers.values()
                          if isinstance(w, dict)})
        return (f"--on {where}: none of the {len(workers)} Dask worker(s) offers GPU={gpus} (they offer GPU="
                f"{' or '.join(offered)}) after {timeout_s:g} s; start one with `dask worker ADDRESS --resources "
                f"GPU={gpus}`, ask for fewer --gpus, or raise --worker-timeout")
    return (f"--on {where}: no Dask worker joined the scheduler in {timeout_s:g} s"
            + (f" (the points need GPU={gpus})" if gpus else "")
            + "; start one with `dask worker ADDRESS`, or raise --worker-timeout")


def executor_for(ex: Executor, *, gpus: int = 0, slurm: dict | None = None, worker_timeout: float | None = None,
                 overwrite: bool = False):
    """The executor ``ex`` names, ready: for Dask and SLURM, once a worker offers what a point needs
    (:func:`wait_for_workers`, at most ``worker_timeout`` seconds, default :data:`DASK_WAIT_S` /
    :data:`SLURM_WAIT_S`). ``overwrite``: a point may replace a log that acl26 did not write."""
    if ex.kind == "local":
        if gpus:
            raise SweepError("--gpus is for Dask and SLURM workers; a local point sees this machine's devices as they are")
        return _Local(ex.workers, overwrite)
    if ex.kind == "dask":
        client = _dask_client(ex.address)
        # the scheduler and its workers are the user's: left running
        executor, wait = _Dask(client, gpus, (client,), overwrite), DASK_WAIT_S
        where = f"dask://{ex.address.removeprefix('tcp://')}"
    else:
        cluster = slurm_cluster(gpus=gpus, **(slurm or {}))
        try:
            from distributed import Client

            client = Client(cluster)
        except BaseException:
            cluster.close()
            raise
        executor, where, wait = _Dask(client, gpus, (client, cluster), overwrite), "slurm", SLURM_WAIT_S
    try:
        wait_for_workers(client, gpus=gpus, timeout_s=wait if worker_timeout is None else worker_timeout, where=where)
    except BaseException:
        executor.close()
        raise
    return executor


def _record_failure(sweep: Sweep, point: Point, outcome: dict, command: list[str], overwrite: bool = False) -> str:
    """Write the point's failure record (replacing only the one acl26 wrote, the last try's, unless
    ``overwrite``); returns why it could not be written, or ""."""
    try:
        io.write_json(sweep.failed_record(point), overwrite=overwrite, obj={
            "paper": sweep.paper, "profile": sweep.profile, "key": point.key, "overrides": point.overrides,
            "params": point.params, "error": outcome.get("error", ""), "wall_s": outcome.get("wall_s"),
            "host": outcome.get("host", ""), "command": shlex.join(command), "log": str(sweep.log(point)),
            "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})
    except (OSError, ValueError) as exc:  # a file of the user's put there since the sweep started
        return f"its failure record was not written: {_one_line(exc)}"
    return ""


def check_files(sweep: Sweep, points: Iterable[Point], *, overwrite: bool = False) -> None:
    """Before anything runs: each point's failure record and log may be written (nothing of the user's is in
    the way, see :mod:`acl26.io`), else one line naming the first file in the way."""
    for p in points:
        io.check_target(sweep.failed_record(p), overwrite=overwrite, name="failure record")
        io.check_target(sweep.log(p), overwrite=overwrite, name="log")


def run_sweep(sweep: Sweep, on: str = "local[1]", *, gpus: int = 0, slurm: dict | None = None, progress: bool = True,
        say: Callable[[str], None] | None = None, executor=None, worker_timeout: float | None = None,
        overwrite: bool = False) -> SweepResult:
    """Run the points of ``sweep`` that are not finished yet (see the module docstring), saying one line per
    point (``say``, default: printed above the progress bar). ``executor``: an object like :class:`_Local` /
    :class:`_Dask`, instead of the one ``on`` names. Every option is checked, and every point's failure record
    and log target (:func:`check_files`), before anything starts; ``overwrite`` replaces such files that
    acl26 did not write."""
    from tqdm.auto import tqdm

    say = say if say is not None else tqdm.write

    ex = check_options(on, gpus=gpus, slurm=slurm, worker_timeout=worker_timeout, submit=False)
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
    check_files(sweep, todo, overwrite=overwrite)
    chapter = registry.get(sweep.paper)
    own = executor is None
    if own:
        check_options(ex, gpus=gpus, slurm=slurm, worker_timeout=worker_timeout, submit=True)
        executor = executor_for(ex, gpus=gpus, slurm=slurm, worker_timeout=check_worker_timeout(worker_timeout),
                                overwrite=overwrite)
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
            warning = f" ({got['warning']})" if got.get("warning") else ""
            say(f"[ok] {point.short}  {point.label()}  in {out.wall_s:.0f} s on {out.host}: {point.folder}{warning}")
        else:
            note = _record_failure(sweep, point, got, cmds[-1], overwrite)
            error = "; ".join(e for e in (got.get("error", ""), note) if e)
            out = Outcome(point, "failed", got.get("wall_s", 0.0), error, got.get("host", ""))
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


def _untrusted(path: Path, root: Path) -> dict:
    """The JSON object in ``path``, a file under the folder ``root`` (resolved) that acl26 may not have written:
    read only when it is, symbolic links followed, a regular file inside ``root`` of at most
    :data:`MAX_RECORD_BYTES` bytes; anything else fails in one line naming it."""
    real = path.resolve()
    if real != root and root not in real.parents:
        raise SweepError(f"sweep collect: {path}: leads outside {root} (to {real}, through a symbolic link); "
                         f"refusing to read it")
    data = read_capped(path, MAX_RECORD_BYTES, f"sweep collect: {path}")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SweepError(f"sweep collect: {path}: not a JSON file ({_one_line(exc)[:160]})") from exc
    if not isinstance(obj, dict):
        raise SweepError(f"sweep collect: {path}: expected a JSON object, found {type(obj).__name__}")
    return obj


def _get(record: dict, path: Path, name: str, kinds: type | tuple, default: Any = ...) -> Any:
    """``record[name]`` checked to be one of ``kinds`` (bool is not a number), or ``default`` where missing."""
    if name not in record and default is not ...:
        return default
    value = record.get(name)
    numbers = kinds in (float, (int, float)) or (isinstance(kinds, tuple) and float in kinds)
    if not isinstance(value, kinds) or (numbers and isinstance(value, bool)):
        raise SweepError(f"sweep collect: {path}: {name!r} is {_short.repr(value)}, not what acl26 writes there")
    return value


def _chapter_and_profile(record: dict, path: Path) -> tuple[str, str]:
    """A record's ``paper`` (a chapter of acl26) and ``profile`` (a plain name): they name a file to read."""
    paper = record.get("paper")
    if not isinstance(paper, str) or not _NAME.fullmatch(paper) or paper not in registry.CHAPTERS:
        raise SweepError(f"sweep collect: {path}: 'paper' is {_short.repr(paper)}, not a chapter of acl26")
    profile = record.get("profile")
    if not isinstance(profile, str) or not _PROFILE.fullmatch(profile):
        raise SweepError(f"sweep collect: {path}: 'profile' is {_short.repr(profile)}, not a profile's name")
    return paper, profile


def _params(record: dict, path: Path, row: dict) -> None:
    """A record's parameters as columns of ``row`` (never in place of the row's own columns)."""
    for k, v in _get(record, path, "params", dict, {}).items():
        if k != "profile" and k not in row:
            row[k] = _cell(v)


def _run_row(record_path: Path, folder: Path, root: Path) -> dict:
    """The row of a finished point: its run record ``<point>/runs/<paper>.json`` and its results file."""
    point = record_path.parent.parent
    run = _untrusted(record_path, root)
    paper, profile = _chapter_and_profile(run, record_path)
    res_path = point / "results" / f"{paper}-{profile}.json"
    res = _untrusted(res_path, root)
    row = {"paper": paper, "profile": profile, "key": str(_get(run, record_path, "key", str, ""))[:KEY_DIGITS],
           "status": "ok", "wall_s": _get(run, record_path, "wall_s", (int, float, type(None)), None),
           "finished": _get(run, record_path, "finished", str, ""),
           "sweep": _sweep_name(point.parent, folder), "folder": str(point.relative_to(folder)), "error": ""}
    _params(run, record_path, row)
    claims = _get(res, res_path, "claims", list, [])
    for c in claims:
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            raise SweepError(f"sweep collect: {res_path}: a claim is {_short.repr(c)}, not a claim's record")
        row[f"verdict.{c['id']}"] = c.get("holds?") if _scalar(c.get("holds?")) else str(c.get("holds?"))
        if isinstance(c.get("value"), (int, float)) and not isinstance(c.get("value"), bool):
            row[f"value.{c['id']}"] = c["value"]
    flat: dict = {}
    _flat("metric", _get(res, res_path, "metrics", dict, {}), flat)
    row.update(flat)
    return row


def _failed_row(record_path: Path, folder: Path, root: Path) -> dict:
    """The row of a failed point: its failure record ``failed/<key>.json``."""
    f = _untrusted(record_path, root)
    paper, profile = _chapter_and_profile(f, record_path)
    row = {"paper": paper, "profile": profile, "key": _get(f, record_path, "key", str)[:KEY_DIGITS],
           "status": "failed", "wall_s": _get(f, record_path, "wall_s", (int, float, type(None)), None),
           "finished": _get(f, record_path, "when", str, ""), "sweep": _sweep_name(record_path.parent.parent, folder),
           "folder": "", "error": _get(f, record_path, "error", str, "")}
    _params(f, record_path, row)
    return row


def collect_rows(folder: str | os.PathLike) -> list[dict]:
    """One row per point found under ``folder``: finished runs (``<point>/runs/<paper>.json``) and
    failed points (``failed/<key>.json``). Every file is untrusted input: a record that is not what acl26
    writes, names a file by a ``paper`` that is not a chapter, or leads outside ``folder`` (a symbolic link)
    fails in one line naming it; nothing outside ``folder`` is read."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SweepError(f"sweep collect {folder}: not a folder")
    root = folder.resolve()
    rows = [_run_row(record, folder, root) for record in sorted(folder.rglob("runs/*.json"))]
    rows += [_failed_row(record, folder, root) for record in sorted(folder.rglob("failed/*.json"))]
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
