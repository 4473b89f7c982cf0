"""Memcheck of the emitted C (`run --ir cuda --memcheck`): bounds and uninitialized reads.

A memcheck build (`cpu_runner.run_kernel(..., memcheck=True)`) checks every memory access of
the kernel in C, then runs the launch in a forked process so that no failure can take the
Python process down:

- **Bounds checks.** `instrument` rewrites the kernel source for the CPU build only (nvcc
  never sees it; the CUDA the printer emits is unchanged): every pointer parameter `T* x`
  becomes `deplodock_simt::GlobalArg<T> x` and every `__shared__ T s[N];` (or
  `DD_DYNAMIC_SHARED(T, s, N, offset);`) a `deplodock_simt::SharedArray<T, N> s{"s"};`
  (`cpu_simt.h`, section "memcheck"). Their subscripts check the index against the exact
  size, so an index below 0 (an underflow) and one inside the padding of the buffer's last
  16-byte granule (element 33 of 33 floats) are caught like any other. Checks rather than
  page placement, because a buffer cannot both start 16-byte aligned (vector accesses need
  it, as they do on a GPU) and end exactly at a page boundary, and a page before the start
  would miss the granule after the end.
- **Uninitialized shared reads.** A `SharedArray` keeps one bit per element: written by a
  thread of the current block (a store, a vector store, an atomic, a landed cp.async). A
  read of an element without it is reported, like the kernel interpreter's
  `UninitializedReadError`: on a GPU it reads the previous block's leftovers.
- **Guard pages.** Each global buffer is still copied to memory that ends (16-byte granule)
  right before a PROT_NONE page, as a backstop: a fault there is reported too.

A failure fills a shared `Fault` record (the failed check's kind, buffer, element, thread,
block and code address) and ends the child with status 3; the parent maps the code address
to the kernel's source line through the line tables of the `-g` build (`addr2line -i`) and
raises a one-line error naming the kernel, the buffer, the element, the thread, the block
and the line.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import struct
import subprocess
from collections.abc import Sequence
from typing import Any

import numpy as np

from deplodock.interpreters.cuda import OutOfBoundsError, uninitialized_shared_read


class MemcheckSourceError(ValueError):
    """The kernel source has a construct memcheck cannot instrument (it checks the CUDA C
    as the printer emits it: buffers as pointer parameters of a one-line kernel head,
    `__shared__` arrays of a literal size, one declaration per line)."""


#: `__shared__ __align__(16) float s[1024];`, as the printer declares a shared array.
_SHARED = re.compile(
    r"^(?P<lead>\s*__shared__\s+(?:__align__\(\d+\)\s+)?)"
    r"(?P<type>[A-Za-z_][\w ]*?)\s+(?P<name>[A-Za-z_]\w*)\s*\[(?P<size>\d+)\]\s*;\s*$"
)
#: `DD_DYNAMIC_SHARED(float, s, 1024, 0);`, a shared array in dynamic shared memory.
_DYNAMIC_SHARED = re.compile(
    r"^(?P<lead>\s*)DD_DYNAMIC_SHARED\(\s*(?P<type>[A-Za-z_][\w ]*?)\s*,\s*(?P<name>[A-Za-z_]\w*)"
    r"\s*,\s*(?P<size>\d+)\s*,\s*\d+\s*\)\s*;\s*$"
)
#: `extern "C" __global__ void __launch_bounds__(256) k(const float* __restrict__ x) {`.
_KERNEL = re.compile(r"^(?P<head>.*\b__global__\b.*?)\((?P<params>[^()]*)\)(?P<tail>\s*\{\s*)$")
#: One pointer parameter: `const float* __restrict__ x`.
_POINTER = re.compile(
    r"^(?P<type>(?:const\s+)?[A-Za-z_][\w ]*?)\s*\*\s*(?:__restrict__\s+)?(?P<name>[A-Za-z_]\w*)$"
)


def instrument(source: str) -> str:
    """`source` with checked buffer types (see the module docstring), line for line, so the
    line tables still number the lines of `source`."""
    return "\n".join(
        _instrument_line(line, number) for number, line in enumerate(source.split("\n"), 1)
    )


def _checked_shared(lead: str, shared: re.Match[str]) -> str:
    """`lead` then the declaration of the checked array standing for the matched one."""
    kind = f"deplodock_simt::SharedArray<{shared['type']}, {shared['size']}>"
    return f'{lead}{kind} {shared["name"]}{{"{shared["name"]}"}};'


def _instrument_line(line: str, number: int) -> str:
    if "DD_DYNAMIC_SHARED(" in line:
        shared = _DYNAMIC_SHARED.match(line)
        if shared is None:
            raise _cannot(line, number, "DD_DYNAMIC_SHARED(T, name, N, offset); with literals")
        return _checked_shared(shared["lead"] + "__shared__ ", shared)
    if "__shared__" in line:
        shared = _SHARED.match(line)
        if shared is None:
            raise _cannot(line, number, "__shared__ [__align__(A)] T name[N]; with a literal N")
        return _checked_shared(shared["lead"], shared)
    if re.search(r"\b__global__\b", line):
        kernel = _KERNEL.match(line)
        if kernel is None:
            raise _cannot(line, number, "a kernel head on one line, ending with '{'")
        params = kernel["params"].strip()
        checked = [_parameter(p.strip(), line, number) for p in params.split(",")] if params else []
        return f"{kernel['head']}({', '.join(checked)}){kernel['tail']}"
    return line


def _parameter(param: str, line: str, number: int) -> str:
    """A pointer parameter as a checked `GlobalArg`; a scalar (`int n`) as it is."""
    if "*" not in param:
        return param
    pointer = _POINTER.match(param)
    if pointer is None:
        raise _cannot(line, number, f"'{param}' as a plain pointer parameter")
    return f"deplodock_simt::GlobalArg<{pointer['type']}> {pointer['name']}"


def _cannot(line: str, number: int, expected: str) -> MemcheckSourceError:
    return MemcheckSourceError(
        f"memcheck cannot instrument kernel.cu:{number}: {line.strip()} (expected {expected})"
    )


_PROT_NONE = 0
_LIBC = ctypes.CDLL(None, use_errno=True)
#: The granule a buffer's start keeps, as cudaMalloc's alignment does (16-byte vector
#: accesses); the bounds checks, not the guard page, catch accesses inside its padding.
_ALIGN = 16


class GuardedBuffer:
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


def source_line(library: ctypes.CDLL, pc: int, source: str) -> str | None:
    """`kernel.cu:7: const float v0 = x0[i0 * 33 + i1];` for an instruction of `library`
    (built with line tables), or None when it cannot be told."""
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
    # -i lists inlined helpers (the checks of cpu_simt.h) first; the last location is in the
    # kernel function itself, numbered from the kernel source (`#line 1` in the translation
    # unit)
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


#: `deplodock_simt::Fault` (cpu_simt.h): filled, address, block, thread, pc, kind, argument,
#: element, size, name.
_FAULT = struct.Struct("<qQqqQqqqq64s")
#: `deplodock_simt::FaultKind`.
_GUARD_PAGE, _GLOBAL_BOUNDS, _SHARED_BOUNDS, _SHARED_UNINITIALIZED = range(4)


def run_guarded(
    library: ctypes.CDLL,
    fn: Any,
    name: str,
    source: str,
    args: Sequence[np.ndarray],
    grid: int,
    block: int,
    workers: int,
) -> int:
    """The launch of a memcheck build (`fn` of `library`) on guarded copies of `args`, in a
    forked child that installs `deplodock_simt_memcheck` first; its status (0: ran), or the
    error its failure record describes. Results are copied back only when the run is clean."""
    buffers = [GuardedBuffer(a) for a in args]
    record = mmap.mmap(-1, mmap.PAGESIZE)
    anchor = ctypes.c_char.from_buffer(record)
    record_address = ctypes.addressof(anchor)
    del anchor
    sizes = (ctypes.c_int64 * max(len(args), 1))(*[a.size for a in args])
    ptrs = (ctypes.c_void_p * max(len(args), 1))(*[b.start for b in buffers])
    install = library.deplodock_simt_memcheck
    install.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
    install.restype = ctypes.c_int
    pid = os.fork()
    if pid == 0:  # the child: install the handler, launch, report through the exit status
        status = 9
        try:
            if install(record_address, sizes, len(args)) != 0:
                status = 8
            else:
                status = 10 + fn(ptrs, grid, block, workers)
        finally:
            os._exit(status)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code == 3:
        raise _failure(record[: _FAULT.size], library, name, source, buffers)
    if code < 10:
        raise RuntimeError(f"'{name}': the memcheck run ended with status {code}")
    for b in buffers:
        b.array[...] = b.view
    return code - 10


def _failure(
    record: bytes,
    library: ctypes.CDLL,
    name: str,
    source: str,
    buffers: Sequence[GuardedBuffer],
) -> Exception:
    """The error a filled `Fault` record describes."""
    _, address, block, thread, pc, kind, argument, element, size, raw = _FAULT.unpack(record)
    line = source_line(library, pc, source)
    shared = raw.split(b"\0", 1)[0].decode(errors="replace")
    if kind == _SHARED_UNINITIALIZED:
        return uninitialized_shared_read(name, shared, element, thread, block, line)
    if kind == _SHARED_BOUNDS:
        return OutOfBoundsError(name, None, element, size, thread, block, line, shared=shared)
    if kind == _GLOBAL_BOUNDS:
        return OutOfBoundsError(name, argument, element, size, thread, block, line)
    hit = next((i for i, b in enumerate(buffers) if b.holds(address)), None)
    if hit is None:
        return RuntimeError(
            f"'{name}': thread {thread} of block {block} faulted at {address:#x}, "
            "outside every buffer"
        )
    b = buffers[hit]
    return OutOfBoundsError(name, hit, b.element(address), b.array.size, thread, block, line)
