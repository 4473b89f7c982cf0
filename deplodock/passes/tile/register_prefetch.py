"""`tile-register-prefetch`: load the next chunk of a register-staged operand before the
arithmetic of the current one, and store it to shared memory after.

Trigger: a pipelined contraction (`tile-pipeline`) with an operand that cannot be copied with
`cp.async` because it is *computed* on its way into shared memory: a fused prologue such as
`silu(gate) * up` feeding a linear. Its copy loop loads from global memory, computes, and
stores to the next slot, all before the chunk's arithmetic. The store needs the loaded value,
so every thread waits out the full global-memory latency (hundreds of cycles) once per chunk
with nothing else to do: measured on an H200, `silu_mul_down` at Qwen2.5-7B's shape took 2.4x
the time of the same linear without the prologue.

Rewrite: the copy loop is unrolled (each thread's share of the chunk, `elements / threads`
iterations, rounded up: in a partial round the threads past the end load a valid element
again and skip the store) and split in two. The loads move before the chunk's arithmetic,
with the K offset clamped to the last chunk so that they stay in bounds past it; the
prologue's arithmetic and the stores, still guarded by `has_next`, move after it. The loads
are in flight while the FMAs run, as with `cp.async`, at the cost of the loaded values'
registers.

    tile.if %has_next {                       %k = min(%ko_next, K - BK)
      tile.for %l = %t to 256 step 256 {      %g, %u = tile.load_vector ...[%k + ...]
        %g, %u = tile.load_vector ...   ==>   tile.if %has_next { cp.async of the other operand }
        %v = silu(%g) * %u                    compute the current slot
        tile.store_vector %v, %a_s[...]       tile.if %has_next {
      }                                         %v = silu(%g) * %u
      cp.async of the other operand             tile.store_vector %v, %a_s[%slot_next, ...]
    }                                         }
    compute the current slot

The slot written is the one the previous chunk read: every thread has passed the chunk's
barrier, so nobody still reads it, and the next chunk's barrier orders the stores before its
reads (the race detector checks both at the tile and kernel levels).

When (the default heuristic): a thread with at least `min_cells` accumulators (FM x FN,
16 by default). Such a kernel runs one or two blocks per SM, too few warps to hide a stalled
load behind others: the prefetch is what hides it (the 8 x 8 tiles of the measured case). A
smaller register tile runs at high occupancy, where other warps hide the latency, and there
the extra live registers push ptxas past the 64 registers it targets for full occupancy: the
bf16 TinyLlama s32 kernel (2 x 4 cells) spilled 8 bytes.

Knob (`schedule`): `register_prefetch` (1 = on, 0 = off; the heuristic when absent), written
only on kernels that have a register-staged copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid

#: The attribute that marks the guard of the stores this pass moved after the arithmetic.
MARK = "register_prefetch"


@dataclass
class _Prefetch:
    """The pieces of one pipelined K loop this pass rearranges."""

    threads: tile.ThreadsOp
    ko: tile.ForOp
    guard: tile.IfOp
    compute: tile.ForOp
    ko_next: SSAValue
    copies: list[tile.ForOp]


def _is_register_copy(loop: tile.ForOp, thread: SSAValue, threads: int) -> bool:
    """A copy loop this pass can split: each thread takes every `threads`-th element from its
    own id, and the body is straight-line code ending in its one store (to the shared slab),
    with no asynchronous copy."""
    if loop.lb is not thread or loop.step_value != threads:
        return False
    if loop.body.block.args[1:] or any(op.regions for op in loop.body.block.ops):
        return False
    ops = [op for op in loop.body.block.ops if not isinstance(op, tile.YieldOp)]
    stores = [op for op in ops if isinstance(op, tile.StoreOp | tile.StoreVectorOp)]
    return (
        len(stores) == 1
        and ops[-1] is stores[0]
        and not any(isinstance(op, tile.CopyAsyncOp) for op in ops)
    )


def _find(kernel: tile.KernelOp) -> _Prefetch | None:
    threads = schedule.threads_of(kernel)
    if threads is None:
        return None
    for guard in threads.walk():
        if not (isinstance(guard, tile.IfOp) and "prefetch" in guard.attributes):
            continue
        ko, compute = guard.parent_op(), guard.next_op
        while compute is not None and not isinstance(compute, tile.ForOp):
            compute = compute.next_op  # past `tile.async_commit`
        has_next = guard.cond.owner
        if not (
            isinstance(ko, tile.ForOp)
            and isinstance(compute, tile.ForOp)
            and compute.is_reduce
            and isinstance(has_next, arith.CmpiOp)
        ):
            return None
        thread, count = threads.iv, threads.count
        copies = [
            op
            for op in guard.body.block.ops
            if isinstance(op, tile.ForOp) and _is_register_copy(op, thread, count)
        ]
        if any(not _is_index_math(op) for op in _setup(guard)):
            copies = []  # something with an effect runs beside the copies: leave it be
        return _Prefetch(threads, ko, guard, compute, has_next.lhs, copies)
    return None


def _clone_before(ops: list[Operation], mapping: dict[SSAValue, SSAValue], point: InsertPoint):
    """Clones `ops` (in order) at `point`, extending `mapping` with their results."""
    for op in ops:
        clone = op.clone(value_mapper=mapping)
        Rewriter.insert_op(clone, point)


def prefetch(found: _Prefetch) -> None:
    """Splits each register copy loop around the arithmetic (see the module docstring)."""
    pool = ConstantPool.adopting(found.threads.body.block)
    before = InsertPoint.before(found.guard)
    build = schedule.IndexBuilder(before, pool)
    last_start = found.ko.upper - found.ko.step_value
    ko_safe = build.add(arith.MinSIOp(found.ko_next, pool.index(last_start)), "ko_load")
    # Everything the copies use from the guard's body (index math), recomputed from ko_safe.
    setup = _setup(found.guard)
    mapping: dict[SSAValue, SSAValue] = {found.ko_next: ko_safe}
    _clone_before(setup, mapping, before)
    stores = tile.IfOp(found.guard.cond)
    stores.attributes[MARK] = IntegerAttr(1, 64)
    Rewriter.insert_op(stores, InsertPoint.after(found.compute))
    at_stores = InsertPoint.before(stores.body.block.last_op)  # type: ignore[arg-type]
    thread, count = found.threads.iv, found.threads.count
    for loop in found.copies:
        body = [op for op in loop.body.block.ops if not isinstance(op, tile.YieldOp)]
        for i in range(-(-loop.upper // count)):
            element = build.addi(thread, i * count, loop.induction_var.name_hint)
            iteration = dict(mapping)
            target = at_stores
            if (i + 1) * count > loop.upper:  # a partial round: some threads have no element
                last = pool.index(loop.upper - 1)
                iteration[loop.induction_var] = build.add(arith.MinSIOp(element, last), "l_load")
                in_range = arith.CmpiOp(element, pool.index(loop.upper), "slt")
                in_range.result.name_hint = "has_element"
                Rewriter.insert_op(in_range, before)
                partial = tile.IfOp(in_range)
                Rewriter.insert_op(partial, at_stores)
                target = InsertPoint.before(partial.body.block.last_op)  # type: ignore[arg-type]
            else:
                iteration[loop.induction_var] = element
            early = _load_slice(body)
            _clone_before([op for op in body if op in early], iteration, before)
            _clone_before([op for op in body if op not in early], iteration, target)
        Rewriter.erase_op(loop)
    for op in reversed(setup):  # index math only the moved copies used
        if all(not result.uses for result in op.results):
            Rewriter.erase_op(op)
    if _is_empty(found.guard.body.block):
        Rewriter.erase_op(found.guard)


def _load_slice(body: list[Operation]) -> set[Operation]:
    """The global loads of a copy body and the index math they need: what runs early. The
    prologue's arithmetic on the loaded values waits, next to the store, until after the
    chunk's arithmetic: placed before it, its first use of a loaded value would stall the
    thread just as the store did."""
    inside = set(body)
    needed: set[Operation] = set()
    work = [op for op in body if isinstance(op, tile.LoadOp | tile.LoadVectorOp)]
    while work:
        op = work.pop()
        if op in needed:
            continue
        needed.add(op)
        work += [
            v.owner for v in op.operands if isinstance(v.owner, Operation) and v.owner in inside
        ]
    return needed


def _setup(guard: tile.IfOp) -> list[Operation]:
    """The guard's ops besides its copy loops: the index math of the chunk's start."""
    return [op for op in guard.body.block.ops if not isinstance(op, tile.ForOp | tile.YieldOp)]


def _is_index_math(op: Operation) -> bool:
    return op.dialect_name() == "arith" and not op.regions


def _is_empty(block: Block) -> bool:
    return all(isinstance(op, tile.YieldOp) for op in block.ops)


@dataclass(frozen=True)
class TileRegisterPrefetchPass(Tunable):
    """Register-staged operands loaded one chunk ahead of their store (module doc)."""

    name = "tile-register-prefetch"
    knobs = ("register_prefetch",)

    enable: bool = True
    #: The heuristic: prefetch when a thread keeps at least this many accumulators.
    min_cells: int = 16

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        found = _find(kernel)
        return found is not None and bool(found.copies) and not schedule.has_knob(kernel, MARK)

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(register_prefetch=(0, 1))

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        found = _find(kernel)
        if found is None or not found.copies:
            return
        cells = schedule.read_knob(kernel, "fm", 1) * schedule.read_knob(kernel, "fn", 1)
        default = int(self.enable and cells >= self.min_cells)
        on = schedule.read_knob(kernel, MARK, default)
        if on:
            prefetch(found)
        schedule.write_knob(kernel, MARK, int(bool(on)))
