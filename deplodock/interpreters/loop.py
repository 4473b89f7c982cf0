"""CPU semantics of the `loop` dialect, vectorised with numpy (docs/ir.md "Interpreter semantics").

A free loop's iterations are independent, so they all run at once: the induction variable of
the free loop at free-nesting depth `d` is `lb + step * np.arange(n)` shaped
`(n,) + (1,) * (d - 1)`. Inner loops thus add *leading* axes and every value computed in the
nest broadcasts against the ivs it depends on. A reduce loop (one with iter_args) runs
sequentially; its iter_args are whatever arrays the body produces. A load is a numpy gather
(`buf[i, j]` with broadcast index arrays) and a store a scatter of the broadcast value.

Host ops: `loop.alloc` makes a NaN-poisoned buffer, `loop.launch` runs the kernel's body on
the argument arrays, which it updates in place.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)

from deplodock.dialects import loop
from deplodock.interpreters.common import alloc_impl, lookup_kernel, terminator_impl


def broadcast_indices(indices: PythonValues) -> tuple[Any, ...]:
    """Index values (ints or int arrays) as a numpy fancy index."""
    return tuple(np.asarray(i, dtype=np.int64) for i in indices)


def gather(buffer: np.ndarray, indices: PythonValues) -> Any:
    """`buffer[indices]` where each index is an int or an int array (broadcast together)."""
    index = broadcast_indices(indices)
    if not index:
        return buffer[()]
    return buffer[index]


def scatter(buffer: np.ndarray, indices: PythonValues, value: Any) -> None:
    """`buffer[indices] = value`, broadcasting value and indices against each other."""
    index = broadcast_indices(indices)
    if not index:
        buffer[()] = value
        return
    value, *index_arrays = np.broadcast_arrays(np.asarray(value), *index)
    buffer[tuple(index_arrays)] = value


@register_impls
class LoopFunctions(InterpreterFunctions):
    """Interpreter functions of the loop dialect (see the module docstring)."""

    def __init__(self) -> None:
        self._free_depth = 0

    @impl(loop.ForOp)
    def run_for(self, interpreter: Interpreter, op: loop.ForOp, args: PythonValues):
        if op.is_reduce:
            return self._run_reduce(interpreter, op, args)
        self._run_free(interpreter, op)
        return ()

    def _run_free(self, interpreter: Interpreter, op: loop.ForOp) -> None:
        count = op.trip_count
        self._free_depth += 1
        try:
            shape = (count,) + (1,) * (self._free_depth - 1)
            iv = (op.lower + op.step_value * np.arange(count, dtype=np.int64)).reshape(shape)
            interpreter.run_ssacfg_region(op.body, (iv,), "loop.for")
        finally:
            self._free_depth -= 1

    def _run_reduce(
        self, interpreter: Interpreter, op: loop.ForOp, args: PythonValues
    ) -> PythonValues:
        carried = tuple(args)
        for iv in range(op.lower, op.upper, op.step_value):
            carried = interpreter.run_ssacfg_region(op.body, (iv, *carried), "loop.for")
        return carried

    run_yield = terminator_impl(loop.YieldOp)

    run_return = terminator_impl(loop.ReturnOp)

    @impl(loop.LoadOp)
    def run_load(self, interpreter: Interpreter, op: loop.LoadOp, args: PythonValues):
        buffer, *indices = args
        return (gather(buffer, indices),)

    @impl(loop.StoreOp)
    def run_store(self, interpreter: Interpreter, op: loop.StoreOp, args: PythonValues):
        value, buffer, *indices = args
        scatter(buffer, indices, value)
        return ()

    run_alloc = alloc_impl(loop.AllocOp)

    @impl(loop.LaunchOp)
    def run_launch(self, interpreter: Interpreter, op: loop.LaunchOp, args: PythonValues):
        kernel = lookup_kernel(op, op.callee, loop.KernelOp)
        saved, self._free_depth = self._free_depth, 0
        try:
            interpreter.run_ssacfg_region(kernel.body, tuple(args), f"loop.kernel {op.callee}")
        finally:
            self._free_depth = saved
        return ()
