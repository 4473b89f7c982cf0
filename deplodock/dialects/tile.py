"""The `tile` dialect: a loop kernel scheduled onto GPU blocks and threads (docs/ir.md §4).

A `tile.kernel` holds exactly one `tile.grid` (the blocks, independent of each other), which
holds `tile.threads` (the threads of one block, run in lock-step). Inside, `tile.for` is a
per-thread loop with a dynamic start (the thread id for a cooperative strided loop,
`b * T + t` for a grid-stride loop, a constant for a serial loop) and `tile.combine` reduces
a per-thread value over the block. Other ops (`arith`, `math`, loads, stores) run once per
thread. Kernels, loops, loads, stores and the host ops share their syntax and verifiers with
`loop` and `kernel` through `common/`.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasAncestor,
    HasParent,
    NoTerminator,
    Pure,
    SingleBlockImplicitTerminator,
)
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import common
from deplodock.dialects.hardware import MAX_THREADS_PER_BLOCK, WARP_SIZE, is_valid_block_size
from deplodock.dialects.reduce_kind import ReduceKind, ReduceKindAttr


@irdl_op_definition
class ReturnOp(common.ReturnOpBase):
    """`tile.return`: end of a kernel body."""

    name = "tile.return"
    traits = lazy_traits_def(lambda: (HasParent(KernelOp),))


@irdl_op_definition
class KernelOp(common.KernelOpBase):
    """`tile.kernel @k(%a: memref<...>, ...) [attributes {schedule = {...}}] { ... }`.

    `schedule` is an optional dictionary of the knobs the scheduling passes decided or are
    to use (`passes/tile/schedule.py`: each pass reads its knob here before its option, and
    writes back what it used). The body holds exactly one `tile.grid`.
    """

    name = "tile.kernel"
    schedule = opt_attr_def(DictionaryAttr)
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(ReturnOp),))

    def verify_(self) -> None:
        super().verify_()
        grids = [op for op in self.body.block.ops if isinstance(op, GridOp)]
        if len(grids) != 1:
            raise VerifyException(
                f"tile.kernel @{self.sym_name.data}: expected exactly one tile.grid directly "
                f"in the body, found {len(grids)}"
            )

    @property
    def grid(self) -> GridOp:
        return next(op for op in self.body.block.ops if isinstance(op, GridOp))


class ParallelRegionOpBase(IRDLOperation):
    """Shared shape of `tile.grid` and `tile.threads`: `%iv to N { ... }`, no terminator."""

    upper = prop_def(IntegerAttr[I64])
    body = region_def("single_block")

    def __init__(self, upper: int, body: Region | None = None):
        if body is None:
            body = Region(Block(arg_types=[IndexType()]))
        super().__init__(properties={"upper": IntegerAttr(upper, 64)}, regions=[body])

    @property
    def iv(self) -> SSAValue:
        return self.body.block.args[0]

    @property
    def count(self) -> int:
        return self.upper.value.data

    @classmethod
    def parse(cls, parser: Parser):
        iv = parser.parse_argument(expect_type=False).resolve(IndexType())
        parser.parse_keyword("to")
        upper = parser.parse_integer(allow_boolean=False)
        body = parser.parse_region((iv,))
        op = cls(upper, body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.iv)
        printer.print_string(f" to {self.count} ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    def verify_(self) -> None:
        args = self.body.block.args
        if len(args) != 1 or not isinstance(args[0].type, IndexType):
            raise VerifyException(f"{self.name}: the body takes exactly one index argument")
        if self.count <= 0:
            raise VerifyException(f"{self.name}: the count must be positive, got {self.count}")


@irdl_op_definition
class GridOp(ParallelRegionOpBase):
    """`tile.grid %b to G { ... }`: the body runs once per block `b` in `[0, G)`.

    Blocks are independent: no value or ordering flows from one block to another.
    """

    name = "tile.grid"
    traits = lazy_traits_def(lambda: (NoTerminator(), HasParent(KernelOp)))


@irdl_op_definition
class ThreadsOp(ParallelRegionOpBase):
    """`tile.threads %t to T { ... }`: the body runs on `T` threads of a block in lock-step.

    Values defined inside are per thread. `T` is a multiple of the warp size (32) and at most
    1024, as CUDA requires.
    """

    name = "tile.threads"
    traits = lazy_traits_def(lambda: (NoTerminator(), HasParent(GridOp)))

    def verify_(self) -> None:
        super().verify_()
        if not is_valid_block_size(self.count):
            raise VerifyException(
                f"tile.threads: thread count {self.count} must be a multiple of {WARP_SIZE} "
                f"and at most {MAX_THREADS_PER_BLOCK}"
            )


@irdl_op_definition
class YieldOp(common.YieldOpBase):
    """`tile.yield %a : f32`: the loop-carried values of the next iteration."""

    name = "tile.yield"
    traits = lazy_traits_def(lambda: (HasParent(ForOp),))


@irdl_op_definition
class ForOp(common.DynamicForOpBase):
    """`tile.for %iv = %lb to UB [step S] [iter_args(...) -> (...)] { ... }`: per thread.

    `%lb` is an `index` value that may differ per thread (thread id, `b * T + t`, or a
    constant); each thread runs `iv = lb, lb + S, ...` while `iv < UB`.
    """

    name = "tile.for"
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(YieldOp),))


@irdl_op_definition
class CombineOp(IRDLOperation):
    """`%r = tile.combine <kind> %v : f32`: reduces `%v` over all threads of the block.

    Every thread of the enclosing `tile.threads` gets the result (an all-reduce); `kind`
    is as in `tensor.reduce` (add, mul, max, min).
    """

    name = "tile.combine"

    T: ClassVar = VarConstraint("T", AnyAttr())
    kind = prop_def(ReduceKindAttr)
    value = operand_def(T)
    result = result_def(T)

    assembly_format = "$kind $value attr-dict `:` type($value)"
    traits = traits_def(HasAncestor(ThreadsOp), Pure())

    def __init__(self, kind: ReduceKind | str, value: SSAValue | Operation):
        super().__init__(
            operands=[value],
            result_types=[SSAValue.get(value).type],
            properties={"kind": ReduceKindAttr(ReduceKind(kind))},
        )

    def verify_(self) -> None:
        if not isinstance(self.value.type, AnyFloat | IntegerType | IndexType):
            raise VerifyException(f"tile.combine: cannot combine values of type {self.value.type}")


@irdl_op_definition
class LoadOp(common.LoadOpBase):
    """`%v = tile.load %buf[%i, ...] : memref<...>`: one element per thread."""

    name = "tile.load"


@irdl_op_definition
class StoreOp(common.StoreOpBase):
    """`tile.store %v, %buf[%i, ...] : memref<...>`: one element per thread.

    A store that is not inside a thread-strided loop is executed by every thread with the
    same value and address; the `tile -> kernel` lowering guards it with thread 0.
    """

    name = "tile.store"


@irdl_op_definition
class AllocOp(common.AllocOpBase):
    """`%b = tile.alloc : memref<...>` (host)."""

    name = "tile.alloc"


@irdl_op_definition
class LaunchOp(common.LaunchOpBase):
    """`tile.launch @k(%a, ...) : (types) -> ()` (host): runs a `tile.kernel` in place."""

    name = "tile.launch"


Tile = Dialect(
    "tile",
    [
        KernelOp,
        ReturnOp,
        GridOp,
        ThreadsOp,
        ForOp,
        YieldOp,
        CombineOp,
        LoadOp,
        StoreOp,
        AllocOp,
        LaunchOp,
    ],
    [],
)
