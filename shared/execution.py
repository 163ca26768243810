"""Cached execution: a notebook (or a benchmark) re-runs only when what it depends on changed.

:func:`notebook_key` is a sha256 over everything that decides what a chapter's notebook computes:
the notebook's source, the source of ``acl26`` and ``acl26.kernels`` (every ``.py`` and ``.toml``
file of both packages except the other chapters' ``acl26/papers/<id>/`` folders and the kernel
modules the chapter does not declare in :attr:`acl26.chapter.Chapter.kernels`), the resolved
parameters, the asset-manifest entries of the assets the chapter uses, and the installed versions
of the packages the book lists (:data:`acl26.book.PACKAGES`). :func:`bench_key` is the same without the notebook and the
parameters, with the quick flag. ``acl26 book`` stores the key beside each executed notebook and
benchmark and skips a run whose key is unchanged (``--force`` runs it anyway).

Trained models are cached on their own, by their configuration (:mod:`acl26.training`), so a
re-executed notebook still loads them in seconds.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata as md
import json
from pathlib import Path

#: packages whose installed versions enter every key (the Environment page lists the same)
PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "numba", "numpy", "pandas", "seaborn", "matplotlib",
            "papermill", "jupyter-book", "nbmake", "gguf", "safetensors", "acl26-repro")


def _package_roots() -> list[Path]:
    import acl26
    import acl26.kernels

    return [Path(acl26.__file__).resolve().parent, Path(acl26.kernels.__file__).resolve().parent]


def _other_chapter(root: Path, f: Path, chapter_id: str | None) -> bool:
    """Whether ``f`` lies in another chapter's package ``acl26/papers/<id>/`` (not ``chapter_id``'s)."""
    if chapter_id is None:
        return False
    parts = f.relative_to(root).parts
    return len(parts) >= 3 and parts[0] == "papers" and parts[1] != chapter_id


def _unused_kernel(root: Path, f: Path, kernels: tuple[str, ...] | None) -> bool:
    """Whether ``f`` belongs to a kernel module outside ``kernels``: ``acl26/kernels/<name>.py``, or any file
    of the kernel package ``acl26/kernels/<name>/`` (private names, such as ``_jit``, belong to every chapter)."""
    if kernels is None or root.name != "kernels":
        return False
    parts = f.relative_to(root).parts
    name = parts[0] if len(parts) > 1 else f.stem
    return not name.startswith("_") and name not in kernels


@functools.lru_cache(maxsize=16)
def source_digest(chapter_id: str | None = None, kernels: tuple[str, ...] | None = None) -> str:
    """sha256 over the ``.py`` and ``.toml`` files of ``acl26`` and ``acl26.kernels`` (names and bytes).

    With ``chapter_id``, the other chapters' packages (``acl26/papers/<other>/``) are left out: a
    chapter imports the shared core, the kernels and its own package, never another chapter's, so
    a change to one chapter does not re-run the others. With ``kernels`` (module names), the other
    kernel modules are left out too (the private helpers, ``__init__`` and ``_jit``, stay in)."""
    h = hashlib.sha256()
    for root in _package_roots():
        files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".toml") and "__pycache__" not in p.parts
                       and not _other_chapter(root, p, chapter_id) and not _unused_kernel(root, p, kernels))
        for f in files:
            h.update(f"{root.name}/{f.relative_to(root).as_posix()}\0".encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


#: optional peers some benchmarks time when installed (the ``peers`` extra): part of every benchmark's key, so
#: installing or removing one runs the benchmarks again (not part of the notebooks' keys: no notebook uses them)
BENCH_PEERS = ("fastokens",)


def package_versions(names=PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _asset_entries(names) -> dict:
    from acl26 import assets

    manifest = assets.load_manifest()
    return {n: {k: v for k, v in dataclasses.asdict(manifest[n]).items() if k != "extra"} for n in sorted(names)}


def _digest(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def notebook_key(chapter, params: dict, root: Path) -> str:
    """The cache key of executing ``chapter``'s notebook with ``params`` (see the module docstring)."""
    return notebook_keyer(chapter, root)(params)


def notebook_keyer(chapter, root: Path):
    """``params -> notebook_key(chapter, params, root)``, with what does not depend on the parameters (the
    notebook, the sources, the assets' entries, the package versions) read once: for many points at once."""
    nb = (Path(root) / chapter.notebook).read_bytes()
    fixed = {"kind": "notebook", "chapter": chapter.id, "notebook": hashlib.sha256(nb).hexdigest(),
             "source": _source(chapter), "assets": _asset_entries(chapter.assets), "packages": package_versions()}
    return lambda params: _digest({**fixed, "params": params})


def _source(chapter) -> str:
    return source_digest(chapter.id, tuple(sorted(chapter.kernels)))


def bench_key(chapter, quick: bool, workers: int | None = None) -> str:
    """The cache key of ``chapter``'s benchmarks (``workers``: the worker count asked for, where one was)."""
    what = {"kind": "bench", "chapter": chapter.id, "quick": bool(quick), "source": _source(chapter),
            "assets": _asset_entries(chapter.assets), "packages": package_versions(),
            "peers": package_versions(BENCH_PEERS)}
    if workers is not None:  # the default run keeps its key
        what["workers"] = int(workers)
    return _digest(what)
