"""``acl26 sync``: the parts of the notebooks and the book that the registry decides, written from it.

* Every chapter notebook's first code cell (tagged ``parameters``) is
  :meth:`acl26.params.ParamSpec.notebook_cell`: the parameter names with their help text (no
  profile values, so changing a profile changes no notebook).
* ``book/_toc.yml`` lists the support pages under "Foundations", the papers under "Chapters", and
  the book's own pages after them.

``acl26 sync --check`` writes nothing and fails when either is stale; a test runs it. Notebooks are
read and written with ``nbformat`` (cell ids kept), so a synced notebook differs only in that cell.
"""

from __future__ import annotations

from pathlib import Path

from acl26 import io, paths, registry

#: the book's own pages, after the chapters
BOOK_PAGES = ("book/claims", "book/performance", "book/assets", "book/environment")


class SyncError(RuntimeError):
    """A notebook or the TOC is out of step with the registry (``--check``), or cannot be synced."""


def toc_text() -> str:
    """The text of ``book/_toc.yml``."""
    lines = ["# Written by `acl26 sync` from the registry (acl26.papers.<id>.CHAPTER); do not edit by hand.",
             "format: jb-book", "root: book/intro", "parts:"]
    for caption, kind in (("Foundations", "support"), ("Chapters", "paper")):
        chapters = [c for c in registry.CHAPTERS.values() if c.kind == kind]
        if chapters:
            lines += [f"  - caption: {caption}", "    chapters:"] + [f"      - file: {c.toc_file}" for c in chapters]
    lines += ["  - caption: The book as a whole", "    chapters:"] + [f"      - file: {p}" for p in BOOK_PAGES]
    return "\n".join(lines) + "\n"


def _synced_notebook(path: Path, cell_text: str) -> str | None:
    """The notebook's new JSON text if its parameters cell differs from ``cell_text``, else None."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code or "parameters" not in code[0].metadata.get("tags", []):
        raise SyncError(f"{path}: the first code cell must be tagged 'parameters'")
    cell = code[0]
    if cell.source == cell_text:
        return None
    cell.source = cell_text
    return nbformat.writes(nb) + "\n"


def sync(root: str | Path | None = None, *, check: bool = False) -> list[Path]:
    """Write what is stale (or, with ``check``, only report it); returns the stale files."""
    root = Path(root) if root is not None else paths.repo_root()
    if root is None:
        raise SyncError("run `acl26 sync` from the acl26-repro checkout")
    stale: list[tuple[Path, str]] = []
    for chapter in registry.CHAPTERS.values():
        path = root / chapter.notebook
        if not path.is_file():
            raise SyncError(f"{chapter.id}: notebook {chapter.notebook} is missing")
        text = _synced_notebook(path, chapter.spec.notebook_cell())
        if text is not None:
            stale.append((path, text))
    toc = root / "book" / "_toc.yml"
    want = toc_text()
    if not toc.is_file() or toc.read_text(encoding="utf-8") != want:
        stale.append((toc, want))
    if not check:
        for path, text in stale:  # rewriting these (the parameters cell, the TOC) is what sync is asked to do
            io.write_text(path, text, overwrite=True)
    return [p for p, _ in stale]
