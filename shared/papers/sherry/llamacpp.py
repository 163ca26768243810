"""Sherry (ACL 2026, arXiv 2601.07892): llama.cpp's ternary kernels, timed as the real peer of ours.

ggml has two ternary types: TQ2_0 (2.0625 bits per weight; 2-bit codes decoded and multiplied
directly, the same kind of kernel as bitnet.cpp's I2_S) and TQ1_0 (1.6875 bits; 5 trits per byte).
:func:`build` compiles llama.cpp from the sources vendored in the ``llama-cpp-python`` sdist (the
``llamacpp-src`` asset, pinned by sha256) with cmake, once, into ``$ACL26_CACHE/llamacpp/``; it
needs cmake, a C++ compiler and ninja or make, and takes a few minutes on 2 cores.
:func:`mul_mat_perf` runs ``test-backend-ops perf`` on the MUL_MAT cases of its perf suite for the
chosen types and shape (e.g. 4096 x 14336, one activation vector) and returns microseconds per
run. ``test-backend-ops`` runs the CPU backend on half the machine's cores (its ``N_THREADS / 2``,
not settable from the command line), so :data:`PERF_THREADS` says how many, and our kernels are
timed on the same number.

Nothing here is needed for the rest of the book: where llama.cpp is not built, :func:`available`
is False and :func:`require` raises :class:`LlamaCppMissing` with the command that builds it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from acl26 import assets, io, machine, paths
from acl26.runner import RunError

log = logging.getLogger(__name__)

ASSET = "llamacpp-src"
SOURCE = "llama_cpp_python-0.3.36/vendor/llama.cpp"
TARGETS = ("test-backend-ops", "llama-bench", "llama-quantize")
#: the threads test-backend-ops gives the CPU backend: half the cores std::thread reports
PERF_THREADS = max(1, (os.cpu_count() or 2) // 2)
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
               "-DLLAMA_BUILD_TESTS=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_EXAMPLES=OFF",
               "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF",
               "-DLLAMA_USE_PREBUILT_UI=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_OPENMP=OFF")


class LlamaCppMissing(RunError):
    """llama.cpp is not built here (or cannot be); the CLI shows it as a one-line error."""


def build_dir() -> Path:
    """Where this machine's build lives: keyed by the source's hash, the flags and the CPU."""
    sha = assets.load_manifest()[ASSET].sha256
    key = hashlib.sha256("\0".join([sha, *CMAKE_FLAGS, machine.cpu_model()]).encode()).hexdigest()[:12]
    return paths.cache_dir() / "llamacpp" / key


def binary(name: str) -> Path:
    return build_dir() / "bin" / name


def available() -> bool:
    return all(binary(t).is_file() for t in TARGETS)


def require() -> None:
    if not available():
        raise LlamaCppMissing("llama.cpp is not built here: run `acl26 build-llamacpp` (needs cmake, a C++ "
                              "compiler and ninja or make; a few minutes once, then cached)")


def tools_missing() -> list[str]:
    """The build tools that are not on PATH (cmake, a C++ compiler, ninja or make)."""
    missing = [] if shutil.which("cmake") else ["cmake"]
    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        missing.append("a C++ compiler")
    if not (shutil.which("ninja") or shutil.which("make")):
        missing.append("ninja or make")
    return missing


def build(*, jobs: int | None = None, force: bool = False) -> Path:
    """Build :data:`TARGETS` once into :func:`build_dir` (atomically: a failed build leaves nothing)."""
    final = build_dir()
    if available() and not force:
        return final
    missing = tools_missing()
    if missing:
        raise LlamaCppMissing(f"cannot build llama.cpp: {', '.join(missing)} not found")
    src = assets.path(ASSET) / SOURCE
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    jobs = jobs or machine.cpu_count()
    with io.atomic_dir(final) as tmp:
        work = tmp / "build"
        cmds = [["cmake", "-S", str(src), "-B", str(work), *generator, *CMAKE_FLAGS],
                ["cmake", "--build", str(work), "-j", str(jobs), "--target", *TARGETS]]
        for cmd in cmds:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                raise LlamaCppMissing(f"llama.cpp build failed ({' '.join(cmd[:2])}, exit {proc.returncode}):\n{tail}")
        (tmp / "bin").mkdir()
        for t in TARGETS:
            found = next((p for p in work.rglob(t) if p.is_file() and os.access(p, os.X_OK)), None)
            if found is None:
                raise LlamaCppMissing(f"llama.cpp build finished but {t} was not produced")
            shutil.copy2(found, tmp / "bin" / t)
        shutil.rmtree(work)
        io.write_json(tmp / "build.json", {"flags": list(CMAKE_FLAGS), "cpu": machine.cpu_model(),
                                           "source": assets.load_manifest()[ASSET].spec})
    return final


_PERF_LINE = re.compile(r"MUL_MAT\((?P<params>[^)]*)\):\s+(?P<runs>\d+) runs -\s+(?P<us>[\d.]+) us/run")


def parse_perf(text: str) -> list[dict]:
    """Rows ``{"params", "type_a", "m", "n", "k", "runs", "us_per_run"}`` of ``test-backend-ops perf`` output."""
    rows = []
    for m in _PERF_LINE.finditer(text):
        params = dict(kv.split("=", 1) for kv in re.split(r",(?![^\[]*\])", m["params"]) if "=" in kv)
        rows.append({"params": m["params"], "type_a": params.get("type_a"), "m": int(params.get("m", 0)),
                     "n": int(params.get("n", 0)), "k": int(params.get("k", 0)), "runs": int(m["runs"]),
                     "us_per_run": float(m["us"])})
    return rows


def mul_mat_perf(types=("tq1_0", "tq2_0"), *, m: int = 4096, k: int = 14336, n: int = 1) -> list[dict]:
    """``test-backend-ops perf`` for MUL_MAT of a ``types`` weight of ``m`` x ``k`` by ``n`` float32 vectors."""
    require()
    pattern = f"type_a=({'|'.join(types)}),type_b=f32,m={m},n={n},k={k},"
    proc = subprocess.run([str(binary("test-backend-ops")), "perf", "-o", "MUL_MAT", "-b", "CPU", "-p", pattern],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise LlamaCppMissing(f"test-backend-ops failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    rows = [r for r in parse_perf(proc.stdout) if r["type_a"] in types and (r["m"], r["n"], r["k"]) == (m, n, k)]
    if not rows:
        raise LlamaCppMissing(f"test-backend-ops has no MUL_MAT perf case for {types} at m={m}, n={n}, k={k}")
    for r in rows:
        r["threads"] = PERF_THREADS
    return rows
