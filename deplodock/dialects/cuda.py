"""The `cuda` dialect: the executable program (docs/ir.md section 6).

A `cuda.kernel` is an opaque symbol holding one kernel's complete CUDA C source and its
launch metadata; the host sequence in `@forward` is `cuda.alloc` + `cuda.launch`. Nothing
below the CUDA C text is modelled: this level exists to be printed (one translation unit)
and executed (nvcc on a GPU, or the CPU SIMT emulation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BoolAttr,
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

_HEADER = re.compile(r"[A-Za-z_][\w/.-]*\.h")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One compiled-to-be kernel with everything the host side needs as properties:

        cuda.kernel @k grid G block T smem S args [types] readonly [true, false, ...]
            includes ["cuda_bf16.h"] source "extern \"C\" __global__ void k(...) {...}"

    `smem` is the *dynamic* shared memory in bytes (static `__shared__` arrays live in the
    source). `args` are the memref types of the kernel parameters, in launch order;
    `readonly[i]` says the kernel never writes argument `i` (its parameter is `const T*`);
    `includes` are the headers the source needs (the translation unit includes each once).
    The printer pass sets them all, so nothing downstream reads them back out of the C.
    """

    name = "cuda.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    grid = prop_def(IntegerAttr[I64])
    block = prop_def(IntegerAttr[I64])
    smem = prop_def(IntegerAttr[I64])
    args = prop_def(ArrayAttr[Attribute])
    readonly = prop_def(ArrayAttr[BoolAttr])
    includes = prop_def(ArrayAttr[StringAttr])
    source = prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface())

    assembly_format = (
        "$sym_name `grid` $grid `block` $block `smem` $smem `args` $args "
        "`readonly` $readonly `includes` $includes `source` $source attr-dict"
    )

    def __init__(
        self,
        name: str,
        grid: int,
        block: int,
        smem: int,
        args: Sequence[MemRefType],
        source: str,
        readonly: Sequence[bool] | None = None,
        includes: Sequence[str] = (),
    ):
        flags = [False] * len(args) if readonly is None else list(readonly)
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "grid": IntegerAttr(grid, 64),
                "block": IntegerAttr(block, 64),
                "smem": IntegerAttr(smem, 64),
                "args": ArrayAttr(args),
                "readonly": ArrayAttr([BoolAttr.from_bool(f) for f in flags]),
                "includes": ArrayAttr([StringAttr(h) for h in includes]),
                "source": StringAttr(source),
            }
        )

    @property
    def arg_types(self) -> tuple[MemRefType, ...]:
        return tuple(t for t in self.args.data if isinstance(t, MemRefType))

    @property
    def readonly_args(self) -> tuple[bool, ...]:
        return tuple(bool(v.value.data) for v in self.readonly.data)

    @property
    def header_names(self) -> tuple[str, ...]:
        return tuple(h.data for h in self.includes.data)

    def verify_(self) -> None:
        name = f"cuda.kernel @{self.sym_name.data}"
        if self.grid.value.data < 1:
            raise VerifyException(f"{name}: grid must be >= 1, got {self.grid.value.data}")
        block = self.block.value.data
        if not 1 <= block <= MAX_THREADS_PER_BLOCK:
            raise VerifyException(
                f"{name}: block must be in [1, {MAX_THREADS_PER_BLOCK}], got {block}"
            )
        if self.smem.value.data < 0:
            raise VerifyException(f"{name}: smem must be >= 0, got {self.smem.value.data}")
        for i, t in enumerate(self.args.data):
            if not isinstance(t, MemRefType):
                raise VerifyException(f"{name}: argument {i} must be a memref type, got {t}")
        if len(self.readonly.data) != len(self.args.data):
            raise VerifyException(
                f"{name}: readonly has {len(self.readonly.data)} entries for "
                f"{len(self.args.data)} arguments"
            )
        for header in self.header_names:
            if not _HEADER.fullmatch(header):
                raise VerifyException(f"{name}: '{header}' is not a header file name")
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
