"""The `tile` dialect: a loop kernel scheduled onto GPU blocks and threads (docs/ir.md §4).

A `tile.kernel` holds exactly one `tile.grid` (the blocks, independent of each other), which
holds `tile.threads` (the threads of one block, run in lock-step). Inside, `tile.for` is a
per-thread loop with a dynamic start (the thread id for a cooperative strided loop,
`b * T + t` for a grid-stride loop, a constant for a serial loop) and `tile.combine` reduces
a per-thread value over the block. Other ops (`arith`, `math`, loads, stores) run once per
thread.

The scheduling passes add structure (docs/scheduling.md):

- `tile.block_tile`: which tile of the output axes a block owns (with grouped raster order);
- `tile.thread_tile`: which rows (or columns) of that tile one thread owns in registers;
- `tile.shared_alloc` + `tile.barrier`: a shared-memory stage of the block and its ordering;
- `tile.if`: a bounds guard for partial tiles.

Kernels, loops, loads, stores and the host ops share their syntax and verifiers with
`loop` and `kernel` through `common/`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    ArrayAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, Region, SSAValue
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
    var_result_def,
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
from deplodock.dialects.common import async_memory, mma
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
        copies = [k for k, op in enumerate(ops) if isinstance(op, CopyAsyncOp)]
        commits = [k for k, op in enumerate(ops) if isinstance(op, AsyncCommitOp)]
        waits = [k for k, op in enumerate(ops) if isinstance(op, AsyncWaitOp)]
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


def _int_array(values: Sequence[int]) -> ArrayAttr[IntegerAttr]:
    return ArrayAttr([IntegerAttr(v, 64) for v in values])


def _ints(attr: ArrayAttr) -> tuple[int, ...]:
    return tuple(a.value.data for a in attr.data)  # type: ignore[attr-defined]


def _bracketed(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _parse_ints(parser: Parser) -> list[int]:
    return parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
    )


def shared_bytes(op: Operation) -> int:
    """Bytes of shared memory the `tile.shared_alloc`s inside `op` take: what the
    `tile.kernel` verifier holds to the hardware limit and the staging passes budget."""
    return sum(
        buffer_bytes(inner.result.type)  # type: ignore[arg-type]
        for inner in op.walk()
        if isinstance(inner, SharedAllocOp)
    )


@irdl_op_definition
class BlockTileOp(IRDLOperation):
    """`%o:3 = tile.block_tile %b counts [4, 8, 16] sizes [1, 64, 128] group 8`.

    Block `b` of the grid owns one tile of the output axes: `counts` tiles along each axis,
    each `sizes` long, and the results are the tile's origin on each axis (tile index times
    size). Blocks walk the tiles row-major, except that the last two axes (M, N) go in
    *groups* of `group` tile rows: consecutive blocks sweep a `group x N` band column by
    column, so blocks running together share rows of A and columns of B in L2 (`group 1`
    is plain row-major). The grid has `prod(counts)` blocks.
    """

    name = "tile.block_tile"
    block = operand_def(IndexType)
    counts = prop_def(ArrayAttr[IntegerAttr])
    sizes = prop_def(ArrayAttr[IntegerAttr])
    group = prop_def(IntegerAttr[I64])
    origins = var_result_def(IndexType)

    traits = traits_def(Pure(), HasAncestor(GridOp))

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.block)
        printer.print_string(f" counts {_bracketed(self.tile_counts)}")
        printer.print_string(f" sizes {_bracketed(self.tile_sizes)} group {self.group_rows}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> BlockTileOp:
        block = parser.parse_operand(IndexType())
        parser.parse_keyword("counts")
        counts = _parse_ints(parser)
        parser.parse_keyword("sizes")
        sizes = _parse_ints(parser)
        parser.parse_keyword("group")
        group = parser.parse_integer(allow_boolean=False)
        op = cls(block, counts, sizes, group)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def __init__(
        self,
        block: SSAValue,
        counts: Sequence[int],
        sizes: Sequence[int],
        group: int = 1,
    ):
        super().__init__(
            operands=[block],
            properties={
                "counts": _int_array(counts),
                "sizes": _int_array(sizes),
                "group": IntegerAttr(group, 64),
            },
            result_types=[[IndexType()] * len(counts)],
        )

    @property
    def tile_counts(self) -> tuple[int, ...]:
        return _ints(self.counts)

    @property
    def tile_sizes(self) -> tuple[int, ...]:
        return _ints(self.sizes)

    @property
    def group_rows(self) -> int:
        return self.group.value.data

    def verify_(self) -> None:
        counts, sizes = self.tile_counts, self.tile_sizes
        if not counts or len(counts) != len(sizes) or len(self.origins) != len(counts):
            raise VerifyException(
                "tile.block_tile: counts, sizes and results must have one entry per axis"
            )
        if min(counts) <= 0 or min(sizes) <= 0 or self.group_rows <= 0:
            raise VerifyException("tile.block_tile: counts, sizes and group must be positive")


def grouped_tile_indices(block: int, counts: Sequence[int], group: int) -> tuple[int, ...]:
    """The tile index on each axis of block `block` (`tile.block_tile`'s order).

    The leading axes are row-major over the blocks; the last two walk in groups of `group`
    rows: within a band of `group` tile rows, consecutive blocks go down the rows first.
    """
    rest, per_batch = block, 1
    for count in counts[-2:]:
        per_batch *= count
    batch, pid = divmod(rest, per_batch)
    leading: list[int] = []
    for count in reversed(counts[:-2]):
        batch, index = divmod(batch, count)
        leading.insert(0, index)
    if len(counts) == 1:
        return (pid,)
    rows, cols = counts[-2], counts[-1]
    band = group * cols
    first_row = (pid // band) * group
    rows_in_band = min(rows - first_row, group)
    row = first_row + (pid % band) % rows_in_band
    col = (pid % band) // rows_in_band
    return (*leading, row, col)


@irdl_op_definition
class ThreadTileOp(IRDLOperation):
    """`%mm:8 = tile.thread_tile %t dim 0 of [16, 16] cells 8 blocked`.

    The threads of a block form a `threads[0] x threads[1]` grid (thread `t` at row
    `t / threads[1]`, column `t % threads[1]`); along `dim`, each thread owns `cells`
    positions of the block tile, held in registers. The results are those block-local
    positions: `blocked` gives thread coordinate `c` the run `c*cells + i`, `interleaved`
    gives it `i*threads[dim] + c` (neighbouring threads then touch neighbouring elements,
    which keeps global stores coalesced and shared reads free of bank conflicts).

    `mma` gives each thread the cells of the m16n8k16 accumulator fragments
    (`common/mma.py`) of its warp: the warps form a `threads[0]/8 x threads[1]/4` grid, warp
    `w` at row `w / (threads[1]/4)`, and each owns a `8*cells_m x 4*cells_n` warp tile of
    `cells_m/2 x cells_n/2` MMA tiles. Lane `l` (group `g = l/4`, `q = l%4`) owns rows
    `16i + 8h + g` (cell `2i + h`) and columns `8j + 2q + e` (cell `2j + e`) of it, which
    is where `mma.sync` leaves its C and D registers.

    An optional trailing `quads` orders the threads in 2 x 2 quads instead of row by row:
    thread `t` (quad `u = t / 4`) sits at row `2 (u / (T1/2)) + (t / 2) % 2`, column
    `2 (u % (T1/2)) + t % 2`. A warp then covers the same rows and columns, but lanes `n`
    and `n ^ 1` share a row and lanes `n` and `n ^ 2` a column, so both operands' vector
    reads from shared memory come in pairs of equal addresses, which shared memory serves
    at twice the rate (`hardware.shared_wavefronts`). Both tiles of a block must agree.
    """

    name = "tile.thread_tile"
    thread = operand_def(IndexType)
    dim = prop_def(IntegerAttr[I64])
    threads = prop_def(ArrayAttr[IntegerAttr])
    cells = prop_def(IntegerAttr[I64])
    layout = prop_def(StringAttr)
    order = opt_prop_def(StringAttr)
    positions = var_result_def(IndexType)

    traits = traits_def(Pure(), HasAncestor(ThreadsOp))

    LAYOUTS: ClassVar[tuple[str, ...]] = ("blocked", "interleaved", "mma")
    #: Thread orders: row by row (the default) or in 2 x 2 quads.
    ORDERS: ClassVar[tuple[str, ...]] = ("rows", "quads")
    #: Threads of a warp along each axis in the `mma` layout (8 groups x 4 lanes).
    MMA_WARP_THREADS: ClassVar[tuple[int, int]] = (8, 4)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.thread)
        printer.print_string(f" dim {self.axis} of {_bracketed(self.thread_grid)}")
        printer.print_string(f" cells {self.cell_count} {self.layout.data}")
        if self.thread_order == "quads":
            printer.print_string(" quads")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ThreadTileOp:
        thread = parser.parse_operand(IndexType())
        parser.parse_keyword("dim")
        dim = parser.parse_integer(allow_boolean=False)
        parser.parse_keyword("of")
        threads = _parse_ints(parser)
        parser.parse_keyword("cells")
        cells = parser.parse_integer(allow_boolean=False)
        layout = parser.parse_identifier()
        if layout not in cls.LAYOUTS:
            parser.raise_error(f"expected a layout ({', '.join(cls.LAYOUTS)}), got '{layout}'")
        order = "quads" if parser.parse_optional_keyword("quads") else "rows"
        op = cls(thread, dim, threads, cells, layout, order)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def __init__(
        self,
        thread: SSAValue,
        dim: int,
        threads: Sequence[int],
        cells: int,
        layout: str,
        order: str = "rows",
    ):
        properties: dict[str, Attribute] = {
            "dim": IntegerAttr(dim, 64),
            "threads": _int_array(threads),
            "cells": IntegerAttr(cells, 64),
            "layout": StringAttr(layout),
        }
        if order != "rows":
            properties["order"] = StringAttr(order)
        super().__init__(
            operands=[thread], properties=properties, result_types=[[IndexType()] * cells]
        )

    @property
    def thread_grid(self) -> tuple[int, ...]:
        return _ints(self.threads)

    @property
    def axis(self) -> int:
        return self.dim.value.data

    @property
    def cell_count(self) -> int:
        return self.cells.value.data

    @staticmethod
    def quads_fit(grid: Sequence[int]) -> bool:
        """Whether a thread grid can be ordered in 2 x 2 quads (both extents even)."""
        return all(extent % 2 == 0 for extent in grid)

    @property
    def thread_order(self) -> str:
        return self.order.data if self.order is not None else "rows"

    def coordinates(self, thread: int) -> tuple[int, int]:
        """(row, column) of `thread` in the thread grid, by the thread order."""
        cols = self.thread_grid[1]
        if self.thread_order == "quads":
            quad, lane = divmod(thread, 4)
            quad_row, quad_col = divmod(quad, cols // 2)
            return 2 * quad_row + lane // 2, 2 * quad_col + lane % 2
        row, col = divmod(thread, cols)
        return row, col

    def position(self, thread: int, cell: int) -> int:
        """The block-local position of `cell` for thread `thread` (the op's semantics)."""
        if self.layout.data == "mma":
            return self._mma_position(thread, cell)
        coord = self.coordinates(thread)[self.axis]
        if self.layout.data == "blocked":
            return coord * self.cell_count + cell
        return cell * self.thread_grid[self.axis] + coord

    def mma_warp_grid(self) -> tuple[int, int]:
        """The `mma` layout's grid of warps (rows, columns)."""
        rows, cols = self.thread_grid
        return rows // self.MMA_WARP_THREADS[0], cols // self.MMA_WARP_THREADS[1]

    def _mma_position(self, thread: int, cell: int) -> int:
        warp, lane = thread // WARP_SIZE, thread % WARP_SIZE
        warp_cols = self.mma_warp_grid()[1]
        if self.axis == 0:  # 8 rows per cell pair: the C fragment's rows g and g + 8
            base = warp // warp_cols * 8 * self.cell_count + lane // 4
            return base + 16 * (cell // 2) + 8 * (cell % 2)
        base = warp % warp_cols * 4 * self.cell_count + 2 * (lane % 4)
        return base + 8 * (cell // 2) + cell % 2

    def verify_(self) -> None:
        grid = self.thread_grid
        if len(grid) != 2 or min(grid) <= 0:
            raise VerifyException("tile.thread_tile: threads must be two positive extents")
        if self.layout.data == "mma" and (
            grid[0] % self.MMA_WARP_THREADS[0]
            or grid[1] % self.MMA_WARP_THREADS[1]
            or self.cell_count % 2
        ):
            raise VerifyException(
                f"tile.thread_tile: the mma layout needs a thread grid of multiples of "
                f"{self.MMA_WARP_THREADS[0]} x {self.MMA_WARP_THREADS[1]} and an even cell "
                f"count, got {grid[0]}x{grid[1]} threads and {self.cell_count} cells"
            )
        if self.axis not in (0, 1):
            raise VerifyException(f"tile.thread_tile: dim must be 0 or 1, got {self.axis}")
        if self.thread_order not in self.ORDERS:
            raise VerifyException(
                f"tile.thread_tile: order must be one of {', '.join(self.ORDERS)}, "
                f"got '{self.thread_order}'"
            )
        if self.thread_order == "quads" and (self.layout.data == "mma" or not self.quads_fit(grid)):
            raise VerifyException(
                f"tile.thread_tile: quads need an even thread grid and a blocked or "
                f"interleaved layout, got {grid[0]}x{grid[1]} threads, {self.layout.data}"
            )
        if self.layout.data not in self.LAYOUTS:
            raise VerifyException(
                f"tile.thread_tile: layout must be one of {', '.join(self.LAYOUTS)}, "
                f"got '{self.layout.data}'"
            )
        if len(self.positions) != self.cell_count or self.cell_count <= 0:
            raise VerifyException("tile.thread_tile: one result per cell")
        threads = self.parent_op()
        while threads is not None and not isinstance(threads, ThreadsOp):
            threads = threads.parent_op()
        if threads is not None and grid[0] * grid[1] != threads.count:
            raise VerifyException(
                f"tile.thread_tile: a {grid[0]}x{grid[1]} thread grid in a block of "
                f"{threads.count} threads"
            )


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
class AtomicAddOp(common.AtomicAddOpBase):
    """`tile.atomic_add %v, %buf[%i, ...] : memref<...>`: `buf[i] += v`, atomically.

    Like `tile.store`, an add that every thread of the block runs alike (`is_block_uniform`:
    unscheduled kernels run every loop on every thread) is one update per block; the
    `tile -> kernel` lowering keeps it on thread 0. Otherwise each active thread adds.
    """

    name = "tile.atomic_add"


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


@irdl_op_definition
class AllocOp(common.AllocOpBase):
    """`%b = tile.alloc : memref<...>` (host)."""

    name = "tile.alloc"


@irdl_op_definition
class LaunchOp(common.LaunchOpBase):
    """`tile.launch @k(%a, ...) : (types) -> ()` (host): runs a `tile.kernel` in place."""

    name = "tile.launch"


# Asynchronous copies and vector accesses (syntax and rules: common/async_memory.py); the
# tile -> kernel lowering maps each to its kernel op one to one.


@irdl_op_definition
class CopyAsyncOp(async_memory.CpAsyncOpBase):
    """`tile.copy_async %dst[...], %src[...], 16 [if %p] : memref<..., 3>, memref<...>`:
    each thread copies BYTES from global to shared memory without a register round trip;
    the copy lands by the `tile.async_wait` that retires its group."""

    name = "tile.copy_async"
    traits = traits_def(HasAncestor(ThreadsOp))


@irdl_op_definition
class AsyncCommitOp(async_memory.CpAsyncCommitOpBase):
    """`tile.async_commit`: the thread's copies since the last commit form one group."""

    name = "tile.async_commit"
    traits = traits_def(HasAncestor(ThreadsOp))


@irdl_op_definition
class AsyncWaitOp(async_memory.CpAsyncWaitOpBase):
    """`tile.async_wait N`: all but the thread's `N` most recent groups have landed."""

    name = "tile.async_wait"
    traits = traits_def(HasAncestor(ThreadsOp))


@irdl_op_definition
class LoadVectorOp(async_memory.LoadVectorOpBase):
    """`%a, %b, %c, %d = tile.load_vector %buf[...] width 4 : memref<...>`: per thread."""

    name = "tile.load_vector"


@irdl_op_definition
class StoreVectorOp(async_memory.StoreVectorOpBase):
    """`tile.store_vector %a, %b, %c, %d, %buf[...] : memref<...>`: per thread."""

    name = "tile.store_vector"


@irdl_op_definition
class MmaSyncOp(mma.MmaSyncOpBase):
    """`%d:4 = tile.mma_sync a(...) b(...) c(...) : bf16`: one warp's m16n8k16 tensor-core
    multiply-accumulate (m16n8k8 for `: tf32`); the 32 threads `[32w, 32w + 32)` of the
    block form warp `w` (`common/mma.py` has the fragment layouts)."""

    name = "tile.mma_sync"
    traits = traits_def(HasAncestor(ThreadsOp), Collective())


@irdl_op_definition
class SplitTf32Op(mma.SplitTf32OpBase):
    """`%hi, %lo = tile.split_tf32 %x`: `x` as two tf32 values (`common/mma.py`)."""

    name = "tile.split_tf32"


Tile = Dialect(
    "tile",
    [
        KernelOp,
        ReturnOp,
        GridOp,
        ThreadsOp,
        ForOp,
        YieldOp,
        IfOp,
        BarrierOp,
        SharedAllocOp,
        BlockTileOp,
        ThreadTileOp,
        CombineOp,
        LoadOp,
        StoreOp,
        AtomicAddOp,
        AllocOp,
        LaunchOp,
        CopyAsyncOp,
        AsyncCommitOp,
        AsyncWaitOp,
        LoadVectorOp,
        StoreVectorOp,
        MmaSyncOp,
        SplitTf32Op,
    ],
    [],
)
