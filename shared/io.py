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
#: inside a staging folder while acl26 writes into it: held locked (``flock``) by the writing process,
#: so a staging folder whose marker nobody holds was left by a killed run (:func:`reap_stale`)
STAGING_MARKER = ".acl26-staging"
#: the lock of a folder's ledger where the folder itself cannot be locked (NFS; see :func:`_folder_lock`)
LEDGER_LOCK = ".acl26-files.lock"
_OURS = (DIR_MARKER, FILE_LEDGER, STAGING_MARKER, LEDGER_LOCK)


class OutputExistsError(RunError, ValueError):
    """A target exists that acl26 did not write (or that is one of the writer's inputs): a bad output
    path, so also a ``ValueError``; the CLI shows it as one line."""


# ---- ownership


#: the largest bookkeeping file (:data:`FILE_LEDGER`, :data:`DIR_MARKER`) read: some 60 bytes a file
MAX_BOOKKEEPING = 64 << 20


def _bookkeeping(path: Path) -> dict:
    """The JSON object in acl26's bookkeeping file ``path``, or ``{}`` where it is missing or is not one: a
    link, a FIFO, a device, a file too large or not JSON counts as no record (so nothing is taken for
    acl26's on its word), and is never followed, waited on or read past :data:`MAX_BOOKKEEPING`."""
    try:
        data = read_json(path, max_bytes=MAX_BOOKKEEPING, follow_symlinks=False)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_ledger(folder: Path) -> dict:
    return _bookkeeping(folder / FILE_LEDGER)


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _locked(path: Path, flags: int) -> int | None:
    """A descriptor of ``path`` (opened with ``flags``) holding an exclusive ``flock``; None where the file
    system takes no locks; ``OSError`` EBADF where it takes them only on a file open for writing (NFS)."""
    import errno
    import fcntl

    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o666 & ~_umask())
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            return None
        raise


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the folder itself for the block, so that two processes (or threads)
    recording files in one folder's ledger take turns instead of losing each other's entries. Where a
    folder cannot be locked (NFS emulates ``flock`` with POSIX locks, which need a file open for writing:
    EBADF), the lock is taken on :data:`LEDGER_LOCK` in it instead; where the file system takes no locks at
    all, or the folder cannot be opened, the block runs unlocked (and its write fails on its own)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    import errno

    try:
        fd = _locked(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        fd = None
        if exc.errno == errno.EBADF:
            with contextlib.suppress(OSError):
                fd = _locked(folder / LEDGER_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _record(path: Path, signature: list[int] | None) -> None:
    """Set (or, with None, drop) ``path``'s entry in its folder's ledger; written atomically, under the
    folder's lock (read, change and write are one step for every writer in that folder)."""
    folder = path.parent
    with _folder_lock(folder):
        ledger = _read_ledger(folder)
        if signature is None:
            if path.name not in ledger:
                return
            ledger.pop(path.name)
        else:
            ledger[path.name] = signature
        fd, tmp = tempfile.mkstemp(prefix=f"{FILE_LEDGER}.", suffix=".tmp", dir=folder)
        try:
            with _named(folder / FILE_LEDGER):
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(ledger, fh, sort_keys=True)
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, folder / FILE_LEDGER)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


@contextlib.contextmanager
def _named(path: Path) -> Iterator[None]:
    """Give an ``OSError`` raised in the block without a file name (``write`` on a full disk: ENOSPC,
    EDQUOT, EIO) the name ``path``, so its one-line message says where."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise type(exc)(exc.errno, f"{exc.strerror or exc} (while writing it)", os.fspath(path)) from exc


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
            if rel in _OURS or name in (FILE_LEDGER, STAGING_MARKER, LEDGER_LOCK):
                continue
            out[rel] = _signature(p.lstat())
    return out


def owned_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder acl26 wrote (:func:`atomic_dir`) holding exactly what it wrote."""
    path = Path(path)
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        marker = _bookkeeping(path / DIR_MARKER)
        return "files" in marker and marker["files"] == _listing(path)
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
        with _named(final):
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
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=json_default) + "\n",
                      overwrite=overwrite)


#: the largest file :func:`read_bytes` (and so :func:`read_json`) reads unless told otherwise
MAX_READ = 256 << 20


def read_bytes(path: str | os.PathLike, *, max_bytes: int = MAX_READ, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path``, refused before reading when it is anything else (a FIFO, a
    device such as ``/dev/zero``, a folder; with ``follow_symlinks=False`` a symbolic link too) or larger
    than ``max_bytes``: an :class:`OSError` naming the path. Never blocks on a FIFO: it is opened
    non-blocking and refused."""
    import errno

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symbolic link, which is not read here", os.fspath(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            what = "a folder" if _stat.S_ISDIR(st.st_mode) else "a FIFO" if _stat.S_ISFIFO(st.st_mode) else \
                "a device or socket"
            raise OSError(errno.EINVAL, f"not a regular file ({what}); refusing to read it", os.fspath(path))
        if st.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"{st.st_size} bytes, more than the {max_bytes} read here", os.fspath(path))
        chunks, left = [], max_bytes + 1
        while left > 0:  # a file that grows while it is read stops at the cap too
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise OSError(errno.EFBIG, f"more than the {max_bytes} bytes read here", os.fspath(path))
        return data
    finally:
        os.close(fd)


def loads_json(text: str | bytes) -> Any:
    """``json.loads``, with nesting too deep for the parser a ``ValueError`` like any other bad JSON
    (Python's parser raises ``RecursionError`` at about a thousand levels)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def read_json(path: str | os.PathLike, *, max_bytes: int = MAX_READ, follow_symlinks: bool = True) -> Any:
    """The JSON in the regular file ``path`` (see :func:`read_bytes`); bad UTF-8, bad JSON and nesting
    too deep raise ``ValueError``, anything else about the file ``OSError`` naming it."""
    data = read_bytes(path, max_bytes=max_bytes, follow_symlinks=follow_symlinks)
    return loads_json(data.decode("utf-8"))


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
        for name in (FILE_LEDGER, LEDGER_LOCK):
            with contextlib.suppress(FileNotFoundError):
                (folder / name).unlink()
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


def _lock_nowait(fd: int) -> bool | None:
    """Take ``flock(LOCK_EX | LOCK_NB)`` on ``fd``: True when taken, False when another holds it, None where
    the file system takes no locks (nothing can be told from it)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _new_staging(parent: Path, prefix: str, suffix: str) -> tuple[Path, int]:
    """A fresh folder in ``parent`` (``mkdtemp``) holding :data:`STAGING_MARKER`, whose lock the caller now
    holds through the returned descriptor (close it when the folder is gone or renamed)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
    fd = None
    try:
        # locked under another name first, then renamed (the lock goes with the file): a reaper never sees
        # this folder's marker unlocked, not even between its creation and the lock
        fd = os.open(tmp / f"{STAGING_MARKER}.new", os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                     0o600)
        if _lock_nowait(fd) is False:  # pragma: no cover - nobody else knows this new file
            raise OSError(f"{tmp}: its staging marker is locked by another process")
        os.replace(tmp / f"{STAGING_MARKER}.new", tmp / STAGING_MARKER)
    except BaseException:
        if fd is not None:
            os.close(fd)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp, fd


#: the staging folders acl26 makes: :func:`atomic_dir`'s ``.<name>.<8>.tmp`` and the target it moves aside,
#: ``.<name>.<8>.old``, and :func:`staging`'s ``.<name>-<8>.run`` (``<8>``: ``mkdtemp``'s random part)
_STAGING_NAME = r"\.(?P<name>.+)(?P<sep>[.-])(?P<rand>[a-z0-9_]{8})\.(?P<kind>tmp|old|run)"


def _abandoned(folder: Path) -> bool:
    """Whether ``folder`` is a staging folder of acl26's (it holds the marker) that no live process holds."""
    flags = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:  # open for writing where it may be: NFS locks only such files
        fd = os.open(folder / STAGING_MARKER, os.O_RDWR | flags)
    except OSError:
        try:
            fd = os.open(folder / STAGING_MARKER, os.O_RDONLY | flags)
        except OSError:
            return False
    if not _stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return False
    try:
        return bool(_lock_nowait(fd))
    finally:
        os.close(fd)


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def reap_stale(parent: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove the staging folders in ``parent`` that a killed acl26 process left behind (for the target
    ``name`` only, or for every target); returns what was removed or put back.

    Only acl26's staging folders are touched: a folder named as :func:`atomic_dir` and :func:`staging`
    name theirs (never a symbolic link), holding :data:`STAGING_MARKER` that no process holds locked. A
    target that :func:`atomic_dir` had moved aside (``.old``) when it was killed, before the new one was
    in place, is put back where it was; once the new one is in place (still holding its abandoned marker),
    the old one is removed. A folder named like an ``.old`` that neither vouches for is left alone."""
    import re

    parent = Path(parent)
    pattern = re.compile(_STAGING_NAME)
    done = []
    try:
        entries = sorted(os.scandir(parent), key=lambda e: e.name)
    except OSError:
        return done
    found = [(m, Path(e.path)) for e in entries for m in [pattern.fullmatch(e.name)]
             if m and (name is None or m["name"] == name) and e.is_dir(follow_symlinks=False)
             and (m["kind"] == "run") == (m["sep"] == "-")]
    for m, path in sorted(found, key=lambda f: f[0]["kind"] != "old"):  # an .old before its own .tmp goes
        if m["kind"] in ("tmp", "run"):
            if _abandoned(path):
                shutil.rmtree(path, ignore_errors=True)
                done.append(path)
            continue
        # an .old is acl26's only when its own staging folder (the same random part) or the target it was
        # replaced by still holds an abandoned marker; any other folder named so is left alone
        pair, final = parent / f".{m['name']}.{m['rand']}.tmp", parent / m["name"]
        if _real_dir(pair) and _abandoned(pair):  # killed between the two renames: the new one never landed
            if not os.path.lexists(final):
                with contextlib.suppress(OSError):
                    os.replace(path, final)  # the old target goes back
                    done.append(final)
                    continue
            shutil.rmtree(path, ignore_errors=True)
            done.append(path)
        elif _real_dir(final) and _abandoned(final):  # killed after the new one landed, before the old one went
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                (final / STAGING_MARKER).unlink()
            done.append(path)
    return done


@contextlib.contextmanager
def staging(parent: str | os.PathLike, name: str) -> Iterator[Path]:
    """A fresh private folder ``.<name>-<random>.run`` in ``parent`` for the block, removed after it
    (whatever happens). While the block runs the folder is marked and locked as acl26's, so if the
    process is killed (SIGKILL), the next :func:`staging` for ``name`` there removes it
    (:func:`reap_stale`)."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    reap_stale(parent, name)
    tmp, fd = _new_staging(parent, f".{name}-", ".run")
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(fd)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, overwrite: bool = False,
               inputs: Iterable[str | os.PathLike] = (), name: str = "") -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; rename it to ``path`` only on success.

    An existing ``path`` is replaced only when it is empty or a folder acl26 wrote that holds exactly
    what it wrote, or with ``overwrite``; a ``path`` that is or holds one of ``inputs`` is always
    refused. The check runs before the block (fail fast) and again before the rename. On failure
    the temporary folder is removed and ``path`` is untouched. Staging folders of ``path`` that a
    killed process left are removed first (:func:`reap_stale`).
    """
    inputs = tuple(inputs)
    final = check_target(path, kind="folder", overwrite=overwrite, inputs=inputs, name=name)
    final.parent.mkdir(parents=True, exist_ok=True)
    reap_stale(final.parent, final.name)
    final = check_target(path, kind="folder", overwrite=overwrite, inputs=inputs, name=name)  # one may be back
    tmp, fd = _new_staging(final.parent, f".{final.name}.", ".tmp")
    try:
        with _named(final):
            yield tmp
            _write_marker(tmp)  # the staging marker stays (locked) until the folder is in place
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the user's umask decides
        check_target(final, kind="folder", overwrite=overwrite, inputs=inputs, name=name)
        old = None
        with _signals_held():
            if os.path.lexists(final):
                # move the old target aside under the staging folder's name (.old: reap_stale puts it back
                # if this process dies before the new one is in place), put the new one in place, drop the old
                old = tmp.with_name(tmp.name[: -len(".tmp")] + ".old")
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
            _remove(old)  # before the marker goes: a reaper removes an .old only while the new target holds it
        with contextlib.suppress(FileNotFoundError):
            (final / STAGING_MARKER).unlink()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        os.close(fd)


def json_default(obj: Any) -> Any:
    # numpy scalars and arrays, Paths, sets: the usual suspects in results dictionaries
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (Path, os.PathLike)):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
