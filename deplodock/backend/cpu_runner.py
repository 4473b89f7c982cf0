"""Run CUDA C kernels on the CPU: compile with g++ against `cpu_simt.h`, call through ctypes.

This is how the `cuda` level executes without a GPU (docs/ir.md, "Interpreter semantics"):
the very source that nvcc would compile runs with one fiber per CUDA thread (see the
header), so a printer bug shows up as a numerical mismatch on any machine. Compiled shared
objects are cached by content (source, header, compiler, flags) under
`$XDG_CACHE_HOME/deplodock/cpu-simt`, so a test suite compiles each kernel once.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from deplodock.files import cache_root

HEADER_PATH = Path(__file__).with_name("cpu_simt.h")
CXX = os.environ.get("DEPLODOCK_CXX", "g++")
CXX_FLAGS = ("-O1", "-std=c++20", "-shared", "-fPIC", "-pthread")
#: Host threads per launch (each runs whole blocks); default: all cores.
WORKERS_ENV = "DEPLODOCK_SIMT_WORKERS"

_KERNEL_RE = re.compile(
    r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?([A-Za-z_]\w*)\s*\("
)
# GPU-only headers: their content is provided by cpu_simt.h.
_CUDA_INCLUDE_RE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]cuda\w*\.h[>\"].*$", re.MULTILINE)


class CpuCompileError(RuntimeError):
    """g++ rejected the emulated translation unit; the message holds its diagnostics."""


def kernel_names(source: str) -> list[str]:
    """The names of the `__global__` functions defined in `source`, in order."""
    return _KERNEL_RE.findall(source)


def cache_dir() -> Path:
    return cache_root() / "cpu-simt"


@functools.cache
def compiler_version() -> str:
    out = subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0] if out.stdout else CXX


def translation_unit(source: str) -> str:
    """The emulation header, the kernel source, and one `launch_<name>` per kernel."""
    names = kernel_names(source)
    if not names:
        raise ValueError("no __global__ function found in the CUDA source")
    body = _CUDA_INCLUDE_RE.sub("", source)
    wrappers = "\n".join(
        f'extern "C" int launch_{n}(void** args, int grid, int block) '
        f"{{ return deplodock_simt::launch(&{n}, args, grid, block); }}"
        for n in names
    )
    header = HEADER_PATH.read_text().replace("#pragma once", "", 1)
    return f'{header}\n#line 1 "kernel.cu"\n{body}\n\n{wrappers}\n'


def compile_source(source: str) -> Path:
    """Compile (or find in the cache) the shared object that runs `source` on the CPU."""
    tu = translation_unit(source)
    key = hashlib.sha256(
        "\0".join((compiler_version(), " ".join(CXX_FLAGS), tu)).encode()
    ).hexdigest()
    out_dir = cache_dir()
    so_path = out_dir / f"{key}.so"
    if so_path.exists():
        return so_path
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        cpp = Path(tmp) / "kernel.cpp"
        cpp.write_text(tu)
        tmp_so = Path(tmp) / "kernel.so"
        proc = subprocess.run(
            [CXX, *CXX_FLAGS, "-o", str(tmp_so), str(cpp)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if "error" in ln]
            first = lines[0] if lines else proc.stderr.strip()[:2000]
            raise CpuCompileError(f"g++ failed on the emulated CUDA source: {first}\n{proc.stderr}")
        os.replace(tmp_so, so_path)
    return so_path


_LOADED: dict[Path, ctypes.CDLL] = {}


def load(source: str) -> ctypes.CDLL:
    path = compile_source(source)
    if path not in _LOADED:
        _LOADED[path] = ctypes.CDLL(str(path))
    return _LOADED[path]


def run_kernel(source: str, name: str, args: Sequence[np.ndarray], grid: int, block: int) -> None:
    """Launch kernel `name` of `source` over `grid` blocks of `block` threads, in place.

    `args` are C-contiguous numpy arrays, passed as device pointers in order (a 0-d array
    also serves a scalar parameter: the emulation reads the value behind the pointer).
    """
    if name not in kernel_names(source):
        raise ValueError(f"kernel '{name}' is not defined in the CUDA source")
    for i, a in enumerate(args):
        if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
            raise TypeError(f"argument {i} of '{name}' must be a C-contiguous numpy array")
    fn = getattr(load(source), f"launch_{name}")
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    ptrs = (ctypes.c_void_p * max(len(args), 1))(*[a.ctypes.data for a in args])
    rc = fn(ptrs, grid, block)
    if rc == 1:
        raise ValueError(f"bad launch configuration for '{name}': grid {grid}, block {block}")
    if rc != 0:
        raise RuntimeError(f"'{name}': could not allocate the stacks of {block} CPU fibers")
