"""acl26.papers: one subpackage per chapter of the book.

Each ``acl26.papers.<id>`` holds the method (its public API, re-exported from its ``__init__``),
the study (parameters, claims, experiments, ``record_claims``) and its speed or benchmark code,
and declares ``CHAPTER`` (:class:`acl26.chapter.Chapter`). The registry discovers them.
:data:`PLANNED` lists the papers of the book whose chapter is not built yet.
"""

#: (id, title, arXiv id) of the book's papers that have no chapter yet
PLANNED: tuple[tuple[str, str, str], ...] = ()
