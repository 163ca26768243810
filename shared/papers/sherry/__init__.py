"""Sherry: 1.25-bit 3:4-sparse ternary quantization (ACL 2026, arXiv 2601.07892).

:mod:`.qat` is the training side (the 3:4 quantizer in torch, Arenas, trapping statistics, the
packed deployment layer); the packed formats and kernels are :mod:`acl26.kernels.ternary`.
:mod:`.decoder` builds decoders of real shapes in each format, :mod:`.speed` times them,
:mod:`.paper` holds the paper's speed table, :mod:`.peers` llama.cpp's ternary types, :mod:`.ikllama` ik_llama.cpp's BitNet types (:mod:`.forks` builds both),
:mod:`.kernel_bench` the kernel timings, :mod:`.modelfile` whole-model files with the ternary layers
packed, :mod:`.engine` a transformers LLaMA, Mistral or Granite model through the packed decoder (:class:`Engine`; it refuses the maths it does not implement), :mod:`.spec` the chapter's parameters and rows, :mod:`.study` its experiments, :mod:`.tables` the
tables, intervals and saved metrics from their results, :mod:`.verdicts` its verdicts, :mod:`.bench` its benchmarks.
"""

from acl26 import zoo
from acl26.chapter import Chapter
from acl26.papers.sherry import bench, engine, ikllama, llamacpp, modelfile, spec, tables, verdicts
from acl26.papers.sherry.engine import Engine
from acl26.papers.sherry.modelfile import load_model, model_from_file, save_model
from acl26.papers.sherry.qat import (MODES, PackedLinear, QATMonitor, QuantLinear, absmean, arenas_lambda,
                                     effective_rank, quantize, quantized_layers, sparse34, to_packed, wrap)

CHAPTER = Chapter(
    id="sherry",
    title="Sherry: Hardware-Efficient 1.25-Bit Ternary Quantization via Fine-grained Sparsification",
    arxiv="2601.07892",
    venue="ACL 2026 long 513",
    cite="sherry2026",
    spec=spec.SPEC,
    claims=tuple(spec.CLAIMS),
    record_claims=verdicts.record_claims,
    assets=("smollm2", *zoo.ASSETS),
    benchmarks=bench.benchmarks,
    order=10,
    prepare=ikllama.prepare_peers,
    fragments={"intro_sherry_shapes.md": tables.decoded_shapes},
    kernels=("ternary", "decode"),
)

__all__ = ["CHAPTER", "Engine", "MODES", "engine", "PackedLinear", "QATMonitor", "QuantLinear", "absmean", "arenas_lambda", "effective_rank",
           "load_model", "model_from_file", "modelfile", "quantize", "quantized_layers", "save_model", "sparse34",
           "to_packed", "wrap"]
