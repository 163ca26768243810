"""Where every figure came from, in a form a reader can check.

* Each run record (``runs/<paper>.json``, written by :func:`acl26.runner.run`) holds the exact
  ``acl26 run`` command with every resolved parameter (:func:`command`), the cache key, the git
  commit and whether the tree was dirty (:func:`git_state`), the machine (:func:`machine_facts`:
  CPU model, cores, bf16 native or not), the date and the time taken.
* Each chapter page opens with a folded "Run this yourself" box (:func:`run_box`, the fragment
  ``book/_generated/run-<paper>.md``) that shows all of that, with links that download the executed
  notebook and its results JSON and their sha256.
* ``acl26 book`` writes ``book/executed/MANIFEST.json`` (:func:`write_manifest`): the sha256 of every
  executed notebook, run record, results file and benchmark file.
* ``acl26 verify`` (:func:`verify`) hashes those files again against the manifest and decides every
  verdict again from the results' saved evidence (:mod:`acl26.evidence`) with the current
  ``record_claims``; any difference is named, file or claim, and the command fails.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple

from acl26 import claims, io, machine, registry

MANIFEST = "MANIFEST.json"
#: the files of an executed book the manifest covers (relative glob patterns)
COVERED = ("*.ipynb", "runs/*.json", "results/*.json", "bench/*.json")


def sha256(path: str | Path) -> str:
    from acl26 import assets

    return assets.sha256_file(Path(path))


def git_state(root: str | Path) -> dict | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout at ``root`` (dirty: a tracked file differs from
    the commit), or None where it is not a git checkout or git is missing."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=30, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(status.strip())}


def machine_facts() -> dict:
    return {"cpu": machine.cpu_model() or "unknown CPU", "cores": machine.cpu_count(),
            "bf16_native": machine.bf16_native()}


def command(paper: str, profile: str, params: dict[str, Any], sep: str = " ") -> str:
    """The ``acl26 run`` that repeats a run: the profile and every resolved parameter, shell-quoted
    (``sep`` between the parameters: ``" \\\n  "`` puts one per line)."""
    head = " ".join(_quote(w) for w in ("acl26", "run", paper, "--profile", profile))
    return sep.join([head] + [f"-p {_quote(f'{n}={v!r}')}" for n, v in params.items() if n != "profile"])


def _quote(word: str) -> str:
    """``word`` for a POSIX shell, readably: as it is, in double quotes where nothing in it is special
    there, else in :func:`shlex.quote`'s single quotes."""
    if re.fullmatch(r"[\w@%+=:,./-]+", word):
        return word
    if not re.search(r'["$`\\!]', word):
        return f'"{word}"'
    return shlex.quote(word)


def _files(executed: Path) -> list[Path]:
    return sorted({p for pattern in COVERED for p in executed.glob(pattern) if p.is_file()})


def manifest(executed: str | Path) -> dict:
    executed = Path(executed)
    return {"written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "files": {p.relative_to(executed).as_posix(): sha256(p) for p in _files(executed)}}


def write_manifest(executed: str | Path, *, overwrite: bool = False) -> Path:
    """``MANIFEST.json`` in ``executed``: the sha256 of every file :data:`COVERED` names."""
    return io.write_json(Path(executed) / MANIFEST, manifest(executed), overwrite=overwrite)


#: the largest manifest, and the largest results file, ``acl26 verify`` reads (a book profile's results
#: are a few MB); any file it hashes is at most :data:`MAX_HASHED`
MAX_MANIFEST = 16 << 20
MAX_RESULTS = 32 << 20
MAX_HASHED = 256 << 20
#: the most bytes verify hashes in all (each link to one file counts again): a book is some tens of MB
MAX_TOTAL_HASHED = 2 << 30
#: deciding one results file's verdicts again runs in a child process (where the platform forks), stopped
#: past this many seconds or this much memory: the evidence is the file's, and its figures (a bootstrap's
#: resample count, an array's length) decide how much work the current record_claims does
REDERIVE_S = 60.0
REDERIVE_BYTES = 6 << 30
#: the most files a manifest may list
MAX_LISTED = 10_000
_DIGEST = re.compile(r"[0-9a-f]{64}")


def rederive(result: dict) -> dict[str, tuple[tuple[str, str], tuple[str, str]]]:
    """``{claim id: ((saved verdict, saved value), (verdict, value) decided again)}`` for one results file's
    claims, from its evidence with the current ``record_claims`` (values as JSON text; raises
    :class:`acl26.evidence.EvidenceError` where the evidence cannot be read, or the file does not hold
    what a results file holds)."""
    from acl26 import evidence

    if not isinstance(result, dict):
        raise evidence.EvidenceError(f"it holds a JSON {type(result).__name__}, not a results object")
    if "evidence" not in result:
        raise evidence.EvidenceError("it holds no evidence (written before acl26 saved it): run the notebook again")
    paper, profile, params, rows = (result.get(k) for k in ("paper", "profile", "params", "claims"))
    if not (isinstance(paper, str) and registry.canonical(paper) in registry.CHAPTERS):
        raise evidence.EvidenceError(f"its 'paper' {str(paper)[:60]!r} is not a chapter of this book")
    if not isinstance(profile, str) or not isinstance(params, (dict, type(None))):
        raise evidence.EvidenceError("its 'profile' is not a string or its 'params' not an object")
    if not (isinstance(rows, list) and all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in rows)):
        raise evidence.EvidenceError("its 'claims' is not a list of claim rows with an 'id'")
    chapter = registry.get(paper)
    ledger = claims.Ledger(chapter.id, profile, list(chapter.claims), params)
    chapter.record_claims(ledger, evidence.decode(result["evidence"]))
    again = {cid: (e.holds, _json(e.ours)) for cid, e in ledger.entries.items()}
    saved = {c["id"]: (str(c.get("holds?")), _json(c.get("value"))) for c in rows}
    absent = ("absent", "null")
    return {cid: (saved.get(cid, absent), again.get(cid, absent)) for cid in dict.fromkeys([*saved, *again])}


def _json(value) -> str:
    """``value`` as the results file writes it (so a value read back compares equal to one computed)."""
    import json

    try:
        return json.dumps(json.loads(json.dumps(value, default=io.json_default)), sort_keys=True)
    except (TypeError, ValueError, RecursionError):  # a value no results file can hold
        return repr(type(value).__name__)


class Verified(NamedTuple):
    problems: list[str]  # empty: the book checks out
    verdicts: int  # verdicts decided again
    files: int  # files the manifest lists


def _inside(executed: Path, rel) -> Path | str:
    """The file the manifest key ``rel`` names inside ``executed``, or why it names none: a key must be a
    relative path of the kinds :data:`COVERED` lists, without ``..``, reached through real folders only
    (no symbolic link on the way, checked with ``lstat``)."""
    import fnmatch
    import stat

    if not isinstance(rel, str) or not rel or len(rel) > 255 or "\\" in rel or "\x00" in rel:
        return "not a relative file name"
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return "not a file name in UTF-8"
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return "not a path inside the book (absolute, or with '..' or empty parts)"
    if not any(fnmatch.fnmatchcase(rel, pat) and len(parts) == len(pat.split("/")) for pat in COVERED):
        return f"not a file the manifest covers ({', '.join(COVERED)})"
    path = executed
    for i, part in enumerate(parts):
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return "missing"
        except OSError as exc:
            return f"unreadable ({exc.strerror})"
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode):
            return "a symbolic link; verify reads only the book's own files"
        if not last and not stat.S_ISDIR(st.st_mode):
            return f"{part!r} on its way is not a folder"
        if last and not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if last and st.st_size > MAX_HASHED:
            return f"{st.st_size} bytes, more than the {MAX_HASHED} verify reads"
    return path


def _hash(path: Path) -> str:
    """sha256 of the regular file ``path``, opened without following a link or blocking on a FIFO."""
    import hashlib
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_HASHED:
            raise OSError(22, "not a regular file of at most the size verify reads", str(path))
        h = hashlib.sha256()
        left = MAX_HASHED + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def _unlisted(executed: Path, listed: set[str]) -> list[str]:
    """Problems with what is in the book beside the manifest: files of the covered kinds it does not list,
    and symbolic links or other non-files where those files go (named, never followed)."""
    import fnmatch
    import stat

    problems = []
    for folder in dict.fromkeys(pat.rpartition("/")[0] for pat in COVERED):
        where = executed / folder if folder else executed
        if folder:
            try:
                st = os.lstat(where)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
                problems.append(f"{where}: {'a symbolic link' if stat.S_ISLNK(st.st_mode) else 'not a folder'} "
                                "where the book keeps its files; verify reads only the book's own files")
                continue
        try:
            entries = sorted(os.scandir(where), key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"{where}: cannot be listed ({exc.strerror})")
            continue
        for entry in entries[:MAX_LISTED + 1]:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            if not any(fnmatch.fnmatchcase(rel, pat) and rel.count("/") == pat.count("/") for pat in COVERED):
                continue
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                problems.append(f"{entry.path}: a symbolic link; verify reads only the book's own files")
            elif not stat.S_ISREG(mode):
                problems.append(f"{entry.path}: not a regular file")
            elif rel not in listed:
                problems.append(f"{entry.path}: not in the manifest (added since the book was built)")
    return problems


def _printable(text: str) -> str:
    """``text`` with every character that is not printable (a newline, an escape sequence, a lone surrogate
    from a file name) written as its escape, so that a problem is one line of plain text on any terminal."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _results_owner(name: str) -> tuple[str, str] | None:
    """``(chapter id, profile)`` when ``name`` is ``<chapter>-<profile>.json`` (:func:`acl26.claims.result_path`)
    for a chapter of this book and one of its profiles; else None."""
    cid, sep, profile = name.removesuffix(".json").partition("-")
    if not (name.endswith(".json") and sep and cid in registry.CHAPTERS):
        return None
    return (cid, profile) if profile in registry.get(cid).spec.profiles else None


def _decide_again(result: dict) -> dict:
    """:func:`rederive` as JSON-ready data: ``{"pairs": ...}`` or ``{"problem": text}``."""
    from acl26 import evidence

    try:
        return {"pairs": {cid: [list(a), list(b)] for cid, (a, b) in rederive(result).items()}}
    except evidence.EvidenceError as exc:
        return {"problem": f"verdicts cannot be decided again: {exc}"}
    except MemoryError:
        return {"problem": f"deciding its verdicts again needs more than the {REDERIVE_BYTES} bytes of memory "
                           f"verify allows"}
    except Exception as exc:  # noqa: BLE001 - whatever record_claims raises on this file: a problem of the file
        return {"problem": f"the current record_claims fails on its evidence ({type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:200]})"}


def _rederive_bounded(result: dict) -> dict | str:
    """:func:`rederive` of one results file, in a forked child stopped past :data:`REDERIVE_S` seconds or
    :data:`REDERIVE_BYTES` of data memory: its pairs, or the problem as text. In this process where the
    platform cannot fork."""
    import json
    import select
    import signal

    if not hasattr(os, "fork"):  # pragma: no cover - Windows
        out = _decide_again(result)
        return out.get("problem") or {c: (tuple(a), tuple(b)) for c, (a, b) in out["pairs"].items()}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: decide, write the answer as JSON, leave without running the parent's exit code
        code = 0
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                import resource

                resource.setrlimit(resource.RLIMIT_DATA, (REDERIVE_BYTES, REDERIVE_BYTES))
            except (ImportError, ValueError, OSError):
                pass
            data = json.dumps(_decide_again(result)).encode()
            with os.fdopen(w, "wb") as fh:
                fh.write(data)
        except BaseException:  # noqa: BLE001 - nothing of the child may reach the parent's code
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline, status = [], time.monotonic() + REDERIVE_S, None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return f"deciding its verdicts again took longer than the {REDERIVE_S:g} s verify allows"
            ready, _, _ = select.select([r], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(r)
        if status is None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
    try:
        out = json.loads(b"".join(chunks))
        pairs = out["pairs"] if "problem" not in out else out["problem"]
    except (ValueError, KeyError, TypeError):
        why = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"status {os.WEXITSTATUS(status)}")
        return f"deciding its verdicts again ended without an answer ({why}; memory past {REDERIVE_BYTES} bytes?)"
    if isinstance(pairs, str):
        return pairs
    return {c: (tuple(a), tuple(b)) for c, (a, b) in pairs.items()}


def verify(executed: str | Path) -> Verified:
    """Every problem found in the executed book at ``executed``, the number of verdicts decided again and of
    files the manifest lists. See the module docstring.

    The folder is untrusted (a book someone else built): only the files its manifest lists are read,
    each a regular file inside the folder reached without a symbolic link, of bounded size; only
    results files it lists are decoded, by :func:`acl26.evidence.decode`, which builds nothing but
    plain data and acl26's own classes. A FIFO, a device or a link is named as a problem, never read."""
    from acl26 import evidence

    executed = Path(executed)
    problems: list[str] = []
    try:
        listed = io.read_json(executed / MANIFEST, max_bytes=MAX_MANIFEST, follow_symlinks=False)
        if not isinstance(listed, dict) or not isinstance(listed.get("files"), dict):
            raise TypeError("'files' is not an object" if isinstance(listed, dict) else "not a JSON object")
        listed = listed["files"]
        if len(listed) > MAX_LISTED:
            raise ValueError(f"it lists {len(listed)} files, more than the {MAX_LISTED} a book has")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        return Verified([f"{executed / MANIFEST}: no usable manifest ({why}); `acl26 book` writes it"], 0, 0)
    found: dict[str, Path] = {}
    hashed = 0
    for rel, digest in listed.items():
        where = _inside(executed, rel)
        if isinstance(where, str):
            shown = executed / rel if where == "missing" else f"{executed / MANIFEST}: the entry {str(rel)[:120]!r}"
            problems.append(f"{shown}: listed in the manifest, missing" if where == "missing"
                            else f"{shown} is {where}; nothing was read there")
            continue
        if not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
            problems.append(f"{where}: the manifest's sha256 for it is not 64 hex digits")
            continue
        hashed += where.lstat().st_size
        if hashed > MAX_TOTAL_HASHED:
            problems.append(f"{executed / MANIFEST}: the files it lists hold more than the {MAX_TOTAL_HASHED} bytes "
                            f"verify hashes in all; the rest was not read")
            break
        try:
            actual = _hash(where)
        except OSError as exc:
            problems.append(f"{where}: cannot be read ({exc.strerror})")
            continue
        found[rel] = where
        if actual != digest:
            problems.append(f"{where}: sha256 differs from the manifest's (changed since the book was built)")
    problems += _unlisted(executed, {r for r in listed if isinstance(r, str)})
    checked = 0
    for rel in sorted(r for r in found if r.startswith("results/")):
        path = found[rel]
        owner = _results_owner(path.name)
        if owner is None:
            problems.append(f"{path}: not named <chapter>-<profile>.json after a chapter of this book and one of "
                            f"its profiles; not decoded")
            continue
        try:
            result = io.read_json(path, max_bytes=MAX_RESULTS, follow_symlinks=False)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
            problems.append(f"{path}: not a usable results file ({why})")
            continue
        if not isinstance(result, dict) or (result.get("paper"), result.get("profile")) != owner:
            problems.append(f"{path}: its 'paper' and 'profile' are not those its name gives ({owner[0]}, {owner[1]})")
            continue
        pairs = _rederive_bounded(result)
        if isinstance(pairs, str):
            problems.append(f"{path}: {pairs}")
            continue
        for cid, ((verdict, value), (verdict2, value2)) in pairs.items():
            checked += 1
            if verdict != verdict2:
                problems.append(f"{path}: claim {cid!r}: saved verdict {verdict!r}, decided again from the evidence "
                                f"{verdict2!r}")
            elif value != value2:
                problems.append(f"{path}: claim {cid!r}: saved value {value[:80]}, decided again from the evidence "
                                f"{value2[:80]}")
    problems = [_printable(p) for p in problems]
    return Verified(problems, checked, len(listed))


# ---- the "Run this yourself" box


def box_name(paper: str) -> str:
    return f"run-{paper}.md"


_HEX = re.compile(r"[0-9a-f]{7,64}")
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _plain(value, limit: int = 200) -> str:
    """``value`` as plain text inside a MyST table cell: control characters dropped, HTML and Markdown
    punctuation escaped (a run record is data, and none of it may become markup)."""
    import html

    text = "".join(ch if ch.isprintable() else " " for ch in str(value))[:limit]
    text = html.escape(text, quote=False)
    return re.sub(r"([\\`*_{}\[\]()#+!|~$:^-])", r"\\\1", text)


def _run_problem(run: dict, paper: str) -> str | None:
    """What in the run record ``run`` the box cannot show as it is (None: nothing)."""
    import math

    params, git, mach = run.get("params", {}), run.get("git"), run.get("machine")
    if not (isinstance(params, dict) and all(isinstance(k, str) and _PARAM.fullmatch(k) for k in params)):
        return "'params' is not an object of parameter names"
    try:
        for v in params.values():
            _json(v)
            if "\n" in repr(v):
                return "a parameter's value spans lines"
    except RecursionError:
        return "a parameter's value is nested too deeply"
    if run.get("key") is not None and not (isinstance(run["key"], str) and _HEX.fullmatch(run["key"])):
        return "'key' is not a hex digest"
    if git is not None and not (isinstance(git, dict) and isinstance(git.get("commit"), str)
                                and _HEX.fullmatch(git["commit"]) and isinstance(git.get("dirty"), bool)):
        return "'git' is not {commit: hex, dirty: true/false}"
    if mach is not None and not (isinstance(mach, dict) and isinstance(mach.get("cpu", ""), str)
                                 and type(mach.get("cores", 0)) is int
                                 and isinstance(mach.get("bf16_native", False), bool)):
        return "'machine' is not {cpu: text, cores: integer, bf16_native: true/false}"
    wall = run.get("wall_s", 0)
    try:
        seconds = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else math.nan
    except OverflowError:  # an integer of hundreds of digits
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 <= seconds < 1e9):
        return "'wall_s' is not a number of seconds"
    try:
        _dt.datetime.fromisoformat(str(run.get("finished", "2000-01-01")))
    except ValueError:
        return "'finished' is not an ISO date and time"
    return None


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text`` (so nothing in it can close it)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def run_box(paper: str, executed: str | Path, profile: str = "book") -> str:
    """The MyST text of a chapter's folded "Run this yourself" box, from its run record and files.

    The record is data: every field is checked for what the box shows (a record with a field of another
    type or shape raises :class:`acl26.errors.RunError` naming the file and the run that remakes it),
    and free text (the CPU's name) is escaped, so a tampered record cannot put markup into the page."""
    from acl26.errors import RunError

    executed = Path(executed)
    record = executed / "runs" / f"{paper}.json"
    head = ":::{admonition} Run this yourself\n:class: dropdown tip\n\n"
    run = None
    if os.path.lexists(record):
        try:
            run = io.read_json(record, max_bytes=MAX_MANIFEST)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"not valid JSON ({exc})"
            raise RunError(f"{record}: not a usable run record: {why}; remake it with `acl26 run {paper}` (add "
                           f"--force if it was edited)") from exc
        if not isinstance(run, dict):
            raise RunError(f"{record}: not a usable run record: a JSON {type(run).__name__}, not an object; remake it "
                           f"with `acl26 run {paper}` (add --force if it was edited)")
    if run is None or run.get("profile") != profile:
        return head + f"This chapter has not been run with the `{profile}` profile yet: `acl26 run {paper}`.\n:::\n"
    why = _run_problem(run, paper)
    if why:
        raise RunError(f"{record}: not a usable run record: {why}; remake it with `acl26 run {paper}` (add --force "
                       f"if it was edited)")
    cmd = command(paper, profile, run.get("params", {}), sep=" \\\n  ")
    git = run.get("git")
    mach = run.get("machine") or {}
    rows = [("cache key", f"`{run['key']}`" if run.get("key") else "—"),
            ("git commit", (f"`{git['commit']}`, " + ("with uncommitted changes (dirty tree)" if git["dirty"]
                                                     else "clean tree")) if git
             else "not run from a git checkout" if "git" in run else "not recorded (run before acl26 kept it)"),
            ("machine", (f"{_plain(mach.get('cpu', 'unknown CPU'))}, {mach.get('cores', '?')} cores, bf16 "
                         f"{'native' if mach.get('bf16_native') else 'not native'}") if mach else "not recorded"),
            ("finished (UTC)", f"{_plain(run.get('finished', '—'))}, after {run.get('wall_s', 0):.0f} s")]
    for label, rel in (("executed notebook", f"{paper}.ipynb"),
                       ("results JSON", f"results/{paper}-{profile}.json")):
        path = executed / rel
        if path.is_file() and not path.is_symlink():
            rows.append((label, f"{{download}}`{Path(rel).name} </{_book_path(executed, path)}>` "
                                f"(sha256 `{sha256(path)}`)"))
        else:
            rows.append((label, "missing"))
    table = "| | |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
    fence = _fence(cmd)
    return (head + "Every parameter of this run, resolved (the profile's values and any override):\n\n"
            f"{fence}bash\n{cmd}\n{fence}\n\n{table}\n"
            "`acl26 verify` hashes the executed notebooks and results again against the book's manifest and "
            "decides every verdict again from the saved results.\n:::\n")


def _book_path(executed: Path, path: Path) -> str:
    """``path`` relative to the book's source root (the folder above ``book/``), for Sphinx's ``/`` paths."""
    root = executed.resolve().parent.parent
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.resolve().as_posix()

