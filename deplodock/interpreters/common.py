"""`@impl`s that several dialects share: alloc, the kernel lookup of launch, terminators.

The loop, tile, kernel and cuda dialects each have their own alloc, launch, yield and
return ops, but one semantics: an alloc is a fresh NaN-poisoned buffer
(`values.empty_buffer`), a launch runs the kernel symbol it names (only *how* differs per
level) and a terminator hands its operands back to the op running its region.
"""

from __future__ import annotations

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
