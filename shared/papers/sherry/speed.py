"""Sherry (ACL 2026, arXiv 2601.07892): decode speed and model size at real model shapes.

The paper's speed table (Intel i7-14700HX, bitnet.cpp-style kernels) gives tokens/s and model MB for
a 0.7B and a 3B model in BF16, I2_S (2-bit), TL2 (1.67-bit) and Sherry (1.25-bit). Timing needs no
trained weights, so this module builds transformer decoders of real shapes with RANDOM weights,
stores every linear layer in one format, and times greedy decoding (one token at a time, with a KV
cache) and a batched prefill. :func:`speed_table` returns one row per (shape, format);
:func:`paper_table` holds the paper's rows as data and :func:`compare` puts the two side by side as
same-machine ratios (Sherry vs I2, vs TL2, vs BF16), the only figures that carry across machines.

The decoders themselves are :mod:`acl26.papers.sherry.decoder`; the paper's table and the
comparison with it :mod:`acl26.papers.sherry.paper`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import numpy as np

from acl26 import checks, timing
from acl26.kernels import decode as kd
from acl26.kernels import ternary as tn
from acl26.papers.sherry.decoder import (FORMATS, FUSED, LABELS, MB, PACKED, Embedding, KVCache, Model, Shape,
                                         available_bytes, get_shape, model_bytes, random_embedding,
                                         skip_reason)
from acl26.papers.sherry.engine import Engine
from acl26.papers.sherry.paper import ratio_or_none

# --------------------------------------------------------------------------------------------
# timing


def _run_once(model: Model, cache: KVCache, context: int, tokens: int, prefill: bool,
              rng: np.random.Generator) -> tuple[float | None, float, float]:
    """One repeat: fill the cache with ``context`` tokens (prefill, timed, or random keys/values),
    then decode ``tokens`` tokens greedily. Returns (prefill seconds or None, decode seconds, head seconds)."""
    cache.reset()
    prompt = rng.integers(0, model.shape.vocab, context)
    t_prefill = None
    if prefill:
        t0 = time.perf_counter()
        _, logits = model.forward(prompt, cache)
        t_prefill = time.perf_counter() - t0
        token = int(np.argmax(logits))
    else:
        cache.k[:, :, :context] = rng.standard_normal(cache.k[:, :, :context].shape, dtype=np.float32)
        cache.v[:, :, :context] = rng.standard_normal(cache.v[:, :, :context].shape, dtype=np.float32)
        cache.length = context
        token = int(prompt[-1])
    model.head_seconds = 0.0
    t0 = time.perf_counter()
    for _ in range(tokens):
        token = model.next_token(token, cache)  # the fused step after Model.fuse(), else numpy and argmax
    return t_prefill, time.perf_counter() - t0, model.head_seconds





#: the suffix of a speed-table format whose fused step reads an 8-bit head (ggml's Q8_0 layout,
#: :func:`acl26.kernels.decode.q8_head`) instead of the bf16 table
Q8 = "-q8head"
#: the infix of a speed-table format whose fused step multiplies 8-bit activations (a packed format;
#: :func:`acl26.kernels.decode.with_act8`): ``"sherry-a8"``, and ``"sherry-a8-q8head"`` with an 8-bit head
A8 = "-a8"
#: every format :func:`speed_table` times: the weight formats, the fused ones with an 8-bit head, and the
#: packed ones on 8-bit activations (with either head)
SPEED_FORMATS = (tuple(FORMATS) + tuple(f + Q8 for f in FUSED) + tuple(f + A8 for f in PACKED)
                 + tuple(f + A8 + Q8 for f in PACKED))


def base_format(fmt: str) -> str:
    """The weight format of a speed-table format (``"sherry-q8head"``, ``"sherry-a8"`` -> ``"sherry"``)."""
    fmt = fmt[:-len(Q8)] if fmt.endswith(Q8) else fmt
    return fmt[:-len(A8)] if fmt.endswith(A8) else fmt


def is_act8(fmt: str) -> bool:
    """Whether a speed-table format's fused step multiplies 8-bit activations."""
    return (fmt[:-len(Q8)] if fmt.endswith(Q8) else fmt).endswith(A8)


def label(fmt: str) -> str:
    """A speed-table format's name in tables."""
    return (LABELS[base_format(fmt)] + (", 8-bit activations" if is_act8(fmt) else "")
            + (", 8-bit head (Q8_0 layout)" if fmt.endswith(Q8) else ""))


def _q8_head_bytes(s: Shape) -> int:
    """Bytes of an 8-bit head of ``s`` (:func:`acl26.kernels.decode.q8_head`): int8 weights and a float16 scale per
    :data:`~acl26.kernels.decode.Q8_BLOCK` inputs of a row."""
    return s.vocab * (s.hidden + 2 * -(-s.hidden // kd.Q8_BLOCK))


def read_bytes_per_token(s: Shape, linear: int, embedding: int, norms: int) -> int:
    """Bytes a decode step reads: every projection, the norms and the output head (the embedding table
    when tied, else its half that is the head; the one embedding row looked up is left out)."""
    return int(linear + norms + (embedding if s.tied else embedding // 2))


def _size_fields(s: Shape, fmt: str) -> dict:
    """Sizes of a speed-table row; an 8-bit-head row holds the bf16 table (the embedding lookup) and the
    8-bit head, and reads the latter per token."""
    base = base_format(fmt)
    b = model_bytes(s, base)
    q8 = _q8_head_bytes(s) if fmt.endswith(Q8) else 0
    bpt = (read_bytes_per_token(s, b["linear"], b["embedding"], b["norms"]) if not q8 else
           int(b["linear"] + b["norms"] + q8))
    return dict(weight_mb=b["linear"] / MB, embed_mb=(b["embedding"] + q8) / MB, total_mb=(b["total"] + q8) / MB,
                bytes_per_token=bpt, head="fp32" if base == "fp32" else "q8_0" if q8 else "bf16",
                activations="int8" if is_act8(fmt) else "bf16" if base == "bf16" else "float32",
                bits_per_weight=8 * b["linear"] / s.linear_params,
                stream_bits_per_weight=(8 * b["streams"] / s.linear_params) if base in PACKED else None,
                linear_params=s.linear_params, total_params=s.params)


def speed_table(shapes: Sequence[str | Shape], formats: Sequence[str] = tuple(FORMATS), *, tokens: int = 16,
                repeats: int = 3, context: int = 64, prefill: bool = True, n_threads: int = 2,
                max_gb: float = 10.0, interleave: bool = True, seed: int = 0, peers: Sequence[str] = (),
                fused: bool = True, progress: bool = True) -> list[dict]:
    """Decode (and prefill) speed and size of every (shape, format); one row each.

    For each shape the formats that fit (:func:`skip_reason`) are built -- the ternary formats and
    bf16 share one bf16 embedding table -- and warmed up; then ``repeats`` rounds run, each timing
    every format in turn, the order rotated by one each round (``interleave``; so ratios compare runs under the same machine load) or
    each format alone and freed before the next (when ``interleave`` is False, or when all of a
    shape's models would not fit in memory together). A round fills the KV cache with a
    ``context``-token prompt through the GEMM path (timed: prefill tok/s; or, with ``prefill``
    False, with random keys and values) and then decodes ``tokens`` tokens greedily (timed: decode
    tok/s). A row of an 8-bit head or 8-bit activations (``-q8head``, ``-a8``) changes only the decode
    step; its prefill is its base format's, timed in that row, so it fills its cache with random keys
    and values instead (``prefill_tok_s`` None). Numba and PyTorch run on ``n_threads`` threads. With ``fused`` (the default) every format of
    :data:`~acl26.papers.sherry.decoder.FUSED` decodes through the fused step
    (:meth:`~acl26.papers.sherry.decoder.Model.fuse`, :mod:`acl26.kernels.decode`: one Numba call per
    token for the blocks and one for the head); fp32, and every format when ``fused`` is False, through
    the numpy decoder (prefill always does). Each row's ``engine`` says which ("fused" / "numpy").

    Row keys: ``shape``, ``paper_row``, ``format``, ``label``, ``status`` ("ok" / "skipped"),
    ``reason`` (why skipped); medians over the rounds: ``decode_tok_s``, ``decode_ms`` (per token),
    ``head_ms`` (per token in the output head), ``blocks_ms`` (per token in everything else),
    ``prefill_tok_s`` (None without prefill), with every round's figures in ``decode_runs`` /
    ``prefill_runs``; sizes from :func:`model_bytes` (MB = 2**20 bytes): ``weight_mb`` (linear
    layers, with the ternary formats' row scales), ``embed_mb``, ``total_mb``, ``bits_per_weight``
    (linear layers, scales included), ``stream_bits_per_weight`` (packed streams alone; None for
    fp32 / bf16), ``linear_params``, ``total_params``; and ``tokens``, ``context``, ``repeats``,
    ``threads``, ``interleaved``, ``build_s`` (building and warming up).

    ``peers`` (keys of :data:`acl26.papers.sherry.llamacpp.PEERS`) adds llama.cpp's whole-model
    decode of GGUF files of the same shape (random ternary weights, written and quantized once,
    cached) to every round's rotation: ``llama-bench -n tokens -d context`` on ``n_threads``
    threads, one sample per round. Their rows have the same keys (``head_ms``, ``blocks_ms`` and
    prefill are None; sizes are the GGUF file's, ``weight_mb`` its projection tensors) plus
    ``peer`` True and ``gguf_types``. Where llama.cpp is not built, or a TQ type cannot hold the
    shape's rows, the peer's row is "skipped" with the reason.

    The memory limit, measured in the same call on the same threads
    (:func:`acl26.kernels.ternary.read_bandwidth`): every row has ``bandwidth_gb_s`` (the machine's
    streaming read bandwidth), ``bytes_per_token`` (:func:`read_bytes_per_token`; a peer's from its
    GGUF file) and ``limit_share`` = bytes per token x decode tok/s / bandwidth (None when not timed):
    how close the format's decoding comes to the speed the bytes it reads allow.
    """
    from tqdm import tqdm

    if isinstance(shapes, (str, Shape)) or not isinstance(shapes, Sequence) or not shapes:
        raise ValueError(f"shapes must be a non-empty list of shape names or Shapes, got {shapes!r}")
    shape_objs = [get_shape(s, "shapes") for s in shapes]
    if len({s.name for s in shape_objs}) != len(shape_objs):
        raise ValueError(f"shapes must not repeat a shape (aliases count as the shape), got {list(shapes)}")
    if isinstance(formats, str) or not isinstance(formats, Sequence) or not formats:
        raise ValueError(f"formats must be a non-empty list of format names, got {formats!r}")
    for f in formats:
        if f not in SPEED_FORMATS:
            raise ValueError(f"formats: unknown format {f!r}; known: {list(SPEED_FORMATS)}")
    if len(set(formats)) != len(formats):
        raise ValueError(f"formats must not repeat a format, got {list(formats)}")
    tokens = checks.integer("tokens", tokens, 1)
    repeats = checks.integer("repeats", repeats, 1)
    context = checks.integer("context", context, 1)
    n_threads = checks.integer("n_threads", n_threads, 1)
    checks.integer("seed", seed, 0)
    if isinstance(peers, str) or not isinstance(peers, Sequence):
        raise ValueError(f"peers must be a list of llama.cpp peer names, got {peers!r}")
    from acl26.papers.sherry import llamacpp

    for k in peers:
        llamacpp.check_peer(k, "peers")
    if len(set(peers)) != len(peers):
        raise ValueError(f"peers must not repeat a peer, got {list(peers)}")
    checks.number("max_gb", max_gb, 0.0, lo_open=True)
    if not isinstance(fused, bool):
        raise ValueError(f"fused must be True or False, got {fused!r}")
    if not fused and any(f.endswith(Q8) or is_act8(f) for f in formats):
        raise ValueError(f"formats: the {Q8} and {A8} formats run through the fused step only; fused=False was given")

    rows = []
    jobs = [(s, f) for s in shape_objs for f in formats]
    jobs += [(s, k) for s in shape_objs for k in peers]
    bar = tqdm(total=len(jobs) * (repeats + 1), desc="speed table", disable=not progress)
    with timing.threads(n_threads):
        bw = tn.read_bandwidth()["gb_s"]
        for s in shape_objs:
            reasons = {f: skip_reason(s, base_format(f), max_gb=max_gb) for f in formats}
            todo = [f for f in formats if reasons[f] is None]
            bf16_emb = [f for f in todo if f != "fp32"]
            bases = dict.fromkeys(base_format(f) for f in todo)  # an 8-bit-head row shares its base's model
            together = (sum(model_bytes(s, f)["total"] - (model_bytes(s, f)["embedding"] if f != "fp32" else 0)
                            for f in bases) + (model_bytes(s, "bf16")["embedding"] if bf16_emb else 0)
                        + sum(_q8_head_bytes(s) for f in todo if f.endswith(Q8))
                        + sum(model_bytes(s, b)["streams"] for b in {base_format(f) for f in todo if is_act8(f)}))
            avail = available_bytes()
            inter = interleave and (avail is None or together <= 0.8 * avail)
            results = {f: dict(prefill=[], decode=[], head=[], blocks=[], build_s=None) for f in todo}
            shared: dict[str, Embedding] = {}
            base_models: dict[str, Model] = {}  # interleaved: a base model its 8-bit-head row shares
            act8_weights: dict[str, kd.Weights] = {}  # interleaved: the act8 weights two rows share
            q8_heads: dict[int, tuple] = {}  # (table, q, d): 8-bit copies of a head table, by the table's id

            def build(f):
                if f != "fp32" and "bf16" not in shared:
                    shared["bf16"] = random_embedding(s, "bf16", seed=seed)
                t0 = time.perf_counter()
                base = base_format(f)
                m = base_models.get(base)
                if m is None:  # the engine Engine.from_transformers builds for a real model, on random weights
                    m = Engine.random(s, base, seed=seed, embedding=shared.get("bf16") if base != "fp32" else None,
                                      fuse=fused, progress=progress).model
                    if inter:
                        base_models[base] = m
                if is_act8(f):  # the same blocks, the fused step on 8-bit activations (its own copy of the streams)
                    w8 = act8_weights.get(base)
                    if w8 is None:
                        w8 = kd.with_act8(m.fused)
                        if inter:
                            act8_weights[base] = w8
                    m = dataclasses.replace(m, head_seconds=0.0, fused=w8, _fused_state=None)
                if f.endswith(Q8):  # the same blocks, the fused step reading an 8-bit copy of the head
                    hit = q8_heads.get(id(m.embedding.head))  # the shared bf16 table: quantized once per shape
                    if hit is None or hit[0] is not m.embedding.head:  # (about 20 s at 1B)
                        hit = (m.embedding.head, *kd.q8_head(m.embedding.head))
                        q8_heads[id(m.embedding.head)] = hit  # holds the table: its id is not reused
                    q, d = hit[1], hit[2]
                    m = dataclasses.replace(m, head_seconds=0.0, fused=m.fused._replace(head_q8=q, head_q8_scale=d),
                                            _fused_state=None)
                cache = m.new_cache(context + tokens)
                _run_once(m, cache, min(context, 4), min(tokens, 2), prefill and f == base, np.random.default_rng(seed))  # warm
                results[f]["build_s"] = time.perf_counter() - t0
                bar.update(1)
                return m, cache

            def time_round(f, m, cache, r):
                rng = np.random.default_rng([seed, r])
                # a variant row (8-bit head or activations) prefills through its base format's path: not timed again
                tp, td, th = _run_once(m, cache, context, tokens, prefill and f == base_format(f), rng)
                if tp is not None:
                    results[f]["prefill"].append(context / tp)
                results[f]["decode"].append(tokens / td)
                results[f]["head"].append(th / tokens)
                results[f]["blocks"].append((td - th) / tokens)
                bar.update(1)

            peer_reasons = {k: (None if llamacpp.available() else
                                "llama.cpp is not built here (`acl26 prepare sherry`)") for k in peers}
            for k in peers:
                peer_reasons[k] = peer_reasons[k] or llamacpp.peer_skip_reason(s, k, max_gb=max_gb)
            peer_todo = [k for k in peers if peer_reasons[k] is None]
            peer_res = {k: dict(decode=[], build_s=None, path=None) for k in peer_todo}

            def build_peer(k):
                t0 = time.perf_counter()
                peer_res[k]["path"] = llamacpp.gguf_model(s, k, seed=seed)
                peer_res[k]["build_s"] = time.perf_counter() - t0
                bar.update(1)

            def time_peer(k):
                sample = llamacpp.bench_decode(peer_res[k]["path"], tokens=tokens, depth=context, threads=n_threads)
                peer_res[k]["decode"].append(sample[0])
                bar.update(1)

            for k in peer_todo:
                build_peer(k)
            if inter:
                built = {f: build(f) for f in todo}
                for r, order in enumerate(timing.rotations(todo + peer_todo, repeats)):  # rotates every round
                    for f in order:
                        if f in built:
                            time_round(f, *built[f], r)
                        else:
                            time_peer(f)
                del built
            else:
                for f in todo:
                    m, cache = build(f)
                    for r in range(repeats):
                        time_round(f, m, cache, r)
                    del m, cache
                for r, order in enumerate(timing.rotations(peer_todo, repeats)):
                    for k in order:
                        time_peer(k)
            shared.clear()
            base_models.clear()
            act8_weights.clear()
            q8_heads.clear()
            for f in formats:
                row = dict(shape=s.name, paper_row=s.paper_row, format=f, label=label(f),
                           engine="fused" if fused and base_format(f) in FUSED else "numpy",
                           status="ok" if reasons[f] is None else "skipped", reason=reasons[f] or "",
                           tokens=tokens, context=context, repeats=repeats, threads=n_threads,
                           interleaved=inter if reasons[f] is None else None, **_size_fields(s, f))
                if reasons[f] is None:
                    res = results[f]
                    dec = timing.median(res["decode"])
                    row.update(decode_tok_s=dec, decode_ms=1e3 / dec, head_ms=1e3 * timing.median(res["head"]),
                               blocks_ms=1e3 * timing.median(res["blocks"]),
                               prefill_tok_s=timing.median(res["prefill"]) if res["prefill"] else None,
                               decode_runs=res["decode"], prefill_runs=res["prefill"], build_s=res["build_s"])
                else:
                    bar.update(repeats + 1)
                    row.update(decode_tok_s=None, decode_ms=None, head_ms=None, blocks_ms=None,
                               prefill_tok_s=None, decode_runs=[], prefill_runs=[], build_s=None)
                rows.append(_limit(row, bw))
            for k in peers:
                label_, qtype, peer_head = llamacpp.PEERS[k]
                row = dict(shape=s.name, paper_row=s.paper_row, format=k, label=label_, peer=True, engine="llama.cpp",
                           head=peer_head or "llama-quantize's choice",
                           # what ggml's vec_dot multiplies the weights with: TQ1_0 / TQ2_0 take Q8_K activations
                           activations="int8 (Q8_K)" if qtype else "f16",
                           status="ok" if peer_reasons[k] is None else "skipped", reason=peer_reasons[k] or "",
                           tokens=tokens, context=context, repeats=repeats, threads=n_threads,
                           interleaved=inter if peer_reasons[k] is None else None, head_ms=None, blocks_ms=None,
                           prefill_tok_s=None, prefill_runs=[], linear_params=s.linear_params, total_params=s.params,
                           stream_bits_per_weight=None)
                if peer_reasons[k] is None:
                    res = peer_res[k]
                    z = llamacpp.gguf_sizes(res["path"])
                    dec = timing.median(res["decode"])
                    row.update(decode_tok_s=dec, decode_ms=1e3 / dec, decode_runs=res["decode"], build_s=res["build_s"],
                               weight_mb=z["linear"] / MB, embed_mb=z["embedding"] / MB, total_mb=z["total"] / MB,
                               bits_per_weight=8 * z["linear"] / z["linear_params"],
                               # projections, the head, and the rest of the file but the embeddings (norms)
                               bytes_per_token=int(z["linear"] + z["head"] + z["total"] - z["linear"]
                                                   - z["embedding"]),
                               gguf_types="/".join(z["types"]) + " (embeddings and head: "
                                          + "/".join(z["embedding_types"]) + ")")
                else:
                    bar.update(repeats + 1)
                    row.update(decode_tok_s=None, decode_ms=None, decode_runs=[], build_s=None, weight_mb=None,
                               embed_mb=None, total_mb=None, bits_per_weight=None, gguf_types=None,
                               bytes_per_token=None)
                rows.append(_limit(row, bw))
    bar.close()
    return rows


def decode_profile(shape: str | Shape = "bitnet-0.7b", formats: Sequence[str] = ("sherry", "bf16"), *,
                   tokens: int = 16, context: int = 64, repeats: int = 3, n_threads: int = 2, seed: int = 0,
                   progress: bool = True) -> list[dict]:
    """Where a decode step's time goes, before (the numpy decoder) and after (the fused step), per format.

    One random-weight model per format (:func:`build_model`); its cache holds ``context`` random keys and
    values; ``tokens`` greedy steps are timed whole, then each part alone, ``repeats`` times, first
    through the numpy decoder, then after :meth:`~acl26.papers.sherry.decoder.Model.fuse`. A format of
    8-bit activations (``"sherry-a8"``) has the fused rows only. Parts:

    * numpy: ``head`` (timed inside the steps), ``projections`` (every block's 7 layers' GEMV, one after
      another), ``rest`` (the step minus those two: norms, RoPE, attention, SiLU, numpy temporaries);
    * fused: ``head`` (timed inside the steps), ``projections`` and ``attention``
      (:func:`acl26.kernels.decode.profile_parts`), ``rest`` (the step minus those: norms, RoPE, SiLU,
      lookup tables' fill, residuals, call and thread-pool overheads).

    Rows: ``shape``, ``format``, ``engine``, ``part`` ("total" first), ``ms`` (per token, median over the
    repeats), ``ms_min``, ``ms_max``, ``mb`` (bytes the part reads per token, MB = 2**20; projections and
    head) and ``gb_s`` (those bytes over the median time, GB = 1e9), and ``regions`` (parallel regions per
    token of the fused step).
    """
    from tqdm import tqdm

    from acl26.kernels import decode as kd

    s = get_shape(shape, "shape")
    if isinstance(formats, str) or not isinstance(formats, Sequence) or not formats:
        raise ValueError(f"formats must be a non-empty list of format names, got {formats!r}")
    profiled = FUSED + tuple(f + A8 for f in PACKED)
    for f in formats:
        if f not in profiled:
            raise ValueError(f"formats: {f!r} has no fused step; choose from {profiled}")
    tokens, context = checks.integer("tokens", tokens, 1), checks.integer("context", context, 1)
    repeats, n_threads = checks.integer("repeats", repeats, 1), checks.integer("n_threads", n_threads, 1)
    checks.integer("seed", seed, 0)
    rows = []
    with timing.threads(n_threads):
        for f in tqdm(formats, desc=f"decode profile {s.name}", disable=not progress):
            m = Engine.random(s, base_format(f), seed=seed, fuse=False).model  # fused below, after the numpy profile
            cache = m.new_cache(context + tokens)
            rng = np.random.default_rng(seed)
            head_mb = (m.embedding.head.numel() * m.embedding.head.element_size()) / MB
            lin_mb = m.linear_bytes / MB
            for engine in ("fused",) if is_act8(f) else ("numpy", "fused"):  # numpy has no 8-bit activations
                if engine == "fused":
                    m.fuse(act8=is_act8(f))
                parts: dict[str, list[float]] = {}
                xs = {n_in: rng.standard_normal(n_in).astype(np.float32) for _, (_, n_in) in s.linears()}
                for r in range(repeats + 1):  # the first round warms up
                    _, td, th = _run_once(m, cache, context, tokens, False, np.random.default_rng([seed, r]))
                    got = {"total": td / tokens, "head": th / tokens}
                    if engine == "numpy":
                        t0 = time.perf_counter()
                        for blk in m.blocks:
                            for name, (_, n_in) in s.linears():
                                blk.linears[name].gemv(xs[n_in])
                        got["projections"] = time.perf_counter() - t0
                        got["rest"] = got["total"] - got["head"] - got["projections"]
                    else:
                        st = m._fused_state
                        got.update(kd.profile_parts(m.fused, st, context, repeats=1))
                        got.pop("head")  # the head as timed inside the steps is kept
                        got["head"] = th / tokens
                        got["rest"] = got["total"] - got["head"] - got["projections"] - got["attention"]
                    if r:
                        for k, v in got.items():
                            parts.setdefault(k, []).append(v)
                order = ["total", "projections"] + (["attention"] if engine == "fused" else []) + ["head", "rest"]
                for part in order:
                    sp = timing.spread(parts[part])
                    mb = {"projections": lin_mb, "head": head_mb}.get(part)
                    rows.append(dict(shape=s.name, format=f, engine=engine, part=part, ms=1e3 * sp["median"],
                                     ms_min=1e3 * sp["min"], ms_max=1e3 * sp["max"], mb=mb,
                                     gb_s=mb * MB / sp["median"] / 1e9 if mb else None,
                                     regions=kd.regions_per_token(m.fused) if engine == "fused" else None))
            del m, cache
    return rows


def _limit(row: dict, bandwidth_gb_s: float) -> dict:
    """``row`` with the memory limit's fields (see :func:`speed_table`)."""
    bpt, tok_s = row.get("bytes_per_token"), row.get("decode_tok_s")
    row["bandwidth_gb_s"] = bandwidth_gb_s
    row["limit_share"] = bpt * tok_s / (bandwidth_gb_s * 1e9) if bpt and tok_s else None
    return row


# --------------------------------------------------------------------------------------------
# benchmarks (acl26 bench sherry)


#: the decode goals of issue 28, fixed before any run: Sherry over llama.cpp's TQ2_0 with the same head
#: precision at the 0.7B shape, with 8-bit heads on both sides at the LLaMA-3.2-1B shape, and the share
#: of the read bandwidth Sherry's blocks (the head excluded) reach
GOAL_VS_TQ2_07B = 1.5
GOAL_VS_TQ2_1B_Q8 = 1.1
GOAL_BLOCKS_SHARE = 0.5


def _round_ratios(a: dict | None, b: dict | None) -> list[float]:
    """Per-round tok/s ratios a / b of two rows of one speed table (the rounds ran both)."""
    if not a or not b or not a.get("decode_runs") or not b.get("decode_runs"):
        return []
    return [x / y for x, y in zip(a["decode_runs"], b["decode_runs"])]


def benchmarks(quick: bool = False) -> dict:
    """The decode goals (:data:`GOAL_VS_TQ2_07B`, :data:`GOAL_VS_TQ2_1B_Q8`, :data:`GOAL_BLOCKS_SHARE`) on
    one speed table of the 0.7B and LLaMA-3.2-1B shapes (``quick``: the tiny shape, goals not judged),
    every fused format, Sherry with an 8-bit head, and llama.cpp's TQ2_0 / TQ1_0 (f16 head) and TQ2_0
    with a q8_0 head in the same rotated rounds; and the before/after profile of a decode step
    (:func:`decode_profile`, Sherry and BF16 at the first shape).

    Same JSON shape as :func:`acl26.papers.sherry.kernel_bench.benchmarks`: rows and goals (target,
    measured, met). A ratio goal is met when the slowest round's ratio clears it (``min ratio``); a
    format that was skipped (memory, llama.cpp not built) leaves its goals unjudged, saying why.
    """
    from acl26 import machine

    shapes = ["tiny"] if quick else ["bitnet-0.7b", "llama-3.2-1b"]
    tokens, repeats, context = (8, 2, 16) if quick else (16, 3, 64)
    formats = ["bf16", "i2", "tl2", "sherry", "sherry" + Q8, "i2" + A8, "tl2" + A8, "sherry" + A8, "sherry" + A8 + Q8]
    peers = ["ggml-tq2_0", "ggml-tq1_0", "ggml-tq2_0" + Q8]
    table = speed_table(shapes, formats, tokens=tokens, repeats=repeats, context=context, progress=False,
                        peers=peers)
    t = {(r["shape"], r["format"]): r for r in table}
    cpu = machine.cpu_model()
    rows = []
    for r in table:
        row = dict(benchmark=f"decode {r['label']} ({r['engine']})", shape=r["shape"],
                   median_s=1 / r["decode_tok_s"] if r["decode_tok_s"] else None,
                   min_s=1 / max(r["decode_runs"]) if r["decode_runs"] else None,
                   max_s=1 / min(r["decode_runs"]) if r["decode_runs"] else None, tok_s=r["decode_tok_s"],
                   ratio=ratio_or_none(r["decode_tok_s"], t[(r["shape"], "bf16")]["decode_tok_s"]),
                   bytes_per_token=r["bytes_per_token"], limit_share=r["limit_share"], head_ms=r["head_ms"],
                   blocks_ms=r["blocks_ms"])
        if r["status"] != "ok":
            row["note"] = f"skipped: {r['reason']}"
        rows.append(row)
    prof = decode_profile(shapes[0], ["sherry", "sherry" + A8, "bf16"], tokens=tokens, context=context,
                          repeats=repeats, progress=False)
    for p in prof:
        rows.append(dict(benchmark=f"profile {p['format']} {p['engine']}: {p['part']}", shape=p["shape"],
                         median_s=p["ms"] / 1e3, min_s=p["ms_min"] / 1e3, max_s=p["ms_max"] / 1e3, gb_s=p["gb_s"],
                         regions_per_token=p["regions"]))

    def ratio_goal(goal, target, shape, a, b, need):
        rr = _round_ratios(t.get((shape, a)), t.get((shape, b)))
        if not rr:
            why = "; ".join(f"{k}: {t[(shape, k)]['reason']}" for k in (a, b)
                            if (shape, k) in t and t[(shape, k)]["status"] != "ok") or "not timed"
            return dict(goal=goal, target=target, measured=f"not judged ({why})", met=None)
        med = float(np.median(rr))
        return dict(goal=goal, target=target,
                    measured=(f"{t[(shape, a)]['decode_tok_s']:.1f} vs {t[(shape, b)]['decode_tok_s']:.1f} tok/s; "
                              f"per-round ratio {med:.2f}× [{min(rr):.2f}, {max(rr):.2f}]"
                              + (f" ({cpu})" if cpu else "")),
                    met=None if quick else bool(min(rr) >= need))

    s0 = shapes[0]
    lin = model_bytes(s0, "sherry")
    block_bytes = lin["linear"] + lin["norms"]

    def share_goal(fmt):
        sh = t.get((s0, fmt))
        bw = sh["bandwidth_gb_s"] if sh else None
        share = (block_bytes / (sh["blocks_ms"] / 1e3) / (bw * 1e9)) if sh and sh["blocks_ms"] else None
        return dict(goal=f"{label(fmt)}: blocks (head excluded) read at ≥ {GOAL_BLOCKS_SHARE:.0%} of the measured "
                         f"bandwidth ({s0})", target=f"≥ {GOAL_BLOCKS_SHARE:.0%}",
                    measured=(f"{block_bytes / 2**20:.1f} MiB in {sh['blocks_ms']:.2f} ms per token = "
                              f"{block_bytes / (sh['blocks_ms'] / 1e3) / 1e9:.1f} GB/s of {bw:.1f} GB/s ({share:.0%}; "
                              "attention over the float32 KV cache, norms and call overheads included)"
                              + (f" ({cpu})" if cpu else ""))
                    if share is not None else "not timed",
                    met=None if quick or share is None else bool(share >= GOAL_BLOCKS_SHARE))

    goals = []
    for act in ("", A8):  # float32 activations, then 8-bit ones (as llama.cpp's TQ types multiply)
        goals += [
            ratio_goal(f"{label('sherry' + act)} ≥ {GOAL_VS_TQ2_07B}× llama.cpp TQ2_0 at the 0.7B shape, same head "
                       "precision (bf16 / f16)", f"slowest round ≥ {GOAL_VS_TQ2_07B}×", s0, "sherry" + act,
                       "ggml-tq2_0", GOAL_VS_TQ2_07B),
            ratio_goal(f"{label('sherry' + act)} ≥ {GOAL_VS_TQ2_1B_Q8}× llama.cpp TQ2_0 at the LLaMA-3.2-1B shape, "
                       "8-bit heads on both sides", f"slowest round ≥ {GOAL_VS_TQ2_1B_Q8}×", shapes[-1],
                       "sherry" + act + Q8, "ggml-tq2_0" + Q8, GOAL_VS_TQ2_1B_Q8),
            share_goal("sherry" + act),
        ]
    return {"title": "Sherry: decode speed at model shapes", "shape": ", ".join(shapes), "rows": rows, "goals": goals,
            "note": (f"Greedy decoding of {tokens} tokens after a {context}-token context through random-weight "
                     f"models of the {', '.join(shapes)} shapes, through the fused decode step "
                     "(acl26.kernels.decode); medians of "
                     f"{repeats} rounds, each running every format in turn in an order that rotates every round; "
                     "llama.cpp's rows are llama-bench on GGUF files of the same shape (random ternary weights), "
                     "one sample per round in the same rotation. Numba and llama.cpp on 2 threads. Ratio = tok/s "
                     "over BF16's. Our ternary formats keep the embeddings and the output head in bf16 (the "
                     "-q8head row: an 8-bit head, ggml's Q8_0 layout); llama.cpp's in f16, or q8_0 where the row "
                     "says so. Our packed formats multiply float32 activations, or, in the rows that say "
                     "'8-bit activations', int8 ones with one absmax scale per vector (as BitNet b1.58; "
                     "llama.cpp's TQ types multiply 8-bit activations too). The profile rows time a decode step's parts before (numpy decoder) and after (fused "
                     "step); 'rest' is the step minus the parts timed alone."
                     + (" Quick run: the tiny shape, so the goals are not judged." if quick else ""))}
