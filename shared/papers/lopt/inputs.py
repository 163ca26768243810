"""LoPT chapter (ACL 2026, arXiv 2511.04952): the texts the speed study and the benchmarks encode.

:func:`text_of_length` cuts or repeats a corpus text to the length being timed; :mod:`.study` and
:mod:`.bench` both call it, so that the chapter and ``acl26 bench lopt`` time the same inputs.
"""

from __future__ import annotations


def text_of_length(base: str, n: int) -> str:
    """``base`` cut or repeated to exactly ``n`` characters."""
    if n <= len(base):
        return base[:n]
    reps = -(-n // len(base))
    return (base * reps)[:n]
