"""The `tile` dialect's tiling ops: which tile of the output a block owns
(`tile.block_tile`, grouped raster order) and which cells of it a thread owns in registers
(`tile.thread_tile`: blocked, interleaved or MMA-fragment layouts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, ArrayAttr, IndexType, IntegerAttr, StringAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    traits_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasAncestor, Pure
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.hardware import WARP_SIZE
from deplodock.dialects.tile.structure import GridOp, ThreadsOp


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
