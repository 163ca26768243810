"""The ``acl26`` command line: list, fetch, prepare, run, sweep, bench, book, sync, verify.

Every error the user can cause (unknown paper, unknown parameter, bad value, unreachable registry,
corrupted asset or results file, an unreadable or unwritable cache or output path, a full disk, an
existing target acl26 did not write) ends the command with one line ``acl26: error: ...`` naming the
parameter, file or path, and exit status 2; a bug of ours ends in one line too, with status 1. An
interrupt (Ctrl-C, SIGTERM, SIGHUP) at any moment ends in one line and status 130. ``--debug``
(anywhere on the line) adds the traceback. Nothing is left half-written. The same functions are usable from Python (:mod:`acl26.runner`,
:mod:`acl26.assets`, :mod:`acl26.bench`, :mod:`acl26.book`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from acl26 import __version__


def _cmd_list(args) -> None:
    from acl26 import registry

    from acl26.papers import PLANNED

    for paper in registry.CHAPTERS.values():
        spec = paper.spec
        where = f"arXiv {paper.arxiv}, {paper.venue}" if paper.kind == "paper" else "support page, runs first"
        print(f"{paper.id}: {paper.title} ({where})")
        print(f"  notebook: {paper.notebook}   profiles: {', '.join(spec.profiles)}")
        for p in spec.params:
            book = spec.profiles["book"][p.name]
            others = ", ".join(f"{prof}: {spec.profiles[prof][p.name]!r}" for prof in ("smoke", "paper")
                               if p.name in spec.profiles[prof])
            extra = f"  [{others}]" if others else ""
            print(f"    {p.name} ({p.type.__name__}) = {book!r}{extra}\n        {p.help}")
    planned = [pid for pid, _, _ in PLANNED if pid not in registry.CHAPTERS]
    if planned:
        print(f"not built yet: {', '.join(planned)}")


def _cmd_fetch(args) -> None:
    from acl26 import assets, registry

    names = list(args.names)
    if args.paper:
        names += list(registry.get(args.paper).assets)
    if args.verify:
        if args.force:
            raise assets.AssetError("--verify only checks the cache and fetches nothing; drop --force "
                                    "(or repair an asset with `acl26 fetch --force NAME`)")
        # like `sha256sum -c`: one line per asset on stdout, then one error line for the bad ones
        report = assets.verify(names or None)
        for name, problem in report.items():
            print(f"{name}: verified" if problem is None else f"{name}: FAILED: {problem}")
        if not report:
            print("no asset is cached yet; run `acl26 fetch`")
        bad = [name for name, problem in report.items() if problem is not None]
        if len(bad) == 1:
            raise assets.AssetError(report[bad[0]])
        if bad:
            raise assets.AssetError(f"{len(bad)} assets failed verification ({', '.join(bad)}; each file above); "
                                    f"repair: `acl26 fetch --force {' '.join(bad)}`")
        return
    got = assets.fetch(names or None, force=args.force)
    for name, folder in got.items():
        print(f"{name}: {folder}")


def _cmd_run(args) -> None:
    from acl26 import params, runner

    overrides = params.parse_assignments(args.param)
    res = runner.run(args.paper, args.profile, overrides, out_dir=args.out, progress=not args.quiet,
                     overwrite=args.force)
    print(f"{res.paper} ({res.profile}): {res.notebook} in {res.wall_s:.0f} s; results: "
          f"{', '.join(str(p) for p in res.results) or 'none'}")


def _cmd_bench(args) -> None:
    from acl26 import bench

    workers = None
    if args.workers is not None:  # an integer >= 1, ASCII digits only: checked before any benchmark runs
        text = args.workers.strip()
        if not (text.isascii() and text.isdigit()) or int(text) < 1:
            raise ValueError(f"--workers must be an integer ≥ 1, got {args.workers!r}")
        workers = int(text)
    for file in bench.run_benchmarks(args.papers or None, quick=args.quick, out_dir=args.out, overwrite=args.force,
                          workers=workers):
        print(file)


def _cmd_book(args) -> None:
    from acl26 import book

    force = () if args.force is None else (True if not args.force else args.force)
    book.main(profile=args.profile, do_run=not args.skip_run, do_bench=not args.skip_bench,
              do_build=not args.skip_build, papers=args.papers or None, force=force)


def _cmd_prepare(args) -> None:
    from acl26 import book, registry

    chapters = [c for c in registry.ordered(args.papers or None) if c.prepare is not None]
    if args.papers and not chapters:
        print("nothing to prepare: " + ", ".join(args.papers) + " need(s) no one-time setup")
    book.prepare(chapters, force=args.force, strict=True)


def _cmd_sweep(args) -> None:
    import time

    from acl26 import params, sweep

    if args.paper == "collect":
        if len(args.rest) != 1:
            raise sweep.SweepError("usage: acl26 sweep collect DIR [--metric COLUMN --by PARAMETER [--hue PARAMETER]]")
        t0 = time.perf_counter()
        rows = sweep.collect_rows(args.rest[0])
        written = sweep.collect(args.rest[0], metric=args.metric, by=args.by, hue=args.hue, overwrite=args.force,
                                rows=rows)
        ok = sum(r["status"] == "ok" for r in rows)
        print(f"collected {len(rows)} points ({ok} finished, {len(rows) - ok} failed) in {time.perf_counter() - t0:.1f} s:")
        for path in written.values():
            print(f"  {path}")
        return
    if args.rest:
        raise sweep.SweepError(f"unexpected {' '.join(args.rest)!r}; parameter points go in --grid, -p or --points")
    for flag in ("metric", "by", "hue"):
        if getattr(args, flag) is not None:
            raise sweep.SweepError(f"--{flag} belongs to `acl26 sweep collect DIR`")
    slurm = {k: v for k, v in {"cores": args.slurm_cores, "memory": args.slurm_memory, "walltime": args.slurm_time,
                               "partition": args.slurm_partition, "account": args.slurm_account,
                               "max_jobs": args.max_jobs}.items() if v is not None}
    # every option fails before the points are planned; a run also checks that its executor can start here
    sweep.check_options(args.on, gpus=args.gpus, slurm=slurm, worker_timeout=args.worker_timeout,
                        submit=not args.dry_run)
    sweep.check_max_points(args.max_points)
    plan = sweep.plan(args.paper, args.profile, grid=args.grid, points_file=args.points,
                      fixed=params.parse_assignments(args.param), name=args.name, out=args.out,
                      max_points=args.max_points)
    if args.dry_run:
        print(f"{len(plan.points)} points of {plan.paper} ({plan.profile}) into {plan.folder}/, on {args.on}:")
        for p in plan.points:
            print(f"  {p.short}  [{plan.status(p)}]  {p.label()}\n      -> {p.folder}")
        return
    t0 = time.perf_counter()
    res = sweep.run_sweep(plan, args.on, gpus=args.gpus, slurm=slurm, progress=not args.quiet,
                    worker_timeout=args.worker_timeout, overwrite=args.force)
    counts = {s: sum(o.status == s for o in res.outcomes) for s in ("ok", "done", "failed")}
    print(f"sweep {plan.name}/{plan.paper}: {counts['ok']} run, {counts['done']} finished earlier, "
          f"{counts['failed']} failed, in {time.perf_counter() - t0:.0f} s; collect: acl26 sweep collect {plan.folder}")
    if res.failed:
        raise sweep.SweepError(f"{len(res.failed)} of {len(plan.points)} points failed (each error: "
                               f"{plan.folder / 'failed'}; the others went on; a re-run tries the failed ones again)")


def _cmd_verify(args) -> None:
    from acl26 import paths, provenance
    from acl26.errors import RunError

    executed = args.dir
    if executed is None:
        root = paths.repo_root()
        if root is None:
            raise RunError("name the executed book's folder (acl26 verify DIR), or run this from the checkout")
        executed = root / paths.BOOK_EXECUTED
    problems, checked, listed = provenance.verify(executed)
    for line in problems:  # like `sha256sum -c`: every problem on stdout, then one error line
        print(f"FAILED: {line}")
    if len(problems) == 1:
        raise RunError(problems[0])
    if problems:
        raise RunError(f"{len(problems)} problems in {executed} (each above)")
    print(f"{executed}: {listed} files match the manifest; {checked} verdicts decided again from the saved "
          f"results, all as saved")


def _cmd_sync(args) -> None:
    from acl26 import sync

    stale = sync.sync(check=args.check)
    if args.check:
        if stale:
            raise sync.SyncError("stale (run `acl26 sync`): " + ", ".join(str(p) for p in stale))
        print("in step: every notebook's parameters cell and book/_toc.yml")
    else:
        print("\n".join(f"wrote {p}" for p in stale) or "nothing to write: already in step")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="acl26", description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"acl26 {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list papers, their parameters and profiles")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("fetch", help="fetch and verify offline assets into $ACL26_CACHE")
    p.add_argument("names", nargs="*", help="asset names (default: all)")
    p.add_argument("--for", dest="paper", help="also fetch every asset this paper uses")
    p.add_argument("--force", action="store_true",
                   help="download again even if cached, replacing whatever is in the asset's folder")
    p.add_argument("--verify", action="store_true",
                   help="fetch nothing: re-hash every file of the cached (or named) assets; exit 2 if any is bad")
    p.set_defaults(func=_cmd_fetch)

    p = sub.add_parser("run", help="execute one paper's notebook with papermill")
    p.add_argument("paper")
    p.add_argument("--profile", default="book", help="smoke | book | paper (default: book)")
    p.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="override one parameter")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: book/executed)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--force", action="store_true",
                   help="replace existing outputs that acl26 did not write (or that were changed since)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("bench", help="run the benchmarks and write JSON for the Performance page")
    p.add_argument("papers", nargs="*", help="papers (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats (for tests)")
    p.add_argument("--workers", metavar="N", default=None,
                   help="workers for the benchmarks that run in parallel (an integer ≥ 1; default 2): a many-core "
                        "machine measures the parallel speed-up at N")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: book/executed/bench)")
    p.add_argument("--force", action="store_true",
                   help="replace existing files that acl26 did not write (or that were changed since)")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("book", help="fetch, run every notebook, benchmark, and build the HTML book")
    p.add_argument("papers", nargs="*", help="papers to run (default: all)")
    p.add_argument("--profile", default="book", help="profile for every notebook (default: book)")
    p.add_argument("--skip-run", action="store_true", help="reuse the executed notebooks")
    p.add_argument("--skip-bench", action="store_true", help="reuse the benchmark JSON")
    p.add_argument("--skip-build", action="store_true", help="do not run jupyter-book")
    p.add_argument("--force", nargs="*", metavar="PAPER", default=None,
                   help="execute notebooks and benchmarks again although their inputs are unchanged, "
                        "replacing outputs acl26 did not write (all, or the papers named)")
    p.set_defaults(func=_cmd_book)

    p = sub.add_parser("prepare", help="the chapters' one-time setup before their notebooks run (e.g. a chapter builds "
                                       "the timing tools it needs into the cache); acl26 book does it too")
    p.add_argument("papers", nargs="*", help="chapters (default: all that need it)")
    p.add_argument("--force", action="store_true", help="do it again even if done")
    p.set_defaults(func=_cmd_prepare)

    p = sub.add_parser("sweep", help="run one paper's notebook at many parameter points (local processes, Dask or "
                                     "SLURM), or `acl26 sweep collect DIR` to gather them into one table",
                       description="acl26 sweep PAPER [--grid name=v1,v2 ...] [--points FILE.yaml] [--on EXECUTOR]; "
                                   "acl26 sweep collect DIR [--metric COLUMN --by PARAMETER]")
    p.add_argument("paper", help="the paper (or `collect`)")
    p.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--profile", default="book", help="smoke | book | paper (default: book)")
    p.add_argument("--grid", action="append", metavar="NAME=V1,V2", help="values of one parameter; several flags give "
                   "the product")
    p.add_argument("--points", type=Path, metavar="FILE", help="a YAML list of whole parameter sets (for list-valued "
                   "parameters); combined with --grid as a product")
    p.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="a parameter every point shares")
    p.add_argument("--on", default="local[1]", help="local[N] (N points at once, default 1), dask://HOST:PORT or slurm")
    p.add_argument("--name", default="main", help="the sweep's folder under --out (default: main)")
    p.add_argument("--out", type=Path, default=None, help="where sweeps go (default: ./sweeps)")
    p.add_argument("--dry-run", action="store_true", help="print the points and where each would go; run nothing")
    p.add_argument("--gpus", type=int, default=0, help="GPUs per point (Dask: the workers' GPU resource; SLURM: --gres)")
    p.add_argument("--slurm-cores", type=int, default=None, help="SLURM: cores per job (default 4)")
    p.add_argument("--slurm-memory", default=None, help="SLURM: memory per job (default 16GB)")
    p.add_argument("--slurm-time", default=None, help="SLURM: walltime per job (default 02:00:00)")
    p.add_argument("--slurm-partition", default=None, help="SLURM: partition (queue)")
    p.add_argument("--slurm-account", default=None, help="SLURM: account")
    p.add_argument("--max-jobs", type=int, default=None, help="SLURM: most jobs at once (default 4)")
    p.add_argument("--max-points", default=None, metavar="N", help="plan and run up to N points (default 10000: "
                   "a larger grid or points file is refused, counted before anything is planned)")
    p.add_argument("--worker-timeout", default=None, metavar="SECONDS", help="Dask, SLURM: how long to wait for a "
                   "worker that offers what a point needs (GPUs) before giving up (default 300; SLURM 3600)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--metric", default=None, help="collect: the column to plot")
    p.add_argument("--by", default=None, help="collect: the parameter on the plot's x axis")
    p.add_argument("--hue", default=None, help="collect: a parameter drawn as one line per value")
    p.add_argument("--force", action="store_true", help="replace failure records and logs (a run), tables and "
                   "plots (collect) that acl26 did not write")
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser("verify", help="check an executed book: re-hash its notebooks and results against the "
                                      "manifest and decide every verdict again from the saved results")
    p.add_argument("dir", nargs="?", type=Path, default=None, help="the executed book (default: book/executed)")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("sync", help="write every notebook's parameters cell and book/_toc.yml from the registry")
    p.add_argument("--check", action="store_true", help="write nothing; fail if anything is stale")
    p.set_defaults(func=_cmd_sync)
    return parser


#: the signals that end a command: each unwinds like Ctrl-C, so writers remove their temporary files
_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
#: exit status of an error the user can cause (bad value, unreadable or unwritable path, corrupted file)
USER_ERROR = 2
#: exit status of a failure that is acl26's fault (a bug): still one line, the traceback with --debug
INTERNAL_ERROR = 1


class _Stop:
    """The signal handler: the first signal raises KeyboardInterrupt (SIGTERM from ``kill`` or a CI
    timeout, and SIGHUP, unwind like Ctrl-C, so runs remove their staging folders); a second one
    while that unwinding runs ends the process at once, the signal's default action (Ctrl-C twice
    forces the stop).

    A first signal that arrives while another package's module is being imported is held until that
    import is done (:func:`_in_foreign_import`): an exception raised there can unwind through a C++
    extension's initialisation, and pybind11 (torch) then aborts the whole process (status -6, a C++
    message instead of one line). A SIGALRM poll delivers it as soon as the import returns;
    :func:`main` delivers it too if the command ends first."""

    #: seconds between polls while a signal is held
    POLL = 0.05

    def __init__(self):
        self.fired = False
        self.held: int | None = None  # a first signal held until the import it arrived in is done
        self.old_alarm = None  # SIGALRM's handler before the poll took it (None: not taken)

    def __call__(self, signum, frame):
        import signal

        if self.fired:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        self.fired = True
        if _in_foreign_import(frame) and self._poll():
            self.held = signum
            return
        raise KeyboardInterrupt(f"terminated by signal {signum}")

    def _poll(self) -> bool:
        """Arm the SIGALRM poll; False where it cannot be armed (no setitimer, SIGALRM in use)."""
        import signal

        if not hasattr(signal, "setitimer"):
            return False
        try:
            if self.old_alarm is None:
                current = signal.getsignal(signal.SIGALRM)
                if current not in (signal.SIG_DFL, None) and current != self._alarm:
                    return False  # somebody else's alarm: leave it alone
                self.old_alarm = signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, self.POLL)
        except (ValueError, OSError):
            return False
        return True

    def _alarm(self, signum, frame):
        if self.held is None:
            return
        if _in_foreign_import(frame) and self._poll():
            return
        self.deliver()

    def deliver(self) -> None:
        """Raise the held signal's KeyboardInterrupt (nothing if none is held)."""
        if self.held is not None:
            held, self.held = self.held, None
            raise KeyboardInterrupt(f"terminated by signal {held}")

    def restore(self) -> None:
        """Drop a held signal, stop the poll and give SIGALRM its handler back."""
        import signal

        self.held = None
        if self.old_alarm is not None:
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, self.old_alarm)
            except (ValueError, OSError):
                pass
            self.old_alarm = None


def _in_foreign_import(frame) -> bool:
    """The interrupted code runs inside an import (importlib's frames are on the stack), and the module
    whose top-level code is innermost is not acl26's own: another package's initialisation, which may
    have been entered from a C++ extension. acl26's own imports (numba compiling at import time, say)
    stay interruptible at once."""
    f, innermost = frame, None
    while f is not None:
        code = f.f_code
        if innermost is None and code.co_name == "<module>":
            innermost = str(f.f_globals.get("__name__", ""))
        if code.co_filename.startswith("<frozen importlib"):
            return innermost is None or not (innermost == "acl26" or innermost.startswith("acl26."))
        f = f.f_back
    return False


def _install_handlers() -> tuple[_Stop, dict]:
    import signal

    handler, old = _Stop(), {}
    for name in _SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            if signal.getsignal(sig) is signal.SIG_IGN:  # ignored by whoever started us (nohup, a background job)
                continue
            old[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: leave the handlers alone
            break
    return handler, old


def _user_errors() -> tuple[type[BaseException], ...]:
    """The exception types a user can cause; imported lazily (the registry imports every chapter).
    A ``KeyError`` counts only when its message is a sentence (``unknown paper 'x'; known: ...``),
    not a bare key from a bug (see :func:`_is_user_error`)."""
    from acl26.assets import AssetError
    from acl26.errors import RunError
    from acl26.params import ParamError
    from acl26.sync import SyncError

    return (ParamError, AssetError, RunError, SyncError, KeyError, OSError, ValueError)


def _is_user_error(exc: BaseException) -> bool:
    if not isinstance(exc, _user_errors()):
        return False
    if isinstance(exc, KeyError):  # 'machine' from a bug is not a message
        return bool(exc.args) and isinstance(exc.args[0], str) and " " in exc.args[0]
    return True


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: the path and the reason for an OSError, the message otherwise."""
    if isinstance(exc, OSError) and (exc.filename is not None or exc.strerror):
        where = f"{exc.filename}: " if exc.filename is not None else ""
        if exc.filename2 is not None:
            where = f"{exc.filename} -> {exc.filename2}: "
        text = f"{where}{exc.strerror or exc}"
    elif isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])
    else:
        text = str(exc) or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run one command; every failure ends in one line on stderr and a non-zero status (see the module
    docstring). ``--debug`` adds the traceback. The signal handlers are the caller's again on return."""
    import signal

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]  # accepted anywhere on the line
    stop, old = _install_handlers()
    try:
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
            logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
            args.func(args)
            stop.deliver()  # a signal held during an import, when the command ended before the poll
        except KeyboardInterrupt:
            if debug:
                import traceback

                traceback.print_exc()
            print("acl26: interrupted; nothing was left half-written", file=sys.stderr)
            return 130
        except BrokenPipeError:  # the reader went away (acl26 list | head): nothing more to say to it
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the exit's own flush does not fail again
            except OSError:
                pass
            return 141
        except SystemExit as exc:  # argparse: its usage line and message, or --help / --version
            return exc.code if isinstance(exc.code, int) else USER_ERROR
        except Exception as exc:
            if debug:
                import traceback

                traceback.print_exc()
            if stop.fired:
                # the signal's KeyboardInterrupt was turned into another error on its way up (numpy's
                # C extension, interrupted while it imports, raises ImportError): an interruption
                print("acl26: interrupted; nothing was left half-written", file=sys.stderr)
                return 130
            try:
                user = _is_user_error(exc)
            except BaseException:  # the error types themselves could not be imported
                user = False
            if user:
                print(f"acl26: error: {one_line(exc)}", file=sys.stderr)
                return USER_ERROR
            print(f"acl26: error: internal error, {type(exc).__name__}: {one_line(exc)} "
                  f"(rerun with --debug for the traceback)", file=sys.stderr)
            return INTERNAL_ERROR
        return 0
    except KeyboardInterrupt:  # a second signal while the first one's message was printed
        return 130
    finally:
        stop.restore()
        for sig, handler in old.items():
            try:
                signal.signal(sig, handler)
            except (ValueError, TypeError):
                pass


def entry() -> None:
    """The ``acl26`` console script: :func:`main`, then exit without a traceback whatever arrives."""
    import signal

    code = main()
    for name in _SIGNALS:  # a signal during interpreter shutdown must not print a traceback either
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
