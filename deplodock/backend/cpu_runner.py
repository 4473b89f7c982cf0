"""Run CUDA C kernels on the CPU: compile with g++ against `cpu_simt.h`, call through ctypes.

This is how the `cuda` level executes without a GPU (docs/ir.md, "Interpreter semantics"):
the very source that nvcc would compile runs with one fiber per CUDA thread (see the
header), so a printer bug shows up as a numerical mismatch on any machine. The source is
CUDA C as nvcc takes it (its `#include <cuda_fp16.h>` and the like resolve to empty stubs,
as the emulation header defines what they declare); the caller names the kernels, which it
knows from the IR. A memcheck run (`run_kernel(..., memcheck=True)`) builds an instrumented
variant that checks every access, in a forked process (`backend/memcheck.py`).
Compiled shared objects are cached by content (source, header, compiler, flags) under
`$XDG_CACHE_HOME/deplodock/cpu-simt`, so a test suite compiles each kernel once. The header
is compiled once too, as a precompiled header beside them (`precompiled_header`): parsing
its two thousand lines of templates was two thirds of each kernel's g++ time. The C++
compiler is `g++`, or `$DEPLODOCK_CXX` (read when a kernel is compiled); a compiler that
cannot use the precompiled header includes the header as text, with the same result.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.device_header import HEADER_PATH
from deplodock.files import cache_root

if TYPE_CHECKING:
    from deplodock.interpreters.common import BlockProgress

#: Empty `cuda_runtime.h`, `cuda_fp16.h`, `cuda_bf16.h`: a kernel may include them, and
#: `cpu_simt.h` (which the translation unit starts with) defines what they declare.
STUB_INCLUDES = Path(__file__).with_name("cuda_stubs")
CXX_FLAGS = ("-O1", "-std=c++20", "-shared", "-fPIC", "-pthread")
#: The documented override of the C++ compiler (like `CXX` for make).
CXX_ENV = "DEPLODOCK_CXX"


class CpuCompileError(RuntimeError):
    """g++ rejected the emulated translation unit; the message holds its diagnostics."""


def cxx() -> str:
    """The C++ compiler: `$DEPLODOCK_CXX`, else `g++`."""
    return os.environ.get(CXX_ENV) or "g++"


def cache_dir() -> Path:
    return cache_root() / "cpu-simt"


@functools.cache
def compiler_version(compiler: str) -> str:
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0] if out.stdout else compiler


def emulation_header(memcheck: bool = False) -> str:
    """The text every translation unit starts with: `cpu_simt.h` (`memcheck`: with its
    checks switched on)."""
    header = HEADER_PATH.read_text().replace("#pragma once", "", 1)
    return f"#define DEPLODOCK_MEMCHECK 1\n{header}" if memcheck else header


def translation_unit(
    source: str, names: Sequence[str], memcheck: bool = False, header: Path | None = None
) -> str:
    """The emulation header (as text, or an `#include` of `header`, its precompiled copy),
    the kernel source, and one `launch_<name>` per named kernel (`memcheck`: the header's
    checks switched on and the source instrumented for them, see `backend.memcheck`)."""
    if not names:
        raise ValueError("no kernel to launch: name the __global__ functions of the source")
    wrappers = "\n".join(
        f'extern "C" int launch_{n}(void** args, int grid, int block, int workers) '
        f"{{ return deplodock_simt::launch(&{n}, args, grid, block, workers); }}"
        for n in names
    )
    if memcheck:
        from deplodock.backend.memcheck import instrument

        source = instrument(source)
    prelude = f'#include "{header}"' if header is not None else emulation_header(memcheck)
    return f'{prelude}\n#line 1 "kernel.cu"\n{source}\n\n{wrappers}\n'


#: Added for memcheck builds: line tables, so a failed check maps back to a line of the kernel.
DEBUG_FLAGS = ("-g",)


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def precompiled_header(compiler: str, flags: Sequence[str], memcheck: bool = False) -> Path:
    """The emulation header in the cache, precompiled (`<header>.gch` beside it, which g++
    reads instead of the text when the flags match) for `compiler` and `flags`.

    Built once per header text, compiler and flags; where the build fails (a compiler
    without g++'s precompiled headers), that is noted and the text alone is included.
    Written to temporary names and renamed, so processes compiling at once never see half
    a file."""
    header = emulation_header(memcheck)
    directory = (
        cache_dir() / f"header-{_key(compiler_version(compiler), ' '.join(flags), header)[:24]}"
    )
    path = directory / "cpu_simt.h"
    precompiled = directory / "cpu_simt.h.gch"
    refused = directory / "not-precompiled"  # this compiler could not: include the text
    if path.exists() and (precompiled.exists() or refused.exists()):
        return path
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        text = Path(tmp) / "cpu_simt.h"
        text.write_text(header)
        if not path.exists():
            os.replace(text, path)
        built = Path(tmp) / "cpu_simt.h.gch"
        command = [compiler, *_header_flags(flags), f"-I{STUB_INCLUDES}", "-x", "c++-header"]
        proc = subprocess.run(
            [*command, "-o", str(built), str(path)], capture_output=True, text=True
        )
        if proc.returncode == 0:
            os.replace(built, precompiled)
        else:
            refused.write_text(proc.stderr)
    return path


def _header_flags(flags: Sequence[str]) -> list[str]:
    """The flags a precompiled header is built with: the kernel's, less linking ones."""
    return [f for f in flags if f != "-shared"]


def compile_source(source: str, names: Sequence[str], memcheck: bool = False) -> Path:
    """Compile (or find in the cache) the shared object that runs the kernels `names` of
    `source` on the CPU (`memcheck`: a checking build with line tables)."""
    compiler = cxx()
    flags = (*CXX_FLAGS, *DEBUG_FLAGS) if memcheck else CXX_FLAGS
    version = compiler_version(compiler)
    key = _key(version, " ".join(flags), translation_unit(source, names, memcheck))
    out_dir = cache_dir()
    so_path = out_dir / f"{key}.so"
    if so_path.exists():
        return so_path
    header = precompiled_header(compiler, flags, memcheck)
    tu = translation_unit(source, names, memcheck, header)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        cpp = Path(tmp) / "kernel.cpp"
        cpp.write_text(tu)
        tmp_so = Path(tmp) / "kernel.so"
        proc = subprocess.run(
            [compiler, *flags, f"-I{STUB_INCLUDES}", "-o", str(tmp_so), str(cpp)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if "error" in ln]
            first = lines[0] if lines else proc.stderr.strip()[:2000]
            raise CpuCompileError(f"g++ failed on the emulated CUDA source: {first}\n{proc.stderr}")
        os.replace(tmp_so, so_path)
    return so_path


_LOADED: dict[Path, ctypes.CDLL] = {}


def launcher(library: ctypes.CDLL, name: str) -> Any:
    """`launch_<name>` of a loaded library, typed for ctypes."""
    fn = getattr(library, f"launch_{name}")
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def load(source: str, names: Sequence[str], memcheck: bool = False) -> ctypes.CDLL:
    """The loaded library whose `launch_<name>(void** args, int grid, int block, int
    workers)` runs each kernel of `names` (`memcheck`: a checking build)."""
    path = compile_source(source, names, memcheck)
    if path not in _LOADED:
        _LOADED[path] = ctypes.CDLL(str(path))
    return _LOADED[path]


def run_kernel(
    source: str,
    name: str,
    args: Sequence[np.ndarray],
    grid: int,
    block: int,
    workers: int = 0,
    memcheck: bool = False,
) -> None:
    """Launch kernel `name` of `source` over `grid` blocks of `block` threads, in place.

    `args` are C-contiguous numpy arrays, passed as device pointers in order (a 0-d array
    also serves a scalar parameter: the emulation reads the value behind the pointer).
    `workers` host threads run the blocks (0: one per core). With `memcheck`, an access
    outside a global or shared buffer raises `OutOfBoundsError`, a read of a shared element
    the block has not written `UninitializedReadError` (see `backend.memcheck`).
    """
    for i, a in enumerate(args):
        if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
            raise TypeError(f"argument {i} of '{name}' must be a C-contiguous numpy array")
    library = load(source, [name], memcheck=memcheck)
    fn = launcher(library, name)
    if memcheck:
        from deplodock.backend.memcheck import run_guarded

        rc = run_guarded(library, fn, name, source, args, grid, block, workers)
    else:
        ptrs = (ctypes.c_void_p * max(len(args), 1))(*[a.ctypes.data for a in args])
        rc = fn(ptrs, grid, block, workers)
    if rc == 1:
        raise ValueError(
            f"bad launch configuration for '{name}': grid {grid}, block {block}, workers {workers}"
        )
    if rc != 0:
        raise RuntimeError(f"'{name}': could not allocate the stacks of {block} CPU fibers")


def run_on_cpu(
    module: ModuleOp,
    inputs: Sequence[np.ndarray],
    function: str = "forward",
    progress: BlockProgress | None = None,
    memcheck: bool = False,
) -> list[np.ndarray]:
    """Runs a program at any level on the CPU: the interpreters, with `cuda.launch` running
    the kernel's CUDA C through this emulation (`progress`: see `interpreters.run_module`;
    `memcheck`: that C checks its accesses, see `run_kernel`)."""
    from deplodock.interpreters import run_module

    runner = functools.partial(run_kernel, memcheck=True) if memcheck else run_kernel
    return run_module(module, inputs, function, cuda_runner=runner, progress=progress)
