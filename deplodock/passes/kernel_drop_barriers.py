"""`kernel-drop-barriers`: remove the `kernel.barrier`s that order no memory access.

A barrier (`__syncthreads()`) is needed only when an access before it and an access after it
may touch the same buffer, at least one of them a write, from different threads: a shared
array published by one thread and read by another (read after write), or read by some
threads and then overwritten (write after read). The lowerings insert barriers locally and
safely (`tile.combine` puts one after its fold over the partials so a next combine may reuse
`%red`), so some order nothing: the last barrier of a kernel, two barriers in a row.

Trigger: a `kernel.barrier` such that no access that can run since the previous barrier
(or the kernel start) conflicts with an access that can run until the next barrier (or the
kernel end). Conflict: the same buffer (a `kernel.shared_alloc` or a kernel argument; the
arguments do not alias, as their `__restrict__` says) and at least one store. Global
buffers count too, since `__syncthreads()` also orders global memory within a block (the
barrier between two inlined `tile.threads` regions may be what orders them). An op whose
memory effects are unknown conflicts with everything.

Control flow is taken conservatively. The kernel becomes a small flow graph: a `kernel.if`
body may run or be skipped; a `kernel.for` body may run zero or more times, and its end
wraps to its start, so a barrier inside a loop sees the accesses of the loop's other
iterations on both sides. "Before" is every access from which the barrier is reached with no
barrier in between, "after" every access reached from it likewise. Barriers are examined in
program order and the graph rebuilt after each removal, so two barriers with nothing between
them become one, and the barrier removed never leaves two conflicting accesses unordered.

Rewrite: the barrier is erased.

    // RMSNorm after convert-tile-to-kernel: the combine's second barrier lets a later
    // combine reuse %red, but nothing touches %red (or any buffer written) after it.
    kernel.if %is_lane0 {                            kernel.if %is_lane0 {
      kernel.store %add_warp, %red[%warp]              kernel.store %add_warp, %red[%warp]
    }                                                }
    kernel.barrier                                   kernel.barrier
    %add = kernel.for %wid = %c0 to 8 ...     ==>    %add = kernel.for %wid = %c0 to 8 ...
      %add_part = kernel.load %red[%wid]               %add_part = kernel.load %red[%wid]
    ...                                              ...
    kernel.barrier                                   kernel.for %i2 = %t to 2048 step 256 {
    kernel.for %i2 = %t to 2048 step 256 {             ... loads of %x0, a store to %out
      ... loads of %x0, a store to %out
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.traits import MemoryAllocEffect

from deplodock.dialects import kernel
from deplodock.dialects.common import LoadOpBase, StoreOpBase
from deplodock.dialects.effects import is_pure

#: The key of an op whose memory effects are unknown: it conflicts with every access.
ANY_BUFFER = None


@dataclass
class _Node:
    """A point of the flow graph: an access, a barrier, or a branch/join (neither)."""

    succ: list[int] = field(default_factory=list)
    pred: list[int] = field(default_factory=list)
    barrier: kernel.BarrierOp | None = None
    #: (buffer, is_write) of an access; buffer ANY_BUFFER for an unknown op.
    access: tuple[SSAValue | None, bool] | None = None


def _memory_access(op: Operation) -> tuple[SSAValue | None, bool] | None:
    """What `op` (without regions) does to memory: (buffer, is_write) or None for nothing."""
    if isinstance(op, LoadOpBase | kernel.LdmatrixOp):
        return op.memref, False
    if isinstance(op, StoreOpBase):
        return op.memref, True
    if is_pure(op):
        return None
    if op.has_trait(MemoryAllocEffect) or isinstance(
        op, kernel.ShflXorOp | kernel.MmaSyncOp | kernel.YieldOp | kernel.ReturnOp
    ):
        return None  # a shared array's declaration; register exchanges; terminators
    return ANY_BUFFER, True


class _FlowGraph:
    """The kernel body as a graph of accesses and barriers (see the module doc)."""

    def __init__(self, func: kernel.FuncOp):
        self.nodes: list[_Node] = []
        self.exit = self._new()
        self.entry = self._ops(func.body.block.ops, self.exit)
        for index, node in enumerate(self.nodes):
            for succ in node.succ:
                self.nodes[succ].pred.append(index)

    def _new(self, *succ: int) -> int:
        self.nodes.append(_Node(list(succ)))
        return len(self.nodes) - 1

    def _ops(self, ops: Iterable[Operation], after: int) -> int:
        """Nodes for `ops` in order, continuing to `after`; returns the first node."""
        current = after
        for op in reversed(list(ops)):
            current = self._op(op, current)
        return current

    def _blocks(self, op: Operation) -> list[Block]:
        return [block for region in op.regions for block in region.blocks]

    def _op(self, op: Operation, after: int) -> int:
        if isinstance(op, kernel.BarrierOp):
            node = self._new(after)
            self.nodes[node].barrier = op
            return node
        if isinstance(op, kernel.IfOp):  # the body runs, or not
            (block,) = self._blocks(op)
            return self._new(self._ops(block.ops, after), after)
        if op.regions:  # kernel.for (or any op with regions): zero or more runs of each body
            head = self._new(after)
            for block in self._blocks(op):
                self.nodes[head].succ.append(self._ops(block.ops, head))
            return head
        access = _memory_access(op)
        if access is None:
            return after
        node = self._new(after)
        self.nodes[node].access = access
        return node

    def _reach(self, start: int, forward: bool) -> list[tuple[SSAValue | None, bool]]:
        """The accesses reached from barrier `start` (forward or backward) before a barrier."""
        seen: set[int] = set()
        found: list[tuple[SSAValue | None, bool]] = []
        work = list(self.nodes[start].succ if forward else self.nodes[start].pred)
        while work:
            index = work.pop()
            if index in seen:
                continue
            seen.add(index)
            node = self.nodes[index]
            if node.barrier is not None:
                continue
            if node.access is not None:
                found.append(node.access)
            work.extend(node.succ if forward else node.pred)
        return found

    def barriers(self) -> list[int]:
        return [i for i, node in enumerate(self.nodes) if node.barrier is not None]

    def orders_something(self, barrier: int) -> bool:
        """Whether an access before `barrier` conflicts with one after it."""
        before = self._reach(barrier, forward=False)
        after = self._reach(barrier, forward=True)
        return any(_conflict(a, b) for a in before for b in after)


def _conflict(a: tuple[SSAValue | None, bool], b: tuple[SSAValue | None, bool]) -> bool:
    (buf_a, write_a), (buf_b, write_b) = a, b
    same = buf_a is ANY_BUFFER or buf_b is ANY_BUFFER or buf_a is buf_b
    return same and (write_a or write_b)


def drop_barriers(func: kernel.FuncOp) -> int:
    """Erases the barriers of `func` that order nothing; returns how many."""
    dropped = 0
    kept: set[kernel.BarrierOp] = set()
    while True:
        graph = _FlowGraph(func)
        for index in graph.barriers():
            barrier = graph.nodes[index].barrier
            assert barrier is not None
            if barrier in kept:
                continue
            if graph.orders_something(index):
                kept.add(barrier)
                continue
            Rewriter.erase_op(barrier)
            dropped += 1
            break  # the graph changed: rebuild it
        else:
            return dropped


@dataclass(frozen=True)
class KernelDropBarriersPass(ModulePass):
    """Erases every `kernel.barrier` that orders no conflicting accesses (see module doc)."""

    name = "kernel-drop-barriers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, kernel.FuncOp)]:
            drop_barriers(func)
