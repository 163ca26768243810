"""Parameters and profiles: validated up front, with a message naming the parameter."""

import pytest

from acl26 import params
from acl26.papers.lopt.spec import SPEC
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


# --------------------------------------------------------------------------------------------
# every chapter's parameters, walked: what each declaration refuses, it refuses through resolve

import math  # noqa: E402

import numpy as np  # noqa: E402

from acl26 import checks, registry, runner  # noqa: E402

ALL_PARAMS = [(cid, p) for cid, ch in registry.CHAPTERS.items() for p in ch.spec.params]
INT_DTYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)


def _kind(p: Param) -> type:
    return (p.elem or str) if p.type is list else p.type


def _bad_scalars(p: Param) -> list[tuple[str, object]]:
    """Values of one item that ``p``'s own declaration refuses, with why."""
    kind, out = _kind(p), [("None", None)]
    if kind is int:
        out += [("a float", 2.5), ("an integral float", 2.0), ("a bool", True), ("a numpy bool", np.bool_(False)),
                ("a numeric string", "3"), ("a numpy float", np.float64(3.0))]
    elif kind is float:
        out += [("a bool", True), ("a numpy bool", np.bool_(True)), ("a numeric string", "0.5")]
        if not p.allow_nonfinite:
            out += [("NaN", float("nan")), ("inf", float("inf")), ("-inf", float("-inf")), ("1e999", 1e999),
                    ("a numpy NaN", np.float32("nan"))]
    elif kind is str:
        out += [("an int", 1), ("a bool", False)]
    else:
        out += [("an int", 1), ("a string", "true"), ("a float", 1.0)]
    if p.choices is not None:
        out.append(("not a choice", "no-such-choice" if kind is str else max(p.choices) + 1))
    if p.min is not None:
        out.append(("below min", p.min if p.min_open else p.min - 1))
    if p.max is not None:
        out.append(("above max", p.max if p.max_open else p.max + 1))
    return out


def _bad_values(p: Param, good) -> list[tuple[str, object]]:
    if p.type is not list:
        return _bad_scalars(p)
    out = [("not a list", 42), ("None", None)]
    if p.min_len >= 1:
        out.append(("too short", list(good[:p.min_len - 1])))
    if p.max_len is not None:
        out.append(("too long", (list(good) * (p.max_len + 1))[:p.max_len + 1]))
    if good:
        out.append(("a duplicate item", [good[0]] * max(2, p.min_len)))
    head = list(good[:max(0, p.min_len - 1)])
    out += [(f"an item that is {why}", head + [v]) for why, v in _bad_scalars(p)]
    return out


@pytest.mark.parametrize("cid,p", ALL_PARAMS, ids=[f"{c}.{p.name}" for c, p in ALL_PARAMS])
def test_every_parameter_refuses_what_its_declaration_refuses(cid, p):
    spec = registry.get(cid).spec
    good = spec.resolve("smoke")[p.name]
    for why, value in _bad_values(p, good):
        with pytest.raises(ParamError) as err:
            runner.resolve(cid, "smoke", {p.name: value})
        msg = str(err.value)
        assert "\n" not in msg, f"{why}: not one line: {msg}"
        assert msg.startswith(f"{cid}: parameter {p.name!r}: "), f"{why}: {msg}"
        shown = value if p.type is not list or why in ("not a list", "None", "too short", "too long") else value[-1]
        if why != "a duplicate item":
            assert repr(shown) in msg, f"{why}: the message does not name the value {shown!r}: {msg}"


@pytest.mark.parametrize("cid,p", ALL_PARAMS, ids=[f"{c}.{p.name}" for c, p in ALL_PARAMS])
def test_every_parameter_takes_numpy_scalars_and_returns_plain_values(cid, p):
    spec = registry.get(cid).spec
    good = spec.resolve("book")[p.name]
    kind = _kind(p)
    items = good if p.type is list else [good]
    for i, g in enumerate(items):
        variants = [g]
        if kind is int:
            variants += [t(g) for t in INT_DTYPES if np.iinfo(t).min <= g <= np.iinfo(t).max] + [np.array(g)]
        elif kind is float:
            variants += [np.float64(g), np.float32(g), np.array(g)]
            variants += [int(g)] if float(g).is_integer() else []
        elif kind is bool:
            variants += [np.bool_(g), np.array(g)]
        for v in variants:
            got = p.check(items[:i] + [v] + items[i + 1:] if p.type is list else v, cid)
            got = got[i] if p.type is list else got
            assert type(got) is kind, f"{v!r} -> {got!r}"
            assert got == g or (kind is float and math.isclose(got, g, rel_tol=1e-6)), f"{v!r} -> {got!r}"
    if kind is float and p.type is not list:  # float16 rounds: only the type is checked
        assert type(p.check(np.float16(good), cid)) is float


@pytest.mark.parametrize("cid", list(registry.CHAPTERS))
def test_profiles_resolve_to_plain_values(cid):
    spec = registry.get(cid).spec
    for profile in params.PROFILES:
        values = runner.resolve(cid, profile)
        assert set(values) == {"profile", *spec.names}
        for p in spec.params:
            v = values[p.name]
            for x in v if p.type is list else [v]:
                assert type(x) is _kind(p), f"{profile}: {p.name} = {v!r}"
                assert not (isinstance(x, float) and not math.isfinite(x)) or p.allow_nonfinite


def test_every_seed_is_a_torch_seed_and_nothing_more():
    seeds = [(cid, p) for cid, p in ALL_PARAMS if "seed" in p.name and _kind(p) is int and p.name not in ("ablation_seeds", "fp_seeds")]  # counts of seeds
    assert {cid for cid, _ in seeds} == set(registry.CHAPTERS)  # every chapter has one
    for cid, p in seeds:
        assert (p.min, p.max) == (0, checks.SEED_MAX), f"{cid}.{p.name}: declare min=0, max=SEED_MAX"
        good = registry.get(cid).spec.resolve("smoke")[p.name]
        wrap = (lambda v: list(good[:max(0, p.min_len - 1)]) + [v]) if p.type is list else (lambda v: v)
        for v in (2**32, 2**64, -1):
            with pytest.raises(ParamError, match=rf"^{cid}: parameter '{p.name}': "):
                runner.resolve(cid, "smoke", {p.name: wrap(v)})
        if not (p.type is list and checks.SEED_MAX in good[:max(0, p.min_len - 1)]):
            got = runner.resolve(cid, "smoke", {p.name: wrap(np.uint32(checks.SEED_MAX))})[p.name]
            assert (got[-1] if p.type is list else got) == checks.SEED_MAX


# --------------------------------------------------------------------------------------------
# the known faults, and each constraint between parameters, refused before any work


@pytest.mark.parametrize("cid,overrides,match", [
    # λ of an ablation above 1 (merge._check_lam would refuse it mid-run)
    ("model_interpolation", {"ablation_offset": 1.5}, "'ablation_offset': 1.5 is above the maximum 1.0"),
    ("model_interpolation", {"power_problems": 3}, "power_problems must be at least eval_problems"),
    ("model_interpolation", {"gsm8k_k": 0}, "'gsm8k_k'"),
    ("model_interpolation", {"grid_control_temperature": 0.0}, "'grid_control_temperature'"),
    ("model_interpolation", {"extra_ablation_lambdas": [0.6, 1.5]}, "'extra_ablation_lambdas': item 1: 1.5 is above"),
    ("model_interpolation", {"extra_ablation_lambdas": [-0.1]}, "'extra_ablation_lambdas'.*below the minimum"),
    ("model_interpolation", {"lambdas": [0.0, 0.5, 1.0, 1.2]}, "'lambdas': item 3: 1.2 is above"),
    ("model_interpolation", {"lambdas": [0.0, 0.5]}, r"lambdas must include 0 and 1 \(got lambdas=\[0.0, 0.5\]\)"),
    ("model_interpolation", {"lambdas": [0.0]}, "'lambdas': expected at least 2 item"),
    ("model_interpolation", {"best_lambda": 0.8}, "best_lambda"),  # the band's end + ablation_offset, not a parameter
    ("model_interpolation", {"grid_k": 0}, "'grid_k'"),
    ("model_interpolation", {"grid_temperatures": [0.7]}, r"must include the paper's decoding of a merged model"),
    ("model_interpolation", {"grid_temperatures": [0.0]}, "'grid_temperatures'.*exclusive minimum"),
    ("model_interpolation", {"grid_top_ps": [1.01]}, "'grid_top_ps'.*above the maximum"),
    ("model_interpolation", {"instruct": "/x"}, "instruct and thinking must both be given"),
    ("model_interpolation", {"instruct": "/x", "thinking": "/y"}, "instruct and thinking must be local"),
    ("model_interpolation", {"base": "/no/such/folder"}, "'base': must be '' or a local folder with config.json"),
    ("model_interpolation", {"ft_batch": 57}, "ft_batch must not exceed the pair's fine-tuning rows.*train_problems=64"),
    ("model_interpolation", {"ties_densities": [0.2, 0.0]}, "'ties_densities'.*below the minimum"),
    ("model_interpolation", {"ties_densities": []}, "'ties_densities': expected at least 1 item"),
    # an Alloc-MoE budget at or above the native top-k (smoke's shared MoE: 3, book's: 6)
    ("alloc_moe", {"budgets": [1, 3]}, r"budgets must each be below the native top-k.*budgets=\[1, 3\]"),
    ("alloc_moe", {"budgets": [0, 1]}, "'budgets': item 0: 0 is below the minimum 1"),
    ("alloc_moe", {"k_base": 2}, "k_base must not exceed the smallest budget"),
    ("alloc_moe", {"k_base_sweep": [2]}, "k_base_sweep needs a value at or below the half budget"),
    ("alloc_moe", {"k_base_sweep": [-1]}, "'k_base_sweep': item 0: -1 is below"),
    ("alloc_moe", {"calib_alt": "sotu"}, "calib_alt must differ from calib_source"),
    ("alloc_moe", {"match_blocks": 3}, "match_blocks must not exceed calib_blocks"),
    ("alloc_moe", {"moefy_experts": 2}, "budgets must each be below moefy_experts"),
    ("alloc_moe", {"moefy_experts": 9}, r"moefy_experts \+ moefy_shared must divide SmolLM2-135M's MLP width \(1536\)"),
    ("alloc_moe", {"moefy_experts": 16, "moefy_shared": 16}, "moefy_shared must be below moefy_experts"),
    ("alloc_moe", {"moefy_shared": -1}, "'moefy_shared': -1 is below the minimum 0"),
    ("alloc_moe", {"moefy_layers": [29, 30]}, "moefy_layers must lie within"),
    ("alloc_moe", {"moefy_layers": [3, 3]}, "'moefy_layers': duplicate items"),
    ("alloc_moe", {"native_margin": -0.1}, "'native_margin'"),
    ("alloc_moe", {"checkpoint": "/no/such/folder"}, "'checkpoint': must be '' or a local folder with config.json"),
    # models page
    ("models", {"moe_top_k": 9}, "moe_top_k must not exceed moe_experts"),
    ("models", {"ppl_stride": 300}, "ppl_stride must not exceed ppl_context"),
    ("models", {"ppl_context": 8193, "ppl_stride": 8}, "'ppl_context': 8193 is above the maximum 8192"),
    ("models", {"ppl_chars": 3}, "'ppl_chars': must be 0 .* or at least 16 characters"),
    ("models", {"extra_seeds": [0]}, r"extra_seeds must differ from seed \(got seed=0, extra_seeds=\[0\]\)"),
    ("models", {"dense_hidden": 256}, "unknown parameter 'dense_hidden'"),
    ("models", {"moe_hidden": 18}, "'moe_hidden': must be a multiple of 4"),
    ("models", {"moe_expert_intermediate": 6}, "'moe_expert_intermediate': must be a multiple of 4"),
    ("models", {"lr": 0.0}, "'lr': 0.0 is below the minimum"),
    # LoPT
    ("lopt", {"overlap_chars": 40000}, "overlap_chars must be smaller than chunk_chars"),
    ("lopt", {"sweep_overlaps": [8, 2048]}, "sweep_overlaps must each be smaller than sweep_chunk"),
    ("lopt", {"sweep_overlaps": [1]}, "'sweep_overlaps': item 0: 1 is below the minimum 2"),
    ("lopt", {"speed_lengths": [10]}, "'speed_lengths': item 0: 10 is below the minimum 1000"),
    ("lopt", {"speed_workers": [1, 65]}, "'speed_workers': item 1: 65 is above the maximum 64"),
    ("lopt", {"min_chunk": 40000}, "min_chunk must be at most chunk_chars"),
    ("lopt", {"trials": 0, "adversarial_trials": 0}, "the exactness study needs runs"),
    # Sherry
    ("sherry", {"speed_shapes": ["llama-0.7b", "bitnet-0.7b"]}, "speed_shapes must not name a shape twice"),
    ("sherry", {"ptq_chars": 5}, "'ptq_chars': must be 0"),
    ("sherry", {"seeds": []}, "'seeds': expected at least 1 item"),
    ("sherry", {"qat_steps": 1}, "'qat_steps': 1 is below the minimum 2"),
    ("sherry", {"qat_blocks": [13, 13]}, "'qat_blocks': duplicate items"),
    ("sherry", {"qat_blocks": []}, "'qat_blocks': expected at least 1 item"),
    ("sherry", {"qat_steps": 6, "track_every": 6}, "track_every must be below qat_steps"),
    ("sherry", {"variants": ["fp", "fp"]}, "'variants': duplicate items"),
    ("sherry", {"seeds": [0, 1], "fp_seeds": 3}, r"fp_seeds must not exceed the number of seeds \(got seeds=\[0, 1\], fp_seeds=3\)"),
    ("sherry", {"fp_seeds": 0}, "'fp_seeds': 0 is below the minimum 1"),
    ("sherry", {"checkpoint": "/nonexistent/llama"}, "'checkpoint'"),
    # MTA
    ("mta", {"seeds": [0]}, "'seeds': expected at least 2 item"),
    ("mta", {"ablation_seeds": 3}, "ablation_seeds must not exceed the number of seeds"),
    ("mta", {"student_layers": 5}, r"student_layers must not exceed the teacher's layers.*teacher='tiny', student_layers=5"),
    ("mta", {"teacher": "smollm2", "student_layers": 31}, "student_layers must not exceed"),
    ("mta", {"top_k": 49153}, "top_k must not exceed the teacher's vocabulary"),
    ("mta", {"batch_size": 13}, "batch_size must not exceed train_pairs"),
    ("mta", {"lambda_dsa": float("inf")}, "'lambda_dsa': expected a finite number, got inf"),
    ("mta", {"teacher": "/no/such/folder"}, "'teacher': must be 'smollm2' or 'tiny' or a local HF folder"),
    ("mta", {"student": "/no/such/folder"}, "'student': must be '' or a local folder"),
])
def test_constraints_refused_up_front_in_one_line(cid, overrides, match):
    with pytest.raises(ParamError, match=match) as err:
        runner.resolve(cid, "smoke", overrides)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{cid}: ")


def test_book_budget_at_the_native_top_k_is_refused():
    with pytest.raises(ParamError, match="native top-k"):
        runner.resolve("alloc_moe", "book", {"budgets": [3, 6]})
    assert runner.resolve("alloc_moe", "book", {"budgets": [5]})["budgets"] == [5]


def test_a_checkpoint_is_checked_against_its_own_config(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps({"num_experts_per_tok": 2}))
    with pytest.raises(ParamError, match="tokenizer_config.json"):  # load_local would find no tokenizer
        runner.resolve("alloc_moe", "smoke", {"checkpoint": str(tmp_path), "budgets": [1]})
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ParamError, match="native top-k"):
        runner.resolve("alloc_moe", "smoke", {"checkpoint": str(tmp_path), "budgets": [2]})
    got = runner.resolve("alloc_moe", "smoke", {"checkpoint": str(tmp_path), "budgets": [1]})
    assert got["checkpoint"] == str(tmp_path)
    (tmp_path / "config.json").write_text("{}")  # it does not say: the study checks the loaded model
    assert runner.resolve("alloc_moe", "smoke", {"checkpoint": str(tmp_path), "budgets": [2]})["budgets"] == [2]


def test_a_local_pair_needs_configs_a_tokenizer_and_for_streaming_safetensors(tmp_path):
    ends = {e: tmp_path / e for e in ("instruct", "thinking")}
    for d in ends.values():
        d.mkdir()
        (d / "config.json").write_text("{}")
    ov = {e: str(d) for e, d in ends.items()}
    with pytest.raises(ParamError, match="tokenizer"):
        runner.resolve("model_interpolation", "smoke", ov)
    (ends["thinking"] / "tokenizer_config.json").write_text("{}")
    assert runner.resolve("model_interpolation", "smoke", ov)["instruct"] == ov["instruct"]
    with pytest.raises(ParamError, match="streamed.*safetensors"):
        runner.resolve("model_interpolation", "smoke", {**ov, "merge": "streamed"})
    for d in ends.values():
        (d / "model.safetensors").write_bytes(b"")
    assert runner.resolve("model_interpolation", "smoke", {**ov, "merge": "streamed"})["merge"] == "streamed"
    # the fine-tune batch limit is the pair made here's; a local pair is not fine-tuned
    assert runner.resolve("model_interpolation", "smoke", {**ov, "ft_batch": 100})["ft_batch"] == 100


def test_a_local_teacher_is_checked_against_its_config(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 3, "vocab_size": 100}))
    with pytest.raises(ParamError, match="'teacher'.*tokenizer_config.json"):
        runner.resolve("mta", "smoke", {"teacher": str(tmp_path)})
    (tmp_path / "tokenizer_config.json").write_text("{}")
    assert runner.resolve("mta", "smoke", {"teacher": str(tmp_path)})["student_layers"] == 2
    with pytest.raises(ParamError, match="student_layers must not exceed"):
        runner.resolve("mta", "smoke", {"teacher": str(tmp_path), "student_layers": 4})
    with pytest.raises(ParamError, match="top_k must not exceed"):
        runner.resolve("mta", "smoke", {"teacher": str(tmp_path), "top_k": 101})
    # a local student: no student is made here, so student_layers does not apply
    assert runner.resolve("mta", "smoke", {"teacher": str(tmp_path), "student": str(tmp_path), "student_layers": 9})


def test_cuda_is_refused_where_torch_sees_none():
    import torch

    for cid in ("model_interpolation", "mta"):
        if torch.cuda.is_available():
            assert runner.resolve(cid, "smoke", {"device": "cuda"})["device"] == "cuda"
        else:
            with pytest.raises(ParamError, match=rf"^{cid}: parameter 'device': .*CUDA.*got 'cuda'"):
                runner.resolve(cid, "smoke", {"device": "cuda"})


# --------------------------------------------------------------------------------------------
# the command line's -p values and the notebook's namespace


@pytest.mark.parametrize("item,match", [
    ("lr=1e999", "'lr': expected a finite number, got inf"),
    ("lr=-1e999", "'lr': expected a finite number, got -inf"),
    ("lr=nan", "'lr': expected a finite number, got nan"),
    ("lr=NaN", "'lr': expected a finite number, got nan"),
    ("lr=inf", "'lr': expected a finite number, got inf"),
    ("lr=True", "'lr': expected float, got True"),
    ("lr=true", "'lr': expected float, got True"),
    ("lr=0.5e", "'lr': expected float, got '0.5e'"),
    ("batch_size=True", "'batch_size': expected int, got True"),
    ("batch_size=2.0", "'batch_size': expected int, got 2.0"),
    ("batch_size=1e999", "'batch_size': expected int, got inf"),
    ("batch_size=nan", "'batch_size': expected int, got nan"),
    ("bf16=1", "'bf16': expected true or false, got 1"),
    ("extra_seeds=1,2.5", r"'extra_seeds': item 1: expected int, got 2.5"),
])
def test_cli_values_are_refused_by_the_parameters_own_check(item, match):
    overrides = params.parse_assignments([item])
    with pytest.raises(ParamError, match=match) as err:
        runner.resolve("models", "smoke", overrides)
    assert "\n" not in str(err.value)


def test_cli_values_that_are_good_resolve():
    got = runner.resolve("models", "smoke", params.parse_assignments(["lr=1e-3", "batch_size=4", "bf16=false",
                                                                     "extra_seeds=3,4", "seed=4294967295"]))
    assert got["lr"] == 1e-3 and got["batch_size"] == 4 and got["bf16"] is False and got["extra_seeds"] == [3, 4]
    assert got["seed"] == checks.SEED_MAX
    assert params.parse_cli_value("-inf") == -math.inf and math.isnan(params.parse_cli_value("nan"))
    assert params.parse_cli_value("sotu") == "sotu"


def test_namespace_takes_numpy_values_and_refuses_bad_ones():
    spec = registry.get("lopt").spec
    got = spec.from_namespace({"profile": "smoke", "trials": np.int64(2), "full_texts": np.bool_(True),
                               "seed": np.uint64(7), "speed_workers": [np.int32(1), np.int8(2)]})
    assert got["trials"] == 2 and type(got["trials"]) is int and got["full_texts"] is True
    assert got["seed"] == 7 and type(got["seed"]) is int and [type(w) for w in got["speed_workers"]] == [int, int]
    with pytest.raises(ParamError, match="^lopt: parameter 'trials': expected int, got 2.0"):
        spec.from_namespace({"profile": "smoke", "trials": 2.0})
    with pytest.raises(ParamError, match="^lopt: parameter 'seed': 18446744073709551616 is above the maximum"):
        spec.from_namespace({"profile": "smoke", "seed": 2**64})


# --------------------------------------------------------------------------------------------
# the declarations themselves


def test_open_bounds_nonfinite_max_len_and_rules():
    p = Param("x", float, "a share in (0, 1]", min=0.0, min_open=True, max=1.0)
    assert p.check(1, "t") == 1.0 and p.check(np.float32(0.5), "t") == 0.5
    with pytest.raises(ParamError, match="'x': 0.0 is at or below the exclusive minimum 0.0"):
        p.check(0.0, "t")
    q = Param("y", float, "a bound; nan: none, inf: unbounded", allow_nonfinite=True, min=0.0)
    assert math.isnan(q.check(float("nan"), "t")) and q.check(math.inf, "t") == math.inf
    with pytest.raises(ParamError, match="'y': -inf is below the minimum 0.0"):
        q.check(-math.inf, "t")
    r = Param("zs", list, "two or three ints", elem=int, min_len=2, max_len=3, min=0)
    assert r.check((1, np.int16(2)), "t") == [1, 2]
    with pytest.raises(ParamError, match="'zs': expected at most 3 item"):
        r.check([1, 2, 3, 4], "t")
    with pytest.raises(ParamError, match="'zs': duplicate items"):
        r.check([1, np.int64(1)], "t")
    s = Param("even", int, "an even count", min=0, rule=("must be even", lambda v: v % 2 == 0))
    assert s.check(np.uint8(4), "t") == 4
    with pytest.raises(ParamError, match="^t: parameter 'even': must be even, got 3$"):
        s.check(3, "t")


@pytest.mark.parametrize("kwargs,error", [
    (dict(type=dict), TypeError),
    (dict(type=list, elem=list), TypeError),
    (dict(type=int, elem=int), TypeError),
    (dict(type=str, min=1), TypeError),
    (dict(type=int, min=0.5), TypeError),
    (dict(type=int, min=0, min_open=True), TypeError),
    (dict(type=float, max_open=True), ValueError),
    (dict(type=int, allow_nonfinite=True), TypeError),
    (dict(type=float, min=2.0, max=1.0), ValueError),
    (dict(type=list, elem=int, min_len=3, max_len=2), ValueError),
    (dict(type=int, rule=lambda v: True), TypeError),
])
def test_bad_declarations_fail_when_declared(kwargs, error):
    with pytest.raises(error):
        Param("x", help="h", **kwargs)


def test_cross_check_messages_name_the_parameters_and_their_values():
    spec = ParamSpec("x", (Param("a", int, "a"), Param("b", int, "b"), Param("ab", int, "ab")),
                     {"book": {"a": 1, "b": 2, "ab": 0}, "smoke": {}, "paper": {}},
                     checks=(("a must be below b", lambda p: p["a"] < p["b"]),))
    with pytest.raises(ParamError, match=r"^x: a must be below b \(got a=3, b=2\)$"):
        spec.resolve("smoke", {"a": 3})


def test_path_parameters_are_made_absolute_against_the_callers_folder(tmp_path, monkeypatch):
    """The notebook runs in notebooks/: a relative folder the user named must reach it as the same folder."""
    from acl26 import runner

    for name in ("i", "t"):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "config.json").write_text("{}")
        (tmp_path / "models" / name / "tokenizer_config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    p = runner.resolve("model_interpolation", "smoke", {"instruct": "models/i", "thinking": "models/t"})
    assert p["instruct"] == str(tmp_path / "models" / "i") and p["thinking"] == str(tmp_path / "models" / "t")
    assert runner.resolve("mta", "smoke", {"teacher": "tiny"})["teacher"] == "tiny"  # a name stays a name
    assert runner.resolve("alloc_moe", "smoke", {"checkpoint": ""})["checkpoint"] == ""
