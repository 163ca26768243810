"""The chapters of the book, built from the ``CHAPTER`` object of every ``acl26.papers.<id>``.

:data:`CHAPTERS` maps each chapter id to its :class:`~acl26.chapter.Chapter`, support pages first
(the shared models), then the papers, each kind in its chapters' ``order``; the runner and
``acl26 book`` execute them in that order. A chapter's package is imported only when it is asked
for: :func:`get` (``acl26 run <id>``) imports that one chapter, going over all of them (``acl26
list``, ``acl26 book``) imports all. Papers of the book that have no chapter yet are listed in
:data:`acl26.papers.PLANNED`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, MutableMapping

from acl26.chapter import KINDS, Chapter


def _names() -> list[str]:
    """The chapter packages under ``acl26.papers``, found without importing them."""
    import acl26.papers as pkg

    return sorted(info.name for info in pkgutil.iter_modules(pkg.__path__) if info.ispkg)


def _load(name: str) -> Chapter:
    mod = importlib.import_module(f"acl26.papers.{name}")
    chapter = getattr(mod, "CHAPTER", None)
    if not isinstance(chapter, Chapter):
        raise TypeError(f"acl26.papers.{name} must define CHAPTER = acl26.chapter.Chapter(...)")
    if chapter.id != name:
        raise ValueError(f"acl26.papers.{name}: CHAPTER.id is {chapter.id!r}, not the folder name")
    return chapter


class _Chapters(MutableMapping):
    """id -> Chapter, importing a chapter's package on first access; iteration is in run order."""

    def __init__(self):
        self._ids = _names()
        self._loaded: dict[str, Chapter] = {}

    def __contains__(self, key) -> bool:
        return key in self._loaded or key in self._ids

    def __getitem__(self, key: str) -> Chapter:
        if key not in self._loaded:
            if key not in self._ids:
                raise KeyError(key)
            self._loaded[key] = _load(key)
        return self._loaded[key]

    def __setitem__(self, key: str, chapter: Chapter) -> None:  # tests register a fake chapter
        if key not in self._ids:
            self._ids.append(key)
        self._loaded[key] = chapter

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._loaded.pop(key, None)
        self._ids.remove(key)

    def __iter__(self) -> Iterator[str]:
        chapters = [self[i] for i in list(self._ids)]
        chapters.sort(key=lambda c: (KINDS.index(c.kind), c.order, c.id))
        return iter([c.id for c in chapters])

    def __len__(self) -> int:
        return len(self._ids)

    def loaded(self) -> list[str]:
        """The ids whose package has been imported so far."""
        return sorted(self._loaded)


CHAPTERS: MutableMapping[str, Chapter] = _Chapters()


def canonical(chapter_id: str) -> str:
    """``chapter_id`` with dashes read as underscores (``my-paper`` -> ``my_paper``)."""
    return chapter_id.replace("-", "_")


def get(chapter_id: str) -> Chapter:
    cid = canonical(chapter_id)
    if cid not in CHAPTERS:
        raise KeyError(f"unknown paper {chapter_id!r}; known: {', '.join(sorted(_names()))}")
    return CHAPTERS[cid]


def ordered(ids: list[str] | None = None) -> list[Chapter]:
    """The chapters ``ids`` (default: all) in run order: support pages before papers."""
    if ids is None:
        return list(CHAPTERS.values())
    wanted = {get(i).id: get(i) for i in ids}
    return sorted(wanted.values(), key=lambda c: (KINDS.index(c.kind), c.order, c.id))


def used_by(asset: str) -> list[str]:
    """The chapters that declare ``asset``."""
    return [c.id for c in CHAPTERS.values() if asset in c.assets]
