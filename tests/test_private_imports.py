"""One name, one thing (issue 42, points 4 and 5): no module of acl26 (shared/ and kernels/) imports a private
name (a leading underscore, dunders aside) from another acl26 module, whether by ``from m import _x`` or
by ``m._x`` on an imported module. A helper another module needs is public. (tests/test_validate_once.py
checks the narrower rule that a chapter's study and verdicts use only its spec's public names.)"""

from __future__ import annotations

import ast
from pathlib import Path

from test_architecture import modules as acl26_modules  # every acl26 module by its dotted name

ROOT = Path(__file__).resolve().parents[1]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str, str]]:
    """(importer, module, private name) for each private name ``path`` takes from another acl26 module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    aliases: dict[str, str] = {}  # a local name bound to an acl26 module -> that module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([module] if module else []))
            if not module.startswith("acl26"):
                continue
            for a in node.names:
                if _private(a.name) and module != name:
                    found.append((name, module, a.name))
                if f"{module}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and _private(node.attr) and aliases[node.value.id] != name):
            found.append((name, aliases[node.value.id], node.attr))
    return found


def test_the_scan_sees_both_forms(tmp_path):
    modules = {"acl26.a": tmp_path / "a.py", "acl26.b": tmp_path / "b.py", "acl26.p.c": tmp_path / "p" / "c.py"}
    (tmp_path / "a.py").write_text("from acl26.b import _x, y, __version__\nfrom acl26 import b\n"
                                   "from . import b as bee\nb._z\nbee._w\nb.__doc__\n")
    assert sorted(private_imports("acl26.a", tmp_path / "a.py", modules)) == [
        ("acl26.a", "acl26.b", "_w"), ("acl26.a", "acl26.b", "_x"), ("acl26.a", "acl26.b", "_z")]
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "c.py").write_text("from .d import _q\nfrom ..b import _r\n")
    assert private_imports("acl26.p.c", tmp_path / "p" / "c.py", modules) == [
        ("acl26.p.c", "acl26.p.d", "_q"), ("acl26.p.c", "acl26.b", "_r")]


def test_no_acl26_module_imports_a_private_name_from_another():
    modules = acl26_modules()
    assert len(modules) > 40 and "acl26.kernels" in modules and "acl26.papers.lopt.method" in modules
    found = sorted(hit for name, path in modules.items() for hit in private_imports(name, path, modules))
    assert found == [], found
