"""The error a run reports in one line (a notebook failed, llama.cpp is missing, the book cannot build).

Its own module so that chapter code can raise it without importing :mod:`acl26.runner`, which
imports the registry of chapters (a cycle while a chapter package is being imported).
"""


class RunError(RuntimeError):
    """A failure the CLI shows as a one-line error, without a traceback."""
