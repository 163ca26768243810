"""LoPT: Lossless Parallel Tokenization (ACL 2026, arXiv 2511.04952).

The documented API::

    from acl26.papers import lopt
    ids = lopt.encode(tokenizer, text)   # identical to tokenizer.encode(text, add_special_tokens=False)

:mod:`.method` is the method, :mod:`.baselines` the lossy schemes it is compared with,
:mod:`.spec` the chapter's parameters and claims, :mod:`.study` its experiments (:mod:`.inputs` the texts
they and the benchmarks encode), :mod:`.tables` their results as rows, intervals and metrics, :mod:`.verdicts`
its verdicts, :mod:`.bench` its benchmarks.
"""

from acl26.chapter import Chapter
from acl26.papers.lopt import bench as _bench
from acl26.papers.lopt import spec, study, tables, verdicts  # noqa: F401  (the experiments, their tables)
from acl26.papers.lopt.baselines import encode_delimiter, encode_naive, encode_overlap_ids
from acl26.papers.lopt.method import (DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS, POOLS, Stats, backend, chunk_spans,
                                      default_workers, encode, sequential_ids, validate_settings)

CHAPTER = Chapter(
    id="lopt",
    title="LoPT: Lossless Parallel Tokenization Acceleration for Long Context Inference",
    arxiv="2511.04952",
    venue="ACL 2026 long 1529",
    cite="lopt2026",
    spec=spec.SPEC,
    claims=tuple(spec.CLAIMS),
    record_claims=verdicts.record_claims,
    assets=("tok-llama3", "tok-qwen3", "tok-mistral", "tok-gpt2", "llamacpp-vocabs", "smollm2", "sotu", "moby-dick",
            "shakespeare"),
    benchmarks=_bench.benchmarks,
    order=20,
    kernels=("tokmerge",),
)

__all__ = ["CHAPTER", "DEFAULT_CHUNK_CHARS", "DEFAULT_OVERLAP_CHARS", "POOLS", "Stats", "backend", "chunk_spans",
           "default_workers", "encode", "encode_delimiter", "encode_naive", "encode_overlap_ids", "sequential_ids",
           "validate_settings"]
