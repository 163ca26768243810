"""Validate once (issue 42, point 3): a run resolves its parameters once and passes the set on; a rule
lives in one place with one message; a chapter's study and verdicts use only its spec's public names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import acl26.papers
from acl26 import cli, params, registry, runner
from acl26.papers.alloc_moe import spec as alloc_spec
from acl26.papers.alloc_moe import study as alloc_study
from test_architecture import modules as acl26_modules
from test_private_imports import private_imports


@pytest.fixture()
def counted(monkeypatch, tmp_path):
    """Count ``ParamSpec.resolve`` per chapter and ``Param.check`` per parameter; the notebook itself
    is not executed (what papermill would run is recorded instead)."""
    for chapter in registry.ordered():  # each spec checks its own profiles once, on import: not counted
        chapter.spec
    resolves: dict[str, int] = {}
    param_checks: dict[str, int] = {}
    resolve, check = params.ParamSpec.resolve, params.Param.check

    def counting_resolve(self, *a, **k):
        resolves[self.paper] = resolves.get(self.paper, 0) + 1
        return resolve(self, *a, **k)

    def counting_check(self, *a, **k):
        param_checks[self.name] = param_checks.get(self.name, 0) + 1
        return check(self, *a, **k)

    executed = []

    def fake_execute(paper_id, profile, params_, injected, *a, **k):
        executed.append((paper_id, params_, injected))
        return runner.RunResult(paper_id, profile, tmp_path / f"{paper_id}.ipynb", [], 0.0, params_)

    monkeypatch.setattr(params.ParamSpec, "resolve", counting_resolve)
    monkeypatch.setattr(params.Param, "check", counting_check)
    monkeypatch.setattr(runner, "_execute", fake_execute)
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    return resolves, param_checks, executed


def test_acl26_run_resolves_its_parameters_once(counted, tmp_path, capsys):
    resolves, param_checks, executed = counted
    rc = cli.main(["run", "sherry", "--profile", "smoke", "-p", "qat_blocks=14,15", "--out", str(tmp_path / "o"), "-q"])
    assert rc in (0, None), capsys.readouterr().err
    assert resolves == {"sherry": 1}  # was 2: the CLI's own resolve, then the runner's
    assert param_checks["qat_blocks"] == 1
    # the runner passed the resolved set on: what the notebook gets is what was validated
    [(paper_id, got, injected)] = executed
    assert paper_id == "sherry" and got["qat_blocks"] == [14, 15] and injected["qat_blocks"] == [14, 15]


def test_a_bad_parameter_still_fails_before_any_work_in_one_line(counted, tmp_path, capsys):
    resolves, _, executed = counted
    rc = cli.main(["run", "sherry", "--profile", "smoke", "-p", "qat_blocks=-1", "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err.strip()
    assert rc not in (0, None) and not executed and not (tmp_path / "o").exists()
    assert "qat_blocks" in err and len(err.splitlines()) == 1, err
    assert resolves == {"sherry": 1}


def test_run_all_resolves_each_chapter_once(counted, tmp_path, monkeypatch):
    resolves, _, executed = counted
    monkeypatch.setattr(runner, "cached", lambda *a, **k: None)
    runner.run_all(["sherry"], "smoke", out_dir=tmp_path / "o", root=Path(registry.__file__).parents[1],
                   progress=False)
    assert resolves == {"sherry": 1}  # was 3: the up-front check, the key, and run()
    assert [e[0] for e in executed] == ["sherry"]



def test_the_book_resolves_each_chapter_once_and_passes_the_sets_on(counted, monkeypatch):
    """``acl26 book`` checks every chapter's profile before any work, and run_all runs what was checked."""
    from acl26 import book

    resolves, _, _ = counted
    got = {}

    class Stop(Exception):
        pass

    def fake_run_all(ids, profile, **kw):
        got.update(ids=ids, params=kw.get("params"))
        raise Stop

    monkeypatch.setattr(book.assets, "fetch", lambda *a, **k: None)
    monkeypatch.setattr(book, "prepare", lambda *a, **k: None)
    monkeypatch.setattr(runner, "run_all", fake_run_all)
    with pytest.raises(Stop):
        book.main("smoke", do_bench=False, do_build=False, papers=["sherry", "lopt"])
    assert resolves == {"sherry": 1, "lopt": 1}
    assert sorted(got["params"]) == ["lopt", "sherry"] and got["params"]["lopt"]["profile"] == "smoke"


def test_run_all_refuses_params_that_lack_a_chapter(tmp_path):
    with pytest.raises(ValueError, match="lacks the parameter sets of sherry"):
        runner.run_all(["sherry"], "smoke", out_dir=tmp_path / "o", root=Path(registry.__file__).parents[1],
                       progress=False, params=runner.resolve_all(["lopt"], "smoke"))


def test_a_sweep_resolves_each_point_once(counted, tmp_path):
    from acl26 import sweep

    resolves, _, _ = counted
    plan = sweep.plan("lopt", "smoke", grid=["seed=0,1,2"], out=tmp_path / "sw")
    assert len(plan.points) == 3 and resolves == {"lopt": 3}  # was 4: the bare profile first
    with pytest.raises(params.ParamError, match="unknown profile 'big'"):
        sweep.plan("lopt", "big", grid=["seed=0,1"], out=tmp_path / "sw")


@pytest.mark.parametrize("kind, value, lo, hi", [(int, 5, 1, 9), (float, 0.5, 0.0, 1.0)])
def test_a_bounded_number_is_type_checked_once(monkeypatch, kind, value, lo, hi):
    """The bounds are compared in one place (Param._bounds), not by checking the type a second time."""
    from acl26 import checks

    calls = []
    for name in ("integer", "number"):
        real = getattr(checks, name)
        monkeypatch.setattr(checks, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
    p = params.Param("x", kind, "a number", min=lo, max=hi)
    assert p.check(value, "t") == value
    assert calls == ["integer" if kind is int else "number"]
    for bad, edge in ((lo - 1, "below the minimum"), (hi + 1, "above the maximum")):
        with pytest.raises(params.ParamError, match=f"'x': {bad!r} is {edge} {hi if bad > hi else lo}$"):
            p.check(kind(bad), "t")

# ---- Alloc-MoE: "each budget below the native top-k", one rule, one message -------------------------------

def _rule_message(text: str, budgets: list[int]) -> bool:
    """The rule's one message: BELOW_NATIVE, the subject's top-k in parentheses, then the budgets."""
    rule, got = re.escape(alloc_spec.BELOW_NATIVE), re.escape(str(budgets))
    pattern = rf"(alloc_moe: )?{rule} \(.+\) \(got (.+, )?budgets={got}.*\)"
    return re.fullmatch(pattern, text) is not None


def test_the_below_native_rule_has_one_message_whichever_entry_point_catches_it():
    from test_alloc_moe import tiny_qwen3

    budgets = [1, 3]  # smoke's trained MoE has top-3; the tiny model below has top-2
    with pytest.raises(params.ParamError) as by_spec:
        runner.resolve("alloc_moe", "smoke", {"budgets": budgets})
    with pytest.raises(ValueError) as by_study:  # checked first, before any work on the model
        alloc_study.run_grid(tiny_qwen3(top_k=2, experts=4), {}, {"budgets": budgets}, progress=False)
    with pytest.raises(ValueError) as by_rule:
        alloc_spec.check_below_native(budgets, 3, "the trained MoE's")
    for e in (by_spec, by_study, by_rule):
        msg = str(e.value)
        assert _rule_message(msg, budgets) and "\n" not in msg, msg
    assert alloc_spec.below_native([1, 2], 3) and not alloc_spec.below_native([1, 3], 3)
    assert alloc_spec.below_native([5], None)  # a top-k not known yet: checked once it is


def test_the_study_writes_the_below_native_rule_nowhere_itself():
    """The rule's text lives in the spec: no string in the study says it again."""
    tree = ast.parse(Path(alloc_study.__file__).read_text())
    said = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and re.search(r"below the (\w+ )*native top-k|not below", n.value)]
    assert said == []


def test_nearest_half_is_public_and_keeps_its_behaviour():
    assert alloc_spec.nearest_half([1, 2, 3, 4], 6) == 3
    assert alloc_spec.nearest_half([1, 2], 3) == 1  # a tie: the smaller
    assert alloc_study.half_budget({"budgets": [2, 4]}, 6) == 2


# ---- a chapter's study and verdicts import no private name of its spec -------------------------------------

def _private_spec_uses(path: Path, chapter: str) -> list[str]:
    """The private names ``path`` (a chapter's study or verdicts) takes from its chapter's spec, by the
    general scan of tests/test_private_imports.py."""
    name = f"acl26.papers.{chapter}.{path.stem}"
    spec_module = f"acl26.papers.{chapter}.spec"
    return [n for _, module, n in private_imports(name, path, acl26_modules()) if module == spec_module]


def test_no_study_or_verdicts_imports_a_private_name_from_its_spec():
    papers = Path(acl26.papers.__file__).parent
    checked, bad = 0, {}
    for spec_file in sorted(papers.glob("*/spec.py")):
        chapter = spec_file.parent.name
        for name in ("study.py", "verdicts.py"):
            path = spec_file.parent / name
            if path.is_file():
                checked += 1
                if uses := _private_spec_uses(path, chapter):
                    bad[f"{chapter}/{name}"] = uses
    assert checked >= 5 and bad == {}
