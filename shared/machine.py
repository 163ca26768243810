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


def bf16_native() -> bool:
    """Whether the CPU computes bf16 natively (AVX512-BF16 or AMX), from its flags in /proc/cpuinfo (False
    where they cannot be read); no torch import."""
    try:
        flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    except OSError:
        return False
    return bool({"avx512_bf16", "amx_bf16"} & set(flags.split()))


def describe() -> dict:
    """CPUs, CPU model, Python and platform: what every results and benchmark file records."""
    return {"cpus": cpu_count(), "cpu": cpu_model(), "python": platform.python_version(),
            "platform": platform.platform()}
