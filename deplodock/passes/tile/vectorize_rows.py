"""`tile-vectorize-rows`: a group's strided reduction reads `width` consecutive elements at once.

A row reduction split over a group of threads (`tile-rows`: `W` threads per row;
`tile-cooperative-reduce`: the whole block) reads its rows one element per thread per trip:
a GEMV of bf16 weights issues a 2-byte load per multiply-add, and the decode step of an LLM is
made of such GEMVs (`M = 1`), each streaming its weights once. Reading 8 bf16 (or 4 fp32) at a
time, one 16-byte load, cuts the load instructions by that factor and gives every request
whole sectors: the weights then stream at DRAM speed instead of at the issue rate.

Trigger: a reduce loop `tile.for %k = %lane to L step W iter_args(...)` directly in a threads
body, whose start `%lane` is the thread id (`W` the block size) or `%t % W`, whose body is
straight-line pure `arith`/`math` and `tile.load`s, where `%k` is used only as the innermost
index of loads of global buffers (the other indices do not change with `%k`), and
`L` and each such buffer's innermost extent are multiples of `width` (`width` elements of
every such load make an 8- or 16-byte vector). `L` need not be a multiple of `W * width`:
the last trip then reads only in some threads (Qwen's `down_proj` has rows of 18944 = 9.25
trips of 256 threads x 8), each thread still reading whole vectors inside the row. Loads
whose indices do not involve `%k` are read once per trip.

Rewrite: the loop runs `%k = %lane * width to L step W * width`, each thread now reading the
`width` elements from `%k` on: every `%k`-indexed load becomes one `tile.load_vector`, and the
rest of the body is repeated once per element, in order, each copy carrying the reduction on
from the copy before (element `j` sees the accumulator element `j - 1` left), so the sum is
the one the scalar loop computes, in the same order per thread. The combine after the loop is
untouched.

    %s = tile.for %k = %lane to 3584 step 32       %l8 = arith.muli %lane, %c8 : index
        iter_args(%acc = %zero) -> (f32) {         %s = tile.for %k = %l8 to 3584 step 256
      %x = tile.load %a[%c0, %k]          ==>          iter_args(%acc = %zero) -> (f32) {
      %w = tile.load %b[%row, %k]                    %x, ... = tile.load_vector %a[%c0, %k] width 8
      %p = arith.mulf %x, %w : f32                   %w, ... = tile.load_vector %b[%row, %k] width 8
      %r = arith.addf %acc, %p : f32                 %p = arith.mulf %x, %w : f32
                                                     %r = arith.addf %acc, %p : f32
      tile.yield %r : f32                            ... 7 more, each adding to the one before
    }                                                tile.yield %r_7 : f32

Knob `row_vector` on the kernel's `schedule`: the width (1 leaves the loops scalar); by
default the widest of 8, 4 and 2 that every such loop and load allows (16 bytes at most).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import BlockArgument, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import is_pure
from deplodock.dialects.queries import constant_index
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.vectorize import vector_candidate

#: The knob: elements per vector load of a row reduction (1: scalar).
KNOB = "row_vector"
#: The widths tried, widest first.
WIDTHS = (8, 4, 2)


def _lane_of(loop: tile.ForOp) -> tile.ThreadsOp | None:
    """The block whose threads `loop` is strided over, `W` at a time: its start is the
    thread id (`W` the block) or `thread % W`; None otherwise."""
    start = loop.lb
    if isinstance(start.owner, arith.RemSIOp):
        if constant_index(start.owner.rhs) != loop.step_value:
            return None
        start = start.owner.lhs
    if not isinstance(start, BlockArgument) or start.index != 0:
        return None
    threads = start.block.parent_op()
    if not isinstance(threads, tile.ThreadsOp) or loop.step_value <= 0:
        return None
    if threads.count % loop.step_value:
        return None
    if start is loop.lb and loop.step_value != threads.count:
        return None
    return threads


def _strided_loads(loop: tile.ForOp) -> list[tile.LoadOp] | None:
    """The loads indexed by the loop's `%k` (as their innermost index only), when the body
    is one the rewrite can repeat per element (module doc); None otherwise."""
    k = loop.induction_var
    strided: list[tile.LoadOp] = []
    for op in loop.body.block.ops:
        if isinstance(op, tile.YieldOp):
            continue
        if isinstance(op, tile.LoadOp):
            if k in op.indices[:-1] or any(_inside(i, loop) for i in op.indices[:-1]):
                return None  # the vector load goes first: its row must be known before
            if op.indices and op.indices[-1] is k:
                strided.append(op)
        elif op.regions or not is_pure(op):
            return None
    if not strided or any(use.operation not in strided for use in k.uses):  # `%k` feeds loads only
        return None
    return strided


def _inside(value: SSAValue, loop: tile.ForOp) -> bool:
    """`value` is defined in `loop`'s body (an op of it, or one of its arguments)."""
    if isinstance(value, BlockArgument):
        return value.block is loop.body.block
    return value.owner.parent_op() is loop


def row_loops(kernel: tile.KernelOp) -> list[tuple[tile.ForOp, list[tile.LoadOp]]]:
    """The kernel's row reductions the pass could widen, with their strided loads."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return []
    found = []
    for op in threads.body.block.ops:
        if isinstance(op, tile.ForOp) and op.is_reduce and _lane_of(op) is threads:
            loads = _strided_loads(op)
            if loads is not None:
                found.append((op, loads))
    return found


def widest(loops: list[tuple[tile.ForOp, list[tile.LoadOp]]]) -> int:
    """The widest of `WIDTHS` every loop and load allows (1: none)."""
    for width in WIDTHS:
        if all(_legal(loop, loads, width) for loop, loads in loops):
            return width
    return 1


def _legal(loop: tile.ForOp, loads: list[tile.LoadOp], width: int) -> bool:
    return loop.upper % width == 0 and all(vector_candidate(load, width) for load in loads)


def widen(loop: tile.ForOp, loads: list[tile.LoadOp], width: int, pool: ConstantPool) -> None:
    """Rewrites one row loop to read `width` elements per load (module doc)."""
    builder = schedule.IndexBuilder(InsertPoint.before(loop), pool)
    name = f"{loop.lb.name_hint}{width}" if loop.lb.name_hint else None
    start = builder.muli(loop.lb, width, name=name)
    new = tile.ForOp(start, loop.upper, loop.step_value * width, loop.inits)
    Rewriter.insert_op(new, InsertPoint.before(loop))
    new.induction_var.name_hint = loop.induction_var.name_hint
    for old, fresh in zip(loop.iter_args, new.iter_args, strict=True):
        fresh.name_hint = old.name_hint
    target = new.body.block
    mapping: dict[SSAValue, SSAValue] = {loop.induction_var: new.induction_var}
    vectors: dict[SSAValue, tuple[SSAValue, ...]] = {}
    for load in loads:  # one vector load each, before the copies of the body
        indices = [mapping.get(i, i) for i in load.indices]
        vector = tile.LoadVectorOp(load.memref, indices, width)
        for result in vector.res:
            result.name_hint = load.res.name_hint
        target.add_op(vector)
        vectors[load.res] = tuple(vector.res)
    yielded = loop.body.block.last_op
    assert isinstance(yielded, tile.YieldOp)
    carried: list[SSAValue] = list(new.iter_args)
    for element in range(width):
        lane = dict(mapping)
        lane.update(zip(loop.iter_args, carried, strict=True))
        lane.update({old: values[element] for old, values in vectors.items()})
        for op in loop.body.block.ops:
            if op is yielded or op in loads:
                continue
            copy = op.clone(value_mapper=lane)
            target.add_op(copy)
        carried = [lane.get(value, value) for value in yielded.operands]
    target.add_op(tile.YieldOp(*carried))
    for old, fresh in zip(loop.results, new.results, strict=True):
        old.replace_all_uses_with(fresh)
    Rewriter.erase_op(loop)


def vectorize_rows(kernel: tile.KernelOp, width: int | None = None) -> int:
    """Widens every row loop of `kernel` to `width` (the knob, else the widest legal);
    returns the width used (1: nothing changed)."""
    loops = row_loops(kernel)
    if not loops:
        return 1
    width = schedule.read_knob(kernel, KNOB, width if width is not None else widest(loops))
    if width <= 1 or not all(_legal(loop, loads, width) for loop, loads in loops):
        return 1
    threads = schedule.threads_of(kernel)
    assert threads is not None
    pool = ConstantPool.adopting(threads.body.block)
    for loop, loads in loops:
        widen(loop, loads, width, pool)
    return width


@dataclass(frozen=True)
class TileVectorizeRowsPass(Tunable):
    """A group's strided row reductions read `width` elements per load (module doc)."""

    name = "tile-vectorize-rows"
    knobs = (KNOB,)

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return not schedule.has_knob(kernel, KNOB) and bool(row_loops(kernel))

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(**{KNOB: (1, *WIDTHS)})

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if row_loops(kernel):  # a widened loop no longer starts at the lane: not twice
            schedule.write_knob(kernel, KNOB, vectorize_rows(kernel))
