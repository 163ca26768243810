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
MODULES = [m.name for m in pkgutil.iter_modules(acl26.kernels.__path__) if not m.name.startswith("_")]  # _jit: no kernel


def public_kernels(name: str) -> list[str]:
    mod = importlib.import_module(f"acl26.kernels.{name}")
    skip = set(getattr(mod, "NOT_KERNELS", ()))
    return sorted(n for n, f in vars(mod).items()
                  if inspect.isfunction(f) and f.__module__ == mod.__name__ and not n.startswith("_") and n not in skip)


def compared(module: str) -> set[str]:
    """Names ``alias.name`` referenced in test files that import ``naive.<module>`` as ``alias``."""
    seen = set()
    for path in TESTS.glob("test_*.py"):
        text = path.read_text()
        for mod, alias in re.findall(r"from naive import (\w+)(?: as (\w+))?", text):
            if mod == module:
                seen |= set(re.findall(rf"\b{re.escape(alias or mod)}\.(\w+)", text))
    return seen


def test_every_kernel_module_has_a_twin_module():
    assert MODULES, "no kernel modules found"
    for name in MODULES:
        assert (TESTS / "naive" / f"{name}.py").is_file(), f"tests/naive/{name}.py is missing"


@pytest.mark.parametrize("module", MODULES)
def test_every_public_kernel_function_has_a_compared_twin(module):
    twin = importlib.import_module(f"naive.{module}")
    used = compared(module)
    for name in public_kernels(module):
        assert callable(getattr(twin, name, None)), f"tests/naive/{module}.py has no twin {name}()"
        assert name in used, f"no test compares acl26.kernels.{module}.{name} with naive.{module}.{name}"
