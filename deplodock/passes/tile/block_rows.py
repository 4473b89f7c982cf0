"""`tile-block-rows`: a block does the work of `R` blocks, reading their shared operand once.

A GEMV (`M = 1`, the decode step's projections) maps one output row to a block: every block
streams its own row of the weights, and every block reads the whole activation vector
again. The weights come from DRAM once; the vector comes from L2 once per row, so for Qwen's
`down_proj` (18944 x 3584, bf16) L2 carries 272 MB to produce 136 MB of compulsory reads,
and the kernel is L2-bound before it is DRAM-bound. Letting one block compute `R`
consecutive rows in a single pass over `K` reads the vector once for all `R`: each thread
loads its element of the vector and multiplies it with `R` rows of the weights (`R`
accumulators in registers, a register tile over rows).

Trigger: a `tile.kernel` whose grid block `%b` is used only inside its one `tile.threads`
body, and whose threads body holds a reduce `tile.for` (straight-line body: loads and pure
ops) reading both an operand that changes with `%b` (the weights' row) and one that does
not (the vector). The other ops of the threads body have no regions (loads, stores, pure
ops, `tile.combine`) or are `tile.if` guards; no loop's range changes with the block. The
grid count `G` must be a multiple of `R`.

Rewrite: the grid shrinks to `G / R` and block `%b` plays old blocks `%b * R + r` for
`r < R`. Every op of the threads body that depends on the block is repeated `R` times, copy
`r` reading `%b * R + r` (the row index, the combine, the store). Each reduce loop becomes
one loop carrying `R` times its accumulators: the ops of its body that do not depend on the
block (the vector's load, its conversion) run once per trip, the others once per row. Old
blocks are independent (`tile.grid`), so running their ops interleaved in one block keeps
every result.

    tile.grid %b to 3584 {                       tile.grid %b to 896 {
      tile.threads %t to 256 {                     tile.threads %t to 256 {
        %p = tile.for %k = %t to 18944 ...  ==>      %b0 = %b * 4, %b1 = %b0 + 1, ...
          %x = tile.load %v[%c0, %k]                 %p0, %p1, %p2, %p3 = tile.for %k ...
          %w = tile.load %W[%b, %k]                    %x = tile.load %v[%c0, %k]
          ... acc + x * w                              %w0 = tile.load %W[%b0, %k] ... %w3
        %s = tile.combine add %p                       ... four accumulators
        tile.store %s, %y[%c0, %b]                 four combines, four stores

Knob `block_rows` on the kernel's `schedule`: `R` (1 leaves the kernel alone). By default
the largest of 8, 4 and 2 that divides `G` and keeps at least `min_blocks` blocks (two per
SM of an H100), so the grid still fills the GPU: a tile that starves the SMs of blocks
loses more bandwidth than the L2 reads it saves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import is_pure
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid

#: The knob: old blocks (rows) per new block (1: the kernel as it was).
KNOB = "block_rows"
#: The tiles the heuristic tries, largest first, and the tuner's grid.
DEFAULT_TILES = (8, 4, 2)
CANDIDATES = (1, 2, 4, 8)


def _uses_of(op: Operation) -> Iterable[SSAValue]:
    """Every value `op` reads, its nested ops' included."""
    for inner in op.walk():
        yield from inner.operands


def _depends(op: Operation, varying: set[SSAValue]) -> bool:
    return any(value in varying for value in _uses_of(op))


def _straight_line(loop: tile.ForOp) -> bool:
    return all(
        not op.regions and (is_pure(op) or isinstance(op, tile.LoadOp))
        for op in loop.body.block.ops
        if not isinstance(op, tile.YieldOp)
    )


def _top_level_allowed(op: Operation) -> bool:
    if isinstance(op, tile.ForOp):
        return op.is_reduce and _straight_line(op)
    if isinstance(op, tile.IfOp):
        return True
    return not op.regions and (
        is_pure(op) or isinstance(op, (tile.LoadOp, tile.StoreOp, tile.CombineOp))
    )


def _shares_an_operand(loop: tile.ForOp, varying: set[SSAValue]) -> bool:
    """The loop reads one operand the same for every block and one that changes with it
    (`varying`: the values that change with the block, defined above the loop)."""
    inside = varying | set(loop.iter_args)
    shared = changing = False
    for op in loop.body.block.ops:
        if _depends(op, inside):
            inside.update(op.results)
            changing |= isinstance(op, tile.LoadOp)
        elif isinstance(op, tile.LoadOp):
            shared = True
    return shared and changing


def candidate(kernel: tile.KernelOp) -> tile.ThreadsOp | None:
    """The kernel's threads body when the pass can tile its blocks (module doc)."""
    threads = schedule.threads_of(kernel)
    if threads is None or kernel.grid.count < 2:
        return None
    row = kernel.grid.iv
    if any(not threads.is_ancestor(use.operation) for use in row.uses):
        return None
    ops = list(threads.body.block.ops)
    if not all(_top_level_allowed(op) for op in ops):
        return None
    varying: set[SSAValue] = {row}
    sharing = False
    for op in ops:
        if isinstance(op, tile.ForOp):
            if op.lb in varying:
                return None  # rows with different ranges cannot share one loop
            sharing |= _shares_an_operand(op, varying)
        if _depends(op, varying):
            varying.update(op.results)
    return threads if sharing else None


def default_rows(count: int, min_blocks: int) -> int:
    """The largest default tile that divides the grid and keeps `min_blocks` blocks."""
    for rows in DEFAULT_TILES:
        if count % rows == 0 and count // rows >= min_blocks:
            return rows
    return 1


def block_rows(kernel: tile.KernelOp, threads: tile.ThreadsOp, rows: int) -> None:
    """Rewrites the kernel so each block does the work of `rows` blocks (module doc)."""
    grid_op = kernel.grid
    block = threads.body.block
    original = list(block.ops)
    pool = ConstantPool.adopting(block)
    first = next(op for op in original if not isinstance(op, arith.ConstantOp))
    build = schedule.IndexBuilder(InsertPoint.before(first), pool)  # after the constants
    base = build.muli(grid_op.iv, rows, name="b0")
    copies: list[dict[SSAValue, SSAValue]] = [
        {grid_op.iv: build.addi(base, r, name=f"b{r}")} for r in range(rows)
    ]
    varying: set[SSAValue] = {grid_op.iv}
    replaced: list[Operation] = []
    for op in original:
        if not _depends(op, varying):
            continue
        if isinstance(op, tile.ForOp):
            _merge_loop(op, copies, varying)
        else:
            for mapping in copies:
                clone = op.clone(value_mapper=mapping)
                Rewriter.insert_op(clone, InsertPoint.before(op))
                mapping.update(zip(op.results, clone.results, strict=True))
        varying.update(op.results)
        replaced.append(op)
    for op in reversed(replaced):  # users first: every use of a result is replaced too
        Rewriter.erase_op(op)
    schedule.set_count(grid_op, grid_op.count // rows)


def _merge_loop(
    loop: tile.ForOp, copies: list[dict[SSAValue, SSAValue]], varying: set[SSAValue]
) -> None:
    """One loop carrying each copy's accumulators; block-independent body ops run once."""
    inits = [mapping.get(init, init) for mapping in copies for init in loop.inits]
    merged = tile.ForOp(loop.lb, loop.upper, loop.step_value, inits)
    merged.attributes.update(loop.attributes)
    Rewriter.insert_op(merged, InsertPoint.before(loop))
    merged.induction_var.name_hint = loop.induction_var.name_hint
    width = len(loop.inits)
    inner = [dict(mapping) for mapping in copies]
    for r, mapping in enumerate(inner):
        mapping[loop.induction_var] = merged.induction_var
        own = merged.iter_args[r * width : (r + 1) * width]
        for old, new in zip(loop.iter_args, own, strict=True):
            mapping[old] = new
            new.name_hint = old.name_hint
    shared: dict[SSAValue, SSAValue] = {loop.induction_var: merged.induction_var}
    inside = varying | set(loop.iter_args)
    target = merged.body.block
    yielded = loop.body.block.last_op
    assert isinstance(yielded, tile.YieldOp)
    for op in loop.body.block.ops:
        if op is yielded:
            continue
        if _depends(op, inside):
            inside.update(op.results)
            for mapping in inner:
                clone = op.clone(value_mapper=mapping)
                target.add_op(clone)
                mapping.update(zip(op.results, clone.results, strict=True))
        else:
            clone = op.clone(value_mapper=shared)
            target.add_op(clone)
            shared.update(zip(op.results, clone.results, strict=True))
            for mapping in inner:
                mapping.update(zip(op.results, clone.results, strict=True))
    target.add_op(tile.YieldOp(*[mapping.get(v, v) for mapping in inner for v in yielded.operands]))
    for r, mapping in enumerate(copies):
        results = merged.results[r * width : (r + 1) * width]
        for old, new in zip(loop.results, results, strict=True):
            new.name_hint = old.name_hint
            mapping[old] = new


@dataclass(frozen=True)
class TileBlockRowsPass(Tunable):
    """A block does the work of `R` blocks, reading their shared operand once (module doc)."""

    name = "tile-block-rows"
    knobs = (KNOB,)

    #: Fewer blocks than this would starve the SMs (two per SM of an H100's 132).
    min_blocks: int = 264

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return not schedule.has_knob(kernel, KNOB) and candidate(kernel) is not None

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(**{KNOB: CANDIDATES})

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        threads = candidate(kernel)
        if threads is None:
            return
        count = kernel.grid.count
        rows = schedule.read_knob(kernel, KNOB, default_rows(count, self.min_blocks))
        if rows <= 1 or count % rows:
            rows = 1  # recorded as not taken (`choices`: the tuner's value is refused)
        if rows > 1:
            block_rows(kernel, threads, rows)
        schedule.write_knob(kernel, KNOB, rows)
