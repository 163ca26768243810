"""The package's import structure: no import cycle among acl26's modules (issue 42, point 2).

The graph is built statically from the source (``ast``), not from what one run happens to import, so a
lazy import inside a function counts as much as one at the top of a module: a cycle that a deferred
import hides at load time is still a cycle of dependencies (``claims -> registry -> chapter -> claims``
was one). Modules: every ``.py`` under ``shared/`` (``acl26``) and ``kernels/`` (``acl26.kernels``),
a package being its ``__init__``. Edges, for each ``import`` / ``from ... import`` anywhere in a module
(at the top, in a function, in a class, under ``try`` or ``if``), except under ``if TYPE_CHECKING:``,
which never runs:

* ``import acl26.x.y``: to ``acl26.x.y``;
* ``from acl26.x import y``: to ``acl26.x.y`` where that is a module, else to ``acl26.x`` (a name the
  package defines or re-exports from its ``__init__``, which is itself an edge of that ``__init__``);
* relative imports resolved against the importing module's package the same way.

Importing ``acl26.x.y`` also runs the ``__init__`` of ``acl26`` and ``acl26.x``; those implicit edges
are left out (a package that imports its own submodules would otherwise be in a cycle with each of
them). A module imported by a computed name (``importlib.import_module``) is not an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: folder -> the dotted name it is imported as (pyproject.toml's package-dir)
PACKAGES = {ROOT / "shared": "acl26", ROOT / "kernels": "acl26.kernels"}


def modules(packages: dict[Path, str] = PACKAGES) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` under each folder (``__init__.py``: the package)."""
    found: dict[str, Path] = {}
    for folder, name in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([name, *parts])] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node in ``tree``, at any depth, but none under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def graph(packages: dict[Path, str] = PACKAGES) -> dict[str, set[str]]:
    """The static import graph among the modules of ``packages``: ``{module: {modules it imports}}``."""
    mods = modules(packages)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    # the package a relative import starts from: a package's own __init__ counts as level 1
                    base = mod.split(".") if is_package else mod.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                    base_name = ".".join(base + ([node.module] if node.module else []))
                else:
                    base_name = node.module or ""
                targets = [f"{base_name}.{a.name}" if f"{base_name}.{a.name}" in mods else base_name
                           for a in node.names]
            for target in targets:
                # ``import acl26.x.y`` where only acl26.x is a module here (y a name): the nearest module
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    edges[mod].add(target)
                elif target == mod:
                    edges[mod].add(mod)  # a module importing itself: a cycle of one
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle (``[a, b, ..., a]``) per strongly connected component that has a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:  # Tarjan, iterative over each node's successors
        work = [(v, iter(sorted(edges[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, succ = work[-1]
            for w in succ:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    components.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            connect(v)

    found = []
    for comp in components:
        if len(comp) == 1 and comp[0] not in edges[comp[0]]:
            continue
        members = set(comp)
        best: list[str] | None = None
        for start in comp:  # the shortest cycle through any member (breadth first inside the component)
            parent = {start: None}
            frontier = [start]
            path = None
            while frontier and path is None:
                nxt = []
                for u in frontier:
                    for w in sorted(edges[u] & members):
                        if w == start:
                            path = [start, *reversed(_walk(parent, u)), start]
                            break
                        if w not in parent:
                            parent[w] = u
                            nxt.append(w)
                    if path is not None:
                        break
                frontier = nxt
            if path is not None and (best is None or len(path) < len(best)):
                best = path
        found.append(best)
    return found


def _walk(parent: dict, u: str) -> list[str]:
    """``u`` and its BFS ancestors up to (not including) the root: ``[u, parent(u), ...]``."""
    out = []
    while parent[u] is not None:
        out.append(u)
        u = parent[u]
    return out


def _show(cycle: list[str]) -> str:
    return " -> ".join(cycle)


def test_no_import_cycle_among_acl26_modules():
    found = cycles(graph())
    assert not found, "import cycle(s) among acl26 modules (a lazy import inside a function counts too):\n  " + \
        "\n  ".join(_show(c) for c in found)


def test_the_graph_sees_what_the_modules_import():
    """The graph is not vacuous: top-level, lazy (inside a function), relative and package imports are edges."""
    g = graph()
    assert len(g) > 40 and "acl26.kernels.ternary" in g and "acl26.papers.lopt.study" in g
    assert "acl26.claims" in g["acl26.chapter"]  # from acl26.claims import Claim, ...
    assert "acl26.stats" in g["acl26.claims"]  # lazy: inside Ledger.record_noisy
    assert "acl26.registry" in g["acl26.notebook"]  # from acl26 import claims, plots, registry
    assert "acl26.papers" in g["acl26.registry"]  # import acl26.papers as pkg, inside _names()


def test_cycles_are_found_and_named(tmp_path):
    """On a made-up package: a cycle through a lazy import, a relative import and a package's re-export."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "sub" / "__init__.py").write_text("from .d import thing\n")
    (pkg / "sub" / "d.py").write_text("from pkg.sub import other\nthing = 1\n")
    (pkg / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import f\n")
    (pkg / "f.py").write_text("from pkg import e\n")
    g = graph({pkg: "pkg"})
    assert g["pkg.b"] == {"pkg.c"} and g["pkg.sub"] == {"pkg.sub.d"} and g["pkg.sub.d"] == {"pkg.sub"}
    assert g["pkg.e"] == set()  # under TYPE_CHECKING: never run
    assert sorted(map(_show, cycles(g))) == ["pkg.a -> pkg.b -> pkg.c -> pkg.a", "pkg.sub -> pkg.sub.d -> pkg.sub"]


# ---- every chapter has the same parts, and its verdicts read only its spec and tables (issue 42, point 1) ----

PAPERS = ROOT / "shared" / "papers"
#: the parts every chapter has, beside its method modules (a support page's are in the core: acl26.zoo)
PARTS = ("spec", "study", "tables", "verdicts", "bench")
#: what a chapter's module may import of its own chapter (None: anything)
ALLOWED = {"verdicts": {"spec", "tables"}, "tables": None}
#: what ``tables`` must never import of its chapter: it is pure, and below the study
TABLES_NEVER = {"study", "bench", "verdicts"}


def chapter_ids() -> list[str]:
    return sorted(p.parent.name for p in PAPERS.glob("*/__init__.py"))


def own_imports(chapter: str, part: str, edges: dict[str, set[str]] | None = None) -> set[str]:
    """The parts of its own chapter that ``acl26.papers.<chapter>.<part>`` imports (its package's
    ``__init__`` counted as ``"__init__"``), from the static graph."""
    edges = graph() if edges is None else edges
    pkg = f"acl26.papers.{chapter}"
    out = set()
    for target in edges[f"{pkg}.{part}"]:
        if target == pkg:
            out.add("__init__")
        elif target.startswith(pkg + "."):
            out.add(target[len(pkg) + 1:].split(".")[0])
    return out


def test_there_are_chapters_to_check():
    assert {"lopt", "sherry", "alloc_moe", "model_interpolation", "mta", "models"} <= set(chapter_ids())


@pytest.mark.parametrize("chapter", chapter_ids())
def test_every_chapter_has_the_same_parts(chapter):
    missing = [p for p in PARTS if not (PAPERS / chapter / f"{p}.py").is_file()]
    assert not missing, f"{chapter}: missing {', '.join(f'{p}.py' for p in missing)} (CONTRIBUTING.md shows the shape)"


@pytest.mark.parametrize("chapter", chapter_ids())
def test_verdicts_import_only_the_spec_and_the_tables(chapter):
    got = own_imports(chapter, "verdicts")
    assert got <= ALLOWED["verdicts"], f"acl26.papers.{chapter}.verdicts imports {sorted(got - ALLOWED['verdicts'])} " \
        "of its chapter; it may import only spec and tables"


@pytest.mark.parametrize("chapter", chapter_ids())
def test_tables_never_import_the_study(chapter):
    got = own_imports(chapter, "tables") & (TABLES_NEVER | {"__init__"})
    assert not got, f"acl26.papers.{chapter}.tables imports {sorted(got)}: tables are pure functions below the study"


@pytest.mark.parametrize("chapter", chapter_ids())
def test_only_bench_defines_the_benchmarks_hook(chapter):
    """``benchmarks`` is the name of one thing: a chapter's ``Chapter.benchmarks`` hook, in its bench.py."""
    defining = sorted(p.stem for p in (PAPERS / chapter).glob("*.py")
                      if any(isinstance(n, ast.FunctionDef) and n.name == "benchmarks"
                             for n in ast.parse(p.read_text()).body))
    assert defining == ["bench"], f"{chapter}: `benchmarks` is defined in {defining}"


def test_the_import_rule_sees_a_verdicts_to_study_arrow(tmp_path):
    """On a made-up chapter: verdicts importing the study (lazily) and tables importing the study are caught."""
    pkg = tmp_path / "acl26"
    ch = pkg / "papers" / "demo"
    ch.mkdir(parents=True)
    for f in (pkg / "__init__.py", pkg / "papers" / "__init__.py", ch / "__init__.py", ch / "spec.py", ch / "study.py"):
        f.write_text("")
    (ch / "tables.py").write_text("from acl26.papers.demo.study import run_experiments\n")
    (ch / "verdicts.py").write_text("from acl26.papers.demo import spec, tables\n"
                                    "def f():\n    from acl26.papers.demo import study\n")
    edges = graph({pkg: "acl26"})
    assert own_imports("demo", "verdicts", edges) == {"spec", "tables", "study"}
    assert own_imports("demo", "tables", edges) == {"study"}
