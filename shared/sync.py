"""``acl26 sync``: the parts of the notebooks and the book that the registry decides, written from it.

* Every chapter notebook's first code cell (tagged ``parameters``) is
  :meth:`acl26.params.ParamSpec.notebook_cell`: the parameter names with their help text (no
  profile values, so changing a profile changes no notebook).
* The cell after each chapter notebook's title includes its folded "Run this yourself" box
  (:func:`box_cell`; ``acl26 book`` writes the box from the run).
* ``book/_toc.yml`` lists the support pages under "Foundations", the papers under "Chapters", and
  the book's own pages after them.

``acl26 sync --check`` writes nothing and fails when either is stale; a test runs it. Notebooks are
read and written with ``nbformat`` (cell ids kept), so a synced notebook differs only in that cell.
A notebook that is not one (not UTF-8, not JSON, not a notebook object, invalid against nbformat's
schema) stops the command with one line naming it (:class:`SyncError`); nothing is written.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from acl26 import io, paths, registry
from acl26.errors import one_line

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


def box_cell(chapter_id: str) -> str:
    """The markdown cell after a chapter's title: its folded "Run this yourself" box, which ``acl26 book``
    generates from the run (:func:`acl26.provenance.run_box`) into ``book/_generated``."""
    from acl26 import provenance

    return f"```{{include}} ../_generated/{provenance.box_name(chapter_id)}\n```"


def _read_notebook(path: Path):
    """The notebook at ``path`` (nbformat 4, validated against nbformat's schema); :class:`SyncError`
    naming it when it is not UTF-8 JSON, not a notebook object, or not a valid notebook."""
    import nbformat

    try:
        text = io.read_bytes(path).decode("utf-8")  # a regular file (a FIFO or a device is refused, named)
        data = io.loads_json(text)
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, nested too deep
        raise SyncError(f"{path}: not a notebook, not UTF-8 JSON ({one_line(exc)})") from None
    if not isinstance(data, dict):
        raise SyncError(f"{path}: not a notebook, a JSON {type(data).__name__} instead of an object")
    # nbformat meets a damaged notebook with whatever error its code hits (AttributeError, TypeError,
    # KeyError, its own ValidationError, RecursionError in the schema check): each is the file's fault here
    with warnings.catch_warnings(record=True) as caught:  # nbformat's warnings: shown only for a notebook that reads
        try:
            nb = nbformat.convert(nbformat.reader.reads(text), 4)
            nbformat.validate(nb)
        except Exception as exc:  # noqa: BLE001 - see above; the file is untrusted input
            raise SyncError(f"{path}: not a valid notebook ({one_line(exc)})") from None
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return nb


def _synced_notebook(path: Path, cell_text: str, box: str) -> str | None:
    """The notebook's new JSON text if its parameters cell differs from ``cell_text`` or the cell after its
    title is not ``box``, else None."""
    import nbformat

    nb = _read_notebook(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code or "parameters" not in code[0].metadata.get("tags", []):
        raise SyncError(f"{path}: the first code cell must be tagged 'parameters'")
    if not nb.cells or nb.cells[0].cell_type != "markdown":
        raise SyncError(f"{path}: the first cell must be the chapter's title (markdown)")
    cell, changed = code[0], False
    if cell.source != cell_text:
        cell.source, changed = cell_text, True
    second = nb.cells[1] if len(nb.cells) > 1 else None
    if second is None or second.cell_type != "markdown" or "../_generated/run-" not in second.source:
        nb.cells.insert(1, nbformat.v4.new_markdown_cell(box))
        changed = True
    elif second.source != box:
        second.source, changed = box, True
    return nbformat.writes(nb) + "\n" if changed else None


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
        text = _synced_notebook(path, chapter.spec.notebook_cell(), box_cell(chapter.id))
        if text is not None:
            stale.append((path, text))
    toc = root / "book" / "_toc.yml"
    want = toc_text()
    if not toc.is_file() or toc.read_bytes() != want.encode("utf-8"):  # not UTF-8: stale like any other text
        stale.append((toc, want))
    if not check:
        for path, text in stale:  # rewriting these (the parameters cell, the TOC) is what sync is asked to do
            io.write_text(path, text, overwrite=True)
    return [p for p, _ in stale]
