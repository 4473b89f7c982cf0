"""`tile-row-on-chip`: a row that a reducing kernel sweeps several times is read from HBM once.

Trigger: a scheduled kernel (after `tile-rows` or `tile-rows-to-blocks` +
`tile-loops-to-threads` + `tile-cooperative-reduce`) whose threads body holds two or more
thread-strided loops over the same index set (*sweeps*: same start `%lane` or `%t`, same
bound `L`, same step `S`, the group of threads sharing one row) that load the same element
of a buffer the kernel never writes (RMSNorm: the sum of squares, then the normalization;
softmax: the max, the sum of exponentials, then the output).

Knob `row_on_chip` on the kernel's `schedule`: 0 = leave the kernel, 1 = registers,
2 = shared memory. Default: registers when each thread holds at most `max_cells` (32)
elements of the row (`ceil(L / S)` cells), else shared memory when the block's rows fit
the static shared memory, else 0. (On the H100 model, registers beat the shared buffer
even at 32 cells, e.g. softmax over 256 rows of 8192: 28.3 us none, 24.2 us shared,
16.8 us registers; ptxas keeps 32 cells without spills.)

Rewrite, registers (1): every sweep is unrolled into its `C = ceil(L / S)` cells, cell `c`
at index `%lane + c * S`, computed once before the first sweep, so a thread's elements of
the row are `C` separate scalars. A cell that some threads do not have (`L % S != 0`) uses
the index clamped to `L - 1`, and is masked: its reduction step is `arith.select`-ed away,
its free-loop body runs under `tile.if`. Loads of the same element of a read-only buffer
then appear once per cell in the first sweep, and the later sweeps reuse those values.

Rewrite, shared memory (2): one `tile.shared_alloc : memref<G x L x f32, 3>` row buffer,
`G = T / S` rows per block (slot `t / S`). The first sweep stores each element it loads
into the buffer; the later sweeps load it from there. A thread reads back exactly the
elements it wrote (the sweeps have the same start and step), so no `tile.barrier` is
needed: no element crosses threads. The race detector checks that invariant
(`tests/passes/test_tile_row_on_chip.py` plants a sweep that reads its neighbour's
elements).

    %ss_p = tile.for %k = %t to 256 step 128 ...        %k0 = %t ; %k1 = %t + 128
      %v = tile.load %x[%b, %k]                          %v0 = tile.load %x[%b, %k0]
      ...                                      ==>       %v1 = tile.load %x[%b, %k1]
    %ss = tile.combine add %ss_p                         %ss = tile.combine add (v0*v0 + v1*v1)
    tile.for %j = %t to 256 step 128 {                   tile.store (%v0 * %r), %y[%b, %k0]
      %xv = tile.load %x[%b, %j]                         tile.store (%v1 * %r), %y[%b, %k1]
      tile.store (%xv * %r), %y[%b, %j]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.element_types import buffer_bytes
from deplodock.dialects.hardware import MAX_STATIC_SHARED_BYTES, WARP_SIZE, shared_memref
from deplodock.dialects.queries import written_buffers
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.nests import body_ops

NONE, REGISTERS, SHARED = 0, 1, 2

#: Bytes kept free for the combine's per-warp partials (`%red`) the lowering adds.
_COMBINE_RESERVE = 4 * (1024 // WARP_SIZE) * 2


def _sweep_key(loop: tile.ForOp, threads: tile.ThreadsOp) -> tuple | None:
    """(start, bound, step) of a thread-strided loop that covers `[0, L)` once over a group
    of `step` threads: its start is `%t` (step = the block) or `%t % step`."""
    if loop.parent_op() is not threads or not tile.depends_on_thread(loop.lb):
        return None
    start, step = loop.lb, loop.step_value
    if start is threads.iv:
        if step != threads.count:
            return None
    elif not (
        isinstance(start.owner, arith.RemSIOp)
        and start.owner.lhs is threads.iv
        and _constant(start.owner.rhs) == step
    ):
        return None
    return (start, loop.upper, step)


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp):
        return owner.value.value.data  # type: ignore[attr-defined]
    return None


def _defined_in(value: SSAValue, loop: tile.ForOp) -> bool:
    owner = value.block.parent_op() if isinstance(value, BlockArgument) else value.owner
    return isinstance(owner, Operation) and loop.is_ancestor(owner)


def _load_key(load: tile.LoadOp, loop: tile.ForOp) -> tuple | None:
    """A load's element in terms of the loop index: one index is the iv, the others come
    from outside the loop (None otherwise)."""
    key: list[object] = [load.memref]
    for index in load.indices:
        if index is loop.induction_var:
            key.append("iv")
        elif _defined_in(index, loop):
            return None
        else:
            key.append(index)
    return tuple(key) if key.count("iv") == 1 else None


def _loads(loop: tile.ForOp, readonly: set[SSAValue]) -> dict[tuple, list[tile.LoadOp]]:
    """The read-only loads directly in the body of `loop`, by element."""
    found: dict[tuple, list[tile.LoadOp]] = {}
    for op in body_ops(loop):
        if isinstance(op, tile.LoadOp) and op.memref in readonly:
            key = _load_key(op, loop)
            if key is not None:
                found.setdefault(key, []).append(op)
    return found


@dataclass
class _Sweeps:
    loops: list[tile.ForOp]
    #: The elements loaded by more than one sweep (what the pass keeps on chip).
    repeated: set[tuple]

    @property
    def first(self) -> tile.ForOp:
        return self.loops[0]


def find_sweeps(kernel: tile.KernelOp) -> _Sweeps | None:
    """The sweeps of the kernel that reread a row (module doc's trigger), if any."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return None
    written = written_buffers(kernel)
    readonly = {arg for arg in kernel.body.block.args if isinstance(arg.type, MemRefType)} - written
    groups: dict[tuple, list[tile.ForOp]] = {}
    for loop in schedule.top_loops(threads):
        key = _sweep_key(loop, threads)
        if key is not None:
            groups.setdefault(key, []).append(loop)
    best: _Sweeps | None = None
    for loops in groups.values():
        if len(loops) < 2:
            continue
        seen: dict[tuple, int] = {}
        for loop in loops:
            for key in _loads(loop, readonly):
                seen[key] = seen.get(key, 0) + 1
        repeated = {key for key, n in seen.items() if n > 1}
        if repeated and (best is None or len(loops) > len(best.loops)):
            best = _Sweeps(loops, repeated)
    return best


# --- registers -------------------------------------------------------------------------------


@dataclass
class _Cell:
    index: SSAValue  # the (clamped) element index of the cell
    valid: SSAValue | None  # None when every thread has the cell


def sweep_cells(sweep: tile.ForOp, pool: ConstantPool) -> list[_Cell]:
    """`%lane + c * S` for each cell, before the first sweep."""
    start, bound, step = sweep.lb, sweep.upper, sweep.step_value
    build = schedule.IndexBuilder(InsertPoint.before(sweep), pool)
    cells: list[_Cell] = []
    for c in range(-(-bound // step)):
        index = build.addi(start, c * step, f"{sweep.induction_var.name_hint or 'k'}{c}")
        if (c + 1) * step <= bound:
            cells.append(_Cell(index, None))
            continue
        valid = build.add(arith.CmpiOp(index, pool.index(bound), "slt"), f"has{c}")
        clamped = build.add(arith.MinSIOp(index, pool.index(bound - 1)), f"in{c}")
        cells.append(_Cell(clamped, valid))
    return cells


def _clone_into(ops: Sequence[Operation], mapper: dict, point: InsertPoint) -> None:
    for op in ops:
        Rewriter.insert_op(op.clone(value_mapper=mapper), point)


def unroll_sweep(loop: tile.ForOp, cells: Sequence[_Cell]) -> None:
    """Replaces a sweep by its cells, in place (see module doc)."""
    point = InsertPoint.before(loop)
    ops = body_ops(loop)
    yielded = loop.body.block.last_op
    assert isinstance(yielded, tile.YieldOp)
    carried = list(loop.inits)
    for cell in cells:
        mapper: dict[SSAValue, SSAValue] = {loop.induction_var: cell.index}
        mapper.update(zip(loop.iter_args, carried, strict=True))
        if loop.is_reduce:
            _clone_into(ops, mapper, point)
            nxt = [mapper.get(v, v) for v in yielded.arguments]
            if cell.valid is not None:
                masked = []
                for new, old in zip(nxt, carried, strict=True):
                    select = arith.SelectOp(cell.valid, new, old)
                    Rewriter.insert_op(select, point)
                    masked.append(select.result)
                nxt = masked
            carried = nxt
        elif cell.valid is None:
            _clone_into(ops, mapper, point)
        else:
            guard = tile.IfOp(cell.valid)
            Rewriter.insert_op(guard, point)
            _clone_into(ops, mapper, InsertPoint.before(guard.body.block.last_op))  # type: ignore[arg-type]
    for old, new in zip(loop.res, carried, strict=True):
        if old.name_hint and new.name_hint is None:
            new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    Rewriter.erase_op(loop)


def share_loads(scope: Operation, readonly: set[SSAValue]) -> None:
    """A read-only load repeated later in the body of `scope` (the threads body, or a loop of
    it; at its top or under `tile.if`) reuses the first load of the same element at the top
    of that body."""
    first: dict[tuple, SSAValue] = {}
    for op in list(scope.regions[0].walk()):
        if not isinstance(op, tile.LoadOp) or op.memref not in readonly:
            continue
        key = (op.memref, *op.indices)
        if key in first:
            op.res.replace_all_uses_with(first[key])
            Rewriter.erase_op(op)
        elif op.parent_op() is scope:
            first[key] = op.res


def keep_in_registers(kernel: tile.KernelOp, sweeps: _Sweeps) -> None:
    threads = schedule.threads_of(kernel)
    assert threads is not None
    pool = ConstantPool.adopting(threads.body.block)
    cells = sweep_cells(sweeps.first, pool)
    readonly = {key[0] for key in sweeps.repeated}
    for loop in sweeps.loops:
        unroll_sweep(loop, cells)  # type: ignore[arg-type]
    share_loads(threads, readonly)  # type: ignore[arg-type]


# --- shared memory ---------------------------------------------------------------------------


def _row_buffer_type(sweeps: _Sweeps, threads: tile.ThreadsOp, element_type) -> MemRefType:
    first = sweeps.first
    return shared_memref(element_type, [threads.count // first.step_value, first.upper])


def keep_in_shared(kernel: tile.KernelOp, sweeps: _Sweeps) -> None:
    threads = schedule.threads_of(kernel)
    assert threads is not None
    pool = ConstantPool.adopting(threads.body.block)
    first = sweeps.first
    step = first.step_value
    top = InsertPoint.before(first)
    build = schedule.IndexBuilder(top, pool)
    slot: SSAValue = pool.index(0)
    if threads.count != step:
        slot = build.add(arith.FloorDivSIOp(threads.iv, pool.index(step)), "slot")
    buffers: dict[tuple, SSAValue] = {}
    for n, key in enumerate(sorted(sweeps.repeated, key=str)):
        element_type = key[0].type.element_type
        alloc = tile.SharedAllocOp(
            _row_buffer_type(sweeps, threads, element_type), "row" if n == 0 else f"row{n}"
        )
        Rewriter.insert_op(alloc, InsertPoint.at_start(threads.body.block))
        buffers[key] = alloc.result
    for index, loop in enumerate(sweeps.loops):
        for key, loads in _loads(loop, {k[0] for k in sweeps.repeated}).items():
            if key not in buffers:
                continue
            for load in loads:
                if index == 0 and load is loads[0]:
                    store = tile.StoreOp(load.res, buffers[key], [slot, loop.induction_var])
                    Rewriter.insert_op(store, InsertPoint.after(load))
                    continue
                new = tile.LoadOp(buffers[key], [slot, loop.induction_var])
                new.res.name_hint = load.res.name_hint
                Rewriter.replace_op(load, new)


def _shared_bytes(sweeps: _Sweeps, threads: tile.ThreadsOp) -> int:
    return sum(
        buffer_bytes(_row_buffer_type(sweeps, threads, key[0].type.element_type))
        for key in sweeps.repeated
    )


def row_on_chip(kernel: tile.KernelOp, max_cells: int) -> None:
    """Keeps the reread row in registers or shared memory (see module doc)."""
    sweeps = find_sweeps(kernel)
    threads = schedule.threads_of(kernel)
    if sweeps is None or threads is None:
        return
    cells = -(-sweeps.first.upper // sweeps.first.step_value)
    fits = _shared_bytes(sweeps, threads) <= MAX_STATIC_SHARED_BYTES - _COMBINE_RESERVE
    derived = REGISTERS if cells <= max_cells else SHARED if fits else NONE
    mode = schedule.read_knob(kernel, "row_on_chip", derived)
    if mode == REGISTERS:
        keep_in_registers(kernel, sweeps)
    elif mode == SHARED and fits:
        keep_in_shared(kernel, sweeps)
    else:
        mode = NONE
    schedule.write_knob(kernel, "row_on_chip", mode)


@dataclass(frozen=True)
class TileRowOnChipPass(Tunable):
    """Rows swept more than once: read from HBM once, kept in registers or shared memory."""

    name = "tile-row-on-chip"
    knobs = ("row_on_chip",)

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return find_sweeps(kernel) is not None and not schedule.has_knob(kernel, "row_on_chip")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(row_on_chip=(NONE, REGISTERS, SHARED))

    #: At most this many elements of the row per thread go to registers.
    max_cells: int = 32

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not schedule.is_tiled_contraction(kernel):
            row_on_chip(kernel, self.max_cells)
