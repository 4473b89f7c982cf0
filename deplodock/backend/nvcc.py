"""nvcc helpers: compile CUDA C to a cubin and read ptxas' resource report.

No GPU is needed: `nvcc -cubin` only compiles. The ptxas report (`-Xptxas -v`) gives per
kernel the registers, spill stores/loads and static shared memory, which is how the tests
(and later the tuner) check that a schedule fits the hardware without running it.

The architecture is the device's own (`sm_90` on an H100); the arch-specific variant
(`sm_90a`) is chosen only when a kernel uses an instruction that exists only there (wgmma,
setmaxnreg, ...), since an `a` cubin runs on that one architecture and nothing newer.
The nvcc version is part of every build cache key (`backend/build.py`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deplodock.dialects.hardware import MMA_MIN_CAPABILITY

#: The documented override of the nvcc path (read each time nvcc is looked up).
NVCC_ENV = "DEPLODOCK_NVCC"


def nvcc_command() -> str:
    """The nvcc to run: `$DEPLODOCK_NVCC`, else `nvcc` on PATH."""
    return os.environ.get(NVCC_ENV) or "nvcc"


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
    return shutil.which(nvcc_command()) is not None


@functools.cache
def _version_of(nvcc: str) -> str:
    proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    lines = [ln.strip() for ln in (proc.stdout or "").splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        raise NvccError(f"`{nvcc} --version` failed: {(proc.stderr or '').strip()[:200]}")
    return lines[-1]  # "Build cuda_13.0.r13.0/compiler.36424714_0": exact to the build


def nvcc_version() -> str:
    """The build line of `nvcc --version` (part of every cache key); NvccError without nvcc."""
    if not nvcc_available():
        raise NvccError(f"{nvcc_command()} not found on PATH")
    return _version_of(shutil.which(nvcc_command()) or nvcc_command())


def nvcc_release(version: str) -> str:
    """`13.0` from a build line such as `Build cuda_13.0.r13.0/compiler.36424714_0`."""
    m = re.search(r"cuda_(\d+\.\d+)", version) or re.search(r"release (\d+\.\d+)", version)
    return m.group(1) if m else version


#: Instructions that exist only in the arch-specific target (`sm_90a`) of their architecture.
ARCH_SPECIFIC_PATTERNS = (r"\bwgmma\.", r"\bsetmaxnreg\.", r"\btcgen05\.")


def needs_arch_specific(source: str) -> bool:
    """Whether `source` uses an instruction that only the `a` target of an architecture has."""
    return any(re.search(p, source) for p in ARCH_SPECIFIC_PATTERNS)


def arch_for(capability: tuple[int, int], source: str = "") -> str:
    """The nvcc `-arch` for a device of compute capability `capability` and kernels whose
    source is `source` (the kernels' own, not the device primitives a unit defines).

    `(9, 0)` -> `sm_90`, or `sm_90a` when the source needs the arch-specific instructions.
    """
    from deplodock.passes.kernel_to_cuda.printer import MMA_HELPER  # the builds load it anyway

    major, minor = capability
    arch = f"sm_{major}{minor}"
    if capability < MMA_MIN_CAPABILITY and f"{MMA_HELPER}(" in source:
        wanted = "".join(map(str, MMA_MIN_CAPABILITY))
        raise NvccError(
            f"the kernels multiply on tensor cores (mma.sync m16n8k16), which needs sm_{wanted} "
            f"or newer; this device is {arch} (schedule without them: tile-thread{{mma=0}})"
        )
    return arch + "a" if needs_arch_specific(source) else arch


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
        raise NvccError(f"{nvcc_command()} not found on PATH")
    with tempfile.TemporaryDirectory(prefix="deplodock-nvcc-") as tmp:
        cu = Path(tmp) / "kernels.cu"
        cubin = Path(tmp) / "kernels.cubin"
        cu.write_text(source)
        # No -I: a unit deplodock writes carries its device primitives (`cuda_source`).
        cmd = [nvcc_command(), f"-arch={arch}", "-cubin", "-Xptxas", "-v", *extra_flags]
        proc = subprocess.run(
            [*cmd, "-o", str(cubin), str(cu)], capture_output=True, text=True, cwd=tmp
        )
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise NvccError(f"nvcc failed: {first_error(log)}\n{log}")
        return CompileResult(cubin.read_bytes(), log, parse_ptxas_report(log))
