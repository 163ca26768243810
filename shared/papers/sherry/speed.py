"""Sherry (ACL 2026, arXiv 2601.07892): decode speed and model size at real model shapes.

The paper's speed table (Intel i7-14700HX, bitnet.cpp-style kernels) gives tokens/s and model MB for
a 0.7B and a 3B model in BF16, I2_S (2-bit), TL2 (1.67-bit) and Sherry (1.25-bit). Timing needs no
trained weights, so this module builds transformer decoders of real shapes with RANDOM weights,
stores every linear layer in one format, and times greedy decoding (one token at a time, with a KV
cache) and a batched prefill. :func:`speed_table` returns one row per (shape, format), a format being a
:class:`SpeedFormat` (packing, activations, head) named in the rows as ``"sherry-a8-q8head"``;
:func:`.paper.paper_table` holds the paper's rows as data and :func:`.tables.compare` puts the two side by side as
same-machine ratios (Sherry vs I2, vs TL2, vs BF16), the only figures that carry across machines.

The decoders themselves are :mod:`acl26.papers.sherry.decoder`; the paper's table and the
comparison with it :mod:`acl26.papers.sherry.paper`.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from acl26 import checks, timing
from acl26.kernels import decode as kd
from acl26.kernels import ternary as tn
from acl26.papers.sherry import ikllama, llamacpp
from acl26.papers.sherry.decoder import (FORMATS, FUSED, LABELS, MB, PACKED, Embedding, KVCache, Model, Shape,
                                         available_bytes, get_shape, model_bytes, random_embedding,
                                         skip_reason)
from acl26.papers.sherry.engine import Engine

# --------------------------------------------------------------------------------------------
# speed formats

#: the name's suffix of a format on 8-bit activations, and of one reading an 8-bit head (in that order)
_A8, _Q8 = "-a8", "-q8head"


def _own_activations(packing: str) -> str:
    """What ``packing``'s linear layers multiply when 8-bit activations are not asked for."""
    return "bf16" if packing == "bf16" else "float32"


def _own_head(packing: str) -> str:
    """The head table a ``packing`` model reads when an 8-bit head is not asked for (the ternary formats
    share bf16's table)."""
    return "fp32" if packing == "fp32" else "bf16"


@dataclasses.dataclass(frozen=True)
class SpeedFormat:
    """One format of the speed table: how the linear layers are stored (``packing``, a key of
    :data:`~acl26.papers.sherry.decoder.FORMATS`), what the decode step multiplies them with
    (``activations``: the packing's own, "float32" or "bf16" for bf16, or "int8": 8-bit activations with
    one absmax scale per vector, :func:`acl26.kernels.decode.with_act8`, packed formats only) and which
    output head it reads (``head``: the packing's own table, "fp32" or "bf16", or "q8_0": an 8-bit copy
    in ggml's Q8_0 layout, :func:`acl26.kernels.decode.q8_head`, fused formats only). The two 8-bit
    options change only the fused decode step: such a format (a :attr:`variant`) runs its packing's
    model. :attr:`name` is how parameters and rows spell it (``"sherry-a8-q8head"``), and
    :meth:`parse` reads a name back."""

    packing: str
    activations: str
    head: str

    def __post_init__(self):
        acts = (_own_activations(self.packing),) + (("int8",) if self.packing in PACKED else ())
        heads = (_own_head(self.packing),) + (("q8_0",) if self.packing in FUSED else ())
        if self.packing not in FORMATS or self.activations not in acts or self.head not in heads:
            raise ValueError(f"no speed format has packing={self.packing!r}, activations={self.activations!r} "
                             f"and head={self.head!r}")

    @classmethod
    def of(cls, packing: str, *, act8: bool = False, q8_head: bool = False) -> SpeedFormat:
        """``packing`` on its own activations and head, or on 8-bit ones."""
        return cls(packing, "int8" if act8 else _own_activations(packing), "q8_0" if q8_head else _own_head(packing))

    @classmethod
    def parse(cls, name: str) -> SpeedFormat:
        """The format ``name`` names (the packing, then ``-a8``, then ``-q8head``); ValueError if none."""
        if isinstance(name, str):
            packing = name.removesuffix(_Q8).removesuffix(_A8)
            try:
                fmt = cls.of(packing, act8=name.removesuffix(_Q8).endswith(_A8), q8_head=name.endswith(_Q8))
            except ValueError:
                fmt = None
            if fmt is not None and fmt.name == name:
                return fmt
        raise ValueError(f"unknown format {name!r}; known: {list(SPEED_FORMATS)}")

    @property
    def act8(self) -> bool:
        """Whether the fused step multiplies 8-bit activations."""
        return self.activations == "int8"

    @property
    def q8_head(self) -> bool:
        """Whether the fused step reads an 8-bit copy of the head."""
        return self.head == "q8_0"

    @property
    def variant(self) -> bool:
        """Whether the decode step differs from the packing's own (8-bit activations or head)."""
        return self.act8 or self.q8_head

    @property
    def name(self) -> str:
        """The name in parameters and rows: ``"sherry"``, ``"sherry-q8head"``, ``"sherry-a8-q8head"``."""
        return self.packing + (_A8 if self.act8 else "") + (_Q8 if self.q8_head else "")

    @property
    def label(self) -> str:
        """The name in tables."""
        return (LABELS[self.packing] + (", 8-bit activations" if self.act8 else "")
                + (", 8-bit head (Q8_0 layout)" if self.q8_head else ""))


#: every format :func:`speed_table` times, by name: the weight formats, the fused ones with an 8-bit head, and the
#: packed ones on 8-bit activations (with either head)
SPEED_FORMATS = tuple(f.name for f in [SpeedFormat.of(p) for p in FORMATS]
                      + [SpeedFormat.of(p, q8_head=True) for p in FUSED]
                      + [SpeedFormat.of(p, act8=True) for p in PACKED]
                      + [SpeedFormat.of(p, act8=True, q8_head=True) for p in PACKED])


def parse_formats(formats: Sequence[str]) -> list[SpeedFormat]:
    """A non-empty list of format names without repeats, parsed (ValueError naming ``formats`` otherwise)."""
    if isinstance(formats, str) or not isinstance(formats, Sequence) or not formats:
        raise ValueError(f"formats must be a non-empty list of format names, got {formats!r}")
    parsed = []
    for f in formats:
        try:
            parsed.append(SpeedFormat.parse(f))
        except ValueError as e:
            raise ValueError(f"formats: {e}") from None
    if len(set(parsed)) != len(parsed):
        raise ValueError(f"formats must not repeat a format, got {list(formats)}")
    return parsed


# --------------------------------------------------------------------------------------------
# sizes


def _q8_head_bytes(s: Shape) -> int:
    """Bytes of an 8-bit head of ``s`` (:func:`acl26.kernels.decode.q8_head`): int8 weights and a float16 scale per
    :data:`~acl26.kernels.decode.Q8_BLOCK` inputs of a row."""
    return s.vocab * (s.hidden + 2 * -(-s.hidden // kd.Q8_BLOCK))


def read_bytes_per_token(s: Shape, linear: int, embedding: int, norms: int) -> int:
    """Bytes a decode step reads: every projection, the norms and the output head (the embedding table
    when tied, else its half that is the head; the one embedding row looked up is left out)."""
    return int(linear + norms + (embedding if s.tied else embedding // 2))


def _size_fields(s: Shape, f: SpeedFormat) -> dict:
    """Sizes of a speed-table row; an 8-bit-head row holds the bf16 table (the embedding lookup) and the
    8-bit head, and reads the latter per token."""
    b = model_bytes(s, f.packing)
    q8 = _q8_head_bytes(s) if f.q8_head else 0
    bpt = (read_bytes_per_token(s, b["linear"], b["embedding"], b["norms"]) if not q8 else
           int(b["linear"] + b["norms"] + q8))
    return dict(weight_mb=b["linear"] / MB, embed_mb=(b["embedding"] + q8) / MB, total_mb=(b["total"] + q8) / MB,
                bytes_per_token=bpt, head=f.head, activations=f.activations,
                bits_per_weight=8 * b["linear"] / s.linear_params,
                stream_bits_per_weight=(8 * b["streams"] / s.linear_params) if f.packing in PACKED else None,
                linear_params=s.linear_params, total_params=s.params)


def _bytes_together(s: Shape, todo: Sequence[SpeedFormat]) -> int:
    """Bytes the models of ``todo`` hold when built side by side: each packing's model once (a variant runs
    its packing's), one bf16 embedding table for all but fp32, each 8-bit head, and each packing's own copy
    of its streams for 8-bit activations."""
    packings = dict.fromkeys(f.packing for f in todo)
    return (sum(model_bytes(s, p)["total"] - (model_bytes(s, p)["embedding"] if p != "fp32" else 0) for p in packings)
            + (model_bytes(s, "bf16")["embedding"] if any(f.packing != "fp32" for f in todo) else 0)
            + sum(_q8_head_bytes(s) for f in todo if f.q8_head)
            + sum(model_bytes(s, p)["streams"] for p in {f.packing for f in todo if f.act8}))


def _fit_together(s: Shape, todo: Sequence[SpeedFormat]) -> bool:
    """Whether the models of ``todo`` fit in 80% of the available memory at once (yes where it cannot be read)."""
    avail = available_bytes()
    return avail is None or _bytes_together(s, todo) <= 0.8 * avail


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





@dataclasses.dataclass(frozen=True)
class _Settings:
    """How :func:`speed_table` builds and times every row (its arguments, checked)."""

    tokens: int
    repeats: int
    context: int
    prefill: bool
    n_threads: int
    max_gb: float
    interleave: bool
    seed: int
    fused: bool
    progress: bool


@dataclasses.dataclass
class _Samples:
    """One of our rows' figures over the rounds: prefill and decode tok/s, the head's and the rest's seconds
    per token, and the seconds building and warming up took."""

    prefill: list[float] = dataclasses.field(default_factory=list)
    decode: list[float] = dataclasses.field(default_factory=list)
    head: list[float] = dataclasses.field(default_factory=list)
    blocks: list[float] = dataclasses.field(default_factory=list)
    build_s: float | None = None


@dataclasses.dataclass
class _PeerSamples:
    """One peer's GGUF file, the seconds it took to get, and its decode tok/s per round."""

    key: str
    path: Path
    build_s: float
    decode: list[float] = dataclasses.field(default_factory=list)


class _Models:
    """The models of one shape's rows, built as they are asked for: one bf16 embedding table for every
    packing but fp32; an 8-bit copy of a head table quantized once; with ``keep`` (interleaved rounds, where
    every row's model lives at once) one model per packing that its variants share, and one copy of its
    weights for 8-bit activations."""

    def __init__(self, s: Shape, cfg: _Settings, *, keep: bool):
        self.s, self.cfg, self.keep = s, cfg, keep
        self.embedding: Embedding | None = None
        self.packed: dict[str, Model] = {}
        self.act8: dict[str, kd.Weights] = {}
        self.q8_heads: dict[int, tuple] = {}  # (table, q, d): 8-bit copies of a head table, by the table's id

    def share_embedding(self, f: SpeedFormat) -> None:
        """Make the bf16 table ``f`` (not fp32) shares, if not made yet."""
        if f.packing != "fp32" and self.embedding is None:
            self.embedding = random_embedding(self.s, "bf16", seed=self.cfg.seed)

    def model(self, f: SpeedFormat) -> Model:
        """``f``'s model: its packing's (the engine Engine.from_transformers builds for a real model, on
        random weights), its fused step on 8-bit activations and / or reading an 8-bit head."""
        m = self.packed.get(f.packing)
        if m is None:
            m = Engine.random(self.s, f.packing, seed=self.cfg.seed,
                              embedding=self.embedding if f.packing != "fp32" else None, fuse=self.cfg.fused,
                              progress=self.cfg.progress).model
            if self.keep:
                self.packed[f.packing] = m
        if f.act8:
            m = self._on_act8(m, f.packing)
        if f.q8_head:
            m = self._with_q8_head(m)
        return m

    def _on_act8(self, m: Model, packing: str) -> Model:
        """The same blocks, the fused step on 8-bit activations (its own copy of the streams)."""
        w8 = self.act8.get(packing)
        if w8 is None:
            w8 = kd.with_act8(m.fused)
            if self.keep:
                self.act8[packing] = w8
        return dataclasses.replace(m, head_seconds=0.0, fused=w8, _fused_state=None)

    def _with_q8_head(self, m: Model) -> Model:
        """The same blocks, the fused step reading an 8-bit copy of the head."""
        hit = self.q8_heads.get(id(m.embedding.head))  # the shared bf16 table: quantized once per shape
        if hit is None or hit[0] is not m.embedding.head:  # (about 20 s at 1B)
            hit = (m.embedding.head, *kd.q8_head(m.embedding.head))
            self.q8_heads[id(m.embedding.head)] = hit  # holds the table: its id is not reused
        q, d = hit[1], hit[2]
        return dataclasses.replace(m, head_seconds=0.0, fused=m.fused._replace(head_q8=q, head_q8_scale=d),
                                   _fused_state=None)


def _build(models: _Models, f: SpeedFormat, cfg: _Settings) -> tuple[Model, KVCache, float]:
    """``f``'s model and KV cache, warmed up, and the seconds that took (the shared table's making left out)."""
    models.share_embedding(f)
    t0 = time.perf_counter()
    m = models.model(f)
    cache = _new_cache(m, cfg.context + cfg.tokens)
    _run_once(m, cache, min(cfg.context, 4), min(cfg.tokens, 2), cfg.prefill and not f.variant,
              np.random.default_rng(cfg.seed))  # warm
    return m, cache, time.perf_counter() - t0


def _time_round(m: Model, cache: KVCache, f: SpeedFormat, r: int, cfg: _Settings, samples: _Samples) -> None:
    """Round ``r`` of ``f``'s row, added to ``samples``; a variant (8-bit head or activations) prefills through
    its packing's path, so its prefill is not timed again."""
    tp, td, th = _run_once(m, cache, cfg.context, cfg.tokens, cfg.prefill and not f.variant,
                           np.random.default_rng([cfg.seed, r]))
    if tp is not None:
        samples.prefill.append(cfg.context / tp)
    samples.decode.append(cfg.tokens / td)
    samples.head.append(th / cfg.tokens)
    samples.blocks.append((td - th) / cfg.tokens)


#: the forks whose whole-model decode the speed table can time, by the modules that run them
PEER_FORKS = (llamacpp, ikllama)
#: the fused step's KV cache in :func:`speed_table` and :func:`decode_profile`: float16, the default cache of
#: llama.cpp and ik_llama.cpp (``-ctk f16 -ctv f16``), so that attention reads the same bytes on both sides
#: (issue 41, point 2). The numpy decoder keeps float32: it would widen a float16 cache on every read.
FUSED_KV = "float16"


def _new_cache(m: Model, capacity: int) -> KVCache:
    """``m``'s cache for ``capacity`` positions: :data:`FUSED_KV` once ``m`` is fused, else float32."""
    return m.new_cache(capacity, FUSED_KV if m.fused is not None else "float32")


def peer_fork(key: str, argument: str = "peers"):
    """The module that runs peer ``key``: :mod:`.llamacpp` (its ``PEERS``: TQ1_0 / TQ2_0) or :mod:`.ikllama`
    (IQ1_BN / IQ2_BN / IQ2_BN_R4); ValueError naming ``argument`` and every known peer otherwise."""
    for fork in PEER_FORKS:
        if key in fork.PEERS:
            return fork
    known = sorted(k for fork in PEER_FORKS for k in fork.PEERS)
    raise ValueError(f"{argument}: unknown peer {key!r}; known: {known}")


def _fork_name(fork) -> str:
    return (fork.LLAMACPP if fork is llamacpp else fork.IKLLAMA).name


def _peer_reasons(s: Shape, peers: Sequence[str], max_gb: float) -> dict[str, str | None]:
    """Why each peer cannot run at ``s`` (None where it can): its fork not built here, or the fork's own reason."""
    out = {}
    for k in peers:
        fork = peer_fork(k)
        out[k] = (None if fork.available() else f"{_fork_name(fork)} is not built here (`acl26 prepare sherry`)") \
            or fork.peer_skip_reason(s, k, max_gb=max_gb)
    return out


def _build_peer(s: Shape, k: str, cfg: _Settings) -> _PeerSamples:
    """Peer ``k``'s GGUF file at ``s`` (written and quantized once, then cached), and the seconds it took."""
    t0 = time.perf_counter()
    path = peer_fork(k).gguf_model(s, k, seed=cfg.seed)
    return _PeerSamples(key=k, path=path, build_s=time.perf_counter() - t0)


def _time_peer(peer: _PeerSamples, cfg: _Settings) -> None:
    """One round of a peer: ``llama-bench``'s decode tok/s, one sample, added to ``peer``."""
    peer.decode.append(peer_fork(peer.key).bench_decode(peer.path, tokens=cfg.tokens, depth=cfg.context,
                                                        threads=cfg.n_threads)[0])


def _time_shape(s: Shape, todo: list[SpeedFormat], peer_todo: list[str], interleaved: bool, cfg: _Settings,
                bar) -> tuple[dict[SpeedFormat, _Samples], dict[str, _PeerSamples]]:
    """Every round of one shape's rows that run: the peers' files first; then, ``interleaved``, every model
    built, and ``cfg.repeats`` rounds each timing every row (peers included) in an order rotated by one each
    round; else each of our models alone, built, timed and freed, then the peers' rounds."""
    theirs = {}
    for k in peer_todo:
        theirs[k] = _build_peer(s, k, cfg)
        bar.update(1)
    ours = {f: _Samples() for f in todo}
    models = _Models(s, cfg, keep=interleaved)
    if interleaved:
        built = {}
        for f in todo:
            m, cache, ours[f].build_s = _build(models, f, cfg)
            built[f] = (m, cache)
            bar.update(1)
        for r, order in enumerate(timing.rotations(todo + peer_todo, cfg.repeats)):  # rotates every round
            for x in order:
                if isinstance(x, SpeedFormat):
                    _time_round(*built[x], x, r, cfg, ours[x])
                else:
                    _time_peer(theirs[x], cfg)
                bar.update(1)
    else:
        for f in todo:
            m, cache, ours[f].build_s = _build(models, f, cfg)
            bar.update(1)
            for r in range(cfg.repeats):
                _time_round(m, cache, f, r, cfg, ours[f])
                bar.update(1)
            del m, cache
        for order in timing.rotations(peer_todo, cfg.repeats):
            for k in order:
                _time_peer(theirs[k], cfg)
                bar.update(1)
    return ours, theirs


# --------------------------------------------------------------------------------------------
# the table


def _our_row(s: Shape, f: SpeedFormat, reason: str | None, samples: _Samples | None, interleaved: bool,
             cfg: _Settings) -> dict:
    """The row of one of our formats at ``s``: its sizes, and its medians over the rounds where it ran."""
    row = dict(shape=s.name, paper_row=s.paper_row, format=f.name, label=f.label,
               engine="fused" if cfg.fused and f.packing in FUSED else "numpy",
               status="ok" if reason is None else "skipped", reason=reason or "",
               tokens=cfg.tokens, context=cfg.context, repeats=cfg.repeats, threads=cfg.n_threads,
               interleaved=interleaved if reason is None else None, **_size_fields(s, f))
    if reason is None:
        dec = timing.median(samples.decode)
        row.update(decode_tok_s=dec, decode_ms=1e3 / dec, head_ms=1e3 * timing.median(samples.head),
                   blocks_ms=1e3 * timing.median(samples.blocks),
                   prefill_tok_s=timing.median(samples.prefill) if samples.prefill else None,
                   decode_runs=samples.decode, prefill_runs=samples.prefill, build_s=samples.build_s)
    else:
        row.update(decode_tok_s=None, decode_ms=None, head_ms=None, blocks_ms=None,
                   prefill_tok_s=None, decode_runs=[], prefill_runs=[], build_s=None)
    return row


def _peer_row(s: Shape, k: str, reason: str | None, peer: _PeerSamples | None, interleaved: bool,
              cfg: _Settings) -> dict:
    """The row of peer ``k`` at ``s``: its GGUF file's sizes and its median over the rounds where it ran."""
    fork = peer_fork(k)
    label_, qtype, peer_head = fork.PEERS[k]
    # what the fork's vec_dot multiplies the weights with: ggml's TQ1_0 / TQ2_0 take Q8_K activations,
    # ik_llama.cpp's BN types their own 8-bit rows (ikllama.ACTIVATIONS)
    acts = ("f16" if not qtype else ikllama.ACTIVATIONS[qtype] if fork is ikllama else "int8 (Q8_K)")
    row = dict(shape=s.name, paper_row=s.paper_row, format=k, label=label_, peer=True, engine=_fork_name(fork),
               head=peer_head or "llama-quantize's choice", activations=acts,
               status="ok" if reason is None else "skipped", reason=reason or "",
               tokens=cfg.tokens, context=cfg.context, repeats=cfg.repeats, threads=cfg.n_threads,
               interleaved=interleaved if reason is None else None, head_ms=None, blocks_ms=None,
               prefill_tok_s=None, prefill_runs=[], linear_params=s.linear_params, total_params=s.params,
               stream_bits_per_weight=None)
    if reason is None:
        z = fork.gguf_sizes(peer.path)
        dec = timing.median(peer.decode)
        row.update(decode_tok_s=dec, decode_ms=1e3 / dec, decode_runs=peer.decode, build_s=peer.build_s,
                   weight_mb=z["linear"] / MB, embed_mb=z["embedding"] / MB, total_mb=z["total"] / MB,
                   bits_per_weight=8 * z["linear"] / z["linear_params"],
                   # projections, the head, and the rest of the file but the embeddings (norms)
                   bytes_per_token=int(z["linear"] + z["head"] + z["total"] - z["linear"] - z["embedding"]),
                   gguf_types="/".join(z["types"]) + " (embeddings and head: "
                              + "/".join(z["embedding_types"]) + ")")
    else:
        row.update(decode_tok_s=None, decode_ms=None, decode_runs=[], build_s=None, weight_mb=None,
                   embed_mb=None, total_mb=None, bits_per_weight=None, gguf_types=None,
                   bytes_per_token=None)
    return row


def _limit(row: dict, bandwidth_gb_s: float) -> dict:
    """``row`` with the memory limit's fields (see :func:`speed_table`)."""
    bpt, tok_s = row.get("bytes_per_token"), row.get("decode_tok_s")
    row["bandwidth_gb_s"] = bandwidth_gb_s
    row["limit_share"] = bpt * tok_s / (bandwidth_gb_s * 1e9) if bpt and tok_s else None
    return row


def _shape_rows(s: Shape, fmts: list[SpeedFormat], peers: list[str], cfg: _Settings, bar) -> list[dict]:
    """One shape's rows, ours then the peers', in the order asked: which can run, whether their models fit
    side by side (then their rounds interleave), their rounds, their rows."""
    reasons = {f: skip_reason(s, f.packing, max_gb=cfg.max_gb) for f in fmts}
    todo = [f for f in fmts if reasons[f] is None]
    interleaved = cfg.interleave and _fit_together(s, todo)
    peer_reasons = _peer_reasons(s, peers, cfg.max_gb)
    peer_todo = [k for k in peers if peer_reasons[k] is None]
    ours, theirs = _time_shape(s, todo, peer_todo, interleaved, cfg, bar)
    bar.update((cfg.repeats + 1) * (len(fmts) - len(todo) + len(peers) - len(peer_todo)))  # the skipped rows
    return ([_our_row(s, f, reasons[f], ours.get(f), interleaved, cfg) for f in fmts]
            + [_peer_row(s, k, peer_reasons[k], theirs.get(k), interleaved, cfg) for k in peers])


def _checked(shapes, formats, peers, **settings) -> tuple[list[Shape], list[SpeedFormat], list[str], _Settings]:
    """:func:`speed_table`'s arguments, checked: its shapes, its formats parsed, its peers and its settings."""
    if isinstance(shapes, (str, Shape)) or not isinstance(shapes, Sequence) or not shapes:
        raise ValueError(f"shapes must be a non-empty list of shape names or Shapes, got {shapes!r}")
    shape_objs = [get_shape(s, "shapes") for s in shapes]
    if len({s.name for s in shape_objs}) != len(shape_objs):
        raise ValueError(f"shapes must not repeat a shape (aliases count as the shape), got {list(shapes)}")
    fmts = parse_formats(formats)
    for name in ("tokens", "repeats", "context", "n_threads"):
        settings[name] = checks.integer(name, settings[name], 1)
    checks.integer("seed", settings["seed"], 0)
    if isinstance(peers, str) or not isinstance(peers, Sequence):
        raise ValueError(f"peers must be a list of peer names (llama.cpp's or ik_llama.cpp's), got {peers!r}")
    for k in peers:
        peer_fork(k, "peers")
    if len(set(peers)) != len(peers):
        raise ValueError(f"peers must not repeat a peer, got {list(peers)}")
    checks.number("max_gb", settings["max_gb"], 0.0, lo_open=True)
    if not isinstance(settings["fused"], bool):
        raise ValueError(f"fused must be True or False, got {settings['fused']!r}")
    if not settings["fused"] and any(f.variant for f in fmts):
        raise ValueError(f"formats: the {_Q8} and {_A8} formats run through the fused step only; fused=False was given")
    return shape_objs, fmts, list(peers), _Settings(**settings)


def speed_table(shapes: Sequence[str | Shape], formats: Sequence[str] = tuple(FORMATS), *, tokens: int = 16,
                repeats: int = 3, context: int = 64, prefill: bool = True, n_threads: int = 2,
                max_gb: float = 10.0, interleave: bool = True, seed: int = 0, peers: Sequence[str] = (),
                fused: bool = True, progress: bool = True) -> list[dict]:
    """Decode (and prefill) speed and size of every (shape, format); one row each. ``formats`` are names of
    :data:`SPEED_FORMATS`, parsed once into :class:`SpeedFormat`; the rows keep the names.

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

    ``peers`` (keys of :data:`acl26.papers.sherry.llamacpp.PEERS` and
    :data:`acl26.papers.sherry.ikllama.PEERS`, :func:`peer_fork`) adds llama.cpp's and ik_llama.cpp's
    whole-model decode of GGUF files of the same shape (random ternary weights, written and quantized
    once with the fork's own ``llama-quantize``, cached) to every round's rotation: the fork's
    ``llama-bench`` at ``tokens`` after ``context`` on ``n_threads`` threads, one sample per round. Their rows have the same keys (``head_ms``, ``blocks_ms`` and
    prefill are None; sizes are the GGUF file's, ``weight_mb`` its projection tensors) plus
    ``peer`` True, ``engine`` (the fork) and ``gguf_types``. Where its fork is not built, or its type
    cannot hold the shape's rows, the peer's row is "skipped" with the reason.

    The memory limit, measured in the same call on the same threads
    (:func:`acl26.kernels.ternary.read_bandwidth`): every row has ``bandwidth_gb_s`` (the machine's
    streaming read bandwidth), ``bytes_per_token`` (:func:`read_bytes_per_token`; a peer's from its
    GGUF file) and ``limit_share`` = bytes per token x decode tok/s / bandwidth (None when not timed):
    how close the format's decoding comes to the speed the bytes it reads allow.
    """
    from tqdm import tqdm

    shapes, fmts, peers, cfg = _checked(shapes, formats, peers, tokens=tokens, repeats=repeats, context=context,
                                        prefill=prefill, n_threads=n_threads, max_gb=max_gb, interleave=interleave,
                                        seed=seed, fused=fused, progress=progress)
    bar = tqdm(total=len(shapes) * (len(fmts) + len(peers)) * (cfg.repeats + 1), desc="speed table",
               disable=not progress)
    rows = []
    with timing.threads(cfg.n_threads):
        bw = tn.read_bandwidth()["gb_s"]
        for s in shapes:
            rows += [_limit(row, bw) for row in _shape_rows(s, fmts, peers, cfg, bar)]
    bar.close()
    return rows


# --------------------------------------------------------------------------------------------
# where a decode step's time goes


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

    s = get_shape(shape, "shape")
    if isinstance(formats, str) or not isinstance(formats, Sequence) or not formats:
        raise ValueError(f"formats must be a non-empty list of format names, got {formats!r}")
    profiled = tuple(n for n in SPEED_FORMATS if (g := SpeedFormat.parse(n)).packing in FUSED and not g.q8_head)
    for f in formats:
        if f not in profiled:
            raise ValueError(f"formats: {f!r} has no fused step; choose from {profiled}")
    fmts = [SpeedFormat.parse(f) for f in formats]
    tokens, context = checks.integer("tokens", tokens, 1), checks.integer("context", context, 1)
    repeats, n_threads = checks.integer("repeats", repeats, 1), checks.integer("n_threads", n_threads, 1)
    checks.integer("seed", seed, 0)
    rows = []
    with timing.threads(n_threads):
        for f in tqdm(fmts, desc=f"decode profile {s.name}", disable=not progress):
            m = Engine.random(s, f.packing, seed=seed, fuse=False).model  # fused below, after the numpy profile
            rng = np.random.default_rng(seed)
            head_mb = (m.embedding.head.numel() * m.embedding.head.element_size()) / MB
            lin_mb = m.linear_bytes / MB
            for engine in ("fused",) if f.act8 else ("numpy", "fused"):  # numpy has no 8-bit activations
                if engine == "fused":
                    m.fuse(act8=f.act8)
                cache = _new_cache(m, context + tokens)
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
                    rows.append(dict(shape=s.name, format=f.name, engine=engine, part=part, ms=1e3 * sp["median"],
                                     ms_min=1e3 * sp["min"], ms_max=1e3 * sp["max"], mb=mb,
                                     gb_s=mb * MB / sp["median"] / 1e9 if mb else None,
                                     regions=kd.regions_per_token(m.fused) if engine == "fused" else None))
            del m, cache
    return rows
