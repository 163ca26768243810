"""The opening cell every chapter notebook shares, as one call (folded away in the book).

``P, ledger = acl26.notebook.setup("<id>", globals())`` validates the notebook's parameters (a bad
one stops the notebook before any work, with a message naming it), applies the book's plot and
table settings, silences the warnings we know to be noise, and opens the chapter's claims ledger.
Only the warnings listed in :data:`NOISE` are silenced, each by category and module: anything
else still shows.
"""

from __future__ import annotations

import warnings

from acl26 import claims, plots, registry

#: (category name, module regex, message regex, why it is noise); matched by ``warnings.filterwarnings``.
#: Only warnings seen in the book's own runs are listed.
NOISE: tuple[tuple[str, str, str, str], ...] = (
    ("tqdm.TqdmWarning", r"tqdm\.auto", r"IProgress not found",
     "tqdm.auto (imported by transformers and datasets) finds no notebook widgets; its bars fall back to text"),
)


def _category(name: str) -> type[Warning]:
    import importlib

    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module or "builtins"), attr)


def quiet_known_noise() -> None:
    """Install the :data:`NOISE` filters (and nothing broader)."""
    for category, module, message, _ in NOISE:
        warnings.filterwarnings("ignore", message=message, category=_category(category), module=module)


def setup(chapter_id: str, namespace: dict) -> tuple[dict, claims.Ledger]:
    """Validate the parameters in ``namespace`` and open the chapter's ledger; see the module docstring."""
    chapter = registry.get(chapter_id)
    params = chapter.spec.from_namespace(namespace)
    quiet_known_noise()
    plots.setup()
    ledger = claims.Ledger(chapter.id, params["profile"], list(chapter.claims), params=params,
                           record_claims=chapter.record_claims)
    print(f"{chapter.short_title}, profile {params['profile']!r}")
    return params, ledger
