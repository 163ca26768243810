"""Where the book keeps things: the asset/model cache and the executed-output folder.

Two environment variables steer everything:

* ``ACL26_CACHE`` -- downloaded assets, converted models, trained checkpoints, numba's cache.
  Default: ``$XDG_CACHE_HOME/acl26`` or ``~/.cache/acl26``.
* ``ACL26_OUT`` -- where notebooks write their results JSON and figures. The command line sets it
  to the book's executed folder; a notebook opened by hand writes under the cache.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The folder (relative to the repository root) that holds executed notebooks and their results.
BOOK_EXECUTED = Path("book") / "executed"


def cache_root() -> Path:
    """The cache root, without creating it (importing the package creates no folder)."""
    env = os.environ.get("ACL26_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "acl26"


def cache_dir() -> Path:
    """The cache root, created on first use (by a writer).

    A cache that cannot be created raises ``OSError`` naming the folder and ``ACL26_CACHE``."""
    root = cache_root()
    _make(root, "ACL26_CACHE")
    return root


def writable_cache() -> Path:
    """The cache root, created, after checking that a file can be written in it (raises a one-line
    ``OSError`` naming the folder and ``ACL26_CACHE`` otherwise): commands call it before long work."""
    import tempfile

    root = cache_dir()
    try:
        tempfile.TemporaryFile(dir=root).close()
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write in the cache ({exc.strerror}); set ACL26_CACHE to a writable folder",
                      str(root)) from None
    return root


def _make(folder: Path, variable: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot create the folder ({exc.strerror}); set {variable} to a writable folder",
                      str(folder)) from None


def out_dir() -> Path:
    """The output root for results JSON and figures (see module docstring), created on use."""
    env = os.environ.get("ACL26_OUT")
    root = Path(env).expanduser() if env else cache_dir() / "out"
    _make(root, "ACL26_OUT" if env else "ACL26_CACHE")
    return root


def results_dir() -> Path:
    path = out_dir() / "results"
    path.mkdir(parents=True, exist_ok=True)
    return path


def repo_root(start: Path | None = None) -> Path | None:
    """The acl26-repro checkout containing ``start`` (default: cwd), or None outside one."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and 'name = "acl26-repro"' in pyproject.read_text(encoding="utf-8"):
            return folder
    return None
