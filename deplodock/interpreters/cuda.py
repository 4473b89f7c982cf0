"""Interpreter functions of the `cuda` dialect: run the emitted CUDA C itself.

A `cuda.kernel` is C source, so interpreting `cuda.launch` means compiling and running that
source, which is a service of the backend, not of the interpreters: the caller hands
`CudaFunctions` a `KernelRunner` (`backend/cpu_runner.run_kernel` compiles the source for
the CPU against an emulation header in which each block's CUDA threads are fibers, and
runs it; `backend.cpu_runner.run_on_cpu` wires it in). This level therefore checks the
printer's output itself, not a model of it. bf16 buffers are float32 arrays in the
interpreters; they are packed to 16-bit storage for the launch and unpacked after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, MemRefType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import cuda
from deplodock.dialects.element_types import numpy_dtype
from deplodock.interpreters.common import alloc_impl, lookup_kernel
from deplodock.interpreters.shared_memory import UninitializedReadError

#: Runs kernel `name` of CUDA C `source` over `grid` blocks of `block` threads on the given
#: C-contiguous buffers, in place: `(source, name, buffers, grid, block) -> None`.
KernelRunner = Callable[[str, str, Sequence[np.ndarray], int, int], None]


class OutOfBoundsError(InterpretationError):
    """A kernel's C touched an element outside a buffer (a memcheck run of
    `backend.cpu_runner.run_kernel`), at source `line` when known: argument `argument` of the
    launch, which `cuda.launch` names, or (`argument` None) the `__shared__` array `shared`.
    `element` is negative for an underflow."""

    def __init__(
        self,
        kernel: str,
        argument: int | None,
        element: int,
        size: int,
        thread: int,
        block: int,
        line: str | None = None,
        shared: str | None = None,
    ):
        self.kernel, self.argument, self.element, self.size = kernel, argument, element, size
        self.thread, self.block, self.line, self.shared = thread, block, line, shared
        buffer = f"argument {argument}" if shared is None else f"shared array {shared}"
        super().__init__(self.describe(buffer))

    def describe(self, buffer: str) -> str:
        where = f" ({self.line})" if self.line else ""
        side = (
            f"before the first of its {self.size} elements"
            if self.element < 0
            else f"past its {self.size} elements"
        )
        return (
            f"out-of-bounds access in kernel {self.kernel}: thread {self.thread} of block "
            f"{self.block} touches {buffer} at element {self.element}, {side}{where}"
        )


def uninitialized_shared_read(
    kernel: str, shared: str, element: int, thread: int, block: int, line: str | None
) -> UninitializedReadError:
    """The report of a memcheck run (`backend.cpu_runner.run_kernel`) whose C read element
    `element` of the `__shared__` array `shared` before any thread of the block wrote it,
    in the words of the kernel interpreter's `UninitializedReadError`."""
    where = f" ({line})" if line else ""
    return UninitializedReadError(
        f"uninitialized read in kernel {kernel}: thread {thread} of block {block} reads "
        f"shared array {shared} at element {element}, which nothing in this block has "
        f"written{where}"
    )


def _to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (round to nearest even, NaN kept quiet)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(a)
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def _from_bf16_bits(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def _device_view(array: np.ndarray, t: MemRefType) -> np.ndarray:
    """The array as the kernel sees it: C-contiguous, in the element type's storage."""
    if isinstance(t.element_type, BFloat16Type):
        return _to_bf16_bits(array)
    return np.ascontiguousarray(array, dtype=numpy_dtype(t.element_type))


@register_impls
class CudaFunctions(InterpreterFunctions):
    """`cuda.alloc` and `cuda.launch`; the launch runs the kernel's C with `runner`."""

    def __init__(self, runner: KernelRunner | None = None):
        self.runner = runner

    run_alloc = alloc_impl(cuda.AllocOp)

    @impl(cuda.LaunchOp)
    def run_launch(self, interpreter: Interpreter, op: cuda.LaunchOp, args: PythonValues):
        kernel = lookup_kernel(op, op.callee, cuda.KernelOp)
        if self.runner is None:
            raise InterpretationError(
                f"cuda.launch {op.callee}: no runner for CUDA C was given (run cuda-level "
                "programs with deplodock.backend.cpu_runner.run_on_cpu)"
            )
        types = [a.type for a in op.args]
        views = []
        for i, (array, t) in enumerate(zip(args, types, strict=True)):
            if not isinstance(array, np.ndarray) or not isinstance(t, MemRefType):
                raise InterpretationError(f"cuda.launch {op.callee}: argument {i} is not a buffer")
            if array.shape != tuple(t.get_shape()):
                raise InterpretationError(
                    f"cuda.launch {op.callee}: argument {i} has shape {array.shape}, "
                    f"expected {tuple(t.get_shape())}"
                )
            views.append(_device_view(array, t))
        try:
            self.runner(
                kernel.source.data,
                kernel.sym_name.data,
                views,
                grid=kernel.grid.value.data,
                block=kernel.block.value.data,
            )
        except OutOfBoundsError as error:
            if error.argument is None:  # a __shared__ array: named already
                raise
            buffer = op.args[error.argument]
            name = f"%{buffer.name_hint}" if buffer.name_hint else f"argument {error.argument}"
            raise InterpretationError(error.describe(name)) from None
        for array, view in zip(args, views, strict=True):
            if view is array:
                continue
            if view.dtype == np.uint16 and array.dtype == np.float32:
                array[...] = _from_bf16_bits(view).reshape(array.shape)
            else:
                array[...] = view.reshape(array.shape)
        return ()
