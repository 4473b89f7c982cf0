"""nvcc helpers: compile CUDA C to a cubin and read ptxas' resource report.

No GPU is needed: `nvcc -cubin` only compiles. The ptxas report (`-Xptxas -v`) gives per
kernel the registers, spill stores/loads and static shared memory, which is how the tests
(and later the tuner) check that a schedule fits the hardware without running it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

NVCC = os.environ.get("DEPLODOCK_NVCC", "nvcc")


class NvccError(RuntimeError):
    """nvcc rejected the source; the message starts with its first error line."""


@dataclass
class KernelResources:
    """What ptxas reports for one kernel."""

    registers: int = 0
    spill_stores: int = 0  # bytes
    spill_loads: int = 0  # bytes
    shared_bytes: int = 0  # static shared memory
    stack_frame: int = 0  # bytes

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


@dataclass
class CompileResult:
    cubin: bytes
    log: str
    kernels: dict[str, KernelResources] = field(default_factory=dict)


def nvcc_available() -> bool:
    return shutil.which(NVCC) is not None


def parse_ptxas_report(log: str) -> dict[str, KernelResources]:
    """Per-kernel resources from `ptxas info` lines (names as ptxas prints them)."""
    kernels: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    for line in log.splitlines():
        if m := re.search(
            r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?", line
        ):
            current = kernels.setdefault(m.group(1), KernelResources())
            continue
        if current is None:
            continue
        if m := re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line
        ):
            current.stack_frame, current.spill_stores, current.spill_loads = map(int, m.groups())
        if m := re.search(r"Used (\d+) registers", line):
            current.registers = int(m.group(1))
        if m := re.search(r"(\d+) bytes smem", line):
            current.shared_bytes = int(m.group(1))
    return kernels


def first_error(log: str) -> str:
    lines = log.splitlines()
    for marker in (": error", "error"):
        for line in lines:
            if marker in line.lower():
                return line.strip()
    return log.strip().splitlines()[0] if log.strip() else "nvcc failed"


def compile_cubin(
    source: str, arch: str = "sm_90", extra_flags: Sequence[str] = ()
) -> CompileResult:
    """`nvcc -arch=<arch> -cubin -Xptxas -v` on `source`; raises NvccError on failure."""
    if not nvcc_available():
        raise NvccError(f"{NVCC} not found on PATH")
    with tempfile.TemporaryDirectory(prefix="deplodock-nvcc-") as tmp:
        cu = Path(tmp) / "kernels.cu"
        cubin = Path(tmp) / "kernels.cubin"
        cu.write_text(source)
        cmd = [NVCC, f"-arch={arch}", "-cubin", "-Xptxas", "-v", *extra_flags]
        proc = subprocess.run(
            [*cmd, "-o", str(cubin), str(cu)], capture_output=True, text=True, cwd=tmp
        )
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise NvccError(f"nvcc failed: {first_error(log)}\n{log}")
        return CompileResult(cubin.read_bytes(), log, parse_ptxas_report(log))
