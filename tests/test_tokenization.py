"""The real tokenizers load offline and reproduce the published reference encodings."""

import pytest

from acl26 import tokenization

pytestmark = pytest.mark.assets


@pytest.mark.parametrize("name", ["llama3", "qwen3", "llama2", "gpt2", "phi3"])
def test_reproduces_llama_cpp_reference_ids(name):
    tok = tokenization.load(name)
    cases = tokenization.reference_cases(name)
    assert len(cases) >= 40
    bad = [text for text, ids in cases if tok.backend_tokenizer.encode(text, add_special_tokens=False).ids != ids]
    assert not bad, f"{name}: {len(bad)} of {len(cases)} reference cases differ, e.g. {bad[:3]!r}"


def test_vocabulary_identities():
    assert tokenization.load("llama2").convert_tokens_to_ids("▁the") == 278  # Meta LLaMA-2
    assert tokenization.load("mistral").convert_tokens_to_ids("▁the") == 272  # npm "llama2" = Mistral-7B
    assert len(tokenization.load("llama3")) == 128_256
    assert len(tokenization.load("qwen3")) == 151_669
    assert len(tokenization.load("gpt2")) == 50_257
    assert len(tokenization.load("smollm2")) == 49_152


def test_smollm2_has_its_chat_template():
    tok = tokenization.load("smollm2")
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert "<|im_start|>user" in text


def test_unknown_tokenizer():
    with pytest.raises(KeyError, match="unknown tokenizer"):
        tokenization.load("nope")
