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

import time
from typing import Sequence

import numpy as np

from acl26 import checks, timing
from acl26.kernels import ternary as tn
from acl26.papers.sherry.decoder import (FORMATS, FUSED, LABELS, MB, PACKED, Embedding, KVCache, Model, Shape, _check_format,
                                         available_bytes, build_model, get_shape, model_bytes, random_embedding,
                                         skip_reason)
from acl26.papers.sherry.paper import _paper_speed_ratio, _ratio

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





def read_bytes_per_token(s: Shape, linear: int, embedding: int, norms: int) -> int:
    """Bytes a decode step reads: every projection, the norms and the output head (the embedding table
    when tied, else its half that is the head; the one embedding row looked up is left out)."""
    return int(linear + norms + (embedding if s.tied else embedding // 2))


def _size_fields(s: Shape, fmt: str) -> dict:
    b = model_bytes(s, fmt)
    return dict(weight_mb=b["linear"] / MB, embed_mb=b["embedding"] / MB, total_mb=b["total"] / MB,
                bytes_per_token=read_bytes_per_token(s, b["linear"], b["embedding"], b["norms"]),
                bits_per_weight=8 * b["linear"] / s.linear_params,
                stream_bits_per_weight=(8 * b["streams"] / s.linear_params) if fmt in PACKED else None,
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
    tok/s). Numba and PyTorch run on ``n_threads`` threads. With ``fused`` (the default) every format of
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
        _check_format(f, "formats")
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
        llamacpp._check_peer(k, "peers")
    if len(set(peers)) != len(peers):
        raise ValueError(f"peers must not repeat a peer, got {list(peers)}")
    checks.number("max_gb", max_gb, 0.0, lo_open=True)
    if not isinstance(fused, bool):
        raise ValueError(f"fused must be True or False, got {fused!r}")

    rows = []
    jobs = [(s, f) for s in shape_objs for f in formats]
    jobs += [(s, k) for s in shape_objs for k in peers]
    bar = tqdm(total=len(jobs) * (repeats + 1), desc="speed table", disable=not progress)
    with timing.threads(n_threads):
        bw = tn.read_bandwidth()["gb_s"]
        for s in shape_objs:
            reasons = {f: skip_reason(s, f, max_gb=max_gb) for f in formats}
            todo = [f for f in formats if reasons[f] is None]
            bf16_emb = [f for f in todo if f != "fp32"]
            together = (sum(model_bytes(s, f)["total"] - (model_bytes(s, f)["embedding"] if f != "fp32" else 0)
                            for f in todo) + (model_bytes(s, "bf16")["embedding"] if bf16_emb else 0))
            avail = available_bytes()
            inter = interleave and (avail is None or together <= 0.8 * avail)
            results = {f: dict(prefill=[], decode=[], head=[], blocks=[], build_s=None) for f in todo}
            shared: dict[str, Embedding] = {}

            def build(f):
                if f != "fp32" and "bf16" not in shared:
                    shared["bf16"] = random_embedding(s, "bf16", seed=seed)
                t0 = time.perf_counter()
                m = build_model(s, f, seed=seed, embedding=shared.get("bf16") if f != "fp32" else None,
                                progress=progress)
                if fused and f in FUSED:
                    m.fuse()
                cache = m.new_cache(context + tokens)
                _run_once(m, cache, min(context, 4), min(tokens, 2), prefill, np.random.default_rng(seed))  # warm
                results[f]["build_s"] = time.perf_counter() - t0
                bar.update(1)
                return m, cache

            def time_round(f, m, cache, r):
                rng = np.random.default_rng([seed, r])
                tp, td, th = _run_once(m, cache, context, tokens, prefill, rng)
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
            for f in formats:
                row = dict(shape=s.name, paper_row=s.paper_row, format=f, label=LABELS[f],
                           engine="fused" if fused and f in FUSED else "numpy",
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
                label = llamacpp.PEERS[k][0]
                row = dict(shape=s.name, paper_row=s.paper_row, format=k, label=label, peer=True, engine="llama.cpp",
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
    through the numpy decoder, then after :meth:`~acl26.papers.sherry.decoder.Model.fuse`. Parts:

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
    for f in formats:
        if f not in FUSED:
            raise ValueError(f"formats: {f!r} has no fused step; choose from {FUSED}")
    tokens, context = checks.integer("tokens", tokens, 1), checks.integer("context", context, 1)
    repeats, n_threads = checks.integer("repeats", repeats, 1), checks.integer("n_threads", n_threads, 1)
    checks.integer("seed", seed, 0)
    rows = []
    with timing.threads(n_threads):
        for f in tqdm(formats, desc=f"decode profile {s.name}", disable=not progress):
            m = build_model(s, f, seed=seed)
            cache = m.new_cache(context + tokens)
            rng = np.random.default_rng(seed)
            head_mb = (m.embedding.head.numel() * m.embedding.head.element_size()) / MB
            lin_mb = m.linear_bytes / MB
            for engine in ("numpy", "fused"):
                if engine == "fused":
                    m.fuse()
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


def benchmarks(quick: bool = False) -> dict:
    """Decode speed of every format at the LLaMA-3.2-1B shape (``quick``: the tiny shape), with goals.

    Same JSON shape as :func:`acl26.papers.sherry.kernel_bench.benchmarks`: rows (medians; ratio = tok/s over
    BF16's) and goals (target, measured, met; time goals are not judged in a quick run). A format
    that had to be skipped (memory) is reported as such, and goals that need it are not judged.
    """
    shape = "tiny" if quick else "llama-3.2-1b"
    tokens, repeats, context = (16, 5, 16) if quick else (16, 3, 64)
    from acl26.papers.sherry import llamacpp

    table = speed_table([shape], list(FORMATS), tokens=tokens, repeats=repeats, context=context, progress=False,
                        peers=list(llamacpp.PEERS))
    t = {r["format"]: r for r in table}

    rows = []
    for key, what in (("decode_tok_s", "decode"), ("prefill_tok_s", f"prefill, {context} tokens")):
        for f, r in t.items():
            if key == "prefill_tok_s" and r.get("peer") is True:
                continue
            row = dict(benchmark=f"{what} {r['label']}", shape=shape,
                       median_s=(1 / r[key] if key == "decode_tok_s" else context / r[key]) if r[key] else None,
                       ratio=_ratio(r[key], t["bf16"][key]), tok_s=r[key])
            if key == "decode_tok_s":
                row.update(head_ms=r["head_ms"], total_mb=r["total_mb"], weight_mb=r["weight_mb"])
            if r["status"] != "ok":
                row["note"] = f"skipped: {r['reason']}"
            rows.append(row)
    sh, i2, tl2, bf, tq2 = (t[f]["decode_tok_s"] for f in ("sherry", "i2", "tl2", "bf16", "ggml-tq2_0"))

    def judged(ok, *needed):
        return None if quick or any(v is None for v in needed) else bool(ok())

    def show(x):
        return "skipped" if x is None else f"{x:.2f}"

    sb, ib = model_bytes(shape, "sherry"), model_bytes(shape, "i2")
    goals = [
        dict(goal="Sherry decodes faster than TL2 (1.67-bit)", target="tok/s(Sherry) > tok/s(TL2)",
             measured=f"{show(sh)} vs {show(tl2)} tok/s ({show(_ratio(sh, tl2))}×; paper 0.7B "
                      f"{_paper_speed_ratio('0.7B', 'sherry', 'tl2'):.2f}×)", met=judged(lambda: sh > tl2, sh, tl2)),
        dict(goal="Sherry decodes at least as fast as llama.cpp's TQ2_0 (2-bit, f16 head as ours is bf16)",
             target="tok/s(Sherry) ≥ tok/s(TQ2_0)",
             measured=f"{show(sh)} vs {show(tq2)} tok/s ({show(_ratio(sh, tq2))}×; paper 0.7B vs I2_S "
                      f"{_paper_speed_ratio('0.7B', 'sherry', 'i2'):.2f}×; our lookup-table I2 {show(i2)} tok/s)"
                      + ("" if tq2 is not None else f" [{t['ggml-tq2_0']['reason']}]"),
             met=judged(lambda: sh >= tq2, sh, tq2)),
        dict(goal="Sherry weight bytes = 62.5% of I2's", target="62.5% (packed streams)",
             measured=f"{sb['streams'] / ib['streams']:.2%} of the streams; {sb['linear'] / ib['linear']:.2%} "
                      f"with per-row scales; {sb['total'] / ib['total']:.2%} of the whole model (bf16 "
                      f"embeddings and head)", met=abs(sb["streams"] / ib["streams"] - 0.625) < 1e-9),
        dict(goal="Sherry decode speedup over BF16", target=f"reported (paper 0.7B: {_paper_speed_ratio('0.7B', 'sherry', 'bf16'):.2f}×)",
             measured=f"{show(_ratio(sh, bf))}×", met=None),
    ]
    return {"title": "Sherry: decode speed at model shapes", "shape": shape, "rows": rows, "goals": goals,
            "note": (f"Greedy decoding of {tokens} tokens after a {context}-token prefill through random-weight "
                     f"models of the {shape} shape; medians of {repeats} rounds, each running every format in "
                     "turn in an order that rotates every round; llama.cpp's rows are llama-bench on GGUF files "
                     "of the same shape (random ternary weights), one sample per round in the same rotation. "
                     "Numba, PyTorch and llama.cpp on 2 threads. Ratio = tok/s over BF16's. Our ternary formats "
                     "keep the embeddings and the output head in bf16; llama.cpp's in f16, or quantized where "
                     "the row says so."
                     + (" Quick run: the tiny shape, so the time goals are not judged." if quick else ""))}
