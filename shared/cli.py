"""The ``acl26`` command line: list, fetch, run, bench, book, sync.

Every error the user can cause (unknown paper, unknown parameter, bad value, unreachable registry,
corrupted asset) ends the command with one line ``acl26: error: ...`` and exit status 2, and leaves
no partial output behind. The same functions are usable from Python (:mod:`acl26.runner`,
:mod:`acl26.assets`, :mod:`acl26.bench`, :mod:`acl26.book`).
"""

from __future__ import annotations

import argparse
import logging
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
    got = assets.fetch(names or None, force=args.force)
    for name, folder in got.items():
        print(f"{name}: {folder}")


def _cmd_run(args) -> None:
    from acl26 import params, runner

    overrides = params.parse_assignments(args.param)
    runner.resolve(args.paper, args.profile, overrides)  # fail fast, before any work
    res = runner.run(args.paper, args.profile, overrides, out_dir=args.out, progress=not args.quiet)
    print(f"{res.paper} ({res.profile}): {res.notebook} in {res.wall_s:.0f} s; results: "
          f"{', '.join(str(p) for p in res.results) or 'none'}")


def _cmd_bench(args) -> None:
    from acl26 import bench

    for file in bench.run(args.papers or None, quick=args.quick, out_dir=args.out):
        print(file)


def _cmd_book(args) -> None:
    from acl26 import book

    force = () if args.force is None else (True if not args.force else args.force)
    book.main(profile=args.profile, do_run=not args.skip_run, do_bench=not args.skip_bench,
              do_build=not args.skip_build, papers=args.papers or None, force=force)


def _cmd_build_llamacpp(args) -> None:
    from acl26.papers.sherry import llamacpp

    print(f"llama.cpp built in {llamacpp.build(force=args.force)}")


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
    parser = argparse.ArgumentParser(prog="acl26", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"acl26 {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list papers, their parameters and profiles")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("fetch", help="fetch and verify offline assets into $ACL26_CACHE")
    p.add_argument("names", nargs="*", help="asset names (default: all)")
    p.add_argument("--for", dest="paper", help="also fetch every asset this paper uses")
    p.add_argument("--force", action="store_true", help="download again even if cached")
    p.set_defaults(func=_cmd_fetch)

    p = sub.add_parser("run", help="execute one paper's notebook with papermill")
    p.add_argument("paper")
    p.add_argument("--profile", default="book", help="smoke | book | paper (default: book)")
    p.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="override one parameter")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: book/executed)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("bench", help="run the benchmarks and write JSON for the Performance page")
    p.add_argument("papers", nargs="*", help="papers (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats (for tests)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: book/executed/bench)")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("book", help="fetch, run every notebook, benchmark, and build the HTML book")
    p.add_argument("papers", nargs="*", help="papers to run (default: all)")
    p.add_argument("--profile", default="book", help="profile for every notebook (default: book)")
    p.add_argument("--skip-run", action="store_true", help="reuse the executed notebooks")
    p.add_argument("--skip-bench", action="store_true", help="reuse the benchmark JSON")
    p.add_argument("--skip-build", action="store_true", help="do not run jupyter-book")
    p.add_argument("--force", nargs="*", metavar="PAPER", default=None,
                   help="execute notebooks and benchmarks again although their inputs are unchanged "
                        "(all, or the papers named)")
    p.set_defaults(func=_cmd_book)

    p = sub.add_parser("build-llamacpp", help="build llama.cpp's timing tools (Sherry's peer kernels) into the cache")
    p.add_argument("--force", action="store_true", help="build again even if built")
    p.set_defaults(func=_cmd_build_llamacpp)

    p = sub.add_parser("sync", help="write every notebook's parameters cell and book/_toc.yml from the registry")
    p.add_argument("--check", action="store_true", help="write nothing; fail if anything is stale")
    p.set_defaults(func=_cmd_sync)
    return parser


def _terminate(signum, frame):
    """SIGTERM (``kill``, a CI timeout) unwinds like Ctrl-C, so runs remove their staging folders."""
    raise KeyboardInterrupt(f"terminated by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    import signal

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    from acl26.assets import AssetError
    from acl26.params import ParamError
    from acl26.runner import RunError
    from acl26.sync import SyncError

    try:
        args.func(args)
    except (ParamError, AssetError, RunError, SyncError, KeyError, FileNotFoundError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"acl26: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("acl26: interrupted; nothing was left half-written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
