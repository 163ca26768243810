"""Sherry (ACL 2026, arXiv 2601.07892): building the ggml forks timed as our peers, once, into the cache.

A :class:`Fork` says what to build: the asset that vendors the sources (pinned by sha256 in
``assets.toml``), the folder of the sources inside it, the cmake targets and flags. Two forks use it:
llama.cpp (:mod:`.llamacpp`, TQ1_0 / TQ2_0) and ik_llama.cpp (:mod:`.ikllama`, IQ1_BN / IQ2_BN /
IQ2_BN_R4). :meth:`Fork.build` configures and builds the targets with cmake into
``$ACL26_CACHE/<cache>/<key>``, the key a hash of the source's sha256, the flags and the CPU model
(``GGML_NATIVE`` compiles for this CPU), atomically (a failed build leaves nothing); it needs cmake, a
C++ compiler and ninja or make (:func:`tools_missing`) and refuses, in one line, where they are missing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from acl26 import assets, checks, io, machine, paths
from acl26.errors import RunError


class PeerMissing(RunError):
    """A peer's tools are not built here (or cannot be); the CLI shows it as a one-line error."""


def tools_missing() -> list[str]:
    """The build tools that are not on PATH (cmake, a C++ compiler, ninja or make)."""
    missing = [] if shutil.which("cmake") else ["cmake"]
    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        missing.append("a C++ compiler")
    if not (shutil.which("ninja") or shutil.which("make")):
        missing.append("ninja or make")
    return missing


@dataclass(frozen=True)
class Fork:
    """One ggml fork to build: ``name`` (as the book names it), ``cache`` (its folder under the cache),
    ``asset`` and ``source`` (the sources' folder inside the asset), ``targets`` (cmake targets, each an
    executable copied to ``bin/``), ``flags`` (cmake configure flags) and ``error`` (the
    :class:`PeerMissing` subclass its refusals raise)."""

    name: str
    cache: str
    asset: str
    source: str
    targets: tuple[str, ...]
    flags: tuple[str, ...]
    error: type[RunError] = PeerMissing
    #: files the vendored sources lack, as ``(path inside the sources, text)``: written into a private copy
    #: of the sources that the build then uses (the cached asset is never changed)
    overlay: tuple[tuple[str, str], ...] = ()
    #: what the fork is to the chapter, in :meth:`prepare`'s message
    role: str = "Sherry's peer"

    def build_dir(self) -> Path:
        """Where this machine's build lives: keyed by the source's hash, the flags, the overlay and the CPU."""
        sha = assets.load_manifest()[self.asset].sha256
        extra = [f"{rel}\0{text}" for rel, text in self.overlay]
        key = hashlib.sha256("\0".join([sha, *self.flags, *extra, machine.cpu_model()]).encode()).hexdigest()[:12]
        return paths.cache_dir() / self.cache / key

    def source_dir(self) -> Path:
        return assets.path(self.asset) / self.source

    def binary(self, name: str) -> Path:
        return self.build_dir() / "bin" / name

    def available(self) -> bool:
        return all(self.binary(t).is_file() for t in self.targets)

    def missing_message(self) -> str:
        return (f"{self.name} is not built here: run `acl26 prepare sherry` (needs cmake, a C++ compiler and "
                "ninja or make; a few minutes once, then cached)")

    def require(self) -> None:
        if not self.available():
            raise self.error(self.missing_message())

    def build(self, *, jobs: int | None = None, force: bool = False) -> Path:
        """Build :attr:`targets` once into :meth:`build_dir` (atomically: a failed build leaves nothing)."""
        return build(self, self.build_dir(), done=self.available() and not force, jobs=jobs, force=force)

    def prepare(self, force: bool = False) -> str | None:
        """Build the fork's tools once: what was built and how long it took, or None when they are built already
        (and not ``force``); raises :attr:`error` when they cannot be built here."""
        if self.available() and not force:
            return None
        t0 = time.perf_counter()
        where = self.build(force=force)
        return f"{self.name} ({self.role}) built in {time.perf_counter() - t0:.0f} s into {where}"


def module_api(fork: Fork, module: str) -> tuple:
    """The build API of the module ``module`` that runs ``fork``: ``(build_dir, binary, available, require, build,
    prepare)``, as :class:`Fork`'s methods, except that each reaches the others through the module's own
    attributes when called, so that replacing one of them in the module (as the tests do: a foreign
    ``build_dir``, ``available`` False) changes what the others do, as for functions written in the module."""
    import sys

    def mod():
        return sys.modules[module]

    def build_dir() -> Path:
        """Where this machine's build lives: keyed by the source's hash, the flags, the overlay and the CPU."""
        return fork.build_dir()

    def binary(name: str) -> Path:
        return mod().build_dir() / "bin" / name

    def available() -> bool:
        return all(mod().binary(t).is_file() for t in fork.targets)

    def require() -> None:
        if not mod().available():
            raise fork.error(fork.missing_message())

    def build(*, jobs: int | None = None, force: bool = False) -> Path:
        """Build the fork's targets once into ``build_dir()`` (atomically: a failed build leaves nothing)."""
        return globals()["build"](fork, mod().build_dir(), done=mod().available() and not force, jobs=jobs, force=force)

    def prepare(force: bool = False) -> str | None:
        """Build the fork's tools once: what was built and how long it took, or None when they are built already
        (and not ``force``); raises the fork's error when they cannot be built here."""
        if mod().available() and not force:
            return None
        t0 = time.perf_counter()
        where = mod().build(force=force)
        return f"{fork.name} ({fork.role}) built in {time.perf_counter() - t0:.0f} s into {where}"

    return build_dir, binary, available, require, build, prepare


def build(fork: Fork, final: Path, *, done: bool, jobs: int | None = None, force: bool = False) -> Path:
    """Build ``fork``'s targets into ``final`` unless ``done``: refused in one line (``fork.error``) where
    the build tools are missing, or where ``final`` holds something acl26 did not build (unless
    ``force``), before any work; a failed configure or build raises with the tail of its output."""
    if done:
        return final
    missing = tools_missing()
    if missing:
        raise fork.error(f"cannot build {fork.name}: {', '.join(missing)} not found")
    io.check_target(final, kind="folder", overwrite=force)  # before the build
    src = assets.path(fork.asset) / fork.source
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    jobs = machine.cpu_count() if jobs is None else checks.integer("jobs", jobs, 1)
    with io.atomic_dir(final, overwrite=force, inputs=(src,)) as tmp:
        work = tmp / "build"
        if fork.overlay:  # a private copy of the sources, completed
            shutil.copytree(src, tmp / "src", symlinks=True)
            src = tmp / "src"
            for rel, text in fork.overlay:
                (src / rel).parent.mkdir(parents=True, exist_ok=True)
                (src / rel).write_text(text)
        cmds = [["cmake", "-S", str(src), "-B", str(work), *generator, *fork.flags],
                ["cmake", "--build", str(work), "-j", str(jobs), "--target", *fork.targets]]
        for cmd in cmds:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                raise fork.error(f"{fork.name} build failed ({' '.join(cmd[:2])}, exit {proc.returncode}):\n{tail}")
        (tmp / "bin").mkdir()
        for t in fork.targets:
            found = next((p for p in work.rglob(t) if p.is_file() and os.access(p, os.X_OK)), None)
            if found is None:
                raise fork.error(f"{fork.name} build finished but {t} was not produced")
            shutil.copy2(found, tmp / "bin" / t)
        shutil.rmtree(work)
        if fork.overlay:
            shutil.rmtree(tmp / "src")
        io.write_json(tmp / "build.json", {"flags": list(fork.flags), "cpu": machine.cpu_model(),
                                           "source": assets.load_manifest()[fork.asset].spec,
                                           "targets": list(fork.targets), "overlay": [rel for rel, _ in fork.overlay]})
    return final
