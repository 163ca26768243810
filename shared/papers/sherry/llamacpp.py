"""Sherry (ACL 2026, arXiv 2601.07892): llama.cpp's ternary kernels, timed as the real peer of ours.

ggml has two ternary types: TQ2_0 (2.0625 bits per weight; 2-bit codes decoded and multiplied
directly, the same kind of kernel as bitnet.cpp's I2_S) and TQ1_0 (1.6875 bits; 5 trits per byte).
:func:`build` compiles llama.cpp from the sources vendored in the ``llama-cpp-python`` sdist (the
``llamacpp-src`` asset, pinned by sha256) with cmake, once, into ``$ACL26_CACHE/llamacpp/``; it
needs cmake, a C++ compiler and ninja or make, and takes a few minutes on 2 cores. The build itself
is :mod:`.forks`' (:data:`LLAMACPP`), shared with ik_llama.cpp's (:mod:`.ikllama`).
:func:`mul_mat_perf` runs ``test-backend-ops perf`` on MUL_MAT cases of the chosen types and any
shape (e.g. 4096 x 4096, one activation vector), written to a test file, and returns microseconds
per run. ``test-backend-ops`` runs the CPU backend on half the machine's cores (its ``N_THREADS / 2``,
not settable from the command line), so :data:`PERF_THREADS` says how many, and our kernels are
timed on the same number.

Nothing here is needed for the rest of the book: where llama.cpp is not built, :func:`available`
is False and :func:`require` raises :class:`LlamaCppMissing` with the command that builds it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
from pathlib import Path

from acl26 import assets, checks, io, machine, paths
from acl26.papers.sherry import forks
from acl26.papers.sherry.forks import Fork, PeerMissing

log = logging.getLogger(__name__)

ASSET = "llamacpp-src"
SOURCE = "llama_cpp_python-0.3.36/vendor/llama.cpp"
TARGETS = ("test-backend-ops", "llama-bench", "llama-quantize")
#: the threads test-backend-ops gives the CPU backend: half the cores std::thread reports
PERF_THREADS = max(1, (os.cpu_count() or 2) // 2)
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
               "-DLLAMA_BUILD_TESTS=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_EXAMPLES=OFF",
               "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF",
               "-DLLAMA_USE_PREBUILT_UI=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_OPENMP=OFF")


class LlamaCppMissing(PeerMissing):
    """llama.cpp is not built here (or cannot be); the CLI shows it as a one-line error."""


#: what :func:`build` builds (:class:`~acl26.papers.sherry.forks.Fork`, shared with ik_llama.cpp's build)
LLAMACPP = Fork(name="llama.cpp", cache="llamacpp", asset=ASSET, source=SOURCE, targets=TARGETS, flags=CMAKE_FLAGS,
                error=LlamaCppMissing, role="Sherry's peer kernels")
tools_missing = forks.tools_missing


# the module's build API (forks.module_api): where its build lives, its tools, the refusal, the build, and
# ``prepare`` (build once, saying what was built and how long it took, or None when it was built already)
build_dir, binary, available, require, build, prepare = forks.module_api(LLAMACPP, __name__)


_PERF_LINE = re.compile(r"MUL_MAT\((?P<params>.*?)\):\s+(?P<runs>\d+) runs -\s+(?P<us>[\d.]+) us/run")


def parse_perf(text: str) -> list[dict]:
    """Rows ``{"params", "type_a", "m", "n", "k", "runs", "us_per_run"}`` of ``test-backend-ops perf``
    output: its perf suite's lines (``type_a=…,m=…,n=…,k=…``) and those of a test file
    (``sources=tq2_0[k,m,1,1],f32[k,n,1,1]``)."""
    rows = []
    for m in _PERF_LINE.finditer(text):
        params = dict(kv.split("=", 1) for kv in re.split(r",(?![^\[]*\])", m["params"]) if "=" in kv)
        src = re.search(r"sources=(?P<t>\w+)\[(?P<k>\d+),(?P<m>\d+),1,1\],f32\[\d+,(?P<n>\d+),1,1\]", m["params"])
        if src:
            params.update(type_a=src["t"], m=src["m"], n=src["n"], k=src["k"])
        rows.append({"params": m["params"], "type_a": params.get("type_a"), "m": int(params.get("m", 0)),
                     "n": int(params.get("n", 0)), "k": int(params.get("k", 0)), "runs": int(m["runs"]),
                     "us_per_run": float(m["us"])})
    return rows


def _op_index(name: str) -> int:
    """The value of ``GGML_OP_<name>`` in the vendored ``ggml.h`` (the enum counts from 0)."""
    header = (assets.path(ASSET) / SOURCE / "ggml" / "include" / "ggml.h").read_text()
    body = re.search(r"enum ggml_op \{(.*?)\};", header, re.S)
    if body is None:
        raise LlamaCppMissing("ggml.h has no enum ggml_op")
    ops = re.findall(r"^\s*(GGML_OP_\w+)", body[1], re.M)
    if f"GGML_OP_{name}" not in ops:
        raise LlamaCppMissing(f"ggml.h has no GGML_OP_{name}")
    return ops.index(f"GGML_OP_{name}")


def mul_mat_case(qtype: str, m: int, k: int, n: int = 1) -> str:
    """One line of a ``test-backend-ops --test-file``: MUL_MAT of an ``m`` x ``k`` ``qtype`` weight
    (contiguous rows of ``k`` weights) by ``n`` float32 vectors, giving float32."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    m, k, n = checks.integer("m", m, 1), checks.integer("k", k, 1), checks.integer("n", n, 1)
    t = GGMLQuantizationType[qtype.upper()]
    block, block_bytes = GGML_QUANT_SIZES[t]
    if k % block:
        raise ValueError(f"k ({k}) must be a multiple of {qtype}'s block of {block} weights")
    row = k // block * block_bytes
    f32 = int(GGMLQuantizationType.F32)
    src0 = f"{int(t)} {k} {m} 1 1 {block_bytes} {row} {row * m} {row * m}"
    src1 = f"{f32} {k} {n} 1 1 4 {4 * k} {4 * k * n} {4 * k * n}"
    return f"{_op_index('MUL_MAT')} {f32} {m} {n} 1 1 0 2 {src0} {src1} {qtype.lower()}"


def mul_mat_perf(types=("tq1_0", "tq2_0"), *, m: int = 4096, k: int = 14336, n: int = 1) -> list[dict]:
    """``test-backend-ops perf`` of MUL_MAT for a ``types`` weight of ``m`` x ``k`` by ``n`` float32
    vectors, at any shape: the cases are written to a ``--test-file`` (ggml's own generic-op test
    path, the one ``test-export-graph-ops`` feeds). Microseconds per run, on :data:`PERF_THREADS`."""
    require()
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "cases.txt"
        f.write_text("".join(mul_mat_case(t, m, k, n) + "\n" for t in types))
        proc = subprocess.run([str(binary("test-backend-ops")), "perf", "-b", "CPU", "--test-file", str(f)],
                              capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise LlamaCppMissing(f"test-backend-ops failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    rows = [r for r in parse_perf(proc.stdout) if r["type_a"] in types and (r["m"], r["n"], r["k"]) == (m, n, k)]
    if sorted(r["type_a"] for r in rows) != sorted(types):
        raise LlamaCppMissing(f"test-backend-ops timed {[r['type_a'] for r in rows]} of {list(types)} at m={m}, n={n}, "
                              f"k={k}:\n{proc.stdout[-500:]}")
    for r in rows:
        r["threads"] = PERF_THREADS
    return rows


# --------------------------------------------------------------------------------------------
# whole-model decode: GGUF files of our speed table's shapes, timed with llama-bench

#: llama.cpp's decode peers of our formats: key -> (label, llama-quantize type or None for the f16
#: source itself, the type of the token embeddings and output head: "f16" as ours stay bf16, "q8_0" as
#: our 8-bit head, or None for llama-quantize's own choice)
PEERS = {
    "ggml-f16": ("llama.cpp F16", None, "f16"),
    "ggml-tq2_0": ("llama.cpp TQ2_0 (2.06-bit), f16 head", "TQ2_0", "f16"),
    "ggml-tq1_0": ("llama.cpp TQ1_0 (1.69-bit), f16 head", "TQ1_0", "f16"),
    "ggml-tq2_0-q8head": ("llama.cpp TQ2_0, q8_0 head and embeddings", "TQ2_0", "q8_0"),
    "ggml-tq1_0-q8head": ("llama.cpp TQ1_0, q8_0 head and embeddings", "TQ1_0", "q8_0"),
    "ggml-tq2_0-qhead": ("llama.cpp TQ2_0, quantized head (llama-quantize's choice)", "TQ2_0", None),
    "ggml-tq1_0-qhead": ("llama.cpp TQ1_0, quantized head (llama-quantize's choice)", "TQ1_0", None),
}
#: the head types :func:`quantize` can pin
HEAD_TYPES = ("f16", "q8_0")
#: ggml's TQ1_0 / TQ2_0 pack 256 weights per block along a row
TQ_BLOCK = 256
_GGUF_VERSION = 1  # bump when the written files change


def check_peer(key: str, argument: str = "peers") -> str:
    if key not in PEERS:
        raise ValueError(f"{argument}: unknown llama.cpp peer {key!r}; known: {sorted(PEERS)}")
    return key


def peer_skip_reason(shape, key: str, *, max_gb: float = 10.0) -> str | None:
    """Why ``key`` cannot run at ``shape`` (None when it can): a TQ type needs rows (the hidden and
    MLP widths) that are whole 256-weight blocks, else llama-quantize falls back to Q4_0; the f16
    source file must fit in ``max_gb``."""
    from acl26.papers.sherry.decoder import get_shape

    s = get_shape(shape, "shape")
    check_peer(key, "key")
    checks.number("max_gb", max_gb, 0.0, lo_open=True)
    bad = [f"{what} {n}" for what, n in (("hidden", s.hidden), ("MLP width", s.intermediate)) if n % TQ_BLOCK]
    if PEERS[key][1] is not None and bad:
        return (f"TQ types pack rows in blocks of {TQ_BLOCK} weights and {' and '.join(bad)} "
                f"{'is not a multiple' if len(bad) == 1 else 'are not multiples'}, so llama-quantize would fall back to Q4_0")
    if 2 * s.params / 2**30 > max_gb:
        return f"the f16 GGUF file ({2 * s.params / 2**30:.1f} GiB) is above max_gb={max_gb}"
    return None


def _vocab(n: int) -> tuple[list[bytes], list[float], list[int]]:
    """A SentencePiece-style vocabulary of exactly ``n`` tokens (llama-bench feeds random token ids;
    only the count matters for speed): <unk>, <s>, </s>, the 256 byte tokens, then filler pieces."""
    import gguf

    T = gguf.TokenType
    toks = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{b:02X}>".encode() for b in range(256)]
    types = [T.UNKNOWN, T.CONTROL, T.CONTROL] + [T.BYTE] * 256
    toks, types = toks[:n], types[:n]
    toks += [f"\u2581t{i}".encode() for i in range(n - len(toks))]
    types += [T.NORMAL] * (n - len(types))
    return toks, [0.0] * n, [int(t) for t in types]


def write_gguf(shape, path: Path, *, seed: int = 0) -> Path:
    """Write a llama-architecture GGUF of ``shape`` with random ternary weights (every linear layer
    ``scale * {-1, 0, +1}``, exact in f16; random f16 embeddings), all in f16, tensor by tensor (memory
    stays near one tensor). Atomic: a failed write leaves nothing at ``path``."""
    import gguf
    import numpy as np

    from acl26.papers.sherry.decoder import get_shape

    s = get_shape(shape, "shape")
    io.check_target(path, name="path")  # before the tensors are made
    rng = np.random.default_rng([seed, s.hidden, s.layers])
    names = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output", "gate": "ffn_gate", "up": "ffn_up",
             "down": "ffn_down"}
    tensors: list[tuple[str, tuple[int, ...], str]] = [("token_embd.weight", (s.vocab, s.hidden), "embed")]
    for i in range(s.layers):
        tensors.append((f"blk.{i}.attn_norm.weight", (s.hidden,), "norm"))
        tensors += [(f"blk.{i}.{names[n]}.weight", shp, "ternary") for n, shp in s.linears()]
        tensors.append((f"blk.{i}.ffn_norm.weight", (s.hidden,), "norm"))
    tensors.append(("output_norm.weight", (s.hidden,), "norm"))
    if not s.tied:
        tensors.append(("output.weight", (s.vocab, s.hidden), "embed"))

    def data(shp, kind):
        if kind == "norm":
            return np.ones(shp, np.float32)
        if kind == "embed":
            return (0.02 * rng.standard_normal(shp, dtype=np.float32)).astype(np.float16)
        t = rng.integers(-1, 2, size=shp, dtype=np.int8).astype(np.float16)
        return t * np.float16(1.0 / np.sqrt(shp[1]))

    with io.atomic_path(path, name="path") as tmp:
        w = gguf.GGUFWriter(str(tmp), "llama")
        w.add_name(f"acl26 random ternary {s.name}")
        w.add_context_length(4096)
        w.add_embedding_length(s.hidden)
        w.add_block_count(s.layers)
        w.add_feed_forward_length(s.intermediate)
        w.add_head_count(s.heads)
        w.add_head_count_kv(s.kv_heads)
        w.add_rope_dimension_count(s.head_dim)
        w.add_rope_freq_base(float(s.rope_theta))
        w.add_layer_norm_rms_eps(1e-5)
        w.add_vocab_size(s.vocab)
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        toks, scores, types = _vocab(s.vocab)
        w.add_tokenizer_model("llama")
        w.add_token_list(toks)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(False)
        for name, shp, kind in tensors:
            dt = np.float32 if kind == "norm" else np.float16
            w.add_tensor_info(name, shp, np.dtype(dt), int(np.prod(shp)) * np.dtype(dt).itemsize)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for name, shp, kind in tensors:
            w.write_tensor_data(data(shp, kind))
        w.close()
    return path


def quantize(src: Path, dst: Path, qtype: str, *, head: str | None, threads: int | None = None) -> Path:
    """``llama-quantize`` ``src`` (f16) to ``qtype``; ``head`` ("f16" or "q8_0") pins the type of the token
    embeddings and the output head (``--token-embedding-type``, ``--output-tensor-type``), None lets
    llama-quantize pick it (for the TQ types Q4_K for the embeddings and, for the head or a tied table,
    its output type, Q6_K)."""
    if head is not None and head not in HEAD_TYPES:
        raise ValueError(f"head must be one of {HEAD_TYPES} or None, got {head!r}")
    require()
    extra = ["--token-embedding-type", head, "--output-tensor-type", head] if head else []
    with io.atomic_path(dst, inputs=(src,), name="dst") as tmp:
        cmd = [str(binary("llama-quantize")), *extra, str(src), str(tmp), qtype, str(threads or machine.cpu_count())]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise LlamaCppMissing(f"llama-quantize failed (exit {proc.returncode}): {(proc.stdout + proc.stderr)[-600:]}")
    return dst


def gguf_dir(shape, seed: int = 0) -> Path:
    """Where the GGUF files of ``shape`` live: keyed by the shape, the seed, this build and the writer."""
    from dataclasses import asdict

    from acl26.papers.sherry.decoder import get_shape

    s = get_shape(shape, "shape")
    key = hashlib.sha256(repr((sorted(asdict(s).items()), seed, build_dir().name, _GGUF_VERSION)).encode()).hexdigest()[:12]
    return paths.cache_dir() / "llamacpp-gguf" / f"{s.name}-{key}"


def gguf_model(shape, key: str, *, seed: int = 0, progress: bool = False) -> Path:
    """The GGUF file of peer ``key`` at ``shape``: written (f16) and quantized once, then from the cache."""
    check_peer(key, "key")
    require()
    folder = gguf_dir(shape, seed)
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "f16.gguf"
    if not src.is_file():
        log.info("writing %s", src)
        write_gguf(shape, src, seed=seed)
    _, qtype, head = PEERS[key]
    if qtype is None:
        return src
    dst = folder / f"{key}.gguf"
    if not dst.is_file():
        log.info("quantizing %s", dst)
        quantize(src, dst, qtype, head=head)
    return dst


def gguf_sizes(path: Path) -> dict:
    """Bytes of a GGUF file: ``total`` (the file), ``linear`` (the blocks' projection tensors) and
    ``linear_params`` (their weights), ``embedding`` (token embeddings and output head), ``head`` (the
    output head read per token: ``output.weight``, or the token embeddings when the head is tied to them)."""
    import gguf

    r = gguf.GGUFReader(str(path))
    lin = [t for t in r.tensors if t.name.startswith("blk.") and not t.name.endswith("norm.weight")]
    emb = [t for t in r.tensors if t.name in ("token_embd.weight", "output.weight")]
    by = {t.name: int(t.n_bytes) for t in emb}
    return {"total": path.stat().st_size, "linear": sum(int(t.n_bytes) for t in lin),
            "head": by.get("output.weight", by.get("token_embd.weight", 0)),
            "linear_params": sum(int(t.n_elements) for t in lin), "embedding": sum(int(t.n_bytes) for t in emb),
            "types": sorted({t.tensor_type.name for t in lin}),
            "embedding_types": sorted({t.tensor_type.name for t in emb})}


def parse_bench(text: str) -> list[dict]:
    """The JSON records of ``llama-bench -o json`` (one per test)."""
    import json

    start = text.find("[")
    if start < 0:
        raise ValueError("llama-bench printed no JSON")
    return json.loads(text[start:])


def bench_decode(path: Path, *, tokens: int, depth: int, threads: int, repetitions: int = 1) -> list[float]:
    """Decode tok/s of ``path`` with ``llama-bench``: ``tokens`` tokens generated after a ``depth``-token
    context (``-p 0 -n tokens -d depth``), on ``threads`` threads, ``repetitions`` samples (after its warm-up)."""
    require()
    cmd = [str(binary("llama-bench")), "-m", str(path), "-p", "0", "-n", str(tokens), "-d", str(depth),
           "-t", str(threads), "-r", str(repetitions), "-o", "json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise LlamaCppMissing(f"llama-bench failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    recs = [r for r in parse_bench(proc.stdout) if r.get("n_gen") == tokens]
    if not recs:
        raise LlamaCppMissing(f"llama-bench reported no decode test for {path.name}")
    return [float(x) for x in recs[0]["samples_ts"]]
