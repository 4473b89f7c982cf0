"""The `cuda` dialect: the executable program (docs/ir.md section 6).

A `cuda.kernel` is an opaque symbol holding one kernel's complete CUDA C source and its
launch metadata; the host sequence in `@forward` is `cuda.alloc` + `cuda.launch`. Nothing
below the CUDA C text is modelled: this level exists to be printed (one translation unit)
and executed (nvcc on a GPU, or the CPU SIMT emulation).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    FlatSymbolRefAttrConstr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import (
    MemoryAllocEffect,
    SymbolOpInterface,
    SymbolTable,
    SymbolUserOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.hardware import MAX_THREADS_PER_BLOCK


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One compiled-to-be kernel: `cuda.kernel @k grid G block T smem S args [...] source "..."`.

    `smem` is the *dynamic* shared memory in bytes (static `__shared__` arrays live in the
    source). `args` are the memref types of the kernel parameters, in launch order.
    """

    name = "cuda.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    grid = prop_def(IntegerAttr[I64])
    block = prop_def(IntegerAttr[I64])
    smem = prop_def(IntegerAttr[I64])
    args = prop_def(ArrayAttr[Attribute])
    source = prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface())

    assembly_format = (
        "$sym_name `grid` $grid `block` $block `smem` $smem `args` $args `source` $source attr-dict"
    )

    def __init__(
        self,
        name: str,
        grid: int,
        block: int,
        smem: int,
        args: Sequence[MemRefType],
        source: str,
    ):
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "grid": IntegerAttr(grid, 64),
                "block": IntegerAttr(block, 64),
                "smem": IntegerAttr(smem, 64),
                "args": ArrayAttr(args),
                "source": StringAttr(source),
            }
        )

    @property
    def arg_types(self) -> tuple[MemRefType, ...]:
        return tuple(t for t in self.args.data if isinstance(t, MemRefType))

    def verify_(self) -> None:
        name = f"cuda.kernel @{self.sym_name.data}"
        if self.grid.value.data < 1:
            raise VerifyException(f"{name}: grid must be >= 1, got {self.grid.value.data}")
        block = self.block.value.data
        if not 1 <= block <= MAX_THREADS_PER_BLOCK:
            raise VerifyException(f"{name}: block must be in [1, 1024], got {block}")
        if self.smem.value.data < 0:
            raise VerifyException(f"{name}: smem must be >= 0, got {self.smem.value.data}")
        for i, t in enumerate(self.args.data):
            if not isinstance(t, MemRefType):
                raise VerifyException(f"{name}: argument {i} must be a memref type, got {t}")
        if not self.source.data.strip():
            raise VerifyException(f"{name}: source must not be empty")


@irdl_op_definition
class AllocOp(IRDLOperation):
    """A device buffer for an intermediate or output: `%b = cuda.alloc : memref<...>`."""

    name = "cuda.alloc"

    result = result_def(base(MemRefType))

    traits = traits_def(MemoryAllocEffect())

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, type: MemRefType):
        super().__init__(result_types=[type])


class LaunchOpSymbolUserOpInterface(SymbolUserOpInterface):
    """`cuda.launch` must name a `cuda.kernel` whose argument types match its operands."""

    def verify(self, op: Operation) -> None:
        assert isinstance(op, LaunchOp)
        callee = op.callee.string_value()
        kernel = SymbolTable.lookup_symbol(op, op.callee)
        if kernel is None:
            raise VerifyException(f"cuda.launch: '@{callee}' could not be found in symbol table")
        if not isinstance(kernel, KernelOp):
            raise VerifyException(f"cuda.launch: '@{callee}' is not a cuda.kernel")
        expected = list(kernel.args.data)
        got = [a.type for a in op.args]
        if len(expected) != len(got):
            raise VerifyException(
                f"cuda.launch: '@{callee}' takes {len(expected)} arguments, got {len(got)}"
            )
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            if e != g:
                raise VerifyException(
                    f"cuda.launch: argument {i} of '@{callee}' has type {g}, expected {e}"
                )


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Run a kernel on buffers, in place: `cuda.launch @k(%a, ...) : (types) -> ()`."""

    name = "cuda.launch"

    callee = prop_def(FlatSymbolRefAttrConstr)
    args = var_operand_def(base(MemRefType))

    traits = traits_def(LaunchOpSymbolUserOpInterface())

    assembly_format = "$callee `(` $args `)` attr-dict `:` `(` type($args) `)` `->` `(` `)`"

    def __init__(self, callee: str | SymbolRefAttr, args: Sequence[SSAValue | Operation]):
        if isinstance(callee, str):
            callee = SymbolRefAttr(callee)
        super().__init__(operands=[args], properties={"callee": callee})


Cuda = Dialect("cuda", [KernelOp, AllocOp, LaunchOp], [])
