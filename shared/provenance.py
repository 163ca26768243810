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

import datetime as _dt
import re
import shlex
import subprocess
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


def rederive(result: dict) -> dict[str, tuple[tuple[str, str], tuple[str, str]]]:
    """``{claim id: ((saved verdict, saved value), (verdict, value) decided again)}`` for one results file's
    claims, from its evidence with the current ``record_claims`` (values as JSON text; raises
    :class:`acl26.evidence.EvidenceError` where the evidence cannot be read)."""
    from acl26 import evidence

    if "evidence" not in result:
        raise evidence.EvidenceError("it holds no evidence (written before acl26 saved it): run the notebook again")
    chapter = registry.get(result["paper"])
    ledger = claims.Ledger(chapter.id, result["profile"], list(chapter.claims), result.get("params"))
    chapter.record_claims(ledger, evidence.decode(result["evidence"]))
    again = {cid: (e.holds, _json(e.ours)) for cid, e in ledger.entries.items()}
    saved = {c["id"]: (c["holds?"], _json(c.get("value"))) for c in result["claims"]}
    absent = ("absent", "null")
    return {cid: (saved.get(cid, absent), again.get(cid, absent)) for cid in dict.fromkeys([*saved, *again])}


def _json(value) -> str:
    """``value`` as the results file writes it (so a value read back compares equal to one computed)."""
    import json

    return json.dumps(json.loads(json.dumps(value, default=io._json_default)), sort_keys=True)


class Verified(NamedTuple):
    problems: list[str]  # empty: the book checks out
    verdicts: int  # verdicts decided again
    files: int  # files the manifest lists


def verify(executed: str | Path) -> Verified:
    """Every problem found in the executed book at ``executed``, the number of verdicts decided again and of
    files the manifest lists. See the module docstring."""
    from acl26 import evidence

    executed = Path(executed)
    problems: list[str] = []
    try:
        listed = io.read_json(executed / MANIFEST)["files"]
        if not isinstance(listed, dict):
            raise TypeError("'files' is not an object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        return Verified([f"{executed / MANIFEST}: no usable manifest ({why}); `acl26 book` writes it"], 0, 0)
    for rel, digest in listed.items():
        path = executed / rel
        if not path.is_file():
            problems.append(f"{path}: listed in the manifest, missing")
        elif sha256(path) != digest:
            problems.append(f"{path}: sha256 differs from the manifest's (changed since the book was built)")
    for path in _files(executed):
        if path.relative_to(executed).as_posix() not in listed:
            problems.append(f"{path}: not in the manifest (added since the book was built)")
    checked = 0
    for path in sorted(executed.glob("results/*.json")):
        try:
            result = io.read_json(path)
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: not a usable results file ({type(exc).__name__}: {exc})")
            continue
        try:
            pairs = rederive(result)
        except evidence.EvidenceError as exc:
            problems.append(f"{path}: verdicts cannot be decided again: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - whatever record_claims raises on this file: a problem of the file
            problems.append(f"{path}: the current record_claims fails on its evidence ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:200]})")
            continue
        for cid, ((verdict, value), (verdict2, value2)) in pairs.items():
            checked += 1
            if verdict != verdict2:
                problems.append(f"{path}: claim {cid!r}: saved verdict {verdict!r}, decided again from the evidence "
                                f"{verdict2!r}")
            elif value != value2:
                problems.append(f"{path}: claim {cid!r}: saved value {value[:80]}, decided again from the evidence "
                                f"{value2[:80]}")
    return Verified(problems, checked, len(listed))


# ---- the "Run this yourself" box


def box_name(paper: str) -> str:
    return f"run-{paper}.md"


def run_box(paper: str, executed: str | Path, profile: str = "book") -> str:
    """The MyST text of a chapter's folded "Run this yourself" box, from its run record and files."""
    executed = Path(executed)
    try:
        run = io.read_json(executed / "runs" / f"{paper}.json")
    except (OSError, ValueError):
        run = None
    head = ":::{admonition} Run this yourself\n:class: dropdown tip\n\n"
    if not isinstance(run, dict) or run.get("profile") != profile:
        return head + f"This chapter has not been run with the `{profile}` profile yet: `acl26 run {paper}`.\n:::\n"
    cmd = command(paper, run["profile"], run.get("params", {}), sep=" \\\n  ")
    git = run.get("git")
    mach = run.get("machine") or {}
    rows = [("cache key", f"`{run.get('key', '')}`" if run.get("key") else "—"),
            ("git commit", (f"`{git['commit']}`, " + ("with uncommitted changes (dirty tree)" if git["dirty"]
                                                     else "clean tree")) if git
             else "not run from a git checkout" if "git" in run else "not recorded (run before acl26 kept it)"),
            ("machine", (f"{mach.get('cpu', 'unknown CPU')}, {mach.get('cores', '?')} cores, bf16 "
                         f"{'native' if mach.get('bf16_native') else 'not native'}") if mach else "not recorded"),
            ("finished (UTC)", f"{run.get('finished', '—')}, after {run.get('wall_s', 0):.0f} s")]
    for label, rel in (("executed notebook", f"{paper}.ipynb"),
                       ("results JSON", f"results/{paper}-{run['profile']}.json")):
        path = executed / rel
        if path.is_file():
            rows.append((label, f"{{download}}`{Path(rel).name} </{_book_path(executed, path)}>` "
                                f"(sha256 `{sha256(path)}`)"))
        else:
            rows.append((label, "missing"))
    table = "| | |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
    return (head + "Every parameter of this run, resolved (the profile's values and any override):\n\n"
            f"```bash\n{cmd}\n```\n\n{table}\n"
            "`acl26 verify` hashes the executed notebooks and results again against the book's manifest and "
            "decides every verdict again from the saved results.\n:::\n")


def _book_path(executed: Path, path: Path) -> str:
    """``path`` relative to the book's source root (the folder above ``book/``), for Sphinx's ``/`` paths."""
    root = executed.resolve().parent.parent
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.resolve().as_posix()

