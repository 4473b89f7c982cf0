"""`tile-stage`: a contraction's operands go through shared memory, one K chunk at a time.

Trigger: a kernel that `tile-chunk-k` has chunked (knob `bk`). In its `ki` loop, every
global load whose address depends on `ki` and on exactly one register cell of one
`tile.thread_tile` (a row cell: operand **a**, a column cell: operand **b**) is a candidate;
loads that compute the same address for different cells form one *stage*.

Rewrite, per stage: a shared slab `tile.shared_alloc` holds the whole block tile's rows (or
columns) for one chunk: E x BK elements, E = BM (or BN). At the top of each `ko` iteration
the block's threads copy the chunk cooperatively (a loop strided over the threads; its
addresses are the load's own index arithmetic with the cell replaced by the slab row and
`ki` by the slab column, so fused prologues, clamps and convolution windows come along), a
`tile.barrier` publishes it, the `ki` loop reads the slab instead of global memory, and a
second barrier keeps the next copy from overwriting what slower threads still read. Each
element of A is then read from global memory once per block instead of once per thread
column that uses it. The slab keeps the global order of its innermost index (`[E][BK]`
when the load's last index moves with K, else `[BK][E]`), so copies are coalesced.

    tile.for %ko ... {                          %a_s = tile.shared_alloc : memref<64x16xf32, 3>
      tile.for %ki ... {                        tile.for %ko ... {
        %a = tile.load %x[%m_0, %k]   ==>         tile.for %l = %t to 1024 step 256 { copy }
        ...                                       tile.barrier
                                                  tile.for %ki ... {
                                                    %a = tile.load %a_s[%mm_0, %ki] }
                                                  tile.barrier

A *fused prologue* is staged as its value: when a product's row (or column) operand is
computed elementwise from global loads of that row (`silu(gate) * up` feeding the MLP's down
projection), the copy loads the inputs and computes the operand, and the slab holds the
result. The prologue then runs once per element and block, not once per thread column in
the `ki` loop (16x fewer `exp`s for a 16 x 16 thread grid), and one slab replaces one per
input. A trailing `extf` stays in the `ki` loop, so a bf16 prologue keeps a bf16 slab; a
bare cast (`extf(load)`) is no prologue and is staged as the load it is.

Knob (`schedule`): `stage`, a bit mask of the operands staged (1 = a, 2 = b; default 3).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import erase_dead, is_pure
from deplodock.dialects.hardware import MAX_SHARED_BYTES, is_shared, shared_memref
from deplodock.dialects.queries import def_chain_reaches, indices_reach
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.contraction import (
    block_slice,
    captured_values,
    defined_in,
    thread_tiles_of,
)
from deplodock.passes.tile.nests import body_ops
from deplodock.passes.tile.shared_statistics import STATISTICS_ATTR

#: Operand names and their bit in the `stage` knob.
OPERAND_BITS: dict[str, int] = {"a": 1, "b": 2}


@dataclass
class Candidate:
    """What one cell of the `ki` loop reads from a chunk: a global load, or (a fused
    prologue) a value computed elementwise from global loads of the same row or column."""

    root: Operation
    cell: SSAValue
    tile_op: tile.ThreadTileOp
    signature: tuple

    @property
    def value(self) -> SSAValue:
        return self.root.results[0]


@dataclass
class Stage:
    """Candidates that read the same slab (one per cell) and the slab that replaces them."""

    operand: str
    members: list[Candidate] = field(default_factory=list)

    @property
    def template(self) -> Candidate:
        return self.members[0]


def _cells_used(ops: Iterable[Operation]) -> list[tuple[SSAValue, int]]:
    """The thread-tile cells (and their axes) the operands of `ops` use."""
    found: dict[SSAValue, int] = {}
    for value in (v for op in ops for v in op.operands):
        owner = value.owner
        if isinstance(owner, tile.ThreadTileOp):
            found[value] = owner.axis
    return list(found.items())


def _depends_on(ops: list[Operation], value: SSAValue) -> bool:
    return any(value in op.operands for op in ops)


def _signature(ops: list[Operation], cell: SSAValue, ki: SSAValue) -> tuple:
    """The computation `ops` with the cell abstracted: equal for the cells of one slab."""
    names: dict[SSAValue, str] = {cell: "cell", ki: "ki"}

    def name(value: SSAValue) -> str:
        if value not in names:
            names[value] = f"v{len(names)}" if not _is_leaf(value, ops) else f"leaf{id(value)}"
        return names[value]

    parts = []
    for op in ops:
        props = tuple(sorted((k, str(v)) for k, v in op.properties.items()))
        parts.append((op.name, props, tuple(name(v) for v in op.operands)))
        for result in op.results:
            name(result)
    return tuple(parts)


def _is_leaf(value: SSAValue, ops: list[Operation]) -> bool:
    return isinstance(value, BlockArgument) or value.owner not in ops


def find_stages(ki_loop: tile.ForOp, threads: tile.ThreadsOp) -> list[Stage]:
    """Candidate loads of the `ki` loop grouped into stages (see the module docstring)."""
    roots = [op for op in body_ops(ki_loop) if isinstance(op, tile.LoadOp)]
    return _group(roots, ki_loop, threads)


def find_prologue_stages(ki_loop: tile.ForOp, threads: tile.ThreadsOp) -> list[Stage]:
    """Fused prologues of the `ki` loop grouped into stages (see the module docstring)."""
    roots: dict[Operation, None] = {}
    for op in body_ops(ki_loop):
        if not isinstance(op, arith.MulfOp):
            continue
        axes = [_axes(v, threads) for v in op.operands]
        if sorted(axes, key=sorted) != [frozenset({0}), frozenset({1})]:
            continue
        for value in op.operands:
            if (root := _prologue_root(value, ki_loop, threads)) is not None:
                roots[root] = None
    return _group(list(roots), ki_loop, threads)


def _axes(value: SSAValue, threads: tile.ThreadsOp) -> frozenset[int]:
    """The thread-tile axes (0: rows, 1: columns) a value depends on."""
    ops = block_slice([value], threads)
    return frozenset(axis for _, axis in _cells_used(ops))


def _prologue_root(
    value: SSAValue, ki_loop: tile.ForOp, threads: tile.ThreadsOp
) -> Operation | None:
    """The op computing a product operand from global loads with arithmetic beyond a cast
    (silu(gate) * up), or None. A trailing `extf` stays out (the slab keeps the narrow type)."""
    while isinstance(value.owner, arith.ExtFOp):
        value = value.owner.input
    root = value.owner
    if not isinstance(root, Operation) or isinstance(root, tile.LoadOp):
        return None
    if root.parent_block() is not ki_loop.body.block:
        return None
    ops = [*block_slice(root.operands, threads), root]
    if not all(_computes_in_copy(op) for op in ops):
        return None
    loads = {op.res for op in ops if isinstance(op, tile.LoadOp)}
    computed = _dependent_ops(ops, loads)
    casts = (arith.ExtFOp, arith.TruncFOp)
    return root if any(not isinstance(op, casts) for op in computed) else None


def _computes_in_copy(op: Operation) -> bool:
    """Whether a copy may compute `op` for a slab element: a pure op, a read of a global
    input or of the row statistics, or a loop of those (the dot product that gives
    attention's score in a fused prologue: the copy computes it once per element and block,
    where the `ki` loop would compute it once per thread column)."""
    if isinstance(op, tile.ForOp):
        return all(
            isinstance(inner, tile.YieldOp) or _computes_in_copy(inner)
            for inner in op.body.block.ops
        )
    return is_pure(op) or _global_load(op) or _statistic_load(op)


def _global_load(op: Operation) -> bool:
    return isinstance(op, tile.LoadOp) and not is_shared(op.memref.type)


def _statistic_load(op: Operation) -> bool:
    """A read of the row statistics `tile-shared-statistics` keeps in shared memory: written
    before the K loop, so the copy may read it like a global input."""
    return (
        isinstance(op, tile.LoadOp)
        and isinstance(alloc := op.memref.owner, tile.SharedAllocOp)
        and STATISTICS_ATTR in alloc.attributes
    )


def _group(roots: list[Operation], ki_loop: tile.ForOp, threads: tile.ThreadsOp) -> list[Stage]:
    """The roots that read one row (or column) cell's chunk, grouped by what they compute."""
    ki = ki_loop.induction_var
    stages: dict[tuple, Stage] = {}
    for root in roots:
        if isinstance(root, tile.LoadOp) and is_shared(root.memref.type):
            continue
        ops = [*block_slice(root.operands, threads), root]
        cells = _cells_used(ops)
        if len(cells) != 1 or not _depends_on(ops, ki):
            continue
        cell, axis = cells[0]
        tile_op = cell.owner
        assert isinstance(tile_op, tile.ThreadTileOp)
        signature = (axis, _signature(ops, cell, ki))
        operand = "a" if axis == 0 else "b"
        stage = stages.setdefault(signature, Stage(operand))
        stage.members.append(Candidate(root, cell, tile_op, signature))
    return list(stages.values())


def _innermost_moves_with_k(load: tile.LoadOp, ki: SSAValue) -> bool:
    """Whether the load's last index depends on `ki` (then the slab is `[E][BK]`)."""
    return def_chain_reaches(load.indices[-1], lambda v: v is ki)


def _streamed_load(loads: list[tile.LoadOp], ki: SSAValue) -> tile.LoadOp:
    """The load that sets the slab's order: the first whose address moves with `ki`. A
    prologue also loads per-row values (the row max and sum of a softmax before `@ V`),
    read once per row whatever the order; the streamed operand is what must coalesce."""
    return next((load for load in loads if indices_reach(load.indices, ki)), loads[0])


def _loads_of(root: Operation, ops: list[Operation]) -> list[tile.LoadOp]:
    """The global loads a candidate copies: the load itself, or those of its prologue."""
    if isinstance(root, tile.LoadOp):
        return [root]
    return [op for op in ops if isinstance(op, tile.LoadOp)]


def build_stage(
    stage: Stage,
    ko_loop: tile.ForOp,
    ki_loop: tile.ForOp,
    threads: tile.ThreadsOp,
    pool: ConstantPool,
    copy_point: InsertPoint,
) -> tile.SharedAllocOp:
    template = stage.template
    tile_op = template.tile_op
    extent = tile_op.cell_count * tile_op.thread_grid[tile_op.axis]
    bk = ki_loop.upper
    ki = ki_loop.induction_var
    ops = [*block_slice(template.root.operands, threads), template.root]
    loads = _loads_of(template.root, ops)
    k_inner = _innermost_moves_with_k(_streamed_load(loads, ki), ki)
    shape = [extent, bk] if k_inner else [bk, extent]
    element = template.value.type
    buffer = _slab_name(_computed_loads(ops) or loads)
    alloc = tile.SharedAllocOp(shared_memref(element, shape), f"{buffer}_{stage.operand}_s")
    alloc.attributes["stage"] = StringAttr(stage.operand)
    Rewriter.insert_op(alloc, _after_leading_constants(threads))
    # The copy: a loop over the slab strided over the block's threads.
    copy = tile.ForOp(threads.iv, extent * bk, threads.count, [])
    copy.induction_var.name_hint = "l"
    copy.body.block.add_op(tile.YieldOp())
    Rewriter.insert_op(copy, copy_point)
    body = schedule.IndexBuilder(InsertPoint.before(copy.body.block.last_op), pool)  # type: ignore[arg-type]
    lin = copy.induction_var
    inner_extent = shape[1]
    outer = body.add(arith.DivSIOp(lin, pool.index(inner_extent)), "row")
    inner = body.add(arith.RemSIOp(lin, pool.index(inner_extent)), "col")
    position, kk = (outer, inner) if k_inner else (inner, outer)
    mapping: dict[SSAValue, SSAValue] = {template.cell: position, ki: kk}
    needs_clone = _dependent_ops(ops, {template.cell, ki})
    needs_clone |= {op for op in ops if defined_in(op.results[0], ko_loop.body.block)}
    for op in ops:
        if op in needs_clone:
            clone = op.clone(value_mapper=mapping)
            body.add(clone)
            for old, new in zip(op.results, clone.results, strict=True):
                mapping[old] = new
                new.name_hint = old.name_hint
    value = mapping[template.value]
    value.name_hint = f"{buffer}_v"
    slot = [position, kk] if k_inner else [kk, position]
    Rewriter.insert_op(tile.StoreOp(value, alloc.result, slot), body.point)
    # The ki loop reads the slab.
    for member in stage.members:
        read_at = [member.cell, ki] if k_inner else [ki, member.cell]
        read = tile.LoadOp(alloc.result, read_at)
        read.res.name_hint = member.value.name_hint
        Rewriter.insert_op(read, InsertPoint.before(member.root))
        member.value.replace_all_uses_with(read.res)
    return alloc


def _computed_loads(ops: list[Operation]) -> list[tile.LoadOp]:
    """When a prologue computes a dot product (attention's scores), the global loads inside
    it, once per buffer: the slab is named after what the product reads (`x0_x1_a_s`), not
    after the row statistics beside it."""
    if not any(op.regions for op in ops):
        return []
    found: dict[SSAValue, tile.LoadOp] = {}
    for op in ops:
        for inner in op.walk():
            if isinstance(inner, tile.LoadOp) and _global_load(inner):
                found.setdefault(inner.memref, inner)
    return list(found.values())


def _slab_name(loads: list[tile.LoadOp]) -> str:
    """The slab's name: its buffer's (`x0_a_s`), the two buffers' of a prologue over two
    (`x0_x1_a_s`), or `prologue` over more (a bias and RoPE tables would make a paragraph)."""
    names = [load.memref.name_hint or "buf" for load in loads]
    return "_".join(names) if len(names) <= 2 else "prologue"


def _after_leading_constants(threads: tile.ThreadsOp) -> InsertPoint:
    """Where block-level allocations go: after the constants that lead the body (so the
    constant pools of later passes keep finding them)."""
    last = None
    for op in threads.body.block.ops:
        if not isinstance(op, arith.ConstantOp):
            break
        last = op
    if last is None:
        return InsertPoint.at_start(threads.body.block)
    return InsertPoint.after(last)


def _dependent_ops(ops: list[Operation], roots: set[SSAValue]) -> set[Operation]:
    """The ops of `ops` that (transitively) use one of `roots`."""
    tainted = set(roots)
    found: set[Operation] = set()
    for op in ops:
        if any(v in tainted for v in (*op.operands, *captured_values(op))):
            found.add(op)
            tainted.update(op.results)
    return found


def stage_operands(kernel: tile.KernelOp, mask: int) -> int:
    """Stages the operands selected by `mask`; returns the mask of those staged."""
    threads = schedule.threads_of(kernel)
    if threads is None or not thread_tiles_of(threads):
        return 0
    ko_loop = next(
        (op for op in schedule.top_loops(threads) if op.is_reduce and _chunked(op)), None
    )
    if ko_loop is None or any(_is_slab(op) for op in threads.body.ops):
        return 0
    ki_loop = next(op for op in body_ops(ko_loop) if isinstance(op, tile.ForOp))
    pool = ConstantPool.adopting(threads.body.block)
    copy_point = InsertPoint.before(ki_loop)
    built: list[Stage] = []
    for find in (find_prologue_stages, find_stages):
        stages = [s for s in find(ki_loop, threads) if OPERAND_BITS[s.operand] & mask]
        for stage in stages:
            build_stage(stage, ko_loop, ki_loop, threads, pool, copy_point)
        erase_dead(list(ki_loop.body.block.ops))
        built += stages
    if not built:
        return 0
    Rewriter.insert_op(tile.BarrierOp(), InsertPoint.before(ki_loop))
    Rewriter.insert_op(tile.BarrierOp(), InsertPoint.after(ki_loop))
    erase_dead(list(threads.body.block.ops))
    _check_shared_budget(kernel, threads)
    staged = 0
    for stage in built:
        staged |= OPERAND_BITS[stage.operand]
    return staged


def _is_slab(op: Operation) -> bool:
    """A shared array this pass made (the block is staged already)."""
    return isinstance(op, tile.SharedAllocOp) and "stage" in op.attributes


def _chunked(loop: tile.ForOp) -> bool:
    inner = [op for op in body_ops(loop) if isinstance(op, tile.ForOp)]
    return len(inner) == 1 and inner[0].is_reduce


def _check_shared_budget(kernel: tile.KernelOp, threads: tile.ThreadsOp) -> None:
    used = tile.shared_bytes(threads)
    if used > MAX_SHARED_BYTES:
        raise PassFailedException(
            f"tile-stage: kernel @{kernel.sym_name.data} needs {used} bytes of shared memory "
            f"for its stages, more than the {MAX_SHARED_BYTES} a block may have "
            "(choose smaller bm/bn/bk)"
        )


@dataclass(frozen=True)
class TileStagePass(Tunable):
    """Chunked contractions: operands copied through shared memory (see the module doc).

    `operands` lists what to stage (`a`, `b` or `a,b`); a kernel's `stage` knob wins.
    """

    name = "tile-stage"
    knobs = ("stage",)

    operands: str = "a,b"

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return schedule.has_knob(kernel, "bk") and not schedule.has_knob(kernel, "stage")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(stage=(0, 1, 2, 3))  # bit masks: none, a, b, both

    def check_options(self) -> None:
        self.requested_mask()

    def requested_mask(self) -> int:
        """The `operands` option as a bit mask of `OPERAND_BITS`."""
        requested = 0
        for name in filter(None, (part.strip() for part in self.operands.split(","))):
            if name not in OPERAND_BITS:
                raise PassFailedException(
                    f"tile-stage: unknown operand '{name}' (expected a, b or a,b)"
                )
            requested |= OPERAND_BITS[name]
        return requested

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not schedule.has_knob(kernel, "bk"):
            return
        mask = schedule.read_knob(kernel, "stage", self.requested_mask())
        stage_operands(kernel, mask)
        schedule.write_knob(kernel, "stage", mask)
