"""Build the book: run every registered notebook, benchmark, generate the summary pages, render.

``acl26 book`` = fetch assets -> :func:`acl26.runner.run_all` (every chapter, profile ``book``,
support pages first; a notebook whose cache key is unchanged is not executed again) ->
:func:`acl26.bench.run_benchmarks` (likewise cached) -> :func:`generate` (tables for the intro, claims ledger, performance,
assets and environment pages, written to ``book/_generated/``) -> vendor MathJax into
``book/_static/mathjax`` -> ``jupyter-book build . --toc book/_toc.yml -W -n --keep-going``.

The committed pages in ``book/`` hold the prose and ``{include}`` the generated tables, so every
number in the book comes from a run.
"""

from __future__ import annotations

import datetime as _dt
import shutil
import subprocess
import sys
import time
from pathlib import Path

from acl26 import assets, bench, claims, execution, io, paths, provenance, registry
from acl26.runner import RunError

PACKAGES = execution.PACKAGES
#: assets the book itself uses (not a chapter), and those only the tests use
BOOK_ASSETS = {"mathjax": "book", "actionlint": "tests"}


#: the book's own pages :func:`generate` writes into ``book/_generated`` (the chapters add their
#: fragments, :attr:`acl26.chapter.Chapter.fragments`; see :func:`generated_names`)
GENERATED = ("intro_status.md", "claims.md", "performance.md", "assets.md", "environment.md")


class BookError(RunError):
    """The book could not be built."""


def _esc(value) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: list[dict], columns: list[str] | None = None) -> str:
    """A MyST pipe table."""
    if not rows:
        return "*(nothing yet)*\n"
    columns = columns or list(rows[0])
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        out.append("| " + " | ".join(_esc(row.get(c, "")) for c in columns) + " |")
    return "\n".join(out) + "\n"


def _number(value, fmt: str = "{:.4g}"):
    """A benchmark figure for a table: numbers formatted, None and NaN as a dash, anything else as is."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt.format(value)
    return value


def machine_line(m: dict) -> str:
    """The line above a benchmark's tables: the CPU model, its SIMD level and the read bandwidth probed in that
    run (:func:`acl26.bench.run_machine`); "not recorded" for a field an older record lacks."""
    bw, span = m.get("read_gb_s"), m.get("read_gb_s_range")
    if isinstance(bw, _NUM) and not isinstance(bw, bool):
        spread = (f", range {_number(span[0], '{:.1f}')}–{_number(span[1], '{:.1f}')}"
                  if isinstance(span, list) and len(span) == 2 and all(isinstance(v, _NUM) for v in span) else "")
        read = f"{_number(bw, '{:.1f}')} GB/s (probed in this run{spread})"
    else:
        read = "not recorded"
    return (f"**Machine:** {_esc(m.get('cpu') or 'unknown CPU')}; SIMD: {_esc(m.get('simd') or 'not recorded')}; "
            f"read bandwidth: {read}.")


#: what each kind of file in ``book/executed`` must hold for the pages: key -> type (a tuple: any of them)
_NUM = (int, float)
_SCHEMAS = {
    "results": {"paper": str, "profile": str, "started": str, "wall_s": _NUM, "claims": list, "metrics": dict},
    "claim": {"claim": str, "source": str, "paper": str, "ours": str, "test": str, "holds?": str},
    "run": {"profile": str, "wall_s": _NUM, "finished": str},
    "bench": {"started": str, "machine": dict, "goals": list, "rows": list},
    "machine": {"cpus": (int, str), "python": str},
    "goal": {"goal": str, "met": (bool, type(None))},
    "build": {},
}
_REPAIR = {"results": "acl26 run {pid}", "run": "acl26 run {pid}", "bench": "acl26 bench {pid} --force",
           "build": "acl26 book"}


def _problem(data, kind: str) -> str | None:
    """What is wrong with ``data`` as a file of ``kind`` (None: nothing)."""
    if not isinstance(data, dict):
        return f"expected a JSON object, found {type(data).__name__}"
    for key, typ in _SCHEMAS[kind].items():
        if key not in data:
            return f"it lacks {key!r}"
        if not isinstance(data[key], typ) or isinstance(data[key], bool) and typ is _NUM:
            return f"{key!r} is {type(data[key]).__name__}"
    inner = {"results": ("claims", "claim"), "bench": ("goals", "goal")}.get(kind)
    if inner:
        for i, item in enumerate(data[inner[0]]):
            why = _problem(item, inner[1])
            if why:
                return f"{inner[0]}[{i}]: {why}"
    if kind == "build":
        for key in ("notebooks", "benchmarks"):
            if not isinstance(data.get(key, {}), dict):
                return f"{key!r} is {type(data[key]).__name__}"
            if not all(isinstance(v, str) for v in data.get(key, {}).values()):
                return f"{key!r} holds a value that is not a status word"
    if kind == "bench":
        why = _problem(data["machine"], "machine")
        if why:
            return f"machine: {why}"
        if not all(isinstance(r, dict) for r in data["rows"]):
            return "'rows' holds a non-object"
    return None


def _load(path: Path, kind: str = "build", pid: str = ""):
    """The JSON file ``path`` of ``kind`` (None when it does not exist); a file that cannot be read or
    does not hold what the pages need raises :class:`BookError` naming it and the command that remakes it."""
    if not path.exists():
        return None
    try:
        data = io.read_json(path)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"not valid JSON ({exc})"
    else:
        why = _problem(data, kind)
        if why is None:
            return data
    repair = _REPAIR[kind].format(pid=pid)
    raise BookError(f"{path}: not a usable {kind} file: {why}; remake it with `{repair}` (add --force if "
                    f"it was edited)")


def _results(executed: Path, profile: str) -> dict[str, dict]:
    out = {}
    for pid in registry.CHAPTERS:
        data = _load(claims.result_path(pid, profile, executed / "results"), "results", pid)
        if data:
            out[pid] = data
    return out


def _counts(rows: list[dict]) -> dict[str, int]:
    return {v: sum(r["holds?"] == v for r in rows) for v in claims.VERDICTS}


#: how each kind of row is named in the pages (plural), in the order they are shown
_KIND_NAMES = {"claim": "paper claims", "fact": "facts by construction", "check": "checks", "control": "controls"}


def _of(result: dict, kind: str) -> list[dict]:
    return [r for r in result.get("claims", []) if r.get("kind", "claim") == kind]


def _measured_text(rows: list[dict]) -> str:
    """The measured verdicts of the rows not testable here, e.g. " (measured: 1 yes, 2 no)"; "" for none."""
    measured = [r.get("measured") for r in rows if r["holds?"] == claims.NOT_TESTABLE]
    counts = [(v, sum(m == v for m in measured)) for v in (claims.HOLDS, claims.FAILS, claims.INCONCLUSIVE)]
    shown = ", ".join(f"{n} {v}" for v, n in counts if n)
    return f" (measured: {shown})" if shown else ""


def _count_text(rows: list[dict]) -> str:
    """E.g. "5 of 9 hold, 1 does not, 1 inconclusive, 1 not testable here (measured: 1 no), 1 not tested"."""
    c = _counts(rows)
    return (f"{c[claims.HOLDS]} of {len(rows)} hold, {c[claims.FAILS]} do{'es' if c[claims.FAILS] == 1 else ''} not, "
            f"{c[claims.INCONCLUSIVE]} inconclusive, {c[claims.NOT_TESTABLE]} not testable here{_measured_text(rows)}, "
            f"{c[claims.UNTESTED]} not tested")


def _shown(c: dict) -> str:
    """A row's verdict as the pages show it: beside "not testable here", the claim's measured verdict."""
    return claims.shown_verdict(c["holds?"], c.get("measured"), c.get("interval"))


def _verdicts(result: dict, kind: str = "claim") -> str:
    """The counts of one kind of row, e.g. "5 of 9 hold, ... , 1 not tested" for the paper claims."""
    rows = _of(result, kind)
    if not rows:
        return f"no {_KIND_NAMES[kind]}"
    return _count_text(rows) if kind == "claim" else f"{_KIND_NAMES[kind]}: {_count_text(rows)}"


def _summary(result: dict) -> str:
    """The paper claims' counts, then those of the other kinds a chapter has, apart."""
    return "; ".join([_verdicts(result)] + [_verdicts(result, k) for k in ("fact", "control", "check") if _of(result, k)])


def _ours(c: dict) -> str:
    return c["ours"] + (f" — {c['note']}" if c.get("note") else "")


def generated_names() -> tuple[str, ...]:
    """Every file :func:`generate` writes: the book's own pages, every chapter's "Run this yourself" box
    (:func:`acl26.provenance.run_box`) and every chapter's fragments."""
    return (GENERATED + tuple(provenance.box_name(c) for c in registry.CHAPTERS)
            + tuple(name for c in registry.CHAPTERS.values() for name in c.fragments))


def generate(executed: Path, generated: Path, profile: str = "book", *, overwrite: bool = False) -> list[Path]:
    """Write the generated fragments the book pages include; returns the files written.

    Every page is made first and every target checked (:func:`acl26.io.check_target`; ``overwrite``
    lets them replace files acl26 did not write) before the first is written."""
    from acl26.papers import PLANNED

    results = _results(executed, profile)
    runs = {pid: _load(executed / "runs" / f"{pid}.json", "run", pid) for pid in registry.CHAPTERS}
    build = _load(executed / "build.json") or {}
    pages: dict[str, str] = {}

    # intro: one row per chapter
    rows = []
    for pid, paper in registry.CHAPTERS.items():
        res = results.get(pid)
        run = runs.get(pid) or {}
        rows.append({
            "chapter": f"[{paper.short_title}]({'executed/' + pid}.ipynb)",
            "paper": f"arXiv {paper.arxiv}" if paper.arxiv else "(shared page)",
            "profile": run.get("profile", "—"),
            "claims": _summary(res) if res else "not run",
            "run time": f"{run['wall_s']:.0f} s" if run.get("wall_s") else "—",
        })
    planned = [f"{title} (arXiv {arxiv})" for pid, title, arxiv in PLANNED if pid not in registry.CHAPTERS]
    text = table(rows)
    if planned:
        text += "\nChapters still to come (no placeholder pages): " + "; ".join(planned) + ".\n"
    pages["intro_status.md"] = (text)
    for pid in registry.CHAPTERS:  # each chapter page's folded "Run this yourself" box
        pages[provenance.box_name(pid)] = provenance.run_box(pid, executed, profile)
    for pid, chapter in registry.CHAPTERS.items():  # the chapters' own fragments of the pages
        for name, make in chapter.fragments.items():
            try:
                pages[name] = make(results.get(pid))
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                raise BookError(f"{claims.result_path(pid, profile, executed / 'results')}: not a usable results "
                                f"file for {name} ({type(exc).__name__}: {exc}); remake it with `acl26 run {pid}`") from None

    # claims ledger: the paper claims of every chapter (only these count), then facts by construction,
    # the controls and our own checks, each apart
    parts = []
    all_claims = [c for res in results.values() for c in _of(res, "claim")]
    if all_claims:
        tot = _counts(all_claims)
        parts.append(f"**All chapters:** {len(all_claims)} paper claims: {tot[claims.HOLDS]} hold, "
                     f"{tot[claims.FAILS]} do not hold, **{tot[claims.INCONCLUSIVE]} inconclusive**, "
                     f"**{tot[claims.NOT_TESTABLE]} not testable here**{_measured_text(all_claims)}, "
                     f"{tot[claims.UNTESTED]} not tested. "
                     f"Facts by construction, controls and our own checks are not counted.\n")
    apart: dict[str, list[str]] = {"fact": [], "control": [], "check": []}
    for pid, paper in registry.CHAPTERS.items():
        res = results.get(pid)
        if not res:
            parts.append(f"## {paper.short_title}\n")
            parts.append(f"*Not run with the `{profile}` profile yet (`acl26 run {pid}`).*\n")
            continue
        mine = _of(res, "claim")
        if mine:
            parts.append(f"## {paper.short_title}\n")
            parts.append(f"Profile `{res['profile']}`, run {res['started']} ({res['wall_s']:.0f} s). {_verdicts(res)}.\n")
            parts.append(table([{"claim (source)": f"{c['claim']} ({c['source']})", "paper": c["paper"],
                                 "ours": _ours(c), "interval": c.get("interval", "—"),
                                 "half-width / margin": c.get("half-width / margin", "—"), "test": c["test"],
                                 "holds?": _shown(c)} for c in mine]))
        for kind in apart:
            rows = _of(res, kind)
            if rows:
                apart[kind].append(f"### {paper.short_title}\n")
                apart[kind].append(table([{_KIND_NAMES[kind][:-1]: c["claim"], "ours": _ours(c),
                                           "interval": c.get("interval", "—"),
                                           "half-width / margin": c.get("half-width / margin", "—"),
                                           "test": c["test"], "holds?": _shown(c)} for c in rows]))
    intro = {
        "fact": "True by how we built it (bit counts, layout arithmetic); shown so the reader can check the "
                "arithmetic, never counted as reproduced.",
        "control": "Each shows that our setup can detect an effect of the size a claim's test needs. A claim "
                   "whose control does not hold is *not testable here*, whatever its own figure.",
        "check": "Sanity checks of our models and code, not claims of any paper.",
    }
    for kind, body in apart.items():
        if body:
            parts.append(f"## {_KIND_NAMES[kind].capitalize()}\n\n{intro[kind]} Not counted above.\n")
            parts += body
    pages["claims.md"] = ("\n".join(parts))

    # performance
    parts = []
    for pid, paper in registry.CHAPTERS.items():
        if paper.benchmarks is None:
            continue  # e.g. the models page: nothing to benchmark
        data = _load(executed / "bench" / f"{pid}.json", "bench", pid)
        parts.append(f"## {data.get('title') or paper.short_title if data else paper.short_title}\n")
        if not data:
            parts.append(f"*No benchmark run yet (`acl26 bench {pid}`).*\n")
            continue
        m = data["machine"]
        parts.append(f"Run {data['started']} on {m['cpus']} CPU(s) ({m.get('cpu') or 'unknown CPU'}), Python {m['python']}"
                     f"{' — quick mode' if data.get('quick') else ''}. {data.get('note', '')}\n")
        parts.append(machine_line(m) + "\n")
        goals = [{**g, "met": {True: "yes", False: "no", None: "—"}[g["met"]]} for g in data["goals"]]
        parts.append("**Goals**\n\n" + table(goals, ["goal", "target", "measured", "met"]))
        rows = [{k: _number(v, "{:.2f}×" if k == "ratio" else "{:.4g}") for k, v in r.items()} for r in data["rows"]]
        columns = list(dict.fromkeys(k for r in rows for k in r))  # every row's fields, first-seen order
        parts.append("**Measurements** (median seconds; ratio = baseline time / this time, same run; "
                     "— where a figure does not apply)\n\n" + table(rows, columns))
    pages["performance.md"] = ("\n".join(parts))

    # assets and licences
    rows = assets.licenses_table()
    for r in rows:
        users = registry.used_by(r["asset"]) + ([BOOK_ASSETS[r["asset"]]] if r["asset"] in BOOK_ASSETS else [])
        r["used by"] = ", ".join(users) or "—"
        r["sha256"] = f"`{r['sha256'][:16]}…`"
    pages["assets.md"] = table(rows, ["asset", "registry", "package", "license", "content", "used by", "what",
                                      "sha256"])

    # environment: execution table + versions
    rows = []
    status_words = {"executed": "executed by this build", "cached": "taken from the cache (inputs unchanged)"}
    for pid in registry.CHAPTERS:
        run = runs.get(pid)
        how = (build.get("notebooks") or {}).get(pid)
        rows.append({"notebook": f"notebooks/{pid}.ipynb", "profile": run["profile"] if run else "—",
                     "executed at (UTC)": run["finished"] if run else "not run",
                     "wall time": f"{run['wall_s']:.0f} s" if run else "—",
                     "this build": status_words.get(how, "—" if not run else "not part of this build")})
    bench_rows = []
    for pid, paper in registry.CHAPTERS.items():
        if paper.benchmarks is None:
            continue
        data = _load(executed / "bench" / f"{pid}.json", "bench", pid)
        how = (build.get("benchmarks") or {}).get(pid)
        bench_rows.append({"benchmarks": pid, "run at (UTC)": data["started"] if data else "not run",
                           "this build": status_words.get(how, "—" if not data else "not part of this build")})
    versions = [{"package": k, "version": v} for k, v in execution.package_versions().items()]
    m = bench.machine()
    env_text = ("## Executed notebooks\n\n" + table(rows) + "\n## Benchmarks\n\n" + table(bench_rows)
                + "\n## Machine\n\n" + table([m]) + "\n## Packages\n\n" + table(versions))
    pages["environment.md"] = env_text
    for name in pages:
        io.check_target(generated / name, overwrite=overwrite)
    return [io.write_text(generated / name, text, overwrite=overwrite) for name, text in pages.items()]


def vendor_mathjax(static: Path, *, overwrite: bool = False) -> Path:
    """Copy MathJax (npm ``mathjax``) into the book's static folder for offline rendering (a folder
    there that acl26 did not write is refused unless ``overwrite``)."""
    src = assets.path("mathjax") / "package" / "es5"
    dest = static / "mathjax"
    with io.atomic_dir(dest, overwrite=overwrite, inputs=(src,)) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
    return dest


def build(root: Path) -> Path:
    """Run Jupyter Book 1 from the repository root, treating warnings as errors."""
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(root), "--toc", str(root / "book" / "_toc.yml"),
           "-W", "-n", "--keep-going", "--builder", "html"]
    proc = subprocess.run(cmd, cwd=root)
    if proc.returncode != 0:
        raise BookError(f"jupyter-book build failed (exit {proc.returncode}); see the messages above")
    return root / "_build" / "html" / "index.html"


def prepare(chapters, *, force: bool = False, strict: bool = False) -> None:
    """Run each chapter's ``prepare`` hook (:attr:`acl26.chapter.Chapter.prepare`), printing what it did.
    A hook that cannot be done here is reported and skipped (the chapter then reports what needed it as
    not tested), unless ``strict`` (``acl26 prepare``), where it is the command's error."""
    for c in chapters:
        if c.prepare is None:
            continue
        print(f"[acl26] {c.id}: preparing (once; may take minutes)", flush=True)
        try:
            done = c.prepare(force)
        except RunError as exc:
            if strict:
                raise
            print(f"[acl26] WARNING: {c.id} is not prepared, so its chapter reports what needs it as not tested: "
                  f"{' | '.join(str(exc).splitlines())}", flush=True)
            continue
        print(f"[acl26] {c.id}: {done or 'already prepared'}", flush=True)


def main(profile: str = "book", *, do_run: bool = True, do_bench: bool = True, do_build: bool = True,
         papers: list[str] | None = None, force: list[str] | bool = ()) -> Path | None:
    """Fetch, run (cached), benchmark (cached), generate and build; see the module docstring.

    ``force``: True re-runs every notebook and benchmark; a list re-runs those chapters'.
    """
    from acl26 import runner

    root = paths.repo_root()
    if root is None:
        raise BookError("run `acl26 book` from the acl26-repro checkout")
    chapters = registry.ordered(papers)
    resolved = runner.resolve_all(papers, profile)  # unknown paper / profile: fail before any work; run once
    if force not in (True, False) and force:
        for f in force:
            registry.get(f)
    ids = [c.id for c in chapters]
    executed = root / paths.BOOK_EXECUTED
    replace = force is True
    # the book's own outputs, checked now rather than after hours of notebooks: a file in the way
    # that acl26 did not write (or that was edited) stops the build here, in one line
    io.check_target(executed / "build.json", overwrite=replace)
    io.check_target(executed / provenance.MANIFEST, overwrite=replace)
    for name in generated_names():
        io.check_target(root / "book" / "_generated" / name, overwrite=replace)
    io.check_target(root / "book" / "_static" / "mathjax", kind="folder", overwrite=replace)
    t0 = time.perf_counter()
    assets.fetch()
    if do_run:
        prepare(chapters)
    build_state = {"notebooks": {}, "benchmarks": {}, "started": _dt.datetime.now(_dt.timezone.utc)
                   .isoformat(timespec="seconds")}

    def report(res):
        build_state["notebooks"][res.paper] = res.status
        what = f"executed in {res.wall_s:.0f} s" if res.status == "executed" else f"unchanged, from the cache (executed {res.finished})"
        print(f"[acl26] {res.paper}: {what}", flush=True)

    if do_run:
        runner.run_all(ids, profile, out_dir=executed, root=root, force=force, on_result=report,
                       params=resolved)
    if do_bench:
        for file in bench.run_benchmarks(ids, out_dir=executed / "bench", cached=True, force=force,
                              statuses=build_state["benchmarks"]):
            print(f"[acl26] benchmark {file.stem}: {build_state['benchmarks'].get(file.stem)}", flush=True)
    io.write_json(executed / "build.json", build_state, overwrite=replace)
    # the sha256 of every executed notebook, run record, results and benchmark file (acl26 verify)
    provenance.write_manifest(executed, overwrite=replace)
    generate(executed, root / "book" / "_generated", profile, overwrite=replace)
    vendor_mathjax(root / "book" / "_static", overwrite=replace)
    if not do_build:
        return None
    index = build(root)
    print(f"[acl26] book built in {time.perf_counter() - t0:.0f} s: {index}", flush=True)
    return index
