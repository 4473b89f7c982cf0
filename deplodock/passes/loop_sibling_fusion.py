"""`loop-sibling-fusion`: two independent kernels over the same loop nest share one launch.

`loop-fusion` joins a producer to its consumer. Two kernels that do not feed each other but
run over the same elements stay two launches: a decode step writes its new key and its new
value into their caches with two kernels of the same shape (`kv_heads x max_len x
head_dim`), builds the rotary cosines and sines with two more, and projects its token to
keys and to values with two GEMVs of the same shape (`M = 1`: one free loop over the output
columns, a dot product in each). On the GPU each launch has a fixed cost that a decode
step, made of small kernels, pays hundreds of times, so siblings are worth one launch.

Trigger: two launches of the same function with no other launch between them, whose kernels

- are elementwise or row reductions: the body is a chain of free `loop.for`, one per level,
  and every other op has no region and is pure, a `loop.load` or a `loop.store`, or is a
  reduce loop of such ops (a row reduction) under a chain of exactly one free loop (a
  GEMV's columns, a norm's rows);
- have the same chain of loop ranges (start, bound and step at every level);
- are independent: neither writes a buffer the other reads or writes.

Rewrite: one kernel whose arguments are the first kernel's, then those of the second that the
first launch does not already pass; its body is the first kernel's nest with, at every level,
the second kernel's ops of that level added (those before the inner loop before it, the rest
after), the second's loop variables replaced by the first's. Its single launch takes the
second launch's place (every buffer either reads is defined before it). A kernel no launch
runs any more is erased. Each element is still computed by the same ops from the same
inputs; only the two stores of one element now happen in one iteration.

    loop.launch @where_kernel(%pos, %k, %kc, %kc2)     loop.launch @where_kernel(%pos, %k,
    loop.launch @where_kernel_2(%pos, %v, %vc, %vc2)  ==>     %kc, %kc2, %v, %vc, %vc2)

    loop.for %h = 0 to 4 {                                loop.for %h = 0 to 4 {
      loop.for %r = 0 to 1024 { ... store %kc2 }  ==>       loop.for %r = 0 to 1024 {
    }                                                           ... store %kc2
    (and the same nest storing %vc2)                            ... store %vc2 }}

A reduction under two or more free loops (a GEMM's rows and columns) is left alone: two
contractions in one body would no longer be one the tile passes can block. Two GEMVs in one
row body read their vector twice, from L1; their weights, what they stream, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import loop
from deplodock.dialects.effects import is_pure
from deplodock.dialects.queries import (
    kernel_base_name,
    read_arguments,
    unique_name,
    written_arguments,
)
from deplodock.passes.loop_fusion import kernel_of, launches

#: A loop's range: (start, bound, step).
Range = tuple[int, int, int]


@dataclass(frozen=True)
class Nest:
    """A kernel's chain of free loops, outermost first (module doc: what qualifies)."""

    kernel: loop.KernelOp
    loops: tuple[loop.ForOp, ...]

    @property
    def ranges(self) -> tuple[Range, ...]:
        return tuple((f.lower, f.upper, f.step_value) for f in self.loops)


def _plain(op: Operation) -> bool:
    return not op.regions and (is_pure(op) or isinstance(op, (loop.LoadOp, loop.StoreOp)))


def _row_reduction(op: Operation) -> bool:
    """A reduce loop whose body is plain ops (a dot product, a sum of squares)."""
    return (
        isinstance(op, loop.ForOp)
        and op.is_reduce
        and all(_plain(inner) or isinstance(inner, loop.YieldOp) for inner in op.body.block.ops)
    )


def _inner_loop(block: Block) -> loop.ForOp | bool | None:
    """The one free loop of `block` (None if it has none), or False when the block holds
    anything but plain ops, row reductions and one free loop."""
    found: loop.ForOp | None = None
    for op in block.ops:
        if _row_reduction(op):
            continue
        if isinstance(op, loop.ForOp):
            if found is not None or op.is_reduce:
                return False
            found = op
        elif not isinstance(op, (loop.YieldOp, loop.ReturnOp)) and not _plain(op):
            return False
    return found


def sibling_nest(kernel: loop.KernelOp) -> Nest | None:
    """The kernel's loop chain when it qualifies (module doc), else None."""
    chain: list[loop.ForOp] = []
    block = kernel.body.block
    while True:
        inner = _inner_loop(block)
        if inner is False:
            return None
        if inner is None:
            break
        assert isinstance(inner, loop.ForOp)
        chain.append(inner)
        block = inner.body.block
    reduces = any(_row_reduction(op) for op in kernel.walk())
    if not chain or (reduces and len(chain) != 1):
        return None  # rows of a reduction: one free loop (two contractions stay apart)
    return Nest(kernel, tuple(chain))


def _buffers(launch: loop.LaunchOp, kernel: loop.KernelOp) -> tuple[set[SSAValue], set[SSAValue]]:
    """(read, written) host buffers of one launch."""
    return (
        {launch.args[i] for i in read_arguments(kernel)},
        {launch.args[i] for i in written_arguments(kernel)},
    )


def independent(
    first: loop.LaunchOp, k1: loop.KernelOp, second: loop.LaunchOp, k2: loop.KernelOp
) -> bool:
    read1, written1 = _buffers(first, k1)
    read2, written2 = _buffers(second, k2)
    return not (written1 & (read2 | written2)) and not (written2 & read1)


def _insert(ops: Sequence[Operation], point: InsertPoint, mapping: dict) -> None:
    """Clones `ops` at `point`, in order, through `mapping` (which learns their results)."""
    for op in ops:
        clone = op.clone(value_mapper=mapping)
        Rewriter.insert_op(clone, point)
        mapping.update(zip(op.results, clone.results, strict=True))


def _end_of(block: Block) -> InsertPoint:
    """Before the block's terminator, or at its end."""
    last = block.last_op
    if isinstance(last, (loop.YieldOp, loop.ReturnOp)):
        return InsertPoint.before(last)
    return InsertPoint.at_end(block)


def merged_kernel(first: Nest, second: Nest, shared: dict[int, int], name: str) -> loop.KernelOp:
    """The fused kernel (module doc); `shared[j] = i`: argument `j` of the second kernel is
    argument `i` of the first."""
    k1, k2 = first.kernel, second.kernel
    args2 = k2.body.block.args
    extra = [arg for j, arg in enumerate(args2) if j not in shared]
    fused = loop.KernelOp(name, [*k1.arg_types, *(arg.type for arg in extra)])
    block = fused.body.block
    mapping1: dict[SSAValue, SSAValue] = {}
    for new, old in zip(block.args, [*k1.body.block.args, *extra], strict=True):
        new.name_hint = old.name_hint
        mapping1[old] = new
    _insert(list(k1.body.block.ops), InsertPoint.at_end(block), mapping1)
    mapping2 = {
        arg: mapping1[k1.body.block.args[shared[j]]] for j, arg in enumerate(args2) if j in shared
    }
    mapping2.update({arg: mapping1[arg] for arg in extra})
    into = sibling_nest(fused)
    assert into is not None
    targets = [block, *(f.body.block for f in into.loops)]
    sources = [k2.body.block, *(f.body.block for f in second.loops)]
    for depth, (target, source) in enumerate(zip(targets, sources, strict=True)):
        if depth:
            mapping2[second.loops[depth - 1].induction_var] = into.loops[depth - 1].induction_var
        inner = second.loops[depth] if depth < len(second.loops) else None
        ops = [op for op in source.ops if op is not inner]
        ops = [op for op in ops if not isinstance(op, (loop.YieldOp, loop.ReturnOp))]
        before = [op for op in ops if inner is not None and op.is_before_in_block(inner)]
        if before:
            _insert(before, InsertPoint.before(into.loops[depth]), mapping2)
        _insert([op for op in ops if op not in before], _end_of(target), mapping2)
    return fused


def _launched_elsewhere(
    module: ModuleOp, kernel: loop.KernelOp, besides: Sequence[Operation]
) -> bool:
    """Whether a launch other than `besides` runs `kernel`."""
    name = kernel.sym_name.data
    return any(
        isinstance(op, loop.LaunchOp) and op not in besides and op.callee.string_value() == name
        for op in module.walk()
    )


def fuse_pair(
    module: ModuleOp, first: loop.LaunchOp, second: loop.LaunchOp
) -> loop.LaunchOp | None:
    """Fuses two adjacent launches when they qualify (module doc); the fused launch, or None."""
    k1, k2 = kernel_of(module, first), kernel_of(module, second)
    if k1 is None or k2 is None:
        return None
    n1, n2 = sibling_nest(k1), sibling_nest(k2)
    if n1 is None or n2 is None or n1.ranges != n2.ranges:
        return None
    if not independent(first, k1, second, k2):
        return None
    firsts = list(first.args)
    shared = {j: firsts.index(buffer) for j, buffer in enumerate(second.args) if buffer in firsts}
    # The kernels no other launch runs go; the fused one may take the first one's name.
    gone = [
        k for k in dict.fromkeys((k1, k2)) if not _launched_elsewhere(module, k, (first, second))
    ]
    used = {op.sym_name.data for op in module.ops if isinstance(op, loop.KernelOp)}
    used -= {k.sym_name.data for k in gone}
    name = unique_name(f"{kernel_base_name(k1.sym_name.data)}_kernel", used)
    fused = merged_kernel(n1, n2, shared, name)
    extra = [buffer for j, buffer in enumerate(second.args) if j not in shared]
    launch = loop.LaunchOp(name, [*firsts, *extra])
    Rewriter.insert_op(launch, InsertPoint.before(second))
    Rewriter.insert_op(fused, InsertPoint.before(k1))
    for op in (first, second, *gone):
        Rewriter.erase_op(op)
    return launch


def fuse_siblings(module: ModuleOp, func: FuncOp) -> None:
    """Fuses the sibling launches of `func` in one sweep: each fused launch is tried again
    with the launch after it, so a run of siblings becomes one kernel."""
    pending = launches(func)
    if not pending:
        return
    current = pending[0]
    for following in pending[1:]:
        current = fuse_pair(module, current, following) or following


@dataclass(frozen=True)
class LoopSiblingFusionPass(ModulePass):
    """Independent kernels over the same loop nest share a launch (module doc)."""

    name = "loop-sibling-fusion"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.ops if isinstance(f, FuncOp)]:
            fuse_siblings(op, func)
