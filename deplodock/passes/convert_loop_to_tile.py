"""`convert-loop-to-tile`: the baseline schedule of every `loop.kernel` onto blocks/threads.

Each kernel gets one of two schedules, chosen by whether it reduces:

- **elementwise** (no loop with iter_args): one thread per element of each top-level nest
  of free loops, grid-stride. With `N` the nest's element count, `T = block_size` and
  `G = min(ceil(N / T), max_blocks)`, each thread runs
  `tile.for %lin = b*T + t to N step G*T` and delinearizes `%lin` into the nest's ivs.
  Sibling nests (concat) get one such loop each, in the same threads region.
- **reduction**: one block per *row*, the free loops enclosing the reductions (`%b` is
  delinearized into their ivs). In the row body a reduce loop becomes a cooperative strided
  loop `tile.for %k = %t to K step T iter_args(identity)` plus one `tile.combine` per
  result; a free loop becomes a strided `tile.for %j = %t to J step T` (loops inside it stay
  serial per thread); scalar code runs redundantly on every thread. `T` fits the largest
  loop of the row body: `min(block_size, max(32, next_pow2(K)))`.

Perfect nests (see `schedule_utils`) are flattened into one linear loop either way. A reduce
loop whose carried value is not a plain `acc = acc <op> x` stays serial on every thread.
`loop.alloc` / `loop.launch` become `tile.alloc` / `tile.launch`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import loop, tile
from deplodock.passes.schedule_utils import (
    Combiner,
    Emitter,
    body_ops,
    combine_kind,
    free_chain,
    identity_attr,
    is_hoistable,
    is_identity,
    next_power_of_two,
    reduce_chain,
    stored_buffers,
    trip_counts,
)

WARP = 32


@dataclass
class KernelScheduler:
    """Builds the `tile.kernel` for one `loop.kernel` (one call of `schedule`)."""

    kernel: loop.KernelOp
    block_size: int
    max_blocks: int

    def __post_init__(self) -> None:
        self.stored = stored_buffers(self.kernel)
        self.top_ops = [
            op for op in self.kernel.body.block.ops if not isinstance(op, loop.ReturnOp)
        ]

    def schedule(self) -> tile.KernelOp:
        new = tile.KernelOp(self.kernel.sym_name.data, self.kernel.arg_types)
        for old, arg in zip(self.kernel.body.block.args, new.body.block.args, strict=True):
            arg.name_hint = old.name_hint
        mapping: dict[SSAValue, SSAValue] = dict(
            zip(self.kernel.body.block.args, new.body.block.args, strict=True)
        )
        reduces = any(isinstance(op, loop.ForOp) and op.is_reduce for op in self.kernel.walk())
        grid = self._reduction(mapping) if reduces else self._elementwise(mapping)
        new.body.block.add_ops([grid, tile.ReturnOp()])
        return new

    # -- elementwise ---------------------------------------------------------------------------

    def _elementwise(self, mapping: dict[SSAValue, SSAValue]) -> tile.GridOp:
        self._check_siblings_independent()
        nests = [free_chain(op, self.stored) for op in self.top_ops if isinstance(op, loop.ForOp)]
        sizes = [math.prod(trip_counts(nest)) for nest in nests]
        threads_count = self.block_size if nests else WARP
        blocks = min(max(1, -(-max(sizes, default=1) // threads_count)), self.max_blocks)
        grid, threads = _grid_and_threads(blocks, threads_count)
        emit = Emitter(threads.body.block, mapping)
        start: SSAValue | None = None
        for op in self.top_ops:
            if not isinstance(op, loop.ForOp):
                emit.clone(op)
                continue
            if start is None:
                base = emit.muli(grid.iv, threads_count)
                start = emit.addi(base, threads.iv, name="start")
            nest = nests.pop(0)
            self._strided_nest(emit, nest, start, blocks * threads_count)
        emit.finish_constants(threads.body.block)
        return grid

    def _check_siblings_independent(self) -> None:
        """Sibling nests run concurrently: none may read what an earlier one writes."""
        written: set[SSAValue] = set()
        for op in self.top_ops:
            ops = list(op.walk())
            read = {o.memref for o in ops if isinstance(o, loop.LoadOp)}
            if clash := read & written:
                name = next(iter(clash)).name_hint or "a buffer"
                raise PassFailedException(
                    f"convert-loop-to-tile: @{self.kernel.sym_name.data} reads %{name} after a "
                    "sibling loop nest writes it (needs a grid-wide barrier)"
                )
            written |= {o.memref for o in ops if isinstance(o, loop.StoreOp)}

    # -- reduction -----------------------------------------------------------------------------

    def _rows(self) -> tuple[list[loop.ForOp], list[Operation]]:
        """The free nest enclosing the reductions, and the ops of the row body."""
        loops = [op for op in self.top_ops if isinstance(op, loop.ForOp)]
        others = [op for op in self.top_ops if not isinstance(op, loop.ForOp)]
        if (
            len(loops) != 1
            or loops[0].is_reduce
            or not all(is_hoistable(op, self.stored) for op in others)
        ):
            return [], self.top_ops
        rows = free_chain(loops[0], self.stored)
        return rows, body_ops(rows[-1])

    def _reduction(self, mapping: dict[SSAValue, SSAValue]) -> tile.GridOp:
        rows, row_body = self._rows()
        work = [self._loop_work(op) for op in row_body if isinstance(op, loop.ForOp)]
        threads_count = min(self.block_size, max(WARP, next_power_of_two(max(work, default=1))))
        grid, threads = _grid_and_threads(math.prod(trip_counts(rows)), threads_count)
        emit = Emitter(threads.body.block, mapping)
        if rows:
            emit.clone_ops(op for op in self.top_ops if op is not rows[0])
            emit.delinearize(grid.iv, rows)
            emit.clone_prologues(rows)
        for op in row_body:
            if isinstance(op, loop.ForOp) and op.is_reduce:
                self._cooperative_reduce(emit, op, threads.iv, threads_count)
            elif isinstance(op, loop.ForOp):
                self._strided_nest(emit, free_chain(op, self.stored), threads.iv, threads_count)
            else:
                emit.clone(op)
        emit.finish_constants(threads.body.block)
        return grid

    def _loop_work(self, op: loop.ForOp) -> int:
        chain = reduce_chain(op, self.stored) if op.is_reduce else free_chain(op, self.stored)
        return math.prod(trip_counts(chain))

    def _cooperative_reduce(
        self, emit: Emitter, op: loop.ForOp, tid: SSAValue, threads_count: int
    ) -> None:
        chain = reduce_chain(op, self.stored)
        innermost = chain[-1]
        combiners = [combine_kind(innermost, p) for p in range(len(op.inits))]
        if not all(combiners):
            emit.serial_for(op)  # not a plain reduction: every thread runs it whole
            return
        kinds: list[Combiner] = [c for c in combiners if c is not None]
        identities: list[SSAValue] = []
        for combiner, init in zip(kinds, op.inits, strict=True):
            if is_identity(init, combiner.kind):
                identities.append(emit.mapping.get(init, init))
                continue
            const = arith.ConstantOp(identity_attr(combiner.kind, init.type))
            identities.append(emit.add(const, name="identity").results[0])
        size = math.prod(trip_counts(chain))
        new = tile.ForOp(tid, size, threads_count, identities)
        emit.add(new)
        lin = new.body.block.args[0]
        lin.name_hint = innermost.induction_var.name_hint if len(chain) == 1 else "lin"
        body = emit.at(new.body.block)
        body.delinearize(lin, chain)
        body.clone_prologues(chain)
        for old, arg in zip(innermost.iter_args, new.body.block.args[1:], strict=True):
            arg.name_hint = old.name_hint
            emit.mapping[old] = arg
        body.clone_ops(innermost.body.block.ops)
        for combiner, partial, init, result in zip(kinds, new.res, op.inits, op.res, strict=True):
            partial.name_hint = f"{result.name_hint}_p" if result.name_hint else None
            combined = emit.add(tile.CombineOp(combiner.kind, partial)).results[0]
            if not is_identity(init, combiner.kind):
                acc = combine_operand_acc(combiner, innermost)
                other = next(v for v in combiner.op.operands if v is not acc)
                folded = combiner.op.clone(
                    value_mapper={acc: emit.mapping.get(init, init), other: combined}
                )
                combined = emit.add(folded).results[0]
            combined.name_hint = result.name_hint
            emit.mapping[result] = combined

    # -- shared --------------------------------------------------------------------------------

    def _strided_nest(
        self, emit: Emitter, nest: Sequence[loop.ForOp], start: SSAValue, stride: int
    ) -> None:
        """`tile.for %lin = start to N step stride { delinearize; nest body }`."""
        new = tile.ForOp(start, math.prod(trip_counts(nest)), stride)
        emit.add(new)
        lin = new.body.block.args[0]
        single = len(nest) == 1 and nest[0].lower == 0 and nest[0].step_value == 1
        lin.name_hint = nest[0].induction_var.name_hint if single else "lin"
        body = emit.at(new.body.block)
        body.delinearize(lin, nest)
        body.clone_prologues(nest)
        body.clone_ops(nest[-1].body.block.ops)


def combine_operand_acc(combiner: Combiner, innermost: loop.ForOp) -> SSAValue:
    """The operand of the combining op that is an iter_arg of `innermost`."""
    carried = set(innermost.iter_args)
    return next(v for v in combiner.op.operands if v in carried)


def _grid_and_threads(blocks: int, threads_count: int) -> tuple[tile.GridOp, tile.ThreadsOp]:
    grid = tile.GridOp(blocks)
    grid.iv.name_hint = "b"
    threads = tile.ThreadsOp(threads_count)
    threads.iv.name_hint = "t"
    grid.body.block.add_op(threads)
    return grid, threads


@dataclass
class ScheduleKernel(RewritePattern):
    block_size: int
    max_blocks: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.KernelOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, KernelScheduler(op, self.block_size, self.max_blocks).schedule())


class LowerAlloc(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.AllocOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, tile.AllocOp(op.res.type))  # the replace keeps the name hint


class LowerLaunch(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.LaunchOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, tile.LaunchOp(op.callee, op.args))


@dataclass(frozen=True)
class ConvertLoopToTilePass(ModulePass):
    """Schedules every `loop.kernel` onto blocks and threads (the baseline schedule)."""

    name = "convert-loop-to-tile"

    block_size: int = 256
    max_blocks: int = 1024

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.block_size % WARP or not 0 < self.block_size <= tile.MAX_THREADS:
            raise PassFailedException(
                f"convert-loop-to-tile: block_size {self.block_size} must be a multiple of 32 "
                "in [32, 1024]"
            )
        if self.max_blocks < 1:
            raise PassFailedException("convert-loop-to-tile: max_blocks must be >= 1")
        patterns = [ScheduleKernel(self.block_size, self.max_blocks), LowerAlloc(), LowerLaunch()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(op)
        if left := next((o for o in op.walk() if o.dialect_name() == "loop"), None):
            raise PassFailedException(f"convert-loop-to-tile: {left.name} left after the pass")
