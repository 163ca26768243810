"""LoPT (ACL 2026, arXiv 2511.04952): fastokens, an exact parallel tokenizer, as a peer in ``acl26 bench lopt``.

fastokens (PyPI ``fastokens``, installed by the ``[peers]`` extra) re-implements the HF ``tokenizers`` BPE
pipeline in Rust and spreads one long document over threads (its regex split and its BPE over the
pre-token pieces), so it is exact by construction where it loads a tokenizer at all. It is a bench row
beside LoPT, never a paper claim:

- :func:`missing` is the one-line reason to skip it where it is not installed (an import failure is
  the only failure that turns into a skip);
- :func:`refusal` is fastokens' own one-line refusal of a tokenizer it does not implement (a model
  other than BPE, a pre-tokenizer such as ``Metaspace``, ``Whitespace`` or ``BertPreTokenizer``): what
  LoPT adds, since LoPT runs over any ``tokenizers`` backend;
- :class:`Peer` runs fastokens with a given thread count in a process of its own: fastokens reads its
  thread count once per process (``FASTOKENS_BPE_THREADS`` for its BPE fan-out, ``RAYON_NUM_THREADS``
  for its parallel regex split), so 1 and N threads cannot share one process;
- :func:`rows` and :func:`goals` turn the timings into the Performance page's rows.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Mapping, Sequence

from acl26 import checks, stats
from acl26.errors import one_line

NAME = "fastokens"
#: the version the ``[peers]`` extra pins (pyproject.toml)
VERSION = "0.3.5"
SKIP = "fastokens not installed: pip install 'acl26-repro[peers]'"
#: the environment variables fastokens reads, once per process, for its thread counts
THREAD_VARIABLES = ("FASTOKENS_BPE_THREADS", "RAYON_NUM_THREADS")
#: its opt-in caches of whole inputs and of segments between added tokens: a repeat of the same text would
#: be a cache hit, not an encode, so the peer's process runs with both off (their default)
CACHE_VARIABLES = ("FASTOKENS_INPUT_CACHE", "FASTOKENS_SEGMENT_CACHE")
#: characters of the text encoded untimed in the peer's process before the first timed run (as the bench
#: warms LoPT's pools)
WARM_CHARS = 200_000
#: seconds to wait for the peer's process to answer before giving up
ANSWER_S = 900.0


class Unsupported(ValueError):
    """fastokens refuses this tokenizer (its message says which component it does not implement)."""


def missing() -> str | None:
    """None where fastokens imports; else :data:`SKIP`, the one-line reason its rows are skipped."""
    try:
        import fastokens  # noqa: F401
    except ImportError:
        return SKIP
    return None


def version() -> str:
    """The installed fastokens version (ImportError where it is not installed)."""
    from importlib import metadata

    try:
        return metadata.version(NAME)
    except metadata.PackageNotFoundError as exc:
        raise ImportError(SKIP) from exc


def _json(tokenizer) -> str:
    from acl26 import tokenization

    return tokenization.backend(tokenizer).to_str()  # TypeError for anything without a tokenizers backend


def _from_json(text: str):
    import fastokens

    try:
        return fastokens.Tokenizer.from_json_str(text)
    except ValueError as exc:  # fastokens raises ValueError for what it does not implement
        raise Unsupported(f"fastokens cannot load this tokenizer: {str(exc).strip()}") from exc


def load(tokenizer):
    """``tokenizer`` (a transformers fast tokenizer or a ``tokenizers`` backend) as a ``fastokens.Tokenizer``,
    from the backend's own ``tokenizer.json``: normalizer, pre-tokenizer, model and added tokens as they are.
    Raises :class:`Unsupported` where fastokens refuses it, ImportError where it is not installed."""
    return _from_json(_json(tokenizer))


def refusal(tokenizer) -> str | None:
    """fastokens' one-line refusal of ``tokenizer``, or None where it loads it."""
    try:
        load(tokenizer)
    except Unsupported as exc:
        return str(exc)
    return None


def encode(fast, text: str) -> list[int]:
    """``text``'s ids through the fastokens tokenizer ``fast``, without special tokens, as a Python list (as LoPT
    and ``tokenizer.encode`` return them)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return list(fast.encode(text, add_special_tokens=False).ids)


def exact(tokenizer, text: str) -> bool:
    """Whether fastokens gives ``tokenizer.encode(text, add_special_tokens=False)`` on ``text`` (the check
    LoPT's benchmark makes). Raises :class:`Unsupported` where fastokens refuses the tokenizer."""
    from acl26 import tokenization

    ref = tokenizer.encode(text, add_special_tokens=False)
    if not isinstance(ref, list):  # a tokenizers backend returns an Encoding
        ref = tokenization.backend(tokenizer).encode(text, add_special_tokens=False).ids
    return encode(load(tokenizer), text) == list(ref)


def _cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _serve(conn, tokenizer_json: str, text: str, reference: list[int], threads: int) -> None:
    """The peer's process: fix the thread count before fastokens starts its pools (its input caches off), load,
    warm, then answer each ``"run"`` with ``(seconds, cpu seconds, ids equal to the reference)`` until ``"stop"``."""
    for var in THREAD_VARIABLES:
        os.environ[var] = str(threads)
    for var in CACHE_VARIABLES:
        os.environ.pop(var, None)
    try:
        fast = _from_json(tokenizer_json)
        encode(fast, text[:WARM_CHARS])
    except Exception as exc:  # noqa: BLE001 - sent back whole, the parent raises it in one line
        conn.send(("error", one_line(exc)))
        conn.close()
        return
    conn.send(("ready", None))
    while conn.recv() == "run":
        c0, t0 = _cpu_s(), time.perf_counter()
        ids = encode(fast, text)
        dt, dc = time.perf_counter() - t0, _cpu_s() - c0
        conn.send(("ran", (dt, dc, ids == reference)))
    conn.close()


class Peer:
    """fastokens with ``threads`` threads (an integer ≥ 1) in a spawned process of its own, holding ``tokenizer``,
    one ``text`` and its ``reference`` ids; :meth:`run` encodes the whole text once, timed inside that process.

    Use as a context manager (the process stops on exit). Raises :class:`Unsupported` where fastokens refuses
    the tokenizer (checked here, before the process starts), ImportError where it is not installed, and
    RuntimeError (one line) where the process fails or dies.
    """

    def __init__(self, tokenizer, text: str, reference: Sequence[int], threads: int):
        self.threads = checks.integer("threads", threads, 1)
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty str")
        reference = list(reference)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in reference):
            raise TypeError("reference must hold integer ids")
        if missing():
            raise ImportError(SKIP)
        tokenizer_json = _json(tokenizer)
        _from_json(tokenizer_json)  # Unsupported here, in one line, rather than in the process
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, tokenizer_json, text, reference, self.threads),
                                 name=f"fastokens-{self.threads}", daemon=True)
        self._proc.start()
        child.close()
        self._answer("ready")

    def _answer(self, expected: str):
        if not self._conn.poll(ANSWER_S):
            self.close()
            raise RuntimeError(f"fastokens ({self.threads} threads): no answer within {ANSWER_S:.0f} s")
        try:
            kind, value = self._conn.recv()
        except EOFError:
            self._proc.join(5)
            self.close()
            raise RuntimeError(f"fastokens ({self.threads} threads): its process died "
                               f"(exit code {self._proc.exitcode})") from None
        if kind != expected:
            self.close()
            raise RuntimeError(f"fastokens ({self.threads} threads): {value}")
        return value

    def run(self) -> tuple[float, float, bool]:
        """One timed encode of the whole text: ``(seconds, CPU seconds of the peer's process, ids equal to the
        reference)``. The ids are built as a Python list inside the timing, as LoPT builds its own."""
        self._conn.send("run")
        return self._answer("ran")

    def close(self) -> None:
        """Stop the process (idempotent)."""
        if self._proc.is_alive():
            try:
                self._conn.send("stop")
            except (BrokenPipeError, OSError):
                pass
            self._proc.join(10)
            if self._proc.is_alive():
                self._proc.terminate()
                self._proc.join(5)
        self._conn.close()

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def thread_counts(workers: int) -> list[int]:
    """The thread counts fastokens runs at beside LoPT with ``workers`` workers: 1 and ``workers`` (once if 1)."""
    w = checks.integer("workers", workers, 1)
    return sorted({1, w})


def _effective(threads: int) -> int:
    """The threads fastokens uses when asked for ``threads``: it caps them at the cores this process may use."""
    return min(threads, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def key(threads: int) -> str:
    """The name of fastokens' run at ``threads`` threads among the bench's rotated runs."""
    return f"fastokens {checks.integer('threads', threads, 1)}"


def _times(times: Mapping[str, Sequence[float]], name: str, n: int | None = None) -> list[float]:
    if name not in times:
        raise KeyError(f"no timings for {name!r}; have {sorted(times)}")
    values = [float(v) for v in times[name]]
    if not values or (n is not None and len(values) != n):
        raise ValueError(f"{name!r}: {len(values)} timings, expected {n if n is not None else 'at least 1'}")
    return values


def rows(tname: str, chars: int, times: Mapping[str, Sequence[float]], cpu: Mapping[str, Sequence[float]],
         lopt_keys: Mapping[int, str], baseline: str = "backend", *, installed: str = VERSION) -> list[dict]:
    """The Performance page's rows of fastokens on tokenizer ``tname``: one per thread count in ``lopt_keys``
    (threads -> the name of LoPT's run with as many workers), from ``times`` (every run's seconds per repeat,
    fastokens' under :func:`key`) and ``cpu`` (fastokens' CPU seconds per repeat).

    Each row: median seconds with their range over repeats, ``ratio`` = the ``baseline`` run's median over this
    row's (as every row of the bench), ``vs_lopt`` = LoPT's time with as many workers over fastokens', per repeat
    (median; > 1: fastokens is faster), ``threads`` the threads fastokens used, ``cpu_s`` its process's CPU
    seconds (median).
    """
    chars = checks.integer("chars", chars, 1)
    base = stats.repeat_range(_times(times, baseline))
    out = []
    for threads, lopt_key in sorted(lopt_keys.items()):
        mine = _times(times, key(threads))
        theirs = _times(times, lopt_key, len(mine))
        iv = stats.repeat_range(mine)
        vs = stats.repeat_range([a / b for a, b in zip(theirs, mine)])
        used = _effective(threads)
        label = f"{threads} thread{'s' if threads > 1 else ''}" + (f" (capped at {used})" if used < threads else "")
        out.append(dict(benchmark=f"{tname}: fastokens {installed}, {label} (peer)", chars=chars,
                        median_s=iv.estimate, min_s=iv.lo, max_s=iv.hi, ratio=base.estimate / iv.estimate,
                        vs_lopt=vs.estimate, threads=used,
                        cpu_s=float(stats.repeat_range(_times(cpu, key(threads), len(mine))).estimate)))
    return out


def goals(tname: str, times: Mapping[str, Sequence[float]], same: bool, w: int, lopt_key: str) -> list[dict]:
    """The goals-table lines of fastokens on ``tname`` (reported, never met or missed: a peer, not a paper claim):
    whether its ids equalled ``tokenizer.encode`` in every run (``same``), and LoPT with ``w`` threads over
    fastokens with ``w`` threads, per repeat."""
    w = checks.integer("w", w, 1)
    mine = _times(times, key(w))
    vs = stats.repeat_range([a / b for a, b in zip(_times(times, lopt_key, len(mine)), mine)])
    return [
        dict(goal=f"{tname}: fastokens' ids equal to tokenizer.encode in every run (a peer)", target="reported",
             measured="yes" if same else "no", met=None),
        dict(goal=(f"{tname}: LoPT's time over fastokens' at {w} thread{'s' if w > 1 else ''} each, same run "
                   "(> 1: fastokens is faster)"),
             target="reported (a peer, not a paper claim)",
             measured=f"{vs.estimate:.2f}× (range {vs.lo:.2f}–{vs.hi:.2f}× over {vs.n} repeats)", met=None),
    ]


def skipped(what: str, reason: str) -> dict:
    """The goals-table line for a fastokens measurement that did not run (``reason``: :data:`SKIP` or
    fastokens' :func:`refusal`)."""
    if not isinstance(what, str) or not what or not isinstance(reason, str) or not reason:
        raise ValueError("what and reason must be non-empty strings")
    return dict(goal=f"{what}: fastokens beside LoPT (a peer)", target="reported", measured=f"skipped: {reason}",
                met=None)


def coverage(names: Sequence[str]) -> dict:
    """Which of the registry tokenizers ``names`` fastokens loads, and its refusal of each other: the goals-table
    line for what LoPT adds (LoPT runs over any ``tokenizers`` backend; the chapter checks its ids on each)."""
    from acl26 import tokenization

    names = list(names)
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"names must be a non-empty list of tokenizer names, got {names!r}")
    refused = {n: r for n in names if (r := refusal(tokenization.load(n)))}
    detail = "; ".join(f"not {n} ({r.removeprefix('fastokens cannot load this tokenizer: ')})"
                       for n, r in refused.items())
    return dict(goal=f"what LoPT adds: tokenizers fastokens loads, of the chapter's {len(names)}",
                target="reported (LoPT: all of them)",
                measured=f"{len(names) - len(refused)} of {len(names)}" + (f"; {detail}" if detail else ""),
                met=None)
