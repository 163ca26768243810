"""The chapters of the book, built from the ``CHAPTER`` object of every ``acl26.papers.<id>``.

:data:`CHAPTERS` lists the support pages first (the shared models), then the papers, each kind in
its chapters' ``order``; the runner and ``acl26 book`` execute them in that order. Papers of the
book that have no chapter yet are listed in :data:`acl26.papers.PLANNED`.
"""

from __future__ import annotations

import importlib
import pkgutil

from acl26.chapter import KINDS, Chapter

def _discover() -> dict[str, Chapter]:
    import acl26.papers as pkg

    found = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.ispkg:
            continue
        mod = importlib.import_module(f"acl26.papers.{info.name}")
        chapter = getattr(mod, "CHAPTER", None)
        if not isinstance(chapter, Chapter):
            raise TypeError(f"acl26.papers.{info.name} must define CHAPTER = acl26.chapter.Chapter(...)")
        if chapter.id != info.name:
            raise ValueError(f"acl26.papers.{info.name}: CHAPTER.id is {chapter.id!r}, not the folder name")
        found.append(chapter)
    found.sort(key=lambda c: (KINDS.index(c.kind), c.order, c.id))
    return {c.id: c for c in found}


CHAPTERS: dict[str, Chapter] = _discover()
#: the old name, kept for readers of earlier notes
PAPERS = CHAPTERS


def canonical(chapter_id: str) -> str:
    """``chapter_id`` with dashes read as underscores (``alloc-moe`` -> ``alloc_moe``)."""
    return chapter_id.replace("-", "_")


def get(chapter_id: str) -> Chapter:
    cid = canonical(chapter_id)
    if cid not in CHAPTERS:
        raise KeyError(f"unknown paper {chapter_id!r}; known: {', '.join(CHAPTERS)}")
    return CHAPTERS[cid]


def ordered(ids: list[str] | None = None) -> list[Chapter]:
    """The chapters ``ids`` (default: all) in run order: support pages before papers."""
    if ids is None:
        return list(CHAPTERS.values())
    wanted = {get(i).id for i in ids}
    return [c for c in CHAPTERS.values() if c.id in wanted]


def used_by(asset: str) -> list[str]:
    """The chapters that declare ``asset``."""
    return [c.id for c in CHAPTERS.values() if asset in c.assets]
