"""Memory base classes: element loads and stores on memrefs, and host buffer allocation.

Syntax: `%v = X.load %buf[%i, ...] : memref<...>`, `X.store %v, %buf[%i, ...] : memref<...>`,
`%b = X.alloc : memref<...>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    operand_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import MemoryAllocEffect, MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException


def _verify_indices(op: Operation, memref: SSAValue, indices: Sequence[SSAValue]) -> None:
    """One index per dimension: the ops address single elements, never slices."""
    assert isinstance(memref.type, MemRefType)
    rank = memref.type.get_num_dims()
    if len(indices) != rank:
        raise VerifyException(
            f"{op.name}: expected {rank} indices for {memref.type}, got {len(indices)}"
        )


class LoadOpBase(IRDLOperation):
    """`%v = X.load %buf[%i, ...] : memref<...>`: one element; the result is the element type."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType())
    res = result_def(T)

    traits = traits_def(MemoryReadEffect())
    assembly_format = "$memref `[` $indices `]` attr-dict `:` type($memref)"

    def __init__(self, memref: SSAValue | Operation, indices: Sequence[SSAValue | Operation]):
        buf = SSAValue.get(memref)
        assert isinstance(buf.type, MemRefType)
        super().__init__(operands=[buf, indices], result_types=[buf.type.element_type])

    def verify_(self) -> None:
        _verify_indices(self, self.memref, self.indices)


class StoreOpBase(IRDLOperation):
    """`X.store %v, %buf[%i, ...] : memref<...>`: the value has the element type."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType())

    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$value `,` $memref `[` $indices `]` attr-dict `:` type($memref)"

    def __init__(
        self,
        value: SSAValue | Operation,
        memref: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
    ):
        super().__init__(operands=[value, memref, indices])

    def verify_(self) -> None:
        _verify_indices(self, self.memref, self.indices)


class AllocOpBase(IRDLOperation):
    """`%b = X.alloc : memref<...>`: a fresh static-shape buffer (host op)."""

    res = result_def(MemRefType)
    traits = traits_def(MemoryAllocEffect())
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self, memref_type: MemRefType):
        super().__init__(result_types=[memref_type])
