"""The CUDA device: is there one, what is it, and how fast can it copy and multiply.

`require_cuda()` is the one gate every GPU path goes through: it returns the device facts or
raises `NoCudaDevice` with a one-line reason ("no CUDA device: torch 2.13.0+cpu was built
without CUDA"), which the CLI prints without a traceback.

Ceilings are what `--profile` divides by: the copy bandwidth (a device-to-device copy of a
buffer far larger than L2) and the matmul rate (cuBLAS on 8192^3, fp32 with TF32 off, and
bf16), measured once and cached in `$XDG_CACHE_HOME/deplodock/ceilings.json` keyed by the
device name, so only the first run on a machine pays the second or so they take.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deplodock.files import cache_root, write_atomic


class NoCudaDevice(RuntimeError):
    """No usable CUDA device (or no pycuda); the message starts with "no CUDA device: "."""

    def __init__(self, reason: str):
        super().__init__(f"no CUDA device: {reason}")


@dataclass(frozen=True)
class DeviceInfo:
    """What the runtime, the benchmark JSON and the profile need to know about the device."""

    index: int
    name: str
    capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    driver: str
    torch: str
    nvcc: str

    @property
    def arch(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"


def cuda_unavailable_reason() -> str | None:
    """Why the GPU paths cannot run here (None when they can): torch, device, pycuda, nvcc."""
    import torch

    from deplodock.backend.nvcc import nvcc_available, nvcc_command

    if torch.version.cuda is None:
        return f"torch {torch.__version__} was built without CUDA"
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return "torch sees no GPU (torch.cuda.is_available() is False)"
    try:
        import pycuda.driver  # noqa: F401
    except ImportError as error:
        return f"pycuda is not importable ({error}); install the gpu extra: pip install -e '.[gpu]'"
    if not nvcc_available():
        return f"{nvcc_command()} is not on PATH"
    return None


def driver_version() -> str:
    """The NVIDIA driver (nvidia-smi) and the CUDA driver API version (pycuda)."""
    parts = []
    if shutil.which("nvidia-smi"):
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            parts.append(proc.stdout.strip().splitlines()[0])
    try:
        import pycuda.driver as drv

        v = drv.get_driver_version()
        parts.append(f"CUDA {v // 1000}.{v % 1000 // 10}")
    except Exception:  # pragma: no cover - informational only
        pass
    return ", ".join(parts) or "unknown"


def require_cuda() -> DeviceInfo:
    """The current CUDA device's facts; NoCudaDevice with the reason when there is none."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        raise NoCudaDevice(reason)
    import torch

    from deplodock.backend.nvcc import nvcc_version

    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return DeviceInfo(
        index=index,
        name=props.name,
        capability=(props.major, props.minor),
        sm_count=props.multi_processor_count,
        l2_bytes=int(getattr(props, "L2_cache_size", 0) or 50 * 2**20),
        memory_bytes=props.total_memory,
        driver=driver_version(),
        torch=torch.__version__,
        nvcc=nvcc_version(),
    )


# --- ceilings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ceilings:
    """Measured peaks of one device: GB/s of a large copy, GFLOP/s of cuBLAS matmuls."""

    copy_gbps: float
    fp32_gflops: float
    bf16_gflops: float
    measured: str = ""  # ISO date

    def flops_for(self, dtype: str) -> float:
        return self.bf16_gflops if dtype in ("bf16", "f16", "fp16") else self.fp32_gflops


def ceilings_path() -> Path:
    """Where measured ceilings are kept: `$XDG_CACHE_HOME/deplodock/ceilings.json`."""
    return cache_root() / "ceilings.json"


def load_ceilings(
    device_name: str,
    measure: Callable[[], Ceilings],
    path: Path | None = None,
) -> Ceilings:
    """The cached ceilings of `device_name`, or `measure()` them and add them to the cache."""
    path = path or ceilings_path()
    table: dict[str, Any] = {}
    if path.exists():
        try:
            table = json.loads(path.read_text())
            return Ceilings(**table[device_name])
        except (ValueError, KeyError, TypeError):
            table = table if isinstance(table, dict) else {}
    ceilings = measure()
    table[device_name] = dataclasses.asdict(ceilings)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(table, indent=1, sort_keys=True))
    return ceilings


def _median_ms(fn: Callable[[], object], runs: int) -> float:  # pragma: no cover - GPU
    from deplodock.backend.benchmark import CudaEventTimer, Measurement

    timer = CudaEventTimer()
    fn()
    return Measurement("ceiling", [timer.time(fn) for _ in range(runs)]).median


def _copy_gbps(runs: int, nbytes: int = 2**30) -> float:  # pragma: no cover - GPU
    """Device-to-device copy of 1 GiB (read + write counted), far beyond any L2."""
    import torch

    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    return 2 * nbytes / (_median_ms(lambda: dst.copy_(src), runs) * 1e-3) / 1e9


def _matmul_gflops(dtype: Any, runs: int, size: int = 8192) -> float:  # pragma: no cover
    """cuBLAS on size^3 in `dtype`, with TF32 off (an fp32 rate is a true fp32 rate)."""
    import torch

    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        return 2 * size**3 / (_median_ms(lambda: a @ b, runs) * 1e-3) / 1e9
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def measure_ceilings(runs: int = 10) -> Ceilings:  # pragma: no cover - needs a GPU
    """Copy bandwidth and matmul rates of the current device (median of `runs` each)."""
    import torch

    copy = _copy_gbps(runs)
    fp32 = _matmul_gflops(torch.float32, runs)
    bf16 = _matmul_gflops(torch.bfloat16, runs)
    torch.cuda.empty_cache()
    return Ceilings(copy, fp32, bf16, datetime.date.today().isoformat())
