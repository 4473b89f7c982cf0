"""Build a cuda-level program into one cubin, through a content-addressed cache.

Every `cuda.kernel` source of a module goes into one translation unit, compiled by nvcc for
the device's own architecture (`nvcc.arch_for`). nvcc takes a second or two per unit, and a
benchmark suite or a test run builds the same kernels again and again, so the cubin and
ptxas' per-kernel resources (registers, shared memory, spills) are stored under
`$XDG_CACHE_HOME/deplodock/cubin/<key>.{cubin,json}`; the key hashes everything that can
change the binary: the source, the architecture, the flags and nvcc's exact build line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from deplodock.backend import nvcc
from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import KernelResources, NvccError
from deplodock.dialects import cuda
from deplodock.files import cache_root, write_atomic

#: Flags of every build (`-Xptxas -v` is always added by `nvcc.compile_cubin`).
DEFAULT_FLAGS: tuple[str, ...] = ("-O3", "-lineinfo")


@dataclass
class Build:
    """A compiled translation unit: the cubin and what ptxas said about each kernel."""

    cubin: bytes
    arch: str
    flags: tuple[str, ...]
    nvcc_version: str
    key: str
    kernels: dict[str, KernelResources] = field(default_factory=dict)
    log: str = ""
    cached: bool = False


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/deplodock/cubin` (`~/.cache` by default)."""
    return cache_root() / "cubin"


def cache_key(source: str, arch: str, flags: Sequence[str], nvcc_version: str) -> str:
    """sha256 over (source, arch, flags, nvcc version): equal keys mean equal cubins."""
    payload = json.dumps([source, arch, list(flags), nvcc_version])
    return hashlib.sha256(payload.encode()).hexdigest()


def _load(directory: Path, key: str) -> Build | None:
    cubin, meta = directory / f"{key}.cubin", directory / f"{key}.json"
    if not (cubin.exists() and meta.exists()):
        return None
    try:
        info = json.loads(meta.read_text())
        kernels = {k: KernelResources(**v) for k, v in info["kernels"].items()}
        return Build(
            cubin.read_bytes(),
            info["arch"],
            tuple(info["flags"]),
            info["nvcc_version"],
            key,
            kernels,
            info.get("log", ""),
            cached=True,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a damaged entry is rebuilt


def _store(directory: Path, build: Build) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    meta = {
        "arch": build.arch,
        "flags": list(build.flags),
        "nvcc_version": build.nvcc_version,
        "kernels": {k: dataclasses.asdict(v) for k, v in build.kernels.items()},
        "log": build.log,
    }
    write_atomic(directory / f"{build.key}.cubin", build.cubin)
    write_atomic(directory / f"{build.key}.json", json.dumps(meta, indent=1))


def build_cubin(
    source: str,
    arch: str,
    flags: Sequence[str] = DEFAULT_FLAGS,
    directory: Path | None = None,
) -> Build:
    """The cubin of `source` for `arch`: from the cache, or nvcc (then cached)."""
    version = nvcc.nvcc_version()
    flags = tuple(flags)
    key = cache_key(source, arch, flags, version)
    directory = directory or cache_dir()
    if (hit := _load(directory, key)) is not None:
        return hit
    result = nvcc.compile_cubin(source, arch=arch, extra_flags=flags)
    build = Build(result.cubin, arch, flags, version, key, result.kernels, result.log)
    _store(directory, build)
    return build


def kernel_ops(module: ModuleOp) -> list[cuda.KernelOp]:
    return [op for op in module.ops if isinstance(op, cuda.KernelOp)]


def kernels_source(module: ModuleOp) -> str:
    """One translation unit with every `cuda.kernel` of the module (headers first, once)."""
    kernels = kernel_ops(module)
    if not kernels:
        raise ValueError("the module has no cuda.kernel: lower it to the cuda stage first")
    return kernels_text(kernels, banner=False)


def build_module(
    module: ModuleOp,
    capability: tuple[int, int] = (9, 0),
    flags: Sequence[str] = DEFAULT_FLAGS,
    directory: Path | None = None,
) -> Build:
    """Build every kernel of a cuda-level module for a device of compute `capability`.

    Raises NvccError when nvcc fails or when ptxas did not report a kernel of the module.
    """
    source = kernels_source(module)
    # what the kernels call, not the device primitives every unit defines (`kernels_text`)
    calls = "\n".join(k.source.data for k in kernel_ops(module))
    build = build_cubin(source, nvcc.arch_for(capability, calls), flags, directory)
    missing = [k.sym_name.data for k in kernel_ops(module) if k.sym_name.data not in build.kernels]
    if missing:
        raise NvccError(f"ptxas reported no resources for kernel(s) {', '.join(missing)}")
    return build
