"""Alloc-MoE: budget-aware expert activation allocation (ACL 2026, arXiv 2604.08133).

:func:`moefy` (:mod:`.moefy`) splits a dense LLaMA-family model's MLPs into experts (MoEfication).
:mod:`.routing` routes any transformers MoE (Qwen2/3-MoE, OLMoE, Mixtral, DeepSeek-V2) under a
budget: per-layer top-k, top-p, NAEE-style skipping and Alloc-T (:func:`alloc_t_mask`), counting
the activated pairs. :mod:`.allocation` is how each method spends a budget: scoring under a policy,
Alloc-L's isolated sensitivity profile and its DP (over :func:`acl26.kernels.dp_alloc.allocate`), the
LExI-style costs and top-p's and skipping's thresholds matched to a budget. :mod:`.speed` times an
MoE layer at DeepSeek-V2-Lite's shapes, :mod:`.bench` the DP. The chapter itself: :mod:`.spec` (its
parameters and claims), :mod:`.study` (its experiments; ``study.run_experiments``), :mod:`.tables`
(rows, intervals and the saved metrics, from the results) and :mod:`.verdicts` (``record_claims``,
the controls first).
"""

from acl26 import zoo
from acl26.chapter import Chapter
from acl26.papers.alloc_moe import bench, spec, verdicts
from acl26.papers.alloc_moe.moefy import moefy
from acl26.papers.alloc_moe.routing import (Counter, Policy, alloc_t, alloc_t_mask, budgeted, moe_blocks, native_k,
                                            skip, topk, topp)

CHAPTER = Chapter(
    id="alloc_moe",
    title="Alloc-MoE: Budget-Aware Expert Activation Allocation for Efficient Mixture-of-Experts Inference",
    arxiv="2604.08133",
    venue="ACL 2026",
    cite="allocmoe2026",
    spec=spec.SPEC,
    claims=tuple(spec.CLAIMS),
    record_claims=verdicts.record_claims,
    assets=zoo.ASSETS,
    benchmarks=bench.benchmarks,
    order=30,
    kernels=("dp_alloc",),
)

__all__ = ["CHAPTER", "Counter", "Policy", "alloc_t", "alloc_t_mask", "budgeted", "moe_blocks", "moefy", "native_k",
           "skip", "topk", "topp"]
