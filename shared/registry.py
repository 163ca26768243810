"""The papers the book reproduces, one entry each (mergekit-style registry).

A paper is registered once its chapter exists: a notebook in ``notebooks/``, a study module in
``acl26`` holding its parameter spec (``SPEC``), claims (``CLAIMS``) and benchmarks
(``benchmarks()``, optional), and a TOC entry for its executed notebook. Support pages that the
chapters build on (the shared models) are registered the same way with ``kind="support"`` and run
first. The five papers of the book and where each stands are listed in :data:`PLANNED`; only
:data:`PAPERS` are built.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Paper:
    id: str
    title: str
    arxiv: str
    venue: str
    study: str  # module with SPEC, CLAIMS and benchmarks()
    #: "paper" for a reproduced paper; "support" for a shared page the chapters build on (models)
    kind: str = "paper"

    @property
    def notebook(self) -> Path:
        """The notebook, relative to the repository root."""
        return Path("notebooks") / f"{self.id}.ipynb"

    @property
    def toc_file(self) -> str:
        """The TOC entry of the executed notebook (relative to the book root, no suffix)."""
        return f"book/executed/{self.id}"

    def module(self):
        return importlib.import_module(self.study)

    @property
    def spec(self):
        return self.module().SPEC

    @property
    def claims(self):
        return self.module().CLAIMS


PAPERS: dict[str, Paper] = {
    p.id: p
    for p in [
        Paper("models", "Shared models: SmolLM2 offline and small LMs trained here", "", "",
              "acl26.models_study", kind="support"),
        Paper("sherry", "Sherry: Hardware-Efficient 1.25-Bit Ternary Quantization via Fine-grained Sparsification",
              "2601.07892", "ACL 2026 long 513", "acl26.sherry_study"),
        Paper("lopt", "LoPT: Lossless Parallel Tokenization Acceleration for Long Context Inference",
              "2511.04952", "ACL 2026 long 1529", "acl26.lopt_study"),
    ]
}

#: all five papers of the book, in book order; chapters not yet built are not in PAPERS
PLANNED = {
    "model-interpolation": "Revisiting Model Interpolation for Efficient Reasoning (arXiv 2510.10977)",
    "alloc-moe": "Alloc-MoE: Budget-Aware Expert Activation Allocation for Efficient MoE Inference (arXiv 2604.08133)",
    "mta": "MTA: Multi-Granular Trajectory Alignment for LLM Distillation (arXiv 2605.01374)",
    "sherry": "Sherry: Hardware-Efficient 1.25-Bit Ternary Quantization via Fine-grained Sparsification (arXiv 2601.07892)",
    "lopt": "LoPT: Lossless Parallel Tokenization Acceleration for Long Context Inference (arXiv 2511.04952)",
}


def get(paper_id: str) -> Paper:
    if paper_id not in PAPERS:
        raise KeyError(f"unknown paper {paper_id!r}; known: {', '.join(PAPERS)}")
    return PAPERS[paper_id]
