"""Every public kernel function has a numpy twin of the same name in tests/naive/<module>.py, and a
test compares the two (stumpy's rule: no kernel without its oracle)."""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import acl26.kernels

TESTS = Path(__file__).resolve().parent


def _kernel_modules() -> list[str]:
    """Kernel modules by dotted name under acl26.kernels (a package's modules as ``package.module``; _jit and
    other private modules hold no kernel)."""
    out = []
    for m in pkgutil.iter_modules(acl26.kernels.__path__):
        if m.name.startswith("_"):
            continue
        if m.ispkg:
            pkg = importlib.import_module(f"acl26.kernels.{m.name}")
            out += [f"{m.name}.{s.name}" for s in pkgutil.iter_modules(pkg.__path__) if not s.name.startswith("_")]
        else:
            out.append(m.name)
    return out


MODULES = _kernel_modules()


def public_kernels(name: str) -> list[str]:
    mod = importlib.import_module(f"acl26.kernels.{name}")
    skip = set(getattr(mod, "NOT_KERNELS", ()))
    return sorted(n for n, f in vars(mod).items()
                  if inspect.isfunction(f) and f.__module__ == mod.__name__ and not n.startswith("_") and n not in skip)


def compared(module: str) -> set[str]:
    """Names ``alias.name`` referenced in test files that import the twin ``naive.<module>`` as ``alias``
    (for ``package.module``: ``from naive.package import module``, or the package itself, which
    re-exports its modules' twins)."""
    pkg, _, sub = module.rpartition(".")
    seen = set()
    for path in TESTS.glob("test_*.py"):
        text = path.read_text()
        aliases = []
        for mod, alias in re.findall(r"from naive import (\w+)(?: as (\w+))?", text):
            if mod == (pkg or module):
                aliases.append(alias or mod)
        if pkg:
            for mod, alias in re.findall(rf"from naive\.{re.escape(pkg)} import (\w+)(?: as (\w+))?", text):
                if mod == sub:
                    aliases.append(alias or mod)
        for alias in aliases:
            seen |= set(re.findall(rf"\b{re.escape(alias)}\.(\w+)", text))
    return seen


def test_every_kernel_module_has_a_twin_module():
    assert MODULES, "no kernel modules found"
    for name in MODULES:
        if not public_kernels(name):  # only layouts, probes and helpers (NOT_KERNELS): nothing to twin
            continue
        twin = TESTS / "naive" / (name.replace(".", "/") + ".py")
        assert twin.is_file(), f"{twin.relative_to(TESTS.parent)} is missing"


@pytest.mark.parametrize("module", [m for m in MODULES if public_kernels(m)])
def test_every_public_kernel_function_has_a_compared_twin(module):
    twin = importlib.import_module(f"naive.{module}")
    used = compared(module)
    for name in public_kernels(module):
        assert callable(getattr(twin, name, None)), f"tests/naive/{module}.py has no twin {name}()"
        assert name in used, f"no test compares acl26.kernels.{module}.{name} with naive.{module}.{name}"
