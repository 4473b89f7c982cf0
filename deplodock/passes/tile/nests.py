"""What the scheduling passes ask of a kernel's loops: nests, trip counts and reductions.

After `convert-loop-to-tile` every loop of a `tile.kernel` is *serial*: a `tile.for` whose
start is a constant, run whole by every thread. A scheduling pass maps some of them onto
blocks or threads; these helpers find which:

- a *chain* is a perfect nest: a loop whose body is one inner loop plus ops that are safe to
  recompute per iteration (`arith`/`math`, loads of buffers the kernel never writes), so the
  whole nest can be flattened into one linear index and delinearized (`free_chain` for free
  loops, `reduce_chain` for reduce loops that pass their accumulators straight down);
- `combiner_of` tells whether a reduce loop's carried value is `acc = acc <op> x` with `acc`
  used nowhere else, so that its iterations may be split between threads and the partial
  results combined with `tile.combine`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue

from deplodock.dialects import tile
from deplodock.dialects.effects import is_pure
from deplodock.dialects.queries import constant_index
from deplodock.dialects.reduce_kind import ReduceKind


def is_serial(loop: tile.ForOp) -> bool:
    """A loop every thread runs whole: its start is a constant, not a thread or block id."""
    return constant_index(loop.lb) is not None


def start_of(loop: tile.ForOp) -> int:
    """The constant start of a serial loop."""
    start = constant_index(loop.lb)
    assert start is not None, "not a serial tile.for"
    return start


def trip_count(loop: tile.ForOp) -> int:
    """Iterations of a serial loop."""
    return max(0, -(-(loop.upper - start_of(loop)) // loop.step_value))


def trip_counts(chain: Sequence[tile.ForOp]) -> list[int]:
    return [trip_count(loop) for loop in chain]


def chain_size(chain: Sequence[tile.ForOp]) -> int:
    """Iterations of a whole flattened nest."""
    return math.prod(trip_counts(chain))


def body_ops(loop: tile.ForOp) -> list[Operation]:
    """The ops of a loop body without its terminator."""
    return [op for op in loop.body.block.ops if not isinstance(op, tile.YieldOp)]


def is_recurrence(loop: tile.ForOp) -> bool:
    """A loop that carries values *and* stores inside (a scan): each iteration's store
    depends on all before it, so it stays serial in one thread, never split."""
    return loop.is_reduce and any(isinstance(op, tile.StoreOp) for op in loop.walk())


def has_reduce_loop(kernel: tile.KernelOp) -> bool:
    """Whether some loop of the kernel carries values that threads may split (the kernel
    reduces); a kernel whose only carried loops are recurrences is scheduled like an
    elementwise one, a thread per independent recurrence."""
    return any(
        isinstance(op, tile.ForOp) and op.is_reduce and not is_recurrence(op)
        for op in kernel.walk()
    )


def is_hoistable(op: Operation, written: set[SSAValue]) -> bool:
    """True when `op` may be recomputed at will: a pure op, or a read-only load."""
    if isinstance(op, tile.LoadOp):
        return op.memref not in written
    return is_pure(op)


def _single_child_loop(loop: tile.ForOp, written: set[SSAValue]) -> tile.ForOp | None:
    loops = [op for op in body_ops(loop) if isinstance(op, tile.ForOp)]
    others = [op for op in body_ops(loop) if not isinstance(op, tile.ForOp)]
    if len(loops) != 1 or not is_serial(loops[0]):
        return None
    if not all(is_hoistable(op, written) for op in others):
        return None
    return loops[0]


def free_chain(loop: tile.ForOp, written: set[SSAValue]) -> list[tile.ForOp]:
    """The perfect nest of serial free loops starting at the serial free loop `loop`."""
    chain = [loop]
    while (child := _single_child_loop(chain[-1], written)) is not None and not child.is_reduce:
        chain.append(child)
    return chain


def reduce_chain(loop: tile.ForOp, written: set[SSAValue]) -> list[tile.ForOp]:
    """The perfect nest of reduce loops starting at `loop` that can be flattened.

    Each inner loop must take the outer loop's iter_args as its inits and the outer loop
    must yield the inner results, with only hoistable ops (not using the iter_args) beside.
    """
    chain = [loop]
    while True:
        outer = chain[-1]
        child = _single_child_loop(outer, written)
        if child is None or not child.is_reduce:
            return chain
        carried = set(outer.iter_args)
        yielded = outer.body.block.last_op
        assert isinstance(yielded, tile.YieldOp)
        if (
            list(child.inits) != list(outer.iter_args)
            or list(yielded.arguments) != list(child.res)
            or any(v in carried for op in body_ops(outer) if op is not child for v in op.operands)
        ):
            return chain
        chain.append(child)


def loop_work(loop: tile.ForOp, written: set[SSAValue]) -> int:
    """Iterations of the nest a serial loop heads (what a thread mapping divides)."""
    return chain_size(reduce_chain(loop, written) if loop.is_reduce else free_chain(loop, written))


@dataclass(frozen=True)
class Combiner:
    """How one carried value of a reduce loop combines: `acc = op(acc, x)`."""

    kind: ReduceKind
    op: Operation
    #: Which operand of `op` is the accumulator (the other is the new element).
    acc_position: int


def combiner_of(innermost: tile.ForOp, position: int) -> Combiner | None:
    """The combiner of iter_arg `position` of a reduce loop, if it is a plain reduction.

    Requires `yield op(acc, x)` where `acc` (the iter_arg) has no other use and the
    combined value feeds only the yield, so partial results over any split of the
    iterations combine to the same value (up to rounding).
    """
    acc = innermost.iter_args[position]
    yielded = innermost.body.block.last_op
    assert isinstance(yielded, tile.YieldOp)
    value = yielded.arguments[position]
    op = value.owner
    if not isinstance(op, Operation) or (kind := ReduceKind.of_combiner(type(op))) is None:
        return None
    if op.parent_block() is not innermost.body.block or not value.has_one_use():
        return None
    if list(op.operands).count(acc) != 1 or not acc.has_one_use():
        return None
    return Combiner(kind, op, list(op.operands).index(acc))


def is_plain_reduction(loop: tile.ForOp, written: set[SSAValue]) -> bool:
    """Whether every value the reduce nest headed by `loop` carries is a plain reduction
    (`combiner_of`), so that threads may split its iterations and combine."""
    innermost = reduce_chain(loop, written)[-1]
    return all(combiner_of(innermost, p) is not None for p in range(len(loop.inits)))


def is_identity(value: SSAValue, kind: ReduceKind) -> bool:
    """True when `value` is an `arith.constant` holding the identity of `kind`."""
    owner = value.owner
    if not isinstance(owner, arith.ConstantOp):
        return False
    return owner.value == kind.identity_attr(value.type)


def next_power_of_two(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))
