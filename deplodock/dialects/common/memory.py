"""Memory base classes: element loads and stores on memrefs, and host buffer allocation.

Syntax: `%v = X.load %buf[%i, ...] : memref<...>`, `X.store %v, %buf[%i, ...] : memref<...>`,
`%b = X.alloc : memref<...>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, NoneAttr, f32
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

from deplodock.dialects.common.loops import ForOpBase, StaticForOpBase


def _verify_indices(op: Operation, memref: SSAValue, indices: Sequence[SSAValue]) -> None:
    """One index per dimension (the ops address single elements, never slices), and none
    provably out of bounds (`index_range`)."""
    assert isinstance(memref.type, MemRefType)
    rank = memref.type.get_num_dims()
    if len(indices) != rank:
        raise VerifyException(
            f"{op.name}: expected {rank} indices for {memref.type}, got {len(indices)}"
        )
    for dim, (index, size) in enumerate(zip(indices, memref.type.get_shape(), strict=True)):
        bounds = index_range(op, index)
        if bounds is not None and size >= 0 and (bounds[0] < 0 or bounds[1] >= size):
            name = f"%{index.name_hint}" if index.name_hint else f"index {dim}"
            raise VerifyException(
                f"{op.name}: {name} ranges over [{bounds[0]}, {bounds[1]}], out of bounds "
                f"for dimension {dim} of {memref.type} (size {size})"
            )


def index_range(access: Operation, index: SSAValue) -> tuple[int, int] | None:
    """The values `index` provably takes at `access`, when the IR alone fixes them: an
    integer constant, or the induction variable of a loop with a static end (its first and
    last iterate; a dynamic start such as a thread id is non-negative). None when unknown,
    and for an access under an `if` between it and the loop, which may be the guard that
    keeps a rounded-up loop in bounds."""
    owner = index.owner
    if isinstance(owner, Operation):
        value = owner.properties.get("value") if owner.name == "arith.constant" else None
        return (value.value.data, value.value.data) if isinstance(value, IntegerAttr) else None
    loop = owner.parent_op()
    if not isinstance(loop, ForOpBase) or index is not loop.induction_var:
        return None
    parent = access.parent_op()
    while parent is not None and parent is not loop:
        if parent.name.endswith(".if"):
            return None
        parent = parent.parent_op()
    if isinstance(loop, StaticForOpBase):
        if loop.trip_count == 0:
            return None
        return loop.lower, loop.lower + (loop.trip_count - 1) * loop.step_value
    return 0, loop.upper - 1


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


class AtomicAddOpBase(StoreOpBase):
    """`X.atomic_add %v, %buf[%i, ...] : memref<...>`: `buf[i] += v` as one indivisible
    update, so the adds of any threads and blocks to one element all land. Their order is
    not fixed, so a float sum may round differently from run to run: deplodock emits it
    only when asked (`tile-split-k{atomic=true}`). Global `f32` buffers, as CUDA's
    `atomicAdd(float*, float)`."""

    def verify_(self) -> None:
        super().verify_()
        memref = self.memref.type
        assert isinstance(memref, MemRefType)
        if memref.element_type != f32:
            raise VerifyException(f"{self.name}: adds f32 elements, got {memref.element_type}")
        if memref.memory_space is not None and not isinstance(memref.memory_space, NoneAttr):
            raise VerifyException(f"{self.name}: adds to a global buffer, not shared memory")


class AllocOpBase(IRDLOperation):
    """`%b = X.alloc : memref<...>`: a fresh static-shape buffer (host op)."""

    res = result_def(MemRefType)
    traits = traits_def(MemoryAllocEffect())
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self, memref_type: MemRefType):
        super().__init__(result_types=[memref_type])
