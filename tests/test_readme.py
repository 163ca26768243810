"""The README's layout table names only paths that exist, and names every top-level folder."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout_paths() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    paths = []
    for line in section.splitlines():
        if line.startswith("| `"):
            cell = line.split("|")[1]
            paths += re.findall(r"`([^`]+)`", cell)
    return paths


def test_every_path_in_the_layout_table_exists():
    paths = layout_paths()
    assert len(paths) >= 10
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"README's layout table names paths that do not exist: {missing}"


def test_layout_table_covers_the_top_level():
    named = {p.rstrip("/").split("/")[0] for p in layout_paths()}
    top = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") and p.name not in
           ("README.md", "LICENSE", "_build", "build", "dist", "venv", "sweeps") and not p.name.endswith(".egg-info")}
    assert top <= named, f"top-level entries missing from README's layout table: {sorted(top - named)}"


def test_licence_and_citation_agree_with_pyproject():
    import tomllib

    import yaml

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["title"].startswith(project["name"]) and cff["authors"]
    assert cff["license"] == project["license"] == "Apache-2.0" and cff["version"] == project["version"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"] and "END OF TERMS AND CONDITIONS" in text
