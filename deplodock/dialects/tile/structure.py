"""The `tile` dialect's structure: the kernel, its grid of blocks and threads of a block, the
per-thread loop and guard, the block-wide combine and barrier, and the block's shared arrays
(with their swizzled layout). What a value or an op means for the threads
(`depends_on_thread`, `is_block_uniform`) is asked here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    opt_prop_def,
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
    MemoryAllocEffect,
    NoTerminator,
    Pure,
    RecursiveMemoryEffect,
    SingleBlockImplicitTerminator,
)
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import common
from deplodock.dialects.common import async_memory
from deplodock.dialects.common.schedule import verify_schedule
from deplodock.dialects.effects import Collective
from deplodock.dialects.element_types import buffer_bytes, byte_size
from deplodock.dialects.hardware import (
    MAX_SHARED_BYTES,
    MAX_THREADS_PER_BLOCK,
    SHARED_MEMORY_SPACE,
    SWIZZLE_CHUNK_BYTES,
    WARP_SIZE,
    is_shared,
    is_valid_block_size,
)
from deplodock.dialects.queries import def_chain_reaches
from deplodock.dialects.reduce_kind import ReduceKind, ReduceKindAttr


@irdl_op_definition
class ReturnOp(common.ReturnOpBase):
    """`tile.return`: end of a kernel body."""

    name = "tile.return"
    traits = lazy_traits_def(lambda: (HasParent(KernelOp),))


@irdl_op_definition
class KernelOp(common.KernelOpBase):
    """`tile.kernel @k(%a: memref<...>, ...) [attributes {schedule = {...}}] { ... }`.

    `schedule` is the optional `Schedule` (`dialects/common/schedule.py`) of the knobs the
    scheduling passes decided or are to use (`passes/tile/schedule.py`: each pass reads its
    knob here before its option, and writes back what it used). The body holds exactly one
    `tile.grid`.
    """

    name = "tile.kernel"
    schedule = opt_attr_def(DictionaryAttr)
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(ReturnOp),))

    def verify_(self) -> None:
        super().verify_()
        verify_schedule(self, self.name, self.sym_name.data)
        grids = [op for op in self.body.block.ops if isinstance(op, GridOp)]
        if len(grids) != 1:
            raise VerifyException(
                f"tile.kernel @{self.sym_name.data}: expected exactly one tile.grid directly "
                f"in the body, found {len(grids)}"
            )
        self._verify_shared_memory()
        self._verify_async_groups()

    def _verify_shared_memory(self) -> None:
        """A block's shared arrays fit the shared memory a CUDA block may opt in to."""
        used = shared_bytes(self)
        if used > MAX_SHARED_BYTES:
            raise VerifyException(
                f"tile.kernel @{self.sym_name.data}: {used} bytes of shared memory per block, "
                f"more than the {MAX_SHARED_BYTES} a block may have"
            )

    def _verify_async_groups(self) -> None:
        """Asynchronous copies are committed and waited for: a `tile.copy_async` without a
        later `tile.async_commit`, or commits without any `tile.async_wait`, would leave
        data landing at an unknown time."""
        ops = list(self.walk())
        copies = [k for k, op in enumerate(ops) if isinstance(op, async_memory.CpAsyncOpBase)]
        commits = [
            k for k, op in enumerate(ops) if isinstance(op, async_memory.CpAsyncCommitOpBase)
        ]
        waits = [k for k, op in enumerate(ops) if isinstance(op, async_memory.CpAsyncWaitOpBase)]
        name = self.sym_name.data
        if copies and (not commits or max(commits) < max(copies)):
            raise VerifyException(
                f"tile.kernel @{name}: a tile.copy_async is not followed by a tile.async_commit"
            )
        if commits and not waits:
            raise VerifyException(
                f"tile.kernel @{name}: tile.async_commit groups are never waited for "
                "(no tile.async_wait)"
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
    """`tile.yield %a : f32`: next iter_args of a `tile.for`; empty (elided) in `tile.if`."""

    name = "tile.yield"
    traits = lazy_traits_def(lambda: (HasParent(ForOp, IfOp),))


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
    """`%r = tile.combine <kind> %v [width W] : f32`: reduces `%v` over threads of the block.

    Every thread gets the result (an all-reduce); `kind` is as in `tensor.reduce` (add, mul,
    max, min). Without `width` the reduction is over all threads of the enclosing
    `tile.threads`. With `width W` it is *segmented*: threads `[k*W, (k+1)*W)` form one
    group and each thread gets the reduction over its own group (several rows per block,
    one group of threads per row). `W` is a power of two up to the warp size (the group
    lives inside one warp) or a multiple of the warp size, and it divides the block.
    """

    name = "tile.combine"

    T: ClassVar = VarConstraint("T", AnyAttr())
    kind = prop_def(ReduceKindAttr)
    width = opt_prop_def(IntegerAttr[I64])
    value = operand_def(T)
    result = result_def(T)

    assembly_format = "$kind $value (`width` $width^)? attr-dict `:` type($value)"
    traits = traits_def(HasAncestor(ThreadsOp), Pure(), Collective())

    def __init__(
        self, kind: ReduceKind | str, value: SSAValue | Operation, width: int | None = None
    ):
        properties: dict[str, Attribute] = {"kind": ReduceKindAttr(ReduceKind(kind))}
        if width is not None:
            properties["width"] = IntegerAttr(width, 64)
        super().__init__(
            operands=[value],
            result_types=[SSAValue.get(value).type],
            properties=properties,
        )

    @property
    def segment(self) -> int | None:
        """The segment width `W`, or None for the whole block."""
        return None if self.width is None else self.width.value.data

    def segment_width(self, threads: int) -> int:
        """The group size over a block of `threads` threads (the block when no width)."""
        return threads if self.segment is None else self.segment

    def verify_(self) -> None:
        if not isinstance(self.value.type, AnyFloat | IntegerType | IndexType):
            raise VerifyException(f"tile.combine: cannot combine values of type {self.value.type}")
        width = self.segment
        if width is None:
            return
        power_of_two = width > 0 and width & (width - 1) == 0
        if not (power_of_two and width <= WARP_SIZE) and not (width > 0 and width % WARP_SIZE == 0):
            raise VerifyException(
                f"tile.combine: width {width} must be a power of two up to {WARP_SIZE} "
                f"or a multiple of {WARP_SIZE}"
            )
        threads = self.parent_op()
        while threads is not None and not isinstance(threads, ThreadsOp):
            threads = threads.parent_op()
        if threads is not None and threads.count % width != 0:
            raise VerifyException(
                f"tile.combine: width {width} does not divide the {threads.count} threads "
                "of the block"
            )


@irdl_op_definition
class IfOp(common.IfOpBase):
    """`tile.if %cond { ... }`: the body runs on the threads where `%cond` holds.

    The scheduling passes use it to guard the cells of a partial tile (`m < M`); it has no
    results, so a guarded computation ends in stores.
    """

    name = "tile.if"
    traits = traits_def(SingleBlockImplicitTerminator(YieldOp), RecursiveMemoryEffect())


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`tile.barrier`: every thread of the block waits until all have arrived, so shared
    memory written before it is visible to every thread after it (`__syncthreads()`).

    Every thread must reach it: it may not sit in a `tile.if` or a per-thread loop.
    """

    name = "tile.barrier"
    assembly_format = "attr-dict"
    traits = traits_def(HasAncestor(ThreadsOp))

    def verify_(self) -> None:
        parent = self.parent_op()
        while parent is not None and not isinstance(parent, ThreadsOp):
            if isinstance(parent, IfOp):
                raise VerifyException(
                    "tile.barrier: must not be nested in a tile.if (divergent control flow)"
                )
            if isinstance(parent, ForOp) and depends_on_thread(parent.lb):
                raise VerifyException(
                    "tile.barrier: must not be nested in a tile.for whose start depends on "
                    "the thread (divergent control flow)"
                )
            parent = parent.parent_op()


def depends_on_thread(value: SSAValue) -> bool:
    """Whether `value` may differ between the threads of a block: its def chain
    (`queries.def_chain`, through loop starts and inits) reaches the `tile.threads`
    induction variable, the thread id."""
    return def_chain_reaches(
        value,
        lambda v: isinstance(v, BlockArgument) and isinstance(v.block.parent_op(), ThreadsOp),
    )


@irdl_op_definition
class SharedAllocOp(IRDLOperation):
    """`%s = tile.shared_alloc : memref<16x65xf32, 3>`: a shared-memory array of the block.

    Every thread of the block sees the same array (its values are per block, not per
    thread); a stage fills it cooperatively and a `tile.barrier` publishes it.

    An optional `swizzle = P` is the array's physical layout: element `[..., r, c]` is stored
    at column `Swizzle.column(r, c)`, 16-byte chunks of a row XOR-permuted by `r / P` (see
    `Swizzle`). Indices at this level stay logical; `convert-tile-to-kernel` writes the XOR.
    """

    name = "tile.shared_alloc"
    result = result_def(MemRefType)
    swizzle = opt_attr_def(IntegerAttr[I64])
    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(MemoryAllocEffect(), HasParent(ThreadsOp))

    def __init__(self, memref_type: MemRefType, name_hint: str | None = None):
        super().__init__(result_types=[memref_type])
        if name_hint is not None:
            self.result.name_hint = name_hint

    def verify_(self) -> None:
        if not is_shared(self.result.type):
            raise VerifyException(
                f"tile.shared_alloc: result must be in memory space {SHARED_MEMORY_SPACE} "
                f"(shared), got {self.result.type}"
            )
        if self.swizzle is not None:
            phase = self.swizzle.value.data
            if problem := Swizzle.problem(self.result.type, phase):
                raise VerifyException(f"tile.shared_alloc: swizzle = {phase}: {problem}")

    def swizzle_layout(self) -> Swizzle | None:
        """The XOR layout of the array, None for the plain row-major one."""
        if self.swizzle is None:
            return None
        return Swizzle.of(self.result.type, self.swizzle.value.data)


@dataclass(frozen=True)
class Swizzle:
    """An XOR layout of a shared array's rows: `column(r, c) = c ^ ((r / phase) % chunks) * g`.

    A row of `chunks` chunks of `g` elements (`SWIZZLE_CHUNK_BYTES` each) keeps its chunks but
    in an order that depends on the row: `phase` consecutive rows share one order. Lanes that
    read one column down many rows then land in different banks without padding the rows,
    which keeps them 16-byte aligned for `cp.async` and `float4`. The low bits of `c` (inside
    a chunk) are untouched, so an aligned access of up to 16 bytes stays contiguous. Works on
    ints and numpy arrays alike (`banks` evaluates it lane by lane).
    """

    phase: int
    chunks: int
    chunk_elements: int

    @staticmethod
    def problem(memref: MemRefType, phase: int) -> str | None:
        """Why `memref` cannot take `swizzle = phase` (None when it can)."""
        shape = memref.get_shape()
        if phase < 1 or phase & (phase - 1):
            return "the phase (rows sharing one chunk order) must be a power of two"
        if len(shape) < 2:
            return "a swizzle permutes the chunks of a row: the array needs rows"
        row_bytes = shape[-1] * byte_size(memref.element_type)
        chunks = row_bytes // SWIZZLE_CHUNK_BYTES
        if row_bytes % SWIZZLE_CHUNK_BYTES or chunks < 2 or chunks & (chunks - 1):
            return (
                f"rows of {row_bytes} bytes are not a power of two (at least 2) of "
                f"{SWIZZLE_CHUNK_BYTES}-byte chunks"
            )
        return None

    @staticmethod
    def of(memref: MemRefType, phase: int) -> Swizzle:
        """The layout `swizzle = phase` gives `memref` (which `problem` accepted)."""
        element = byte_size(memref.element_type)
        chunks = memref.get_shape()[-1] * element // SWIZZLE_CHUNK_BYTES
        return Swizzle(phase, chunks, SWIZZLE_CHUNK_BYTES // element)

    def column(self, row, column):  # type: ignore[no-untyped-def]
        """The physical column of logical element `[row, column]` (ints or arrays)."""
        return column ^ ((row // self.phase) % self.chunks) * self.chunk_elements


def shared_bytes(op: Operation) -> int:
    """Bytes of shared memory the `tile.shared_alloc`s inside `op` take: what the
    `tile.kernel` verifier holds to the hardware limit and the staging passes budget."""
    return sum(
        buffer_bytes(inner.result.type)  # type: ignore[arg-type]
        for inner in op.walk()
        if isinstance(inner, SharedAllocOp)
    )


def is_block_uniform(op: Operation) -> bool:
    """Whether every thread of the block runs `op` alike: none of its operands depends on
    the thread and no enclosing `tile.for` is strided over threads."""
    if any(depends_on_thread(value) for value in op.operands):
        return False
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, ThreadsOp):
        if isinstance(parent, ForOp) and depends_on_thread(parent.lb):
            return False
        parent = parent.parent_op()
    return True
