"""Every registered paper has its notebook, TOC entry, parameters and claims, in step with acl26."""

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


@pytest.mark.parametrize("pid", list(registry.PAPERS))
def test_paper_has_notebook_toc_entry_parameters_and_claims(pid):
    paper = registry.get(pid)
    nb_path = ROOT / paper.notebook
    assert nb_path.is_file()
    assert paper.toc_file in _toc_files()
    assert pid in registry.PLANNED or paper.kind == "support"
    nb = json.loads(nb_path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code[0]["metadata"].get("tags") == ["parameters"], "the first code cell must be tagged parameters"
    assert "".join(code[0]["source"]) == paper.spec.notebook_cell(), "parameters cell out of step with the spec"
    assert paper.spec.names and paper.claims
    assert nb["cells"][0]["cell_type"] == "markdown" and "".join(nb["cells"][0]["source"]).startswith("# ")
    assert any("## Deviations" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_notebooks_are_committed_without_outputs():
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, path.name


def test_toc_chapters_are_exactly_the_registered_papers():
    chapters = [f for f in _toc_files() if f.startswith("book/executed/")]
    assert chapters == [registry.get(p).toc_file for p in registry.PAPERS]
    for f in _toc_files():
        if not f.startswith("book/executed/"):
            assert (ROOT / f"{f}.md").is_file(), f


def test_papermill_sees_every_parameter_with_help():
    import papermill as pm

    for pid, paper in registry.PAPERS.items():
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
    for needed in ["acl26/__init__.py", "acl26/assets.toml", "acl26/lopt.py", "acl26/kernels/__init__.py",
                   "acl26/kernels/tokmerge.py"]:
        assert needed in names
    assert not any(n.startswith(("kernels/", "shared/", "tests/")) for n in names)
