"""Sherry (ACL 2026, arXiv 2601.07892): ik_llama.cpp's BitNet kernels, timed as the second real peer of ours.

ik_llama.cpp, a fork of llama.cpp, has its own ternary types for BitNet models, which its author
measures as the fastest BitNet kernels on CPUs: IQ1_BN (1.625 bits per weight; trits packed 5 to a
byte, as TQ1_0), IQ2_BN (2 bits: 2-bit codes, as TQ2_0 and bitnet.cpp's I2_S) and IQ2_BN_R4 (IQ2_BN
with 4 rows interleaved, for its GEMM). Both multiply 8-bit activations (Q8_K64 / Q8_K16 rows).
:func:`build` compiles ik_llama.cpp from the sources vendored in the ``ik-llama-cpp-python`` sdist
(the ``ikllama-src`` asset, pinned by sha256) with cmake, once, into ``$ACL26_CACHE/ikllama/``
(:class:`~acl26.papers.sherry.forks.Fork`, as llama.cpp's build): ``llama-quantize`` and
``llama-bench`` only; its ``test-backend-ops.cpp`` is not a cmake target in this version, so there
is no per-kernel timing of ik_llama.cpp here.

The models are the same random ternary GGUF files that :func:`.llamacpp.write_gguf` writes (f16, the
llama architecture), quantized by ik_llama.cpp's own ``llama-quantize``; :func:`bench_decode` times
whole-model decode with its own ``llama-bench``, whose ``-gp depth,tokens`` test times ``tokens``
generated tokens after a ``depth``-token prompt (llama.cpp's ``-n tokens -d depth``). Its flash
attention is on by default (``-fa 1``); llama.cpp's ``-fa auto`` turns it on on CPUs as well.

Nothing here is needed for the rest of the book: where ik_llama.cpp is not built, :func:`available`
is False and :func:`require` raises :class:`IkLlamaMissing` with the command that builds it.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
from pathlib import Path

from acl26 import checks, io, machine, paths
from acl26.papers.sherry import forks, llamacpp
from acl26.papers.sherry.forks import Fork

log = logging.getLogger(__name__)

ASSET = "ikllama-src"
SOURCE = "ik_llama_cpp_python-0.1.5/vendor/ik_llama.cpp"
TARGETS = ("llama-quantize", "llama-bench")
#: as llama.cpp's build (native code for this CPU, static, no tests), plus: the examples (ik_llama.cpp
#: keeps llama-bench and llama-quantize there), its CPU flash-attention kernels for f16 / q8_0 caches
#: only (``GGML_IQK_FA_ALL_QUANTS=OFF``: our caches are f16; the rest is build time), and OpenMP, its
#: default (llama.cpp's build here has none). Either way its threads wait for each other spinning: while
#: another process shared the 2 cores, its 0.7B decode on 2 threads fell to about 1 tok/s (44 on 1 thread),
#: so its rows are only worth reading from a machine that runs nothing else
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_SERVER=OFF", "-DBUILD_SHARED_LIBS=OFF",
               "-DGGML_OPENMP=ON", "-DGGML_IQK_FA_ALL_QUANTS=OFF")


#: the sdist lacks ``common/cmake/build-info-gen-cpp.cmake``, the script that writes ``common/build-info.cpp``
#: (the build's version string) from its template; these two lines do what it does
BUILD_INFO_SCRIPT = ("include(${CMAKE_CURRENT_SOURCE_DIR}/cmake/build-info.cmake)\n"
                     "configure_file(${CMAKE_CURRENT_SOURCE_DIR}/common/build-info.cpp.in "
                     "${CMAKE_CURRENT_SOURCE_DIR}/common/build-info.cpp)\n")


class IkLlamaMissing(llamacpp.LlamaCppMissing):
    """ik_llama.cpp is not built here (or cannot be); the CLI shows it as a one-line error."""


IKLLAMA = Fork(name="ik_llama.cpp", cache="ikllama", asset=ASSET, source=SOURCE, targets=TARGETS, flags=CMAKE_FLAGS,
               error=IkLlamaMissing, overlay=(("common/cmake/build-info-gen-cpp.cmake", BUILD_INFO_SCRIPT),),
               role="Sherry's BitNet peer")
tools_missing = forks.tools_missing


# the module's build API (forks.module_api): where its build lives, its tools, the refusal, the build, and
# ``prepare`` (build once, saying what was built and how long it took, or None when it was built already)
build_dir, binary, available, require, build, prepare = forks.module_api(IKLLAMA, __name__)


def prepare_peers(force: bool = False) -> str | None:
    """The Sherry chapter's ``prepare`` hook (``acl26 prepare sherry``, ``acl26 book``): build llama.cpp's
    and ik_llama.cpp's timing tools once each. None when both are built (and not ``force``). A fork
    that cannot be built raises (:class:`~acl26.papers.sherry.forks.PeerMissing`, one line each) after
    the other has been tried, saying what was built."""
    done, failed = [], []
    for hook in (llamacpp.prepare, prepare):
        try:
            msg = hook(force)
        except forks.PeerMissing as exc:
            failed.append(exc)
            continue
        if msg:
            done.append(msg)
    if failed:
        what = (" (" + "; ".join(done) + ")") if done else ""
        raise type(failed[0])(" | ".join(str(e) for e in failed) + what)
    return "; ".join(done) or None


# --------------------------------------------------------------------------------------------
# whole-model decode: the GGUF files llama.cpp's rows use, quantized by ik_llama.cpp's tool

#: ik_llama.cpp's decode peers of our formats: key -> (label, its llama-quantize type, the type of the
#: token embeddings and output head: "f16" as ours stay bf16, "q8_0" as our 8-bit head)
PEERS = {
    "ik-iq2_bn": ("ik_llama.cpp IQ2_BN (2.0-bit), f16 head", "IQ2_BN", "f16"),
    "ik-iq2_bn_r4": ("ik_llama.cpp IQ2_BN_R4 (2.0-bit, 4 rows interleaved), f16 head", "IQ2_BN_R4", "f16"),
    "ik-iq1_bn": ("ik_llama.cpp IQ1_BN (1.62-bit), f16 head", "IQ1_BN", "f16"),
    "ik-iq2_bn-q8head": ("ik_llama.cpp IQ2_BN, q8_0 head and embeddings", "IQ2_BN", "q8_0"),
    "ik-iq2_bn_r4-q8head": ("ik_llama.cpp IQ2_BN_R4, q8_0 head and embeddings", "IQ2_BN_R4", "q8_0"),
    "ik-iq1_bn-q8head": ("ik_llama.cpp IQ1_BN, q8_0 head and embeddings", "IQ1_BN", "q8_0"),
}
#: what each type's dot product multiplies the weights with (``vec_dot_type`` in its ``ggml.c``)
ACTIVATIONS = {"IQ1_BN": "int8 (Q8_K64)", "IQ2_BN": "int8 (Q8_K64)", "IQ2_BN_R4": "int8 (Q8_K16)"}
#: ik_llama.cpp's BitNet types pack 64 weights per block along a row (QK_IQ1BN)
BN_BLOCK = 64
#: the shortest row its 8-bit activation rows (Q8_K64) take: 8 blocks (``GGML_ASSERT(k >= 8*QK_IQ1BN)``)
MIN_ROW = 8 * BN_BLOCK
#: IQ2_BN_R4 interleaves 4 rows: every tensor's row count must be a multiple of 4
R4_ROWS = 4
_GGUF_VERSION = 1  # bump when the written files change


def check_peer(key: str, argument: str = "peers") -> str:
    if key not in PEERS:
        raise ValueError(f"{argument}: unknown ik_llama.cpp peer {key!r}; known: {sorted(PEERS)}")
    return key


def peer_skip_reason(shape, key: str, *, max_gb: float = 10.0) -> str | None:
    """Why ``key`` cannot run at ``shape`` (None when it can): the BN types need rows (the hidden and MLP
    widths) that are whole 64-weight blocks and at least :data:`MIN_ROW` long, the _R4 type row counts
    that are multiples of 4; the f16 source file must fit in ``max_gb``."""
    from acl26.papers.sherry.decoder import get_shape

    s = get_shape(shape, "shape")
    check_peer(key, "key")
    checks.number("max_gb", max_gb, 0.0, lo_open=True)
    bad = [f"{what} {n}" for what, n in (("hidden", s.hidden), ("MLP width", s.intermediate)) if n % BN_BLOCK]
    if bad:
        return (f"the BN types pack rows in blocks of {BN_BLOCK} weights and {' and '.join(bad)} "
                f"{'is not a multiple' if len(bad) == 1 else 'are not multiples'}")
    short = [f"{what} {n}" for what, n in (("hidden", s.hidden), ("MLP width", s.intermediate)) if n < MIN_ROW]
    if short:
        return (f"ik_llama.cpp quantizes the activations of its BN types in rows of at least {MIN_ROW} "
                f"(its quantize_row_q8_K64 asserts it) and {' and '.join(short)} {'is' if len(short) == 1 else 'are'} shorter")
    rows = {n for _, shp in s.linears() for n in (shp[0],)}
    if PEERS[key][1].endswith("_R4") and any(n % R4_ROWS for n in rows):
        return f"IQ2_BN_R4 interleaves {R4_ROWS} rows and a projection has {sorted(n for n in rows if n % R4_ROWS)} rows"
    if 2 * s.params / 2**30 > max_gb:
        return f"the f16 GGUF file ({2 * s.params / 2**30:.1f} GiB) is above max_gb={max_gb}"
    return None


def quantize(src: Path, dst: Path, qtype: str, *, head: str, threads: int | None = None) -> Path:
    """ik_llama.cpp's ``llama-quantize`` of ``src`` (f16) to ``qtype``; ``head`` ("f16" or "q8_0") pins the
    type of the token embeddings and the output head (``--token-embedding-type``, ``--output-tensor-type``)."""
    if head not in llamacpp.HEAD_TYPES:
        raise ValueError(f"head must be one of {llamacpp.HEAD_TYPES}, got {head!r}")
    require()
    extra = ["--token-embedding-type", head, "--output-tensor-type", head]
    with io.atomic_path(dst, inputs=(src,), name="dst") as tmp:
        cmd = [str(binary("llama-quantize")), *extra, str(src), str(tmp), qtype, str(threads or machine.cpu_count())]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise IkLlamaMissing(f"ik_llama.cpp llama-quantize failed (exit {proc.returncode}): "
                                 f"{(proc.stdout + proc.stderr)[-600:]}")
    return dst


def gguf_dir(shape, seed: int = 0) -> Path:
    """Where ik_llama.cpp's GGUF files of ``shape`` live: keyed by the shape, the seed, this build and the writer."""
    from dataclasses import asdict

    from acl26.papers.sherry.decoder import get_shape

    s = get_shape(shape, "shape")
    key = hashlib.sha256(repr((sorted(asdict(s).items()), seed, build_dir().name, _GGUF_VERSION)).encode()).hexdigest()[:12]
    return paths.cache_dir() / "ikllama-gguf" / f"{s.name}-{key}"


def gguf_model(shape, key: str, *, seed: int = 0) -> Path:
    """The GGUF file of peer ``key`` at ``shape``: quantized once from llama.cpp's f16 file of the same
    shape and seed (:func:`.llamacpp.write_gguf`: the same random ternary weights as llama.cpp's rows),
    then from the cache. The f16 file is written here when llama.cpp's folder does not hold it."""
    check_peer(key, "key")
    require()
    folder = gguf_dir(shape, seed)
    folder.mkdir(parents=True, exist_ok=True)
    src = llamacpp.gguf_dir(shape, seed) / "f16.gguf"
    if not src.is_file():
        src = folder / "f16.gguf"
        if not src.is_file():
            log.info("writing %s", src)
            llamacpp.write_gguf(shape, src, seed=seed)
    _, qtype, head = PEERS[key]
    dst = folder / f"{key}.gguf"
    if not dst.is_file():
        log.info("quantizing %s", dst)
        quantize(src, dst, qtype, head=head)
    return dst


def gguf_sizes(path: Path) -> dict:
    """Bytes and tensor types of an ik_llama.cpp GGUF file, as :func:`.llamacpp.gguf_sizes`, read with
    ik_llama.cpp's own tensor sizes: gguf-py does not know its types (IQ2_BN and the rest are past
    ggml's numbering), so the sizes come from the tensors' offsets in the file."""
    return _gguf_sizes(path)


def _gguf_sizes(path: Path) -> dict:
    """Parse the GGUF header of ``path`` (version 3) ourselves: tensor names, types, shapes and offsets;
    each tensor's bytes are the gap to the next offset (the last: to the end of the file)."""
    import struct

    with open(path, "rb") as f:
        data = f.read(64 << 20)  # the header and tensor infos of our files are far smaller
    if data[:4] != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    pos = 4
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, pos)
    pos += 20
    if version < 2:
        raise ValueError(f"{path}: GGUF version {version} is not supported")

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    alignment = 32

    def value(t):
        nonlocal pos
        if t == 8:
            return string()
        if t == 9:
            (et, n) = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if et in sizes:
                pos += sizes[et] * n
                return None
            return [value(et) for _ in range(n)]
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}[t]
        (v,) = struct.unpack_from(fmt, data, pos)
        pos += sizes[t]
        return v

    for _ in range(n_kv):
        k = string()
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        v = value(t)
        if k == "general.alignment":
            alignment = int(v)
    infos = []
    for _ in range(n_tensors):
        name = string()
        (nd,) = struct.unpack_from("<I", data, pos)
        pos += 4
        dims = struct.unpack_from(f"<{nd}Q", data, pos)
        pos += 8 * nd
        ttype, offset = struct.unpack_from("<IQ", data, pos)
        pos += 12
        infos.append((name, dims, ttype, offset))
    start = (pos + alignment - 1) // alignment * alignment
    total = path.stat().st_size
    order = sorted(infos, key=lambda x: x[3])
    nbytes = {name: (nxt[3] if nxt else total - start) - off
              for (name, _, _, off), nxt in zip(order, [*order[1:], None])}
    names = {0: "F32", 1: "F16", 8: "Q8_0"}
    names.update({t: n for n, t in _IK_TYPES.items()})

    def tname(t):
        return names.get(t, f"type{t}")

    lin = [x for x in infos if x[0].startswith("blk.") and not x[0].endswith("norm.weight")]
    emb = [x for x in infos if x[0] in ("token_embd.weight", "output.weight")]
    by = {x[0]: nbytes[x[0]] for x in emb}

    def elements(dims):
        n = 1
        for d in dims:
            n *= d
        return n

    return {"total": total, "linear": sum(nbytes[x[0]] for x in lin),
            "head": by.get("output.weight", by.get("token_embd.weight", 0)),
            "linear_params": sum(elements(x[1]) for x in lin), "embedding": sum(nbytes[x[0]] for x in emb),
            "types": sorted({tname(x[2]) for x in lin}), "embedding_types": sorted({tname(x[2]) for x in emb})}


#: ik_llama.cpp's ggml type numbers of its BitNet types (``enum ggml_type`` in its ``ggml.h``)
_IK_TYPES = {"IQ1_BN": 134, "IQ2_BN": 135, "IQ2_BN_R4": 335}


def parse_bench(text: str) -> list[dict]:
    """The JSON records of ik_llama.cpp's ``llama-bench -o json`` (one per test)."""
    return llamacpp.parse_bench(text)


def bench_decode(path: Path, *, tokens: int, depth: int, threads: int, repetitions: int = 1) -> list[float]:
    """Decode tok/s of ``path`` with ik_llama.cpp's ``llama-bench``: ``tokens`` tokens generated after a
    ``depth``-token prompt (``-p 0 -n 0 -gp depth,tokens``: only the generation is timed), on
    ``threads`` threads, ``repetitions`` samples (after its warm-up)."""
    require()
    tokens, depth = checks.integer("tokens", tokens, 1), checks.integer("depth", depth, 0)
    cmd = [str(binary("llama-bench")), "-m", str(path), "-p", "0", "-n", "0", "-gp", f"{depth},{tokens}",
           "-t", str(threads), "-r", str(repetitions), "-o", "json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise IkLlamaMissing(f"ik_llama.cpp llama-bench failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    return decode_samples(parse_bench(proc.stdout), tokens=tokens, depth=depth, name=path.name)


def decode_samples(records: list[dict], *, tokens: int, depth: int, name: str = "the model") -> list[float]:
    """The tok/s samples of the ``-gp depth,tokens`` test among ik_llama.cpp's llama-bench records."""
    recs = [r for r in records if r.get("n_gen") == tokens and r.get("n_prompt") == depth]
    if not recs:
        raise IkLlamaMissing(f"ik_llama.cpp llama-bench reported no decode test of {tokens} tokens after {depth} for {name}")
    return [float(x) for x in recs[0]["samples_ts"]]


def decode_rows(shape, keys, *, tokens: int, context: int, repeats: int, threads: int, seed: int = 0,
                llamacpp_peers=(), max_gb: float = 10.0) -> list[dict]:
    """Whole-model decode rows of ik_llama.cpp's peers ``keys`` at ``shape`` and, timed in the same rounds,
    llama.cpp's ``llamacpp_peers`` (keys of :data:`.llamacpp.PEERS`): their GGUF files made once, then
    ``repeats`` rounds, each running every file once (one ``llama-bench`` sample of ``tokens`` tokens
    after a ``context``-token prompt, on ``threads`` threads) in an order rotated by one each round.

    A row has the keys of :func:`.speed.speed_table`'s peer rows that say what ran and how fast:
    ``shape``, ``format`` (the key), ``label``, ``peer`` (True), ``engine`` ("ik_llama.cpp" /
    "llama.cpp"), ``head``, ``activations``, ``status`` ("ok" / "skipped"), ``reason``, ``tokens``,
    ``context``, ``repeats``, ``threads``, ``decode_tok_s`` (median), ``decode_runs``, ``total_mb``,
    ``bits_per_weight`` (projection tensors), ``bytes_per_token`` (projections, head and norms) and
    ``gguf_types``. A peer that is not built, or cannot hold the shape, is "skipped" with the reason."""
    from acl26 import timing
    from acl26.papers.sherry.decoder import get_shape

    s = get_shape(shape, "shape")
    keys, lkeys = [check_peer(k, "keys") for k in keys], [llamacpp.check_peer(k) for k in llamacpp_peers]
    tokens, context = checks.integer("tokens", tokens, 1), checks.integer("context", context, 0)
    repeats, threads = checks.integer("repeats", repeats, 1), checks.integer("threads", threads, 1)
    reasons = {k: (None if available() else IKLLAMA.missing_message()) or peer_skip_reason(s, k, max_gb=max_gb)
               for k in keys}
    reasons.update({k: (None if llamacpp.available() else llamacpp.LLAMACPP.missing_message())
                    or llamacpp.peer_skip_reason(s, k, max_gb=max_gb) for k in lkeys})
    todo = [k for k in [*lkeys, *keys] if reasons[k] is None]
    files = {k: llamacpp.gguf_model(s, k, seed=seed) if k in llamacpp.PEERS else gguf_model(s, k, seed=seed)
             for k in todo}
    runs: dict[str, list[float]] = {k: [] for k in todo}
    for order in timing.rotations(todo, repeats):
        for k in order:
            bench = llamacpp.bench_decode if k in llamacpp.PEERS else bench_decode
            runs[k] += bench(files[k], tokens=tokens, depth=context, threads=threads)[:1]
    MB = 2**20
    rows = []
    for k in [*keys, *lkeys]:
        ik = k in PEERS
        label, qtype, head = PEERS[k] if ik else llamacpp.PEERS[k]
        row = dict(shape=s.name, format=k, label=label, peer=True, engine="ik_llama.cpp" if ik else "llama.cpp",
                   head=head or "llama-quantize's choice",
                   # what the ternary dot products multiply the weights with (both forks quantize activations to 8 bits)
                   activations=(ACTIVATIONS.get(qtype, "int8") if ik else "int8 (Q8_K)") if qtype else "f16",
                   status="ok" if reasons[k] is None else "skipped", reason=reasons[k] or "",
                   tokens=tokens, context=context, repeats=repeats, threads=threads)
        if reasons[k] is None:
            z = gguf_sizes(files[k]) if ik else llamacpp.gguf_sizes(files[k])
            dec = timing.median(runs[k])
            row.update(decode_tok_s=dec, decode_runs=runs[k], total_mb=z["total"] / MB,
                       bits_per_weight=8 * z["linear"] / z["linear_params"],
                       bytes_per_token=int(z["linear"] + z["head"] + z["total"] - z["linear"] - z["embedding"]),
                       gguf_types="/".join(z["types"]) + " (embeddings and head: " + "/".join(z["embedding_types"]) + ")")
        else:
            row.update(decode_tok_s=None, decode_runs=[], total_mb=None, bits_per_weight=None, bytes_per_token=None,
                       gguf_types=None)
        rows.append(row)
    return rows
