"""Parameters and profiles: validated up front, with a message naming the parameter."""

import pytest

from acl26 import params
from acl26.papers.lopt.study import SPEC
from acl26.params import Param, ParamError, ParamSpec


def test_every_profile_resolves_completely():
    for profile in params.PROFILES:
        values = SPEC.resolve(profile)
        assert set(values) == {"profile", *SPEC.names}


@pytest.mark.parametrize("overrides,match", [
    ({"nope": 1}, "unknown parameter 'nope'"),
    ({"trials": "many"}, "'trials': expected int"),
    ({"trials": -1}, "'trials'.*below the minimum"),
    ({"tokenizers": ["llama3", "nope"]}, "'tokenizers'.*'nope' is not one of"),
    ({"tokenizers": []}, "'tokenizers'.*at least 1"),
    ({"tokenizers": ["gpt2", "gpt2"]}, "'tokenizers'.*duplicate"),
    ({"full_texts": 1}, "'full_texts'.*true or false"),
    ({"overlap_chars": 40000}, "overlap_chars must be smaller than chunk_chars"),
    ({"speed_lengths": [10]}, "speed_lengths"),
])
def test_bad_values_name_the_parameter(overrides, match):
    with pytest.raises(ParamError, match=match):
        SPEC.resolve("smoke", overrides)


def test_unknown_profile():
    with pytest.raises(ParamError, match="unknown profile 'fast'"):
        SPEC.resolve("fast")


def test_cli_values_are_parsed_and_lists_split():
    got = params.parse_assignments(["trials=3", "tokenizers=llama3,gpt2", "full_texts=false", "texts=hard"])
    assert got == {"trials": 3, "tokenizers": "llama3,gpt2", "full_texts": False, "texts": "hard"}
    resolved = SPEC.resolve("smoke", got)
    assert resolved["tokenizers"] == ["llama3", "gpt2"] and resolved["texts"] == ["hard"]
    with pytest.raises(ParamError, match="name=value"):
        params.parse_assignments(["trials"])


def test_namespace_resolution_takes_profile_values_for_none():
    ns = {"profile": "smoke", "trials": None, "seed": 7}
    got = SPEC.from_namespace(ns)
    assert got["trials"] == SPEC.profiles["smoke"]["trials"] and got["seed"] == 7


def test_int_widens_to_float_but_bool_is_not_an_int():
    p = Param("lr", float, "learning rate", min=0)
    assert p.check(1, "x") == 1.0
    with pytest.raises(ParamError):
        Param("n", int, "count").check(True, "x")


def test_spec_rejects_incomplete_profiles():
    with pytest.raises(ValueError, match="book profile lacks"):
        ParamSpec("x", (Param("a", int, "a"),), {"book": {}, "smoke": {}, "paper": {}})
    with pytest.raises(ValueError, match="unknown parameters"):
        ParamSpec("x", (Param("a", int, "a"),), {"book": {"a": 1}, "smoke": {"b": 2}, "paper": {}})
