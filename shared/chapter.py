"""One object per chapter (mergekit's registry is the model): everything the book needs to know.

Each subpackage ``acl26.papers.<id>`` declares ``CHAPTER = Chapter(...)``: its id and title, the
paper's arXiv id and venue, the parameter spec, the claims, the assets it uses, its benchmarks,
and the function that turns the study's results into the claims ledger's verdicts. The registry
(:mod:`acl26.registry`), the CLI, the runner, ``acl26 sync`` (parameters cells and the TOC), the
book's pages and the asset manifest's "used by" column are all built from these objects, so
nothing is typed twice, and the shared core never names a chapter: what one chapter needs of the
core (a one-time build before its notebook, a fragment of a book page, the kernels it runs) is a
hook here, which the core calls for every chapter alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acl26.claims import Claim, Ledger, check_controls
from acl26.params import ParamSpec

KINDS = ("support", "paper")


@dataclass(frozen=True)
class Chapter:
    id: str
    title: str
    spec: ParamSpec
    claims: tuple[Claim, ...]
    #: ``record_claims(ledger, results)``: decides every claim from the study's results (tested code)
    record_claims: Callable[[Ledger, dict], None]
    #: "support" (a page the chapters build on, run first) or "paper"
    kind: str = "paper"
    arxiv: str = ""
    venue: str = ""
    #: the BibTeX key of the paper in book/references.bib
    cite: str = ""
    #: every asset the chapter's notebook needs, directly or through the shared models
    assets: tuple[str, ...] = ()
    #: ``benchmarks(quick) -> dict`` for ``acl26 bench`` and the Performance page, or None
    benchmarks: Callable[[bool], dict] | None = None
    #: position in the book within its kind (smaller first)
    order: int = 0
    #: ``prepare(force) -> str | None``: one-time setup before the notebook runs (``acl26 prepare``,
    #: ``acl26 book``), e.g. building a peer's tools into the cache. Returns what it did (None: it was
    #: already done); raises :class:`acl26.errors.RunError` when it cannot be done here, and the book
    #: then goes on (the chapter reports what needed it as not tested)
    prepare: Callable[[bool], str | None] | None = None
    #: fragments of the book's pages this chapter writes: ``{file name in book/_generated: fn(results
    #: or None) -> MyST text}``; a page ``{include}``s the file
    fragments: dict[str, Callable[[dict | None], str]] = field(default_factory=dict, compare=False)
    #: the :mod:`acl26.kernels` modules the chapter runs (by module name): its cache key covers these
    #: and no other kernel, so editing one kernel re-runs only the chapters that use it
    kernels: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"chapter {self.id!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.spec.paper != self.id:
            raise ValueError(f"chapter {self.id!r}: its parameter spec is for {self.spec.paper!r}")
        ids = [c.id for c in self.claims]
        if len(set(ids)) != len(ids):
            raise ValueError(f"chapter {self.id!r}: duplicate claim ids {ids}")
        check_controls(list(self.claims))
        if self.kind == "paper" and not self.arxiv:
            raise ValueError(f"chapter {self.id!r}: a paper chapter needs its arXiv id")
        for name in self.fragments:
            if "/" in name or not name.endswith(".md"):
                raise ValueError(f"chapter {self.id!r}: fragment {name!r} must be a file name ending in .md")

    @property
    def short_title(self) -> str:
        """The title before its colon (the paper's name), for tables and headings."""
        return self.title.split(":")[0]

    @property
    def notebook(self) -> Path:
        """The notebook, relative to the repository root."""
        return Path("notebooks") / f"{self.id}.ipynb"

    @property
    def toc_file(self) -> str:
        """The TOC entry of the executed notebook (relative to the book root, no suffix)."""
        return f"book/executed/{self.id}"
