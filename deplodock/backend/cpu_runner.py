"""Run CUDA C kernels on the CPU: compile with g++ against `cpu_simt.h`, call through ctypes.

This is how the `cuda` level executes without a GPU (docs/ir.md, "Interpreter semantics"):
the very source that nvcc would compile runs with one fiber per CUDA thread (see the
header), so a printer bug shows up as a numerical mismatch on any machine. The source is
CUDA C as nvcc takes it (its `#include <cuda_fp16.h>` and the like resolve to empty stubs,
as the emulation header defines what they declare); the caller names the kernels, which it
knows from the IR.
Compiled shared objects are cached by content (source, header, compiler, flags) under
`$XDG_CACHE_HOME/deplodock/cpu-simt`, so a test suite compiles each kernel once. The C++
compiler is `g++`, or `$DEPLODOCK_CXX` (read when a kernel is compiled).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import mmap
import os
import struct
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from deplodock.files import cache_root

if TYPE_CHECKING:
    from deplodock.interpreters.common import BlockProgress

HEADER_PATH = Path(__file__).with_name("cpu_simt.h")
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


def translation_unit(source: str, names: Sequence[str]) -> str:
    """The emulation header, the kernel source, and one `launch_<name>` per named kernel."""
    if not names:
        raise ValueError("no kernel to launch: name the __global__ functions of the source")
    wrappers = "\n".join(
        f'extern "C" int launch_{n}(void** args, int grid, int block, int workers) '
        f"{{ return deplodock_simt::launch(&{n}, args, grid, block, workers); }}"
        for n in names
    )
    header = HEADER_PATH.read_text().replace("#pragma once", "", 1)
    return f'{header}\n#line 1 "kernel.cu"\n{source}\n\n{wrappers}\n'


#: Added for memcheck builds: line tables, so a fault maps back to a line of the kernel.
DEBUG_FLAGS = ("-g",)


def compile_source(source: str, names: Sequence[str], debug: bool = False) -> Path:
    """Compile (or find in the cache) the shared object that runs the kernels `names` of
    `source` on the CPU (`debug`: with line tables)."""
    tu = translation_unit(source, names)
    compiler = cxx()
    flags = (*CXX_FLAGS, *DEBUG_FLAGS) if debug else CXX_FLAGS
    key = hashlib.sha256(
        "\0".join((compiler_version(compiler), " ".join(flags), tu)).encode()
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


def load(source: str, names: Sequence[str], debug: bool = False) -> ctypes.CDLL:
    """The loaded library whose `launch_<name>(void** args, int grid, int block, int
    workers)` runs each kernel of `names`."""
    path = compile_source(source, names, debug)
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
    `workers` host threads run the blocks (0: one per core). With `memcheck`, an access past
    the end of a buffer raises `OutOfBoundsError` (see `_run_guarded`).
    """
    for i, a in enumerate(args):
        if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
            raise TypeError(f"argument {i} of '{name}' must be a C-contiguous numpy array")
    library = load(source, [name], debug=memcheck)
    fn = launcher(library, name)
    if memcheck:
        rc = _run_guarded(library, fn, name, source, args, grid, block, workers)
    else:
        ptrs = (ctypes.c_void_p * max(len(args), 1))(*[a.ctypes.data for a in args])
        rc = fn(ptrs, grid, block, workers)
    if rc == 1:
        raise ValueError(
            f"bad launch configuration for '{name}': grid {grid}, block {block}, workers {workers}"
        )
    if rc != 0:
        raise RuntimeError(f"'{name}': could not allocate the stacks of {block} CPU fibers")


_PROT_NONE = 0
_LIBC = ctypes.CDLL(None, use_errno=True)
#: The granule a buffer's start keeps (16-byte vector accesses): an access past the end
#: but inside the last granule's padding is not caught.
_ALIGN = 16


class _GuardedBuffer:
    """A copy of one argument whose last 16-byte granule ends where an inaccessible page
    begins, in shared memory (a forked child's writes are seen by the parent)."""

    def __init__(self, array: np.ndarray) -> None:
        page = mmap.PAGESIZE
        span = -(-max(array.nbytes, 1) // _ALIGN) * _ALIGN
        self.memory = mmap.mmap(-1, -(-span // page) * page + page)
        anchor = ctypes.c_char.from_buffer(self.memory)
        base = ctypes.addressof(anchor)
        del anchor
        self.guard = base + len(self.memory) - page
        self.start = self.guard - span
        self.array = array
        self.view = np.frombuffer(
            self.memory, dtype=array.dtype, count=array.size, offset=self.start - base
        ).reshape(array.shape)
        self.view[...] = array
        if _LIBC.mprotect(ctypes.c_void_p(self.guard), page, _PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), "memcheck: mprotect of a guard page failed")

    def holds(self, address: int) -> bool:
        """Whether a fault at `address` is this buffer's guard page."""
        return self.guard <= address < self.guard + mmap.PAGESIZE

    def element(self, address: int) -> int:
        return (address - self.start) // max(self.array.itemsize, 1)


def _source_line(library: ctypes.CDLL, pc: int, source: str) -> str | None:
    """`kernel.cu:7: const float v0 = x0[i0 * 33 + i1];` for a faulting instruction of
    `library` (built with line tables), or None when it cannot be told."""
    info = _DlInfo()
    if pc == 0 or _LIBC.dladdr(ctypes.c_void_p(pc), ctypes.byref(info)) == 0:
        return None
    path = info.dli_fname.decode()
    offset = pc - (info.dli_fbase or 0)
    try:
        out = subprocess.run(
            ["addr2line", "-i", "-e", path, hex(offset)], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    # -i lists inlined helpers first; the last location is in the kernel function itself,
    # numbered from the kernel source (`#line 1` in `translation_unit`)
    lines = out.strip().splitlines()
    line = lines[-1].rpartition(":")[2].split() if lines else []
    if not line or not line[0].isdigit():
        return None
    number = int(line[0])
    lines = source.splitlines()
    text = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    return f"kernel.cu:{number}: {text}" if text else f"kernel.cu:{number}"


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _run_guarded(
    library: ctypes.CDLL,
    fn: Any,
    name: str,
    source: str,
    args: Sequence[np.ndarray],
    grid: int,
    block: int,
    workers: int,
) -> int:
    """The launch with every buffer before a guard page, in a forked child whose fault
    handler (`deplodock_simt_memcheck` in cpu_simt.h) records address, block and thread:
    the fault cannot take the Python process down, and the parent names the buffer."""
    buffers = [_GuardedBuffer(a) for a in args]
    record = mmap.mmap(-1, mmap.PAGESIZE)
    anchor = ctypes.c_char.from_buffer(record)
    record_address = ctypes.addressof(anchor)
    del anchor
    ptrs = (ctypes.c_void_p * max(len(args), 1))(*[b.start for b in buffers])
    install = library.deplodock_simt_memcheck
    install.argtypes, install.restype = [ctypes.c_void_p], ctypes.c_int
    pid = os.fork()
    if pid == 0:  # the child: install the handler, launch, report through the exit status
        status = 9
        try:
            status = 8 if install(record_address) != 0 else 10 + fn(ptrs, grid, block, workers)
        finally:
            os._exit(status)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code == 3:
        address, block_id, thread, pc = struct.unpack("<QqqQ", record[:32])
        hit = next((i for i, b in enumerate(buffers) if b.holds(address)), None)
        if hit is None:
            raise RuntimeError(
                f"'{name}': thread {thread} of block {block_id} faulted at {address:#x}, "
                "outside every buffer"
            )
        from deplodock.interpreters.cuda import OutOfBoundsError

        b = buffers[hit]
        line = _source_line(library, pc, source)
        raise OutOfBoundsError(name, hit, b.element(address), b.array.size, thread, block_id, line)
    if code < 10:
        raise RuntimeError(f"'{name}': the memcheck run ended with status {code}")
    for b in buffers:
        b.array[...] = b.view
    return code - 10


def run_on_cpu(
    module: ModuleOp,
    inputs: Sequence[np.ndarray],
    function: str = "forward",
    progress: BlockProgress | None = None,
    memcheck: bool = False,
) -> list[np.ndarray]:
    """Runs a program at any level on the CPU: the interpreters, with `cuda.launch` running
    the kernel's CUDA C through this emulation (`progress`: see `interpreters.run_module`;
    `memcheck`: accesses past a buffer's end in that C are errors, see `run_kernel`)."""
    from deplodock.interpreters import run_module

    runner = functools.partial(run_kernel, memcheck=True) if memcheck else run_kernel
    return run_module(module, inputs, function, cuda_runner=runner, progress=progress)
