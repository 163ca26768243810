"""Revisiting Model Interpolation for Efficient Reasoning (ACL 2026, arXiv 2510.10977).

:mod:`.spec` holds the parameters, the claims and the result rows' names. The method modules:
:mod:`.merge` interpolates an Instruct and a Thinking checkpoint (in memory or streamed over
safetensors files), measures their weight similarity, and runs the Task Arithmetic and TIES
baselines through mergekit; :mod:`.ablation` builds the paper's ablation merges; :mod:`.stages`
reads the transition band off the Think #R curve and places the λ values by it; :mod:`.pair` makes
the pair here from one parent; :mod:`.rollout` samples k rollouts per problem. :mod:`.study` runs the
sweep, the baselines and the ablations; :mod:`.tables` turns its results into rows, intervals and the
saved metrics; :mod:`.verdicts` decides the claims; :mod:`.bench` the merge benchmarks.
"""

from acl26.chapter import Chapter
from acl26.papers.model_interpolation import bench, spec, study, tables, verdicts  # noqa: F401  (study, tables: the notebook's)
from acl26.papers.model_interpolation.merge import (interpolate, interpolate_files, layer_of, module_of, similarity,
                                                    task_arithmetic, ties)

CHAPTER = Chapter(
    id="model_interpolation",
    title="Revisiting Model Interpolation for Efficient Reasoning",
    arxiv="2510.10977",
    venue="ACL 2026",
    cite="interp2026",
    spec=spec.SPEC,
    claims=tuple(spec.CLAIMS),
    record_claims=verdicts.record_claims,
    assets=("smollm2", "gsm8k"),
    benchmarks=bench.benchmarks,
    order=40,
)

__all__ = ["CHAPTER", "interpolate", "interpolate_files", "layer_of", "module_of", "similarity", "task_arithmetic",
           "ties"]
