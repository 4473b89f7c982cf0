"""`@impl`s that several dialects share: alloc, the kernel lookup of launch, terminators;
and the run settings of the block-running interpreters (progress callback, batch size).

The loop, tile, kernel and cuda dialects each have their own alloc, launch, yield and
return ops, but one semantics: an alloc is a fresh NaN-poisoned buffer
(`values.empty_buffer`), a launch runs the kernel symbol it names (only *how* differs per
level) and a terminator hands its operands back to the op running its region.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from xdsl.dialects.builtin import MemRefType, SymbolRefAttr
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    OpImpl,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
)
from xdsl.ir import Operation
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import InterpretationError

from deplodock.interpreters.values import empty_buffer

KernelT = TypeVar("KernelT", bound=Operation)

#: Told after each block (tile) or batch of blocks (kernel) an interpreter finishes:
#: (kernel name, blocks done, grid size).
BlockProgress = Callable[[str, int, int], None]


class _ProgressData(InterpreterFunctions):
    """The namespace of the progress callback and the kernel batch size in the
    interpreter's data."""


def set_block_progress(interpreter: Interpreter, progress: BlockProgress | None) -> None:
    """Install `progress` (or remove it with None) for the blocks `interpreter` runs."""
    interpreter.set_data(_ProgressData, "block_progress", progress)


def report_block(interpreter: Interpreter, kernel_name: str, done: int, total: int) -> None:
    """Tells the installed `BlockProgress`, if any, that block `done` of `total` finished."""
    progress = interpreter.get_data(_ProgressData, "block_progress", lambda: None)
    if progress is not None:
        progress(kernel_name, done, total)


def set_blocks_per_batch(interpreter: Interpreter, blocks: int | None) -> None:
    """How many blocks the kernel interpreter runs together as one lock-step batch (None:
    its default, `blocks.default_blocks_per_batch`). Results do not depend on it; tests
    set 1 and several to check exactly that."""
    if blocks is not None and blocks < 1:
        raise ValueError(f"blocks per batch must be at least 1, got {blocks}")
    interpreter.set_data(_ProgressData, "blocks_per_batch", blocks)


def blocks_per_batch_of(interpreter: Interpreter) -> int | None:
    """The batch size `set_blocks_per_batch` chose, if any."""
    return interpreter.get_data(_ProgressData, "blocks_per_batch", lambda: None)


def _run_alloc(
    _: InterpreterFunctions, __: Interpreter, op: Operation, args: PythonValues
) -> PythonValues:
    (result,) = op.results
    assert isinstance(result.type, MemRefType)
    return (empty_buffer(result.type),)


def _run_terminator(
    _: InterpreterFunctions, __: Interpreter, op: Operation, args: PythonValues
) -> tuple[TerminatorValue, PythonValues]:
    return ReturnedValues(args), ()


def alloc_impl(op_type: type[Operation]) -> OpImpl[InterpreterFunctions, Operation]:
    """The `@impl` of `op_type`, an alloc op with one memref result: a poisoned buffer."""
    return impl(op_type)(_run_alloc)


def terminator_impl(op_type: type[Operation]) -> OpImpl[InterpreterFunctions, Operation]:
    """The `@impl` of a yield (its operands are the region's results) or of an operand-less
    kernel return (the region returns nothing)."""
    return impl_terminator(op_type)(_run_terminator)


def lookup_kernel(op: Operation, callee: SymbolRefAttr, kernel_type: type[KernelT]) -> KernelT:
    """The `kernel_type` op that a launch's `callee` names in the enclosing module."""
    kernel = SymbolTable.lookup_symbol(op, callee)
    if not isinstance(kernel, kernel_type):
        raise InterpretationError(f"{op.name}: no {kernel_type.name} named {callee}")
    return kernel
