"""Every chapter has its notebook, TOC entry, parameters and claims, in step with acl26 (acl26 sync)."""

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from acl26 import registry

ROOT = Path(__file__).resolve().parents[1]


def _toc_files():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part["chapters"]]
    return files


@pytest.mark.parametrize("pid", list(registry.CHAPTERS))
def test_chapter_has_notebook_toc_entry_parameters_and_claims(pid):
    paper = registry.get(pid)
    nb_path = ROOT / paper.notebook
    assert nb_path.is_file()
    assert paper.toc_file in _toc_files()
    nb = json.loads(nb_path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code[0]["metadata"].get("tags") == ["parameters"], "the first code cell must be tagged parameters"
    assert "".join(code[0]["source"]) == paper.spec.notebook_cell(), "parameters cell out of step (acl26 sync)"
    assert paper.spec.names and paper.claims
    opening = "".join(code[1]["source"])
    assert f'notebook.setup("{pid}", globals())' in opening and "hide-input" in code[1]["metadata"].get("tags", [])
    assert "filterwarnings(\"ignore\")" not in "".join("".join(c["source"]) for c in code)
    claims_cells = [c for c in code if "record_claims(ledger" in "".join(c["source"])]
    assert len(claims_cells) == 1, "one cell decides the claims, through CHAPTER.record_claims"
    assert nb["cells"][0]["cell_type"] == "markdown" and "".join(nb["cells"][0]["source"]).startswith("# ")
    assert any("## Deviations" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_notebooks_are_committed_without_outputs():
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, path.name


def test_sync_check_passes():
    """`acl26 sync --check`: every parameters cell and book/_toc.yml are what the registry writes."""
    from acl26 import cli

    assert cli.main(["sync", "--check"]) == 0


def test_changing_a_profile_value_changes_no_notebook():
    import copy

    from acl26 import sync

    chapter = registry.get("lopt")
    spec = copy.deepcopy(chapter.spec)
    spec.profiles["book"]["trials"] += 1
    assert spec.notebook_cell() == chapter.spec.notebook_cell()
    assert "(book:" not in chapter.spec.notebook_cell()
    assert sync.toc_text() == (ROOT / "book" / "_toc.yml").read_text()


def test_sync_writes_a_stale_parameters_cell_and_check_reports_it(tmp_path):
    import shutil

    from acl26 import sync

    for sub in ("notebooks", "book"):
        shutil.copytree(ROOT / sub, tmp_path / sub, ignore=shutil.ignore_patterns("executed", "_generated", "_static"))
    nb_path = tmp_path / "notebooks" / "lopt.ipynb"
    nb = json.loads(nb_path.read_text())
    first = next(c for c in nb["cells"] if c["cell_type"] == "code")
    first["source"] = ["trials: Optional[int] = 3  # hand-edited"]
    nb_path.write_text(json.dumps(nb, indent=1))
    assert sync.sync(tmp_path, check=True) == [nb_path]
    assert sync.sync(tmp_path) == [nb_path]
    assert sync.sync(tmp_path, check=True) == []
    assert "".join(next(c for c in json.loads(nb_path.read_text())["cells"] if c["cell_type"] == "code")["source"]) \
        == registry.get("lopt").spec.notebook_cell()


def test_support_pages_come_first_and_ids_match_folders():
    kinds = [c.kind for c in registry.CHAPTERS.values()]
    assert kinds == sorted(kinds, key=["support", "paper"].index)
    assert [c.id for c in registry.ordered(["lopt", "models"])] == ["models", "lopt"]
    assert registry.get("alloc-moe" if "alloc_moe" in registry.CHAPTERS else "lopt")
    from acl26.papers import PLANNED

    assert not {pid for pid, _, _ in PLANNED} & set(registry.CHAPTERS)


def test_no_per_paper_module_at_the_top_of_shared():
    from acl26.papers import PLANNED

    # papers (the support page "models" shares its name with the shared utility acl26.models)
    ids = {c.id for c in registry.CHAPTERS.values() if c.kind == "paper"} | {pid for pid, _, _ in PLANNED}
    ids |= {i.split("_")[0] for i in ids}  # alloc_moe -> alloc, model_interpolation -> model
    top = {p.stem for p in (ROOT / "shared").glob("*.py")}
    assert not {t for t in top for i in ids if t == i or t.startswith(i + "_") and t != "model"}, top


def test_every_chapter_subpackage_is_packaged():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    found = {"acl26." + ".".join(p.parent.relative_to(ROOT / "shared").parts)
             for p in (ROOT / "shared").rglob("__init__.py") if p.parent != ROOT / "shared"}
    assert found <= listed, found - listed


def test_toc_chapters_are_exactly_the_registered_chapters():
    chapters = [f for f in _toc_files() if f.startswith("book/executed/")]
    assert chapters == [registry.get(p).toc_file for p in registry.CHAPTERS]
    for f in _toc_files():
        if not f.startswith("book/executed/"):
            assert (ROOT / f"{f}.md").is_file(), f


def test_papermill_sees_every_parameter_with_help():
    import papermill as pm

    for pid, paper in registry.CHAPTERS.items():
        seen = pm.inspect_notebook(str(ROOT / paper.notebook))
        assert set(seen) == {"profile", *paper.spec.names}
        assert all(seen[n]["help"] for n in paper.spec.names)


def test_environment_yml_agrees_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    python = [d for d in deps if isinstance(d, str) and d.startswith("python=")]
    assert python == ["python=3.11"]
    assert ">=3.11" in project["project"]["requires-python"]
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert '-e ".[all]"' in pip
    torch_pins = [d for d in project["project"]["dependencies"] if d.startswith("torch")]
    assert torch_pins == ["torch==2.13.0"] and "torch==2.13.0" in pip
    assert set(pip) == {"torch==2.13.0", '-e ".[all]"'}, "pyproject is the one source of Python dependencies"
    extras = project["project"]["optional-dependencies"]
    assert {"book", "test", "all"} <= set(extras)
    assert any(re.match(r"jupyter-book>=1\.0\.4,<2", d) for d in extras["book"])
    assert any(d.startswith("nbmake") for d in extras["test"])


def test_package_maps_shared_and_kernels():
    import acl26
    import acl26.kernels

    assert Path(acl26.__file__).parent.name == "shared"
    assert Path(acl26.kernels.__file__).parent.name == "kernels"


@pytest.mark.slow
def test_regular_wheel_carries_both_packages_and_the_manifest(tmp_path):
    import subprocess
    import sys
    import zipfile

    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                           str(ROOT), "-w", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    names = zipfile.ZipFile(next(tmp_path.glob("acl26_repro-*.whl"))).namelist()
    for needed in ["acl26/__init__.py", "acl26/assets.toml", "acl26/papers/lopt/method.py",
                   "acl26/papers/sherry/qat.py", "acl26/papers/models/study.py", "acl26/kernels/__init__.py",
                   "acl26/kernels/tokmerge.py"]:
        assert needed in names
    assert not any(n.startswith(("kernels/", "shared/", "tests/")) for n in names)


def test_the_shared_core_names_no_chapter():
    """shared/ outside shared/papers/ imports no chapter package and spells no paper chapter's id:
    what a chapter needs of the core is a hook on its Chapter (prepare, fragments, kernels)."""
    import ast
    from pathlib import Path

    from acl26 import registry

    core = Path(registry.__file__).parent
    papers = {c.id for c in registry.CHAPTERS.values() if c.kind == "paper"}
    bad = []
    for path in sorted(core.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            bad += [f"{path.name}: imports {n}" for n in names
                    if n.startswith("acl26.papers.") and n.split(".")[2] in registry.CHAPTERS]
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in papers:
                bad.append(f"{path.name}:{node.lineno}: names the chapter {node.value!r}")
    assert not bad, bad


def _chapter_names() -> set[str]:
    """What names a paper chapter: its id (also with dashes or spaces), its short name (the title before
    a colon: ``Sherry``, ``Alloc-MoE``) and its arXiv id."""
    names = set()
    for c in registry.CHAPTERS.values():
        if c.kind != "paper":
            continue
        names |= {c.id, c.id.replace("_", "-"), c.id.replace("_", " "), c.arxiv}
        short = c.title.split(":")[0]
        if ":" in c.title and len(short.split()) <= 2:
            names.add(short)
    return {n for n in names if n}


def test_the_shared_core_text_names_no_chapter():
    """No docstring, help text or other string of the core (shared/*.py, not shared/papers/) names a paper
    chapter (issue 42, point 5): the core is written for any chapter; an example uses a placeholder."""
    import ast
    import re

    core = Path(registry.__file__).parent
    pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(n)}(?![\w-])" for n in sorted(_chapter_names())),
                         re.IGNORECASE)
    bad = []
    for path in sorted(core.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = re.sub(r"\s+", " ", node.value)  # a name wrapped over two lines
                bad += [f"{path.name}:{node.lineno}: {m.group(0)!r}" for m in pattern.finditer(text)]
    assert not bad, bad


def test_a_chapter_is_imported_only_when_asked_for():
    import subprocess
    import sys

    code = ("import sys\nfrom acl26 import registry, runner\n"
            "runner.resolve('lopt', 'smoke')\nregistry.ordered(['lopt'])\n"
            "print(sorted({m.split('.')[2] for m in sys.modules if m.startswith('acl26.papers.')}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['lopt']", proc.stdout


def test_prepare_runs_each_chapters_hook(monkeypatch, capsys):
    import dataclasses

    import fakepaper
    from acl26 import cli
    from acl26.errors import RunError

    calls = []

    def ok(force):
        calls.append(force)
        return "built the fake tools"

    monkeypatch.setitem(registry.CHAPTERS, "fake", dataclasses.replace(fakepaper.chapter(), prepare=ok))
    assert cli.main(["prepare", "fake", "--force"]) == 0 and calls == [True]
    assert "built the fake tools" in capsys.readouterr().out

    def cannot(force):
        raise RunError("no compiler here")

    monkeypatch.setitem(registry.CHAPTERS, "fake", dataclasses.replace(fakepaper.chapter(), prepare=cannot))
    assert cli.main(["prepare", "fake"]) == 2  # asked for alone: the command's error, one line
    assert capsys.readouterr().err.strip() == "acl26: error: no compiler here"
    from acl26 import book

    book.prepare([registry.get("fake")])  # in the book: reported, and the book goes on
    assert "WARNING: fake is not prepared" in capsys.readouterr().out


@pytest.mark.parametrize("pid", list(registry.CHAPTERS))
def test_no_notebook_cell_builds_a_verdict_input_or_branches_on_verdicts(pid):
    """The claims cell hands record_claims what the package's study.run_experiments returned, untouched; and no cell
    reads verdicts to write prose (that text comes from the package)."""
    import ast

    import nbformat

    nb = nbformat.read(ROOT / registry.get(pid).notebook, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]
    trees = [ast.parse("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))))
             for src in cells]
    from_run = {t.id for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr == "run_experiments" and isinstance(node.value.func.value, ast.Name)
                and node.value.func.value.id == "study" for t in node.targets if isinstance(t, ast.Name)}
    calls = [node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "record_claims"]
    assert len(calls) == 1, f"{pid}: exactly one record_claims call, found {len(calls)}"
    arg = calls[0].args[1] if len(calls[0].args) > 1 else None
    assert isinstance(arg, ast.Name) and arg.id in from_run, \
        f"{pid}: record_claims must read what study.run_experiments(...) returned, as it is (got {ast.unparse(arg) if arg else None})"
    reassigned = [t.id for tree in trees for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AugAssign))
                  for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                  if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == arg.id]
    assert not reassigned, f"{pid}: a cell changes {arg.id}[...] after study.run_experiments"
    for src in cells:
        assert ".holds" not in src and "ledger.entries" not in src, f"{pid}: a cell reads verdicts: {src[:120]!r}"



def test_the_checkouts_kernels_folder_never_poses_as_the_hub_kernels_package():
    """From the checkout's root the working folder is on sys.path, so `import kernels` (which transformers
    does when the Hugging Face `kernels` distribution is installed) found kernels/, i.e. acl26.kernels,
    and failed deep inside transformers. It must load the real package, or, where that is not installed,
    look absent to transformers (an empty module without __file__: transformers 5.24 imports the name to
    probe for it and fails on an ImportError)."""
    import importlib.metadata as md
    import subprocess
    import sys

    code = "import kernels, sys; print(kernels.__file__, [n for n in vars(kernels) if not n.startswith('__')])"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    try:
        md.version("kernels")
    except md.PackageNotFoundError:
        assert proc.returncode == 0 and proc.stdout.strip() == "None []", (proc.stdout, proc.stderr)
    else:
        assert proc.returncode == 0, proc.stderr
        assert "site-packages" in proc.stdout and str(ROOT / "kernels") not in proc.stdout
    proc = subprocess.run([sys.executable, "-c", "import transformers, acl26.kernels.ternary; "
                           "from transformers import AutoConfig, LlamaConfig; from transformers.activations import ACT2FN"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


#: calls a notebook cell must not make: they compute an interval, a statistic or a metric, which is the
#: work of the chapter's tables (issue 42, point 1). Names of functions (any module) and of methods.
COMPUTING_CALLS = {"paired_bootstrap", "seed_interval", "repeat_range", "two_level_bootstrap", "over_half_width",
                   "noisy", "bootstrap", "median", "mean", "std", "var", "percentile", "quantile", "agg",
                   "aggregate", "describe", "interval", "mean_interval", "sem", "nanmean", "nanmedian", "cumsum"}


def computing_calls(source: str) -> list[str]:
    """The calls in ``source`` (a code cell) that compute a statistic (:data:`COMPUTING_CALLS`), by name."""
    import ast

    tree = ast.parse("\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in COMPUTING_CALLS:
                found.append(ast.unparse(f))
    return found


@pytest.mark.parametrize("pid", list(registry.CHAPTERS))
def test_no_notebook_cell_computes_an_interval_or_a_metric(pid):
    """The notebook shows what the chapter's tables return; the metrics it saves come from tables too."""
    import ast

    import nbformat

    nb = nbformat.read(ROOT / registry.get(pid).notebook, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]
    bad = {i: computing_calls(src) for i, src in enumerate(cells) if computing_calls(src)}
    assert not bad, f"{pid}: code cells compute statistics the chapter's tables should return: {bad}"
    saves = [node for src in cells for node in ast.walk(ast.parse(src)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "save"
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "ledger"]
    assert len(saves) == 1, f"{pid}: one ledger.save call, found {len(saves)}"
    metrics = [k.value for k in saves[0].keywords if k.arg == "metrics"]
    for m in metrics:
        assert isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and isinstance(m.func.value, ast.Name) \
            and m.func.value.id == "tables", f"{pid}: ledger.save's metrics must be tables.<fn>(...), got {ast.unparse(m)}"


def test_the_cell_scan_finds_statistics():
    assert computing_calls("iv = stats.paired_bootstrap(a, b)\nx = df.agg(['mean'])\ny = np.median(t)") == \
        ["stats.paired_bootstrap", "df.agg", "np.median"]
    assert computing_calls("display(tables.seed_spread(res['seeds']))\nsns.lineplot(data=d)") == []
