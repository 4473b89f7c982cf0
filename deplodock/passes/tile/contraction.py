"""What the contraction passes ask of a kernel: is it a matmul, and which loops are M, N, K.

A *contraction* is an unscheduled kernel whose loop nest is

    output loops { [recomputable ops] [row statistics]  reduce nest (K) { acc += a * b }  epilogue }

where `a` depends on some output axes and `b` on others. Each free loop is then an **M**
axis (only `a` uses it: the rows of A), an **N** axis (only `b` uses it: the columns of B),
or a **batch** axis (both, or neither). A linear `x[m, k] * w[n, k]` has M = (m), N = (n);
a bmm adds a batch axis; a convolution lowered through an index map has M = (n, oh, ow)
and N = (cout), with K = (cin, kh, kw). Fused prologues (inside `a` or `b`) and epilogues
(bias, activation, residual) ride along unchanged.

A *row statistic* is a reduce loop between the output loops whose value depends on the M
and batch axes only (SDPA's row max and row sum of the scores, fused before `@ V`): it rides
along like a recomputable op until `tile-shared-statistics` computes it once per block row.

`find_contraction` returns this description or None; `tile-block` uses it to tile the
output axes, and the later passes find its structure again through the ops it wrote
(`tile.block_tile`, `tile.thread_tile`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from deplodock.dialects import tile
from deplodock.dialects.element_types import byte_size
from deplodock.dialects.queries import def_chain, written_buffers
from deplodock.dialects.reduce_kind import ReduceKind
from deplodock.passes.tile import schedule
from deplodock.passes.tile.nests import (
    body_ops,
    combiner_of,
    is_hoistable,
    is_serial,
    reduce_chain,
    start_of,
    trip_count,
)

#: Output extents below which a contraction is left to the baseline schedule (a matrix-
#: vector product is better served by threads cooperating along K than by 2-D tiles).
MIN_TILED_EXTENT = 16


@dataclass
class Contraction:
    """The loops of one contraction kernel (see the module docstring)."""

    kernel: tile.KernelOp
    threads: tile.ThreadsOp
    free: list[tile.ForOp]
    reduce: list[tile.ForOp]
    m_axes: list[tile.ForOp]
    n_axes: list[tile.ForOp]
    batch_axes: list[tile.ForOp]
    #: Row statistics (see the module docstring), in program order.
    statistics: list[tile.ForOp] = field(default_factory=list[tile.ForOp])

    @property
    def m(self) -> int:
        return math.prod(trip_count(loop) for loop in self.m_axes)

    @property
    def n(self) -> int:
        return math.prod(trip_count(loop) for loop in self.n_axes)

    @property
    def k(self) -> int:
        return math.prod(trip_count(loop) for loop in self.reduce)

    @property
    def batch(self) -> int:
        return math.prod(trip_count(loop) for loop in self.batch_axes)


def _free_ivs_used(value: SSAValue, free: Sequence[tile.ForOp]) -> set[int]:
    """Which free loops (by position in the nest) `value` is computed from, through the
    bodies of the loops that compute it too: attention's probability is the result of a
    dot product over the head dimension, whose loads use the query and head axes."""
    positions = {loop.induction_var: k for k, loop in enumerate(free)}
    return {positions[v] for v in values_computed_into(value) if v in positions}


def values_computed_into(value: SSAValue) -> set[SSAValue]:
    """`def_chain(value)`, plus, for every loop result on it, the def chains of the values
    its body uses (a nested reduction's loads and their indices)."""
    seen: set[SSAValue] = set()
    work = [value]
    while work:
        for current in def_chain(work.pop()):
            if current in seen:
                continue
            seen.add(current)
            if isinstance(current.owner, Operation):
                work.extend(captured_values(current.owner))
    return seen


def _product_operands(innermost: tile.ForOp) -> tuple[SSAValue, SSAValue] | None:
    """`(a, b)` of a reduce loop carrying exactly `acc = acc + a * b`."""
    if len(innermost.iter_args) != 1:
        return None
    combiner = combiner_of(innermost, 0)
    if combiner is None or combiner.kind is not ReduceKind.ADD:
        return None
    element = combiner.op.operands[1 - combiner.acc_position]
    product = element.owner
    if not isinstance(product, arith.MulfOp):
        return None
    return product.lhs, product.rhs


def _epilogue_is_simple(ops: Sequence[Operation], written: set[SSAValue]) -> bool:
    """Ops after the reduce loop: no regions, and no load of a buffer the kernel writes
    (the passes move stores after every computation of the cell)."""
    for op in ops:
        if op.regions:
            return False
        if isinstance(op, tile.LoadOp) and op.memref in written:
            return False
    return True


def _is_statistic(op: Operation, written: set[SSAValue]) -> bool:
    """A serial reduce loop that stores nothing and reads only buffers the kernel never
    writes: a value per row that may be computed anywhere before its uses."""
    if not isinstance(op, tile.ForOp) or not op.is_reduce or not is_serial(op):
        return False
    inner = [inner for inner in op.walk() if inner is not op]
    return all(isinstance(i, tile.ForOp | tile.YieldOp) or is_hoistable(i, written) for i in inner)


def _output_chain(
    loop: tile.ForOp, written: set[SSAValue]
) -> tuple[list[tile.ForOp], list[tile.ForOp]]:
    """The perfect nest of serial free loops from `loop` (`nests.free_chain`), where a level
    may also hold row statistics beside its one inner free loop; and those statistics."""
    chain, statistics = [loop], []
    while True:
        ops = body_ops(chain[-1])
        free = [op for op in ops if isinstance(op, tile.ForOp) and not op.is_reduce]
        if len(free) != 1 or not is_serial(free[0]):
            return chain, statistics
        others = [op for op in ops if op is not free[0]]
        if not all(is_hoistable(op, written) or _is_statistic(op, written) for op in others):
            return chain, statistics
        statistics += [op for op in others if isinstance(op, tile.ForOp)]
        chain.append(free[0])


def _loop_ivs_used(loop: tile.ForOp, free: Sequence[tile.ForOp]) -> set[int]:
    """Which free loops (by position in the nest) anything inside `loop` is computed from."""
    return {k for op in loop.walk() for v in op.operands for k in _free_ivs_used(v, free)}


def find_contraction(kernel: tile.KernelOp) -> Contraction | None:
    """The contraction structure of an unscheduled kernel, or None."""
    threads = schedule.threads_of(kernel)
    if threads is None or kernel.grid.count != 1:
        return None
    written = written_buffers(kernel)
    top = list(threads.body.block.ops)
    loops = [op for op in top if isinstance(op, tile.ForOp)]
    if len(loops) != 1 or loops[0].is_reduce or not is_serial(loops[0]):
        return None
    if not all(is_hoistable(op, written) for op in top if op is not loops[0]):
        return None
    free, statistics = _output_chain(loops[0], written)
    inner_ops = body_ops(free[-1])
    reduces = [op for op in inner_ops if isinstance(op, tile.ForOp)]
    if len(reduces) != 1 or not reduces[0].is_reduce or not is_serial(reduces[0]):
        return None
    red = reduce_chain(reduces[0], written)
    if any(start_of(loop) != 0 or loop.step_value != 1 for loop in red):
        return None
    operands = _product_operands(red[-1])
    if operands is None:
        return None
    after = inner_ops[inner_ops.index(reduces[0]) + 1 :]
    before = inner_ops[: inner_ops.index(reduces[0])]
    if not all(is_hoistable(op, written) for op in before):
        return None
    if not _epilogue_is_simple(after, written):
        return None
    uses_a = _free_ivs_used(operands[0], free)
    uses_b = _free_ivs_used(operands[1], free)
    m_axes = [loop for k, loop in enumerate(free) if k in uses_a and k not in uses_b]
    n_axes = [loop for k, loop in enumerate(free) if k in uses_b and k not in uses_a]
    batch = [loop for loop in free if loop not in m_axes and loop not in n_axes]
    n_positions = {free.index(loop) for loop in n_axes}
    if any(_loop_ivs_used(stat, free) & n_positions for stat in statistics):
        return None  # a value per output column is no row statistic
    found = Contraction(kernel, threads, free, red, m_axes, n_axes, batch, statistics)
    if found.m < MIN_TILED_EXTENT or found.n < MIN_TILED_EXTENT:
        return None
    return found


def nested_product(loop: tile.ForOp) -> tuple[int, int] | None:
    """(length, widest element bytes) of the dot product a K loop computes an operand with
    (attention in one kernel: the score `q . k` over the head dimension), or None. A chunk
    loop carrying the K loop's accumulators is not one."""
    carried = list(loop.iter_args)
    nested = [
        (
            trip_count(op),
            max(
                (byte_size(i.res.type) for i in op.walk() if isinstance(i, tile.LoadOp)), default=4
            ),
        )
        for op in body_ops(loop)
        if isinstance(op, tile.ForOp) and op.is_reduce and list(op.inits) != carried
    ]
    return max(nested) if nested else None


# --- finding the tiled form again ------------------------------------------------------------


def block_tile_of(kernel: tile.KernelOp) -> tile.BlockTileOp | None:
    """The kernel's `tile.block_tile` (written by `tile-block`)."""
    return next((op for op in kernel.grid.body.block.ops if isinstance(op, tile.BlockTileOp)), None)


def thread_tiles_of(threads: tile.ThreadsOp) -> list[tile.ThreadTileOp]:
    """The `tile.thread_tile` ops of a block (written by `tile-thread`), M side first."""
    found = [op for op in threads.body.block.ops if isinstance(op, tile.ThreadTileOp)]
    return sorted(found, key=lambda op: op.axis)


def k_loop_of(threads: tile.ThreadsOp) -> tile.ForOp | None:
    """The register-tiled reduce loop: the last top-level reduce loop of the block (row
    statistics, where `tile-shared-statistics` left them to each thread, come before it)."""
    reduces = [op for op in schedule.top_loops(threads) if op.is_reduce]
    return reduces[-1] if reduces else None


def defined_in(value: SSAValue, block: Block) -> bool:
    """Whether `value` is defined by an op (or is an argument) of `block` or nested in it."""
    owner_block = value.block if isinstance(value, BlockArgument) else value.owner.parent_block()
    while owner_block is not None:
        if owner_block is block:
            return True
        parent = owner_block.parent_op()
        owner_block = parent.parent_block() if parent is not None else None
    return False


def block_slice(values: Iterable[SSAValue], threads: tile.ThreadsOp) -> list[Operation]:
    """The ops inside the block that `values` are computed from, in program order
    (constants of the block's top level, the thread tiles and shared arrays excluded: they
    stay shared). What a pass clones to compute a value again for another cell or row."""
    found: dict[Operation, None] = {}
    work = list(values)
    while work:
        value = work.pop()
        if isinstance(value, BlockArgument):
            continue
        op = value.owner
        if op in found or not defined_in(value, threads.body.block):
            continue
        if isinstance(op, tile.ThreadTileOp | tile.SharedAllocOp):
            continue
        if isinstance(op, arith.ConstantOp) and op.parent_block() is threads.body.block:
            continue
        found[op] = None
        work.extend(op.operands)
        work.extend(captured_values(op))
    return sorted(found, key=program_order)


def captured_values(op: Operation) -> list[SSAValue]:
    """The values the ops nested in `op`'s regions use but `op` does not define: what a
    loop computing a value (attention's dot product inside a fused prologue) reads from
    around it, so that cloning the loop elsewhere must bring them (or their replacements)."""
    if not op.regions:
        return []
    return [
        value
        for inner in op.walk()
        if inner is not op
        for value in inner.operands
        if not any(defined_in(value, block) for region in op.regions for block in region.blocks)
    ]


def program_order(op: Operation) -> tuple[int, ...]:
    """A key that orders ops of nested blocks as they appear in the program text."""
    path: list[int] = []
    current: Operation | None = op
    while current is not None and current.parent_block() is not None:
        block = current.parent_block()
        path.insert(0, block.get_operation_index(current))  # type: ignore[union-attr]
        current = block.parent_op()  # type: ignore[union-attr]
    return tuple(path)


def operand_bytes(kernel: tile.KernelOp) -> int:
    """Bytes per element of the contraction's operands: the widest global load of its K
    loop (fused prologues and casts included)."""
    sizes = [
        byte_size(op.res.type)
        for loop in kernel.walk()
        if isinstance(loop, tile.ForOp) and loop.is_reduce
        for op in loop.body.block.ops
        if isinstance(op, tile.LoadOp)
    ]
    return max(sizes, default=4)


def tensor_core_product(kernel: tile.KernelOp) -> bool:
    """Whether `mma.sync` can compute the contraction: fp32 sums of products of two bf16 (or
    two f16) values, m16n8k16; or of two fp32 values, which `tile-mma` splits into tf32
    pairs for three m16n8k8 MMAs with fp32-level accuracy (`common/mma.split_tf32`)."""
    return sixteen_bit_product(kernel) or fp32_product(kernel)


def accumulated_product(acc: SSAValue, update: SSAValue) -> arith.MulfOp | None:
    """The product `p` of a reduction step `update = acc + p`, if `p` is a `mulf`."""
    add = update.owner
    if not isinstance(add, arith.AddfOp) or acc not in add.operands:
        return None
    product = add.operands[1] if add.operands[0] is acc else add.operands[0]
    return product.owner if isinstance(product.owner, arith.MulfOp) else None


def fp32_product(kernel: tile.KernelOp) -> bool:
    """Whether the contraction sums, in fp32, products of two fp32 values: a reduce loop
    carries `acc + a * b` with `a` and `b` computed in fp32 (read, or a fused prologue such
    as `silu(gate) * up`, which `tile-stage` computes into the slab), not widened from
    16 bits."""
    for loop in kernel.walk():
        if not isinstance(loop, tile.ForOp) or not loop.is_reduce or not loop.iter_args:
            continue
        yielded = loop.body.block.last_op
        assert yielded is not None
        for acc, update in zip(loop.iter_args, yielded.operands, strict=False):
            mul = accumulated_product(acc, update)
            if (
                mul is not None
                and isinstance(mul.result.type, Float32Type)
                and not any(isinstance(v.owner, arith.ExtFOp) for v in mul.operands)
            ):
                return True
    return False


def sixteen_bit_product(kernel: tile.KernelOp) -> bool:
    """Whether the contraction sums, in fp32, products of two bf16 (or two f16) values:
    what `mma.sync` m16n8k16 computes."""
    for loop in kernel.walk():
        if not isinstance(loop, tile.ForOp) or not loop.is_reduce:
            continue
        for op in loop.body.block.ops:
            if isinstance(op, arith.MulfOp) and isinstance(op.result.type, Float32Type):
                sources = [operand.owner for operand in op.operands]
                if all(isinstance(s, arith.ExtFOp) for s in sources):
                    types = {s.input.type for s in sources}  # type: ignore[union-attr]
                    if len(types) == 1 and isinstance(types.pop(), BFloat16Type | Float16Type):
                        return True
    return False
