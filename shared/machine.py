"""What machine this is: the CPUs this process may use, and a one-line description for reports."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("" where it cannot be read)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where they cannot be read)."""
    try:
        flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    except OSError:
        return set()
    return set(flags.partition(":")[2].split())


def bf16_native() -> bool:
    """Whether the CPU computes bf16 natively (AVX512-BF16 or AMX), from its flags in /proc/cpuinfo (False
    where they cannot be read); no torch import."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


#: the vector extensions a SIMD description names, beyond its base level, as /proc/cpuinfo spells them
SIMD_EXTENSIONS = {"avx512bw": "BW", "avx512_vnni": "VNNI", "avx512vbmi": "VBMI", "avx512_bf16": "BF16",
                   "avx_vnni": "AVX-VNNI", "amx_tile": "AMX"}


def simd(flags: set[str] | None = None) -> str:
    """The CPU's widest vector level and the extensions the kernels care about, from its flags, e.g.
    ``"AVX-512 (BW, VNNI, VBMI)"``, ``"AVX2"``, ``"SSE4.2"``; ``"unknown"`` where no flags can be read."""
    flags = cpu_flags() if flags is None else set(flags)
    if not flags:
        return "unknown"
    if "avx512f" in flags:
        base = "AVX-512"
    elif "avx2" in flags:
        base = "AVX2"
    elif "sse4_2" in flags:
        base = "SSE4.2"
    else:
        base = "below SSE4.2"
    ext = [name for flag, name in SIMD_EXTENSIONS.items() if flag in flags]
    return f"{base} ({', '.join(ext)})" if ext else base


def describe() -> dict:
    """CPUs, CPU model, its SIMD level (:func:`simd`), Python and platform: what every results and benchmark
    file records."""
    return {"cpus": cpu_count(), "cpu": cpu_model(), "simd": simd(), "python": platform.python_version(),
            "platform": platform.platform()}
