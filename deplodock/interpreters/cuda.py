"""Interpreter functions of the `cuda` dialect: run the emitted CUDA C on the CPU.

`cuda.launch` compiles the kernel's own source with the SIMT emulation header
(`deplodock/backend/cpu_runner.py`: one host thread per CUDA thread, `__syncthreads` as a
barrier) and calls it on the numpy buffers, in place. So this level checks the printer's
output itself, not a model of it. bf16 buffers are float32 arrays in the interpreters; they
are packed to 16-bit storage for the launch and unpacked after.
"""

from __future__ import annotations

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

from deplodock.backend import cpu_runner
from deplodock.dialects import cuda
from deplodock.interpreters.common import alloc_impl, lookup_kernel
from deplodock.interpreters.values import numpy_dtype


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
    run_alloc = alloc_impl(cuda.AllocOp)

    @impl(cuda.LaunchOp)
    def run_launch(self, interpreter: Interpreter, op: cuda.LaunchOp, args: PythonValues):
        kernel = lookup_kernel(op, op.callee, cuda.KernelOp)
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
        cpu_runner.run_kernel(
            kernel.source.data,
            kernel.sym_name.data,
            views,
            grid=kernel.grid.value.data,
            block=kernel.block.value.data,
        )
        for array, view in zip(args, views, strict=True):
            if view is array:
                continue
            if view.dtype == np.uint16 and array.dtype == np.float32:
                array[...] = _from_bf16_bits(view).reshape(array.shape)
            else:
                array[...] = view.reshape(array.shape)
        return ()
