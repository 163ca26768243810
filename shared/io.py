"""Atomic, owner-aware output: nothing half-written survives a failure, and nothing of the user's is lost.

Every file and folder the book produces goes through these helpers. Two promises:

* **Atomic.** Output is written to a temporary name beside the target, flushed, then moved onto
  the final name with ``os.replace`` (atomic on POSIX). A failure (an exception, Ctrl-C, a full
  disk) removes the temporary and leaves the target as it was.
* **Nothing lost.** A writer replaces an existing target only when acl26 wrote it and nobody has
  changed it since; anything else (a user's file or folder, a folder holding more than acl26 put
  there, a symbolic link) is refused with :class:`OutputExistsError`, a one-line error naming the
  path, unless the caller passes ``overwrite=True`` (the CLI's ``--force``). Even then a writer
  never removes what it reads: a target that is, or holds, one of its ``inputs`` is always refused.

How acl26 knows what it wrote:

* a folder written by :func:`atomic_dir` holds :data:`DIR_MARKER`, the list of its files with their
  size, modification time and inode; the folder counts as acl26's while exactly those files are in
  it, unchanged (a copy of it, or a file edited in place, is not acl26's);
* a file written by :func:`atomic_path` (and so by :func:`write_text` / :func:`write_json`) is
  recorded in :data:`FILE_LEDGER` in its folder by size, modification time and inode; it counts as
  acl26's while all three still match.

An empty folder may always be written into or replaced. A target that does not exist is simply
created (with its parent folders). Whether a target is, or holds, an input is decided on the
files themselves (device and inode, symbolic links followed), not on how their paths are spelled.
Files and folders are created with the permissions the user's umask gives, as ``open`` would.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat as _stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from acl26.errors import RunError

#: inside a folder written by :func:`atomic_dir`: ``{"files": {relative path: size}}``
DIR_MARKER = ".acl26-dir"
#: in a folder where :func:`atomic_path` wrote files: ``{name: [size, mtime_ns, inode]}``
FILE_LEDGER = ".acl26-files"
_OURS = (DIR_MARKER, FILE_LEDGER)


class OutputExistsError(RunError, ValueError):
    """A target exists that acl26 did not write (or that is one of the writer's inputs): a bad output
    path, so also a ``ValueError``; the CLI shows it as one line."""


# ---- ownership


def _read_ledger(folder: Path) -> dict:
    try:
        data = json.loads((folder / FILE_LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _record(path: Path, signature: list[int] | None) -> None:
    """Set (or, with None, drop) ``path``'s entry in its folder's ledger; written atomically."""
    folder = path.parent
    ledger = _read_ledger(folder)
    if signature is None:
        if path.name not in ledger:
            return
        ledger.pop(path.name)
    else:
        ledger[path.name] = signature
    fd, tmp = tempfile.mkstemp(prefix=f"{FILE_LEDGER}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(ledger, fh, sort_keys=True)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, folder / FILE_LEDGER)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def owned_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file acl26 wrote and nobody changed since."""
    path = Path(path)
    try:
        st = path.lstat()
    except OSError:
        return False
    if not _stat.S_ISREG(st.st_mode):
        return False
    return _read_ledger(path.parent).get(path.name) == _signature(st)


def _listing(folder: Path) -> dict[str, list[int]]:
    """Every file (and symbolic link) under ``folder`` but acl26's own bookkeeping: its signature."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            p = Path(root) / name
            rel = p.relative_to(folder).as_posix()
            if rel in _OURS or name == FILE_LEDGER:
                continue
            out[rel] = _signature(p.lstat())
    return out


def owned_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder acl26 wrote (:func:`atomic_dir`) holding exactly what it wrote."""
    path = Path(path)
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        marker = json.loads((path / DIR_MARKER).read_text(encoding="utf-8"))
        return isinstance(marker, dict) and marker.get("files") == _listing(path)
    except (OSError, ValueError):
        return False


def _is_empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink() and not any(path.iterdir())
    except OSError:
        return False


def _identities(path: Path) -> set[tuple[int, int]]:
    """(device, inode) of ``path`` and of each of its existing parents, symbolic links followed."""
    out = set()
    real = Path(path).resolve()
    for q in (real, *real.parents):
        try:
            st = os.stat(q)
        except OSError:
            continue
        out.add((st.st_dev, st.st_ino))
    return out


def check_target(path: str | os.PathLike, *, kind: str = "file", overwrite: bool = False,
                 inputs: Iterable[str | os.PathLike] = (), name: str = "") -> Path:
    """Refuse (one-line :class:`OutputExistsError`) a target acl26 may not replace; see the module docstring.

    ``kind`` is what will be written there, ``"file"`` or ``"folder"``; ``name`` (e.g. the argument
    that gave the path) starts the message. Returns ``path``.
    """
    final = Path(path)
    label = f"{name} {final}" if name else str(final)
    if Path(os.fspath(path)).name in ("", ".", ".."):
        raise OutputExistsError(f"{label}: not a name to write to; give the file or folder itself")
    if final.name in _OURS:
        raise OutputExistsError(f"{label}: is acl26's own bookkeeping; choose another name")
    target = final.parent.resolve() / final.name  # the link itself, if the target is a symbolic link
    here = None
    if os.path.lexists(final) and not final.is_symlink():
        st = os.stat(final)
        here = (st.st_dev, st.st_ino)
    for inp in inputs:
        src = Path(inp).resolve()
        same = target == src or (here is not None and here == _stat_id(inp))
        if same or target in src.parents or (here is not None and here in _identities(inp)):
            raise OutputExistsError(f"{label}: refusing to write there, it {'is' if same else 'holds'} the "
                                    f"input {inp}; choose another output path")
    if not os.path.lexists(final):
        return final
    if final.is_symlink():
        what = "a symbolic link"
    elif final.is_dir():
        if kind == "file":
            raise OutputExistsError(f"{label}: is a folder; refusing to replace a folder with a file")
        if _is_empty_dir(final) or owned_dir(final):
            return final
        what = "a folder acl26 did not write (or that holds files it did not write)"
    elif final.is_file():
        if kind == "file" and owned_file(final):
            return final
        what = "a file acl26 did not write (or that was changed since)"
    else:
        what = "not a regular file or folder"
    if overwrite:
        return final
    raise OutputExistsError(f"{label}: already exists and is {what}; refusing to replace it "
                            f"(move it away, or pass overwrite=True / --force)")


def _stat_id(path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _signals_held():
    """Hold SIGINT / SIGTERM / SIGHUP for the few system calls of a swap, so an interrupt cannot strand
    the old target under a temporary name; they are delivered right after."""
    sigs = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (AttributeError, OSError, ValueError):  # no pthread_sigmask here
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# ---- locks


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, *, what: str = "") -> Iterator[None]:
    """Hold an exclusive lock between processes on ``path`` (created if missing, left in place) for the
    block: ``fcntl.flock``, which every process on this machine, and on most shared file systems, sees.
    A process that finds the lock taken says so on stderr (``what`` it waits for) and waits. Released
    when the block ends, and by the OS if the process dies. Where the platform has no ``fcntl``
    (Windows), or the file system takes no locks (it says so on stderr), the block runs without one.
    Not re-entrant: a process that takes the same lock twice waits for itself."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    import sys

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[acl26] waiting: another process holds {path} ({what or 'a lock'})", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            import errno

            if exc.errno not in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                raise
            # a file system without flock (Lustre mounted without -o flock): said, then no lock
            print(f"[acl26] WARNING: {path}: this file system takes no locks ({exc.strerror}); {what or 'the block'} "
                  f"runs unlocked, so two processes may both do it", file=sys.stderr, flush=True)
        yield
    finally:
        os.close(fd)


# ---- files


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "", *, overwrite: bool = False,
                inputs: Iterable[str | os.PathLike] = (), name: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it onto ``path`` only if the block succeeds.

    An existing ``path`` is replaced only if acl26 wrote it and it is unchanged, or ``overwrite``;
    never when it is one of ``inputs`` (see the module docstring)."""
    inputs = tuple(inputs)
    final = check_target(path, kind="file", overwrite=overwrite, inputs=inputs, name=name)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=f"{suffix}.tmp", dir=final.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        check_target(final, kind="file", overwrite=overwrite, inputs=inputs, name=name)  # it may have appeared meanwhile
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes it private; the user's umask decides
        # the ledger first: a rename keeps the inode and the times, so the entry is right once it lands
        _record(final, _signature(tmp_path.stat()))
        os.replace(tmp_path, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def write_text(path: str | os.PathLike, text: str, *, overwrite: bool = False) -> Path:
    with atomic_path(path, overwrite=overwrite) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    return Path(path)


def write_json(path: str | os.PathLike, obj: Any, *, overwrite: bool = False) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n",
                      overwrite=overwrite)


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_cached_json(path: str | os.PathLike, what: str = "cached record") -> dict:
    """A JSON object that acl26 cached at ``path``; a damaged one (unreadable, not JSON, not an object)
    raises :class:`acl26.errors.CacheError` naming the file and how to rebuild it."""
    from acl26.errors import cache_entry_error

    try:
        data = read_json(path)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, found {type(data).__name__}")
    except (OSError, ValueError) as exc:
        raise cache_entry_error(Path(path), exc, what=what) from exc
    return data


def move_file(src: str | os.PathLike, dest: str | os.PathLike, *, overwrite: bool = False,
              inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Move the file ``src`` (on the same file system) onto ``dest`` under :func:`atomic_path`'s rules."""
    src, dest = Path(src), Path(dest)
    check_target(dest, kind="file", overwrite=overwrite, inputs=inputs)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _record(dest, _signature(src.stat()))
    os.replace(src, dest)
    return dest


def remove_file(path: str | os.PathLike) -> bool:
    """Remove ``path`` if acl26 wrote it and it is unchanged; returns whether it was removed."""
    path = Path(path)
    if not owned_file(path):
        return False
    path.unlink()
    _record(path, None)
    return True


def discard(folder: str | os.PathLike) -> None:
    """Remove the files acl26 wrote in ``folder`` (unchanged since), its ledger, then ``folder`` if empty.

    Anything else in it is left where it is, with the folder."""
    folder = Path(folder)
    if not folder.is_dir() or folder.is_symlink():
        return
    for name in list(_read_ledger(folder)):
        remove_file(folder / name)
    if not _read_ledger(folder):
        with contextlib.suppress(FileNotFoundError):
            (folder / FILE_LEDGER).unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()  # only if now empty


# ---- folders


def _write_marker(folder: Path) -> None:
    files = _listing(folder)
    with open(folder / DIR_MARKER, "w", encoding="utf-8") as fh:
        json.dump({"written_by": "acl26", "files": files}, fh, sort_keys=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, overwrite: bool = False,
               inputs: Iterable[str | os.PathLike] = (), name: str = "") -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; rename it to ``path`` only on success.

    An existing ``path`` is replaced only when it is empty or a folder acl26 wrote that holds exactly
    what it wrote, or with ``overwrite``; a ``path`` that is or holds one of ``inputs`` is always
    refused. The check runs before the block (fail fast) and again before the rename. On failure
    the temporary folder is removed and ``path`` is untouched.
    """
    inputs = tuple(inputs)
    final = check_target(path, kind="folder", overwrite=overwrite, inputs=inputs, name=name)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        _write_marker(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the user's umask decides
        check_target(final, kind="folder", overwrite=overwrite, inputs=inputs, name=name)
        old = None
        with _signals_held():
            if os.path.lexists(final):
                # move the old target aside under a fresh name, put the new one in place, then drop the old one
                old = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".old", dir=final.parent))
                os.rmdir(old)
                os.replace(final, old)
                # what was moved aside must still be what was checked (nothing can write to it any more)
                if not (overwrite or _is_empty_dir(old) or owned_dir(old)):
                    os.replace(old, final)
                    raise OutputExistsError(f"{final}: changed while acl26 was writing; left as it is")
                try:
                    os.replace(tmp, final)
                except BaseException:
                    os.replace(old, final)  # put the old target back
                    raise
            else:
                os.replace(tmp, final)
        if old is not None:
            _remove(old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _json_default(obj: Any) -> Any:
    # numpy scalars and arrays, Paths, sets: the usual suspects in results dictionaries
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (Path, os.PathLike)):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
