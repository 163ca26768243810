"""Revisiting Model Interpolation for Efficient Reasoning (ACL 2026, arXiv 2510.10977).

:mod:`.merge` interpolates an Instruct and a Thinking checkpoint (in memory or streamed over
safetensors files), measures their weight similarity, and runs the Task Arithmetic and TIES
baselines through mergekit. :mod:`.pair` makes the pair here from one parent, :mod:`.rollout`
samples k rollouts per problem. :mod:`.spec` holds the parameters and claims, :mod:`.study` the
sweep and the ablations, :mod:`.verdicts` the verdicts, :mod:`.bench` the merge benchmarks.
"""

from acl26.chapter import Chapter
from acl26.papers.model_interpolation import bench, spec, study, verdicts  # noqa: F401  (study: the sweep)
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
