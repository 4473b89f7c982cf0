"""`tile-cooperative-reduce`: all threads of a block share a reduction, then combine.

Trigger: a serial reduce loop (nest) at the top of a threads body whose every carried value
is a plain reduction `acc = acc <op> x` (`nests.combiner_of`: add, mul, max, min).

Rewrite: the nest is flattened and strided over the `T` threads of the block; each thread
accumulates a partial result from the kind's identity, and one `tile.combine` per carried
value reduces the partials over the block (every thread gets the total). A loop whose
initial value is not the identity folds it in once, after the combine. A reduction that is
not plain (`acc = acc * 0.5 + x`) stays serial on every thread.

    %sum = tile.for %k = %c0 to 2048              %sum_p = tile.for %k = %t to 2048 step 256
        iter_args(%acc = %zero) -> (f32) {   ==>      iter_args(%acc = %zero) -> (f32) { ... }
      ...                                         %sum = tile.combine add %sum_p : f32
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.queries import written_buffers
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.kernel_pass import TileKernelPass
from deplodock.passes.tile.nests import Combiner, combiner_of, is_identity, is_serial, reduce_chain


def _identities(kinds: list[Combiner], loop: tile.ForOp) -> list[SSAValue]:
    """Each partial starts from the kind's identity (the loop's own init when it is one)."""
    starts: list[SSAValue] = []
    for combiner, init in zip(kinds, loop.inits, strict=True):
        if is_identity(init, combiner.kind):
            starts.append(init)
            continue
        const = arith.ConstantOp(combiner.kind.identity_attr(init.type))
        const.result.name_hint = "identity"
        Rewriter.insert_op(const, InsertPoint.before(loop))
        starts.append(const.result)
    return starts


def cooperative_reduce(
    loop: tile.ForOp,
    threads: tile.ThreadsOp,
    written: set[SSAValue],
    start: SSAValue | None = None,
    step: int | None = None,
    width: int | None = None,
) -> None:
    """Splits one serial reduce nest over the threads and combines (see module doc).

    By default over all threads of the block (`start` = thread id, `step` = block size); a
    group of threads per row (`tile-rows`) passes its lane, its group size and the
    combine's segment `width`.
    """
    chain = reduce_chain(loop, written)
    innermost = chain[-1]
    found = [combiner_of(innermost, p) for p in range(len(loop.inits))]
    kinds = [c for c in found if c is not None]
    if len(kinds) != len(found):
        return  # not a plain reduction: every thread runs it whole
    constants = ConstantPool.adopting(threads.body.block)
    strided = schedule.flatten_into(
        chain,
        threads.iv if start is None else start,
        threads.count if step is None else step,
        constants,
        _identities(kinds, loop),
    )
    point = InsertPoint.after(strided)
    for combiner, partial, init, result in zip(
        kinds, strided.res, loop.inits, loop.res, strict=True
    ):
        partial.name_hint = f"{result.name_hint}_p" if result.name_hint else None
        combined: SSAValue = _insert(tile.CombineOp(combiner.kind, partial, width), point)
        point = InsertPoint.after(combined.owner)  # type: ignore[arg-type]
        if not is_identity(init, combiner.kind):
            # `acc <op> x` once more, outside: the init in place of acc, the total for x.
            acc = combiner.op.operands[combiner.acc_position]
            element = combiner.op.operands[1 - combiner.acc_position]
            folded = combiner.op.clone(value_mapper={acc: init, element: combined})
            combined = _insert(folded, point)
            point = InsertPoint.after(folded)
        combined.name_hint = result.name_hint
        result.replace_all_uses_with(combined)
    Rewriter.erase_op(loop)


def _insert(op: Operation, point: InsertPoint) -> SSAValue:
    Rewriter.insert_op(op, point)
    return op.results[0]


@dataclass(frozen=True)
class TileCooperativeReducePass(TileKernelPass):
    """Top-level plain reductions: strided over the block's threads + `tile.combine`."""

    name = "tile-cooperative-reduce"

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        threads = schedule.threads_of(kernel)
        if threads is None or schedule.is_tiled_contraction(kernel):
            return
        written = written_buffers(kernel)
        for loop in schedule.top_loops(threads):
            if loop.is_reduce and is_serial(loop):
                cooperative_reduce(loop, threads, written)
        schedule.drop_unused_constants(threads)
