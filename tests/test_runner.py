"""The papermill runner: validated up front, atomic on success, nothing half-written on failure."""

import json
from pathlib import Path

import nbformat
import pytest

import fakepaper
from acl26 import params, registry, runner

pytestmark = pytest.mark.notebook


@pytest.fixture()
def fake_repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    nbformat.write(nbformat.from_dict(fakepaper.notebook()), root / "notebooks" / "fake.ipynb")
    monkeypatch.setitem(registry.CHAPTERS, "fake", fakepaper.chapter())
    tests_dir = str(Path(fakepaper.__file__).parent)
    monkeypatch.setenv("PYTHONPATH", tests_dir)
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    return root


def test_success_moves_notebook_and_results_into_place(fake_repo, tmp_path):
    out = tmp_path / "out"
    res = runner.run("fake", "smoke", {"value": 5}, root=fake_repo, out_dir=out, progress=False)
    assert res.notebook == out / "fake.ipynb" and res.notebook.is_file()
    data = json.loads((out / "results" / "fake-smoke.json").read_text())
    assert data["claims"][0]["value"] == 5 and data["claims"][0]["holds?"] == "yes"
    assert json.loads((out / "runs" / "fake.json").read_text())["params"]["value"] == 5
    assert not list(out.glob(".*.run")), "staging folder left behind"


def test_failure_leaves_nothing_half_written(fake_repo, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(runner.RunError, match=r"fake \(smoke\) failed in cell .*RuntimeError: boom after saving") as err:
        runner.run("fake", "smoke", {"fail": True}, root=fake_repo, out_dir=out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [], "the output folder must stay untouched"
    kept = Path(str(err.value).split("kept at ")[1].rstrip(")"))
    assert kept.is_file() and kept.parent == tmp_path / "cache" / "failed"


def test_bad_parameters_fail_before_anything_is_written(fake_repo, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(params.ParamError, match="'value'.*below the minimum"):
        runner.run("fake", "smoke", {"value": -1}, root=fake_repo, out_dir=out, progress=False)
    with pytest.raises(params.ParamError, match="unknown parameter 'nope'"):
        runner.run("fake", "smoke", {"nope": 1}, root=fake_repo, out_dir=out, progress=False)
    assert not out.exists()


def test_unknown_paper():
    with pytest.raises(KeyError, match="unknown paper 'nope'"):
        runner.run("nope")


def test_run_all_executes_once_then_takes_the_cache_until_an_input_changes(fake_repo, tmp_path, monkeypatch):
    out = tmp_path / "out"
    first = runner.run_all(["fake"], "smoke", out_dir=out, root=fake_repo, progress=False)
    assert [r.status for r in first] == ["executed"] and first[0].key
    again = runner.run_all(["fake"], "smoke", out_dir=out, root=fake_repo, progress=False)
    assert [r.status for r in again] == ["cached"] and again[0].key == first[0].key
    assert runner.run_all(["fake"], "smoke", out_dir=out, root=fake_repo, progress=False, force=True)[0].status == "executed"
    # the notebook's source is part of the key
    nb = fake_repo / "notebooks" / "fake.ipynb"
    nb.write_text(nb.read_text().replace("Fake paper", "Fake paper, edited"))
    edited = runner.run_all(["fake"], "smoke", out_dir=out, root=fake_repo, progress=False)[0]
    assert edited.status == "executed" and edited.key != first[0].key
    # so are the resolved parameters, and a missing output means running again
    from acl26 import execution

    chapter = registry.get("fake")
    assert execution.notebook_key(chapter, {"value": 1}, fake_repo) != execution.notebook_key(chapter, {"value": 2}, fake_repo)
    (out / "fake.ipynb").unlink()
    assert runner.run_all(["fake"], "smoke", out_dir=out, root=fake_repo, progress=False)[0].status == "executed"


def test_a_single_run_is_taken_from_the_cache_by_run_all_only_for_the_same_parameters(fake_repo, tmp_path):
    out = tmp_path / "out"
    # what `acl26 run fake --profile smoke -p value=...` does: an override that differs from the profile
    other = runner.run("fake", "smoke", {"value": 7}, root=fake_repo, out_dir=out, progress=False)
    assert runner.run_all(["fake"], "smoke", out_dir=out, root=fake_repo, progress=False)[0].status == "executed"
    same = runner.run("fake", "smoke", root=fake_repo, out_dir=out, progress=False)
    assert same.key and same.key != other.key
    again = runner.run_all(["fake"], "smoke", out_dir=out, root=fake_repo, progress=False)[0]
    assert again.status == "cached" and again.key == same.key


def test_run_all_runs_support_pages_first(monkeypatch, fake_repo, tmp_path):
    seen = []
    monkeypatch.setattr(runner, "run", lambda pid, *a, **k: seen.append(pid) or runner.RunResult(
        pid, "smoke", tmp_path / f"{pid}.ipynb", [], 0.0, {}, "executed", k.get("key", "")))
    monkeypatch.setattr(runner, "cached", lambda *a, **k: None)
    for pid in ("lopt", "models"):
        nb = fake_repo / "notebooks" / f"{pid}.ipynb"
        nb.write_text("{}")
    runner.run_all(["lopt", "models"], "smoke", out_dir=tmp_path / "o", root=fake_repo)
    assert seen == ["models", "lopt"]


def test_source_digest_of_a_chapter_leaves_out_the_other_chapters(tmp_path, monkeypatch):
    from acl26 import execution

    pkg, kern = tmp_path / "acl26", tmp_path / "kernels"
    for f in ("core.py", "papers/__init__.py", "papers/a/study.py", "papers/b/study.py"):
        (pkg / f).parent.mkdir(parents=True, exist_ok=True)
        (pkg / f).write_text(f"# {f}\n")
    kern.mkdir()
    (kern / "k.py").write_text("# kernel\n")
    monkeypatch.setattr(execution, "_package_roots", lambda: [pkg, kern])

    def digests():
        execution.source_digest.cache_clear()
        return {c: execution.source_digest(c) for c in (None, "a", "b")}

    before = digests()
    (pkg / "papers/b/study.py").write_text("# b, edited\n")
    after = digests()
    assert after["a"] == before["a"] and after["b"] != before["b"] and after[None] != before[None]
    for f in ("core.py", "papers/__init__.py"):
        (pkg / f).write_text("# shared, edited\n")
        again = digests()
        assert all(again[c] != after[c] for c in again)
        after = again
    (kern / "k.py").write_text("# kernel, edited\n")
    assert all(v != after[c] for c, v in digests().items())
    execution.source_digest.cache_clear()


def test_editing_one_kernel_re_runs_only_the_chapters_that_use_it(tmp_path, monkeypatch):
    from acl26 import execution

    pkg, kern = tmp_path / "acl26", tmp_path / "kernels"
    (pkg / "papers").mkdir(parents=True)
    (pkg / "core.py").write_text("# core\n")
    kern.mkdir()
    for f in ("__init__.py", "_jit.py", "k1.py", "k2.py"):
        (kern / f).write_text(f"# {f}\n")
    monkeypatch.setattr(execution, "_package_roots", lambda: [pkg, kern])
    uses = {"a": ("k1",), "b": ("k2",), "c": ()}

    def digests():
        execution.source_digest.cache_clear()
        return {c: execution.source_digest(c, k) for c, k in uses.items()}

    before = digests()
    (kern / "k1.py").write_text("# k1, edited\n")
    after = digests()
    assert after["a"] != before["a"] and after["b"] == before["b"] and after["c"] == before["c"]
    (kern / "k3").mkdir()  # a kernel package: its files belong to the chapters that declare it
    (kern / "k3" / "__init__.py").write_text("# k3\n")
    (kern / "k3" / "simd.py").write_text("# k3 simd\n")
    uses["d"] = ("k3",)
    after = digests()
    (kern / "k3" / "simd.py").write_text("# k3 simd, edited\n")
    edited = digests()
    assert edited["d"] != after["d"] and all(edited[c] == after[c] for c in "abc")
    (kern / "_jit.py").write_text("# the shared jit, edited\n")  # every chapter's kernels compile through it
    assert all(v != edited[c] for c, v in digests().items())
    execution.source_digest.cache_clear()


def test_every_chapter_declares_the_kernels_it_imports():
    """A kernel a chapter runs but does not declare would not re-run it when edited."""
    import ast

    from acl26 import registry

    root = Path(registry.__file__).parent / "papers"
    for chapter in registry.CHAPTERS.values():
        used = set()
        for path in (root / chapter.id).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "acl26.kernels":
                    used |= {a.name for a in node.names}
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("acl26.kernels."):
                    used.add(node.module.split(".")[2])
                elif isinstance(node, ast.Import):
                    used |= {a.name.split(".")[2] for a in node.names if a.name.startswith("acl26.kernels.")}
        used = {m for m in used if not m.startswith("_")}
        assert used <= set(chapter.kernels), f"{chapter.id} imports kernels {sorted(used - set(chapter.kernels))} " \
                                             f"it does not declare in CHAPTER.kernels"
