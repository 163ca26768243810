"""The error a run reports in one line (a notebook failed, llama.cpp is missing, the book cannot build).

Its own module so that chapter code can raise it without importing :mod:`acl26.runner`, which
imports the registry of chapters (a cycle while a chapter package is being imported).
"""


class RunError(RuntimeError):
    """A failure the CLI shows as a one-line error, without a traceback."""


class CacheError(RunError):
    """A cache entry under ``$ACL26_CACHE`` that cannot be read (truncated, garbage, half-deleted).

    Its message is one line naming the file and the command that repairs the entry (see
    :func:`cache_entry_error`); the CLI shows it like any :class:`RunError`. Nothing is deleted
    for the user: the entry is rebuilt by the next run once it is removed.
    """


def one_line(exc: BaseException, limit: int = 200) -> str:
    """``exc`` as ``Type: first line of its message``, cut to ``limit`` characters (for one-line errors)."""
    text = str(exc).strip().splitlines()
    msg = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def cache_entry_error(entry, cause: BaseException, *, file=None, what: str = "cache entry") -> CacheError:
    """The one-line :class:`CacheError` for the rebuildable cache entry ``entry`` (a folder) that failed
    to load with ``cause``; ``file`` is the file inside it that failed, when known."""
    import shlex

    return CacheError(f"corrupt {what} {file or entry} ({one_line(cause)}); repair: `rm -r {shlex.quote(str(entry))}` "
                      f"and run again, which rebuilds it")
