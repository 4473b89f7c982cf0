"""`loop-fusion`: producer/consumer fusion of loop kernels by inlining (recompute).

For a consumer kernel C and a buffer B that C loads and an earlier kernel P writes, every
`loop.load B[e...]` in C is replaced by a clone of P's computation of that element: P's ops
with P's free induction variables substituted by `e`. Launches are visited from the last one
back to the first, so a consumer pulls in its producers one lifted kernel at a time and the
guard judges each recomputation in the consumer's final loop order. (Visiting in program
order lets a broadcast absorb a whole matmul before its consumer's loop order is known; in
relu(x @ w1) @ w2 that materialises the broadcast product instead of x @ w1.)
Each cloned op is placed at the outermost position of C where its operands are defined, so
work that depends only on a row index (a reduction over the row, say) runs once per row,
outside C's inner loops. Afterwards identical ops and reduce loops of a block are merged,
dead ops removed, and P's launch, kernel and buffer go away once nothing else reads B.

P qualifies when it writes B with exactly one store whose indices are P's free-loop ivs
(each loop `0 to dim`, each dim an iv or the constant 0 for a size-1 dim), so P computes
each element of B independently (other outputs beside B are fine if P reads none of them).
The guard `max-recompute` bounds the recomputation: a fusion is kept only if
work(fused) <= max_recompute * (work(C) + work(P)), where work is the sum over ops of the
product of their enclosing trip counts, and only if it recomputes no reduction: the number
of reduce-loop iterations may not grow (a row statistic placed once per row is fine; a
matmul redone for every element of its consumer is not). A P with reduce loops
is not cloned while another kernel also reads B (or B is returned): P would stay and its
reductions run twice. It is tried again once those readers have been fused away, so a
softmax still becomes one kernel while a matmul with two consumers is computed once. The
exception is a consumer that reduces over the same rows and runs before B's other readers
(`_takes_over`): it computes P's value, stores it to B as P did, and P's launch goes, so the
row max and row sum of a softmax before `@ V` are one kernel with two outputs.
Nor is a P with reduce loops fused where its value feeds a contraction (`_contraction_operand`:
a norm before a linear) over more than `MAX_RECOMPUTING_COLUMNS` output columns: the row
statistic would be recomputed for every block of columns. The statistic stays a kernel of its
own; the elementwise steps after it still fuse, as the contraction's prologue. Over fewer
columns (a softmax before `@ V`, whose head dimension is 64 or 128), a statistic read once per
row fuses where the product has rows enough to block (`_row_statistic`, option
`row-statistics`): it sits between the contraction's output loops, where `tile-block` keeps
it and `tile-shared-statistics` computes it once per block row.
Nor, past `MAX_RECOMPUTING_COLUMNS` output columns, is a producer with per-element `exp`,
`log` or division that reads the output of an earlier reduction (`_costly_prologue`): the
tile passes would redo that math for every block of columns, and the earlier kernel takes
it as its epilogue instead (the MLP's silu goes with the gate projection; `* up` still
fuses into the down projection).
Nor is an elementwise producer fused into a contraction too thin to tile, fewer than
`MIN_TILED_EXTENT` rows over more than `MAX_RECOMPUTING_COLUMNS` columns (a decode step's
projection, `M = 1`), when recomputing it for every column reads `MIN_REREAD_BYTES` more than
writing it once (`_rereads_per_column`: RMSNorm's normalized row before a GEMV).
A kernel left with a buffer it no longer touches drops it, at its launch too
(`DropUnusedArguments`), so the launch that wrote the buffer goes if nothing else reads it.
A fused kernel is named after its main work and its output (`fused_names.py`):
`linear_silu_kernel`, `linear_add_kernel`, not after the op whose kernel it grew from.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import region_dce

from deplodock.dialects import loop
from deplodock.dialects.element_types import byte_size
from deplodock.dialects.queries import (
    computed_from,
    def_chain,
    enclosing_module,
    read_arguments,
    rename_kernels,
    written_arguments,
)
from deplodock.passes.fused_names import FusedNames
from deplodock.passes.loop_utils import reduction_iterations, work
from deplodock.passes.tile.contraction import MIN_TILED_EXTENT

#: Output columns past which a contraction prologue with per-element `exp`, `log`, division
#: (`_EXPENSIVE_MATH`) is not fused: the tile passes stage it once per block of at most 128
#: columns, so beyond two blocks it is recomputed for every further block.
MAX_RECOMPUTING_COLUMNS = 256

#: Extra bytes a thin contraction's recomputed prologue may read before the prologue is
#: written once instead (`_rereads_per_column`): 16 MiB is a few microseconds of L2 bandwidth,
#: about what the launch of a kernel of its own costs.
MIN_REREAD_BYTES = 1 << 24

# ---------------------------------------------------------------------------------------------
# Producer analysis
# ---------------------------------------------------------------------------------------------


@dataclass
class Producer:
    """A kernel P that computes every element of its output independently."""

    launch: loop.LaunchOp
    kernel: loop.KernelOp
    store: loop.StoreOp
    iv_dims: dict[SSAValue, int]
    """P's free induction variables -> the dimension of B each one indexes."""
    ops: list[Operation]
    """The ops (at the levels of the store's loop chain) the stored value depends on, in
    program order."""


def _is_zero(value: SSAValue) -> bool:
    return (
        isinstance(value, OpResult)
        and isinstance(value.op, arith.ConstantOp)
        and isinstance(value.op.value, IntegerAttr)
        and value.op.value.value.data == 0
    )


def _defined_inside(value: SSAValue, op: Operation) -> bool:
    if isinstance(value, BlockArgument):
        parent = value.block.parent_op()
        return parent is not None and (parent is op or op.is_ancestor(parent))
    assert isinstance(value, OpResult)
    return value.op is op or op.is_ancestor(value.op)


def external_operands(op: Operation) -> list[SSAValue]:
    """Values `op` (or an op nested in it) uses that are defined outside `op`."""
    found: list[SSAValue] = []
    for inner in op.walk():
        for operand in inner.operands:
            if not _defined_inside(operand, op) and operand not in found:
                found.append(operand)
    return found


def _free_chain(store: loop.StoreOp, kernel: loop.KernelOp) -> list[loop.ForOp] | None:
    """The loops enclosing `store`, outermost first, if all are free `0 to n step 1` loops."""
    chain: list[loop.ForOp] = []
    parent = store.parent_op()
    while parent is not kernel:
        if not isinstance(parent, loop.ForOp) or parent.is_reduce:
            return None
        if parent.lower != 0 or parent.step_value != 1:
            return None
        chain.append(parent)
        parent = parent.parent_op()
    return chain[::-1]


def _iv_dims(store: loop.StoreOp, chain: Sequence[loop.ForOp]) -> dict[SSAValue, int] | None:
    assert isinstance(store.memref.type, MemRefType)
    shape = store.memref.type.get_shape()
    ivs = {c.induction_var: c for c in chain}
    dims: dict[SSAValue, int] = {}
    for d, index in enumerate(store.indices):
        if index in ivs and index not in dims and ivs[index].upper == shape[d]:
            dims[index] = d
        elif not (shape[d] == 1 and _is_zero(index)):
            return None
    return dims if len(dims) == len(chain) else None


def _slice(store: loop.StoreOp, kernel: loop.KernelOp, chain: Sequence[loop.ForOp]):
    """The ops the stored value depends on, in program order, or None if one of them is
    not at a level of the store's loop chain."""
    levels = {kernel.body.block, *(c.body.block for c in chain)}
    needed: set[Operation] = set()
    stack = [store.value]
    while stack:
        value = stack.pop()
        if not isinstance(value, OpResult) or value.op in needed:
            continue
        if value.op.parent_block() not in levels:
            return None
        needed.add(value.op)
        stack.extend(external_operands(value.op))
    return [op for op in kernel.walk() if op in needed]


def analyse_producer(launch: loop.LaunchOp, kernel: loop.KernelOp, position: int):
    """P's description if it fully and independently writes its argument `position` (with
    one store; other outputs, such as the second statistic of a kernel that took over the
    first, may be written beside it, as long as P reads none of what it writes)."""
    target = kernel.body.block.args[position]
    mine = [op for op in kernel.walk() if isinstance(op, loop.StoreOp) and op.memref is target]
    if len(mine) != 1:
        return None
    store = mine[0]
    if read_arguments(kernel) & written_arguments(kernel):
        return None
    chain = _free_chain(store, kernel)
    if chain is None or (iv_dims := _iv_dims(store, chain)) is None:
        return None
    ops = _slice(store, kernel, chain)
    if ops is None:
        return None
    return Producer(launch, kernel, store, iv_dims, ops)


# ---------------------------------------------------------------------------------------------
# Inlining
# ---------------------------------------------------------------------------------------------


def _enclosing_blocks(op: Operation, kernel: loop.KernelOp) -> list[Block]:
    """The blocks around `op`, innermost first, up to the kernel body."""
    blocks: list[Block] = []
    block = op.parent_block()
    while block is not None:
        blocks.append(block)
        if block is kernel.body.block:
            break
        parent = block.parent_op()
        block = parent.parent_block() if parent is not None else None
    return blocks


def _ancestor_in(op: Operation, block: Block) -> Operation:
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None
        op = parent
    return op


def _place(clone: Operation, load: loop.LoadOp, blocks: Sequence[Block]) -> None:
    """Inserts `clone` at the outermost block around `load` where its operands exist."""
    depth = len(blocks) - 1
    for value in external_operands(clone):
        block = value.block if isinstance(value, BlockArgument) else value.op.parent_block()
        assert block in blocks, "an operand of an inlined op does not dominate the load"
        depth = min(depth, blocks.index(block))
    anchor = _ancestor_in(load, blocks[depth])
    blocks[depth].insert_op_before(clone, anchor)


def inline_element(
    producer: Producer,
    load: loop.LoadOp,
    kernel: loop.KernelOp,
    args: dict[SSAValue, SSAValue],
) -> SSAValue:
    """Clones P's computation of `B[load.indices]` into `kernel`; returns the value."""
    mapping = dict(args)
    for iv, dim in producer.iv_dims.items():
        mapping[iv] = load.indices[dim]
    blocks = _enclosing_blocks(load, kernel)
    for op in producer.ops:
        _place(op.clone(mapping), load, blocks)
    return mapping.get(producer.store.value, producer.store.value)


def fuse(
    consumer: loop.KernelOp,
    consumer_args: Sequence[SSAValue],
    position: int,
    producer: Producer,
    keep: bool = False,
) -> tuple[loop.KernelOp, list[SSAValue]]:
    """A copy of the consumer with the loads of its argument `position` inlined.

    Returns the new kernel and its launch operands: P's inputs that the consumer did not
    read take the place of the fused buffer, which is dropped once no load is left. With
    `keep`, the consumer also stores each inlined value where it loaded it (it takes over
    P's output for B's later readers; see `_takes_over`).
    """
    fused = consumer.clone()
    block = fused.body.block
    launch_args = list(consumer_args)
    used = {v for op in producer.ops for v in external_operands(op)}
    arg_map: dict[SSAValue, SSAValue] = {}
    for p_arg, buffer in zip(producer.kernel.body.block.args, producer.launch.args, strict=True):
        if p_arg not in used:
            continue
        if buffer in launch_args:
            arg_map[p_arg] = block.args[launch_args.index(buffer)]
            continue
        # P's new inputs take the place of the fused buffer (reads stay before writes).
        new_arg = block.insert_arg(p_arg.type, position)
        new_arg.name_hint = p_arg.name_hint
        launch_args.insert(position, buffer)
        arg_map[p_arg] = new_arg
        position += 1
    fused_arg = block.args[position]
    for op in list(fused.walk()):
        if isinstance(op, loop.LoadOp) and op.memref is fused_arg:
            value = inline_element(producer, op, fused, arg_map)
            if keep:
                Rewriter.insert_op(
                    loop.StoreOp(value, fused_arg, op.indices), InsertPoint.before(op)
                )
            op.res.replace_all_uses_with(value)
            Rewriter.erase_op(op)
    cse(fused)  # the inlined copies of one producer value, and of one reduce loop, merge
    region_dce(fused.body)
    if not fused_arg.uses:
        block.erase_arg(fused_arg)
        del launch_args[position]
    return fused, launch_args


# ---------------------------------------------------------------------------------------------
# Patterns
# ---------------------------------------------------------------------------------------------


_KERNEL_TABLES: weakref.WeakKeyDictionary[ModuleOp, dict[str, loop.KernelOp]] = (
    weakref.WeakKeyDictionary()
)
"""Per module, its kernels by name: what `kernel_of` looks launches up in."""


def kernel_of(module: ModuleOp, launch: loop.LaunchOp) -> loop.KernelOp | None:
    """The `loop.kernel` a launch runs.

    Found in a table of the module's kernels, rebuilt whenever its entry is stale (the
    kernel was replaced, erased or renamed since): fusion asks this for every launch between
    a producer and its consumer, for every producer it tries, and a symbol lookup scans the
    whole module each time (three quarters of ResNet-18's lowering time went there)."""
    name = launch.callee.string_value()
    table = _KERNEL_TABLES.get(module)
    kernel = table.get(name) if table is not None else None
    if kernel is None or kernel.parent_op() is not module or kernel.sym_name.data != name:
        table = {op.sym_name.data: op for op in module.ops if isinstance(op, loop.KernelOp)}
        _KERNEL_TABLES[module] = table
        kernel = table.get(name)
    return kernel


def launches(func: FuncOp) -> list[loop.LaunchOp]:
    return [op for op in func.body.block.ops if isinstance(op, loop.LaunchOp)]


def _host(op: loop.LaunchOp) -> tuple[FuncOp, ModuleOp, loop.KernelOp] | None:
    """The function, module and kernel of a launch in a function body; what both patterns
    start from."""
    func, module = op.parent_op(), enclosing_module(op)
    if not isinstance(func, FuncOp) or module is None:
        return None
    kernel = kernel_of(module, op)
    return None if kernel is None else (func, module, kernel)


def _writes(module: ModuleOp, launch: loop.LaunchOp, buffer: SSAValue) -> bool:
    if all(arg is not buffer for arg in launch.args):  # fast path: not passed, not written
        return False
    kernel = kernel_of(module, launch)
    if kernel is None:
        return True
    return any(launch.args[w] is buffer for w in written_arguments(kernel))


def _writers(module: ModuleOp, func: FuncOp, buffer: SSAValue) -> list[loop.LaunchOp]:
    """The launches of `func` that write `buffer`, found through its uses: only a launch
    that is passed the buffer can write it, so scanning every launch is not needed."""
    found: list[loop.LaunchOp] = []
    for use in buffer.uses:
        launch = use.operation
        if (
            isinstance(launch, loop.LaunchOp)
            and launch.parent_block() is func.body.block
            and launch not in found
            and _writes(module, launch, buffer)
        ):
            found.append(launch)
    return found


def _launch_count(func: FuncOp, kernel: loop.KernelOp) -> int:
    name = kernel.sym_name.data
    return sum(1 for launch in launches(func) if launch.callee.string_value() == name)


def _indexed_by(load: loop.LoadOp) -> set[SSAValue]:
    """The block arguments (loop ivs) the load's indices are computed from."""
    chains = (def_chain(index) for index in load.indices)
    return {v for chain in chains for v in chain if isinstance(v, BlockArgument)}


def _contraction_operand(consumer: loop.KernelOp, position: int) -> bool:
    """Whether a value the consumer loads from its argument `position` feeds a contraction:
    it is used inside a reduce loop that an output loop encloses whose induction variable
    the load ignores (`x[i, k]` in `y[i, n] = sum_k x[i, k] * w[n, k]`, or a row statistic
    `s[i]` applied to it).

    A producer with a reduction (a norm, a softmax) is not fused there: its row statistic
    would sit between the contraction's output loops, so the tile passes could no longer
    block the kernel (one block per row, each reading all of `w`), and its elementwise part
    would run once per output column. It stays a kernel that writes its output once; the
    elementwise rest of the producer chain still fuses, as the contraction's prologue."""
    return any(
        _broadcast_loops(user, _indexed_by(load))
        for load in _argument_loads(consumer, position)
        for user in _users(load)
    )


def _row_statistic(consumer: loop.KernelOp, position: int) -> bool:
    """Whether a reduction's output that feeds a contraction may still fuse into it: every
    load of it sits outside the consumer's reduce loops (one value per row, like SDPA's row
    max and sum) and at most `MAX_RECOMPUTING_COLUMNS` output columns read it. The tile
    passes then compute the statistic once per block of rows into shared memory
    (`tile-shared-statistics`), once or twice per row over the columns, instead of a kernel
    of its own that costs a launch and writes it out; over wider outputs (a norm before a
    linear of hidden size 3584: 28 column blocks) the statistic keeps its kernel."""
    loads = _argument_loads(consumer, position)
    if not loads or any(_inside_reduce(load) for load in loads):
        return False
    if min(_statistic_rows(consumer, load) for load in loads) < MIN_TILED_EXTENT:
        return False  # too few rows to block (decoding's one query): it keeps its kernel
    return _recomputing_columns(consumer, position) <= MAX_RECOMPUTING_COLUMNS


def _statistic_rows(consumer: loop.KernelOp, load: loop.LoadOp) -> int:
    """The rows of the contraction that read the statistic at `load`: the output loops
    indexing it that the other operand (the loads indexed by an output column) does not
    also index (those are batch axes, a head). Fewer than `MIN_TILED_EXTENT` and the tile
    passes cannot block the product: SDPA decoding one query over 4096 keys would run in one
    block per head (modeled on H100, Qwen2.5-7B: 153 -> 205 us)."""
    indexed = _indexed_by(load)
    columns = {c.induction_var for user in _users(load) for c in _broadcast_loops(user, indexed)}
    other: set[SSAValue] = set()
    for op in consumer.walk():
        if isinstance(op, loop.LoadOp) and _indexed_by(op) & columns:
            other |= _indexed_by(op)
    rows, parent = 1, load.parent_op()
    while isinstance(parent, loop.ForOp):
        if not parent.is_reduce and parent.induction_var in indexed - other:
            rows *= parent.trip_count
        parent = parent.parent_op()
    return rows


def _inside_reduce(op: Operation) -> bool:
    parent = op.parent_op()
    while isinstance(parent, loop.ForOp):
        if parent.is_reduce:
            return True
        parent = parent.parent_op()
    return False


def _argument_loads(consumer: loop.KernelOp, position: int) -> list[loop.LoadOp]:
    """The loads of the consumer's argument `position`."""
    uses = consumer.body.block.args[position].uses
    return [use.operation for use in uses if isinstance(use.operation, loop.LoadOp)]


def _users(op: Operation) -> list[Operation]:
    """Every op that (transitively) uses a result of `op`."""
    found: dict[Operation, None] = {}
    work = [op]
    while work:
        for result in work.pop().results:
            for use in result.uses:
                if use.operation not in found:
                    found[use.operation] = None
                    work.append(use.operation)
    return list(found)


def _broadcast_loops(user: Operation, indexed: set[SSAValue]) -> list[loop.ForOp]:
    """The output loops outside `indexed` that enclose a reduce loop around `user`: the
    columns of a contraction that each read the value `user` uses."""
    inside_reduce, loops = False, []
    parent = user.parent_op()
    while isinstance(parent, loop.ForOp):
        if parent.is_reduce:
            inside_reduce = True
        elif inside_reduce and parent.induction_var not in indexed:
            loops.append(parent)
        parent = parent.parent_op()
    return loops


#: Math that costs a special-function call and its fix-ups per element (an `exp` is about
#: ten instructions, a division about six), against one multiply-add per column.
_EXPENSIVE_MATH = (
    math.ExpOp,
    math.Exp2Op,
    math.ExpM1Op,
    math.LogOp,
    math.Log2Op,
    math.Log1pOp,
    math.TanhOp,
    math.ErfOp,
    math.SqrtOp,
    math.RsqrtOp,
    math.PowFOp,
    arith.DivfOp,
)


def _recomputing_columns(consumer: loop.KernelOp, position: int) -> int:
    """How many output columns of a contraction read each element the consumer loads from
    argument `position`: the product of the output loops around the reduce loop that the
    load ignores (1 when the value feeds no contraction). A tiled schedule stages the value
    once per block, so it is computed `columns / BN` times; a head dimension of 128 is one
    block, a hidden size of 3584 is 28."""
    counts = [
        prod(column.trip_count for column in _broadcast_loops(user, _indexed_by(load)))
        for load in _argument_loads(consumer, position)
        for user in _users(load)
    ]
    return max(counts, default=1)


def _reduced_dimensions(consumer: loop.KernelOp, position: int) -> set[int]:
    """The dimensions of the consumer's argument `position` that its loads index with a
    reduce loop's induction variable (a contraction's K)."""
    dims: set[int] = set()
    for load in _argument_loads(consumer, position):
        for dim, index in enumerate(load.indices):
            for value in def_chain(index):
                owner = value.block.parent_op() if isinstance(value, BlockArgument) else None
                if isinstance(owner, loop.ForOp) and owner.is_reduce:
                    dims.add(dim)
    return dims


def _expensive_per_element(producer: Producer, dims: set[int]) -> bool:
    """Whether the producer computes `_EXPENSIVE_MATH` for each element along `dims` (what
    a contraction reduces over), not once per row: SiLU's `exp` is per element, RMSNorm's
    `rsqrt` of the row's mean square is per row."""
    ops = list(producer.kernel.walk())
    moving = computed_from([iv for iv, dim in producer.iv_dims.items() if dim in dims], ops)
    return any(
        isinstance(op, _EXPENSIVE_MATH) and any(v in moving for v in op.operands) for op in ops
    )


def _takes_over(
    module: ModuleOp,
    consumer: loop.LaunchOp,
    kernel: loop.KernelOp,
    position: int,
    producer: Producer,
) -> bool:
    """Whether the consumer can compute a reducing producer's output B and store it for B's
    other readers, so that the producer's launch goes (a multi-output fusion): the consumer
    reduces too (two statistics of the same rows become one row kernel; a matmul is not
    turned into a kernel with two outputs for a copy of it), it loads B once, in loops that
    each index B and none a reduction (so it stores every element exactly once), and every
    other reader of B comes after it and would never clone the producer: it reads B as a
    contraction operand, or cloning would redo the producer's reduction (`_recomputes`).

    Softmax before `@ V` is the case: the row max is read by the row sum's kernel and by
    the P.V product; the sum's kernel computes the max itself and writes it, so the two
    statistics are one kernel (whose loops `tile-online-softmax` then merges into one
    sweep) instead of two launches. GroupNorm is the other: its mean, its mean's correction
    and its variance are three reductions over a group's rows, each read again by the
    normalisation, whose loops run over channels (four per group, say), so it cannot clone
    them; the variance's kernel takes over the other two, and the statistics are one kernel."""
    if not reduction_iterations(kernel):
        return False
    argument = kernel.body.block.args[position]
    loads = [use.operation for use in argument.uses]
    if len(loads) != 1 or not isinstance(load := loads[0], loop.LoadOp):
        return False
    indexed = _indexed_by(load)
    parent = load.parent_op()
    while isinstance(parent, loop.ForOp):
        if parent.is_reduce or parent.induction_var not in indexed:
            return False
        parent = parent.parent_op()
    buffer = consumer.args[position]
    readers = {use.operation for use in buffer.uses} - {consumer, producer.launch}
    return all(
        _contraction_reader(module, consumer, reader, buffer)
        or _recomputes(module, consumer, reader, buffer, producer)
        for reader in readers
    )


def _recomputes(
    module: ModuleOp,
    consumer: loop.LaunchOp,
    reader: Operation,
    buffer: SSAValue,
    producer: Producer,
) -> bool:
    """Whether `reader`, a launch after `consumer`, would redo the producer's reduction if it
    cloned it (it reads B inside loops that do not index B), so the recompute guard keeps it
    reading B: nothing is lost when the consumer takes the producer over."""
    if (
        not isinstance(reader, loop.LaunchOp)
        or reader.parent_block() is not consumer.parent_block()
        or not consumer.is_before_in_block(reader)
        or (kernel := kernel_of(module, reader)) is None
    ):
        return False
    budget = reduction_iterations(kernel) + reduction_iterations(producer.kernel)
    for position in (k for k, arg in enumerate(reader.args) if arg is buffer):
        fused, _ = fuse(kernel, reader.args, position, producer)
        grows = reduction_iterations(fused) > budget
        fused.erase()
        if not grows:
            return False
    return True


def _single_output(kernel: loop.KernelOp) -> bool:
    """Whether the kernel writes one buffer: a consumer that takes it over removes its
    launch, which must then have written nothing else."""
    return len(written_arguments(kernel)) == 1


def _contraction_reader(
    module: ModuleOp, consumer: loop.LaunchOp, reader: Operation, buffer: SSAValue
) -> bool:
    """Whether `reader`, a launch after `consumer`, reads `buffer` only as an operand of a
    contraction: it would never clone B's producer, so nothing is lost when the consumer
    takes the producer over (an elementwise reader, which would, waits for it instead)."""
    if (
        not isinstance(reader, loop.LaunchOp)
        or reader.parent_block() is not consumer.parent_block()
    ):
        return False
    kernel = kernel_of(module, reader)
    if kernel is None or not consumer.is_before_in_block(reader):
        return False
    positions = [k for k, arg in enumerate(reader.args) if arg is buffer]
    return all(_contraction_operand(kernel, k) for k in positions)


def _read_elsewhere(buffer: SSAValue, consumer: loop.LaunchOp, producer: loop.LaunchOp) -> bool:
    """Whether `buffer` outlives fusing its producer into `consumer`: another launch reads
    it or the function returns it, so the producer's kernel stays and runs anyway."""
    return any(use.operation not in (consumer, producer) for use in buffer.uses)


@dataclass
class FuseProducers(RewritePattern):
    """Fuses into a launch's kernel one producer of a buffer it reads (see module doc)."""

    max_recompute: int
    row_statistics: bool = True
    attention: bool = True
    rejected: set[tuple[Operation, Operation]] = field(
        default_factory=set[tuple[Operation, Operation]]
    )
    """(consumer kernel, producer launch) pairs over budget, not to be cloned again."""
    names: FusedNames = field(default_factory=FusedNames)
    """The parts each fused kernel is made of, for its name (`fused_names`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.LaunchOp, rewriter: PatternRewriter) -> None:
        if (host := _host(op)) is None:
            return
        func, module, consumer = host
        if _launch_count(func, consumer) != 1:
            return
        for position in sorted(read_arguments(consumer)):
            producer = self._producer(module, func, op, op.args[position])
            if producer is None or (consumer, producer.launch) in self.rejected:
                continue
            reductions = reduction_iterations(producer.kernel)
            if self.attention and _score_matrix(consumer, position, producer):
                if _read_elsewhere(op.args[position], op, producer.launch):
                    continue  # not rejected: retried once the other readers are fused away
                self._fuse(rewriter, op, consumer, position, producer)
                return
            if (
                reductions
                and _contraction_operand(consumer, position)
                and not (self.row_statistics and _row_statistic(consumer, position))
            ):
                self.rejected.add((consumer, producer.launch))
                continue
            if _costly_prologue(module, func, consumer, position, producer):
                self.rejected.add((consumer, producer.launch))
                continue
            if _rereads_per_column(consumer, position, producer):
                self.rejected.add((consumer, producer.launch))
                continue
            keep = bool(reductions) and _read_elsewhere(op.args[position], op, producer.launch)
            if keep and not (
                _single_output(producer.kernel)
                and _takes_over(module, op, consumer, position, producer)
            ):
                continue  # not rejected: retried once the other readers are fused away
            parts = self.names.of(consumer) + self.names.of(producer.kernel)
            fused, args = fuse(consumer, op.args, position, producer, keep)
            budget = self.max_recompute * (work(consumer) + work(producer.kernel))
            reductions += reduction_iterations(consumer)
            if work(fused) > budget or reduction_iterations(fused) > reductions:
                fused.erase()
                self.rejected.add((consumer, producer.launch))
                continue
            self._replace(rewriter, op, consumer, fused, args, parts)
            if keep:  # the consumer writes B now
                rewriter.erase(producer.launch)
                if _launch_count(func, producer.kernel) == 0:
                    rewriter.erase(producer.kernel)
            return

    def _fuse(
        self,
        rewriter: PatternRewriter,
        op: loop.LaunchOp,
        consumer: loop.KernelOp,
        position: int,
        producer: Producer,
    ) -> None:
        """Fuses without the recompute guard (`_score_matrix` decided)."""
        parts = self.names.of(consumer) + self.names.of(producer.kernel)
        fused, args = fuse(consumer, op.args, position, producer, False)
        self._replace(rewriter, op, consumer, fused, args, parts)

    def _replace(
        self,
        rewriter: PatternRewriter,
        op: loop.LaunchOp,
        consumer: loop.KernelOp,
        fused: loop.KernelOp,
        args: Sequence[SSAValue],
        parts: list[str],
    ) -> None:
        self.names.fused(consumer.sym_name.data, parts)
        rewriter.replace(consumer, fused)
        rewriter.replace(op, loop.LaunchOp(op.callee, args))

    def _producer(
        self, module: ModuleOp, func: FuncOp, consumer: loop.LaunchOp, buffer: SSAValue
    ) -> Producer | None:
        """The unique earlier writer of `buffer`, if fusable into `consumer`."""
        writers = _writers(module, func, buffer)
        if len(writers) != 1 or not writers[0].is_before_in_block(consumer):
            return None
        launch = writers[0]
        kernel = kernel_of(module, launch)
        if kernel is None:
            return None
        position = list(launch.args).index(buffer)
        producer = analyse_producer(launch, kernel, position)
        if producer is None:
            return None
        # P's inputs must hold the same values when C runs as when P ran.
        inputs = {launch.args[r] for r in read_arguments(kernel)}
        sequence = launches(func)
        between = sequence[sequence.index(launch) + 1 : sequence.index(consumer) + 1]
        if any(_writes(module, other, x) for other in between for x in inputs):
            return None
        return producer


#: Keys per chunk the tile passes stream through shared memory at the least: a score matrix
#: fuses only over a whole number of such chunks (`tile-streaming-softmax` has no tail).
SCORE_CHUNK = 16


def _score_matrix(consumer: loop.KernelOp, position: int, producer: Producer) -> bool:
    """Whether the producer is attention's score matrix and the consumer its softmax and
    product with V, to be fused by recomputing the scores where they are read.

    The producer reduces (`q . k`); its output has a dimension (the keys) that every reader
    in the consumer reduces over, as row statistics (max, sum: at least one) and as the
    operand of a contraction (`P @ V`) over at most `MAX_RECOMPUTING_COLUMNS` columns (the
    head dimension, one block of columns); once nothing else reads it, it fuses. Its size is
    the product of two sequence lengths, the memory that long contexts cannot hold (7.5 GB
    per layer of Qwen2.5-7B at 8k tokens). At the loop level the fused kernel recomputes
    each score for every use; the tile passes compute it once per K chunk:
    `tile-prologue-product` as a register tile of the `P` slab on tensor cores,
    `tile-streaming-softmax` with running statistics instead of the sweeps. Both need rows
    to block (at least `MIN_TILED_EXTENT` queries: a decoding step keeps its two kernels,
    whose scores are one row) and whole chunks of `SCORE_CHUNK` keys."""
    if not reduction_iterations(producer.kernel):
        return False
    loads = _argument_loads(consumer, position)
    if not loads or not all(_inside_reduce(load) for load in loads):
        return False
    dims = _reduced_dimensions(consumer, position)
    if len(dims) != 1 or not _contraction_operand(consumer, position):
        return False
    if not any(_row_statistic_read(load) for load in loads):
        return False  # no softmax: a product of products (relu(x @ w1) @ w2) is no score matrix
    if not _exponentiated(consumer, loads):
        return False  # a LayerNorm before a linear has row statistics too, but no softmax
    if _recomputing_columns(consumer, position) > MAX_RECOMPUTING_COLUMNS:
        return False
    (keys,) = dims
    buffer = consumer.body.block.args[position].type
    assert isinstance(buffer, MemRefType)
    if buffer.get_shape()[keys] % SCORE_CHUNK:
        return False
    return min(_statistic_rows(consumer, load) for load in loads) >= MIN_TILED_EXTENT


def _exponentiated(consumer: loop.KernelOp, loads: Sequence[loop.LoadOp]) -> bool:
    """Whether the consumer takes `exp` of a value computed from the loads: a softmax of
    them, which the tile passes stream (`tile-streaming-softmax`). A norm's mean and
    variance are row statistics too (linear -> LayerNorm -> linear has the score matrix's
    shape), but no streaming form of them exists: fused, the producer would be recomputed
    for every use."""
    ops = list(consumer.walk())
    moving = computed_from([load.res for load in loads], ops)
    return any(isinstance(op, math.ExpOp) and any(v in moving for v in op.operands) for op in ops)


def _row_statistic_read(load: loop.LoadOp) -> bool:
    """Whether the load feeds a reduction that no output column encloses: a row statistic
    (the softmax's max or sum), not a contraction's operand."""
    return all(not _broadcast_loops(user, _indexed_by(load)) for user in _users(load))


def _costly_prologue(
    module: ModuleOp, func: FuncOp, consumer: loop.KernelOp, position: int, producer: Producer
) -> bool:
    """Whether the producer's expensive per-element math had better be the epilogue of the
    product it reads than the consumer's contraction prologue.

    As a prologue it is redone for every block of output columns, past
    `MAX_RECOMPUTING_COLUMNS` columns many times (the SiLU of the MLP before its down
    projection: its `exp` in each of 28 column blocks at Qwen2.5-7B's hidden size, against
    the product's tensor cores). When the producer reads the output of an earlier kernel
    that reduces (the gate projection), it stays for that kernel to take as its epilogue,
    computed once per element, and the cheap rest (`* up`) still fuses as the prologue.
    With nothing to take it (inputs of the program) it fuses: a kernel of its own would
    cost a launch and a round trip through memory. SDPA's softmax before `@ V` is read by
    128 columns, one block, and fuses."""
    if _recomputing_columns(consumer, position) <= MAX_RECOMPUTING_COLUMNS:
        return False
    if not _expensive_per_element(producer, _reduced_dimensions(consumer, position)):
        return False
    return _reads_a_reduction(module, func, producer.launch)


def _rereads_per_column(consumer: loop.KernelOp, position: int, producer: Producer) -> bool:
    """Whether an elementwise producer had better write its output once than be the
    prologue of a contraction too thin to tile: fewer than `MIN_TILED_EXTENT` rows (a decode
    step's `M = 1` projection, scheduled as a row reduction per output column, with nothing
    staged) and more than `MAX_RECOMPUTING_COLUMNS` columns, each of which would recompute
    the whole prologue. That costs only when an element of the prologue reads more bytes
    than the element it makes: RMSNorm's `(x + attention) * rsqrt * weight` reads 8 bytes
    per bf16 element, 18944 times over for Qwen2.5-7B's up projection (modeled on the H100,
    gate and up 147.6 -> 70.5 us each). A copy, a transpose or a widening cast reads no more
    and still fuses; so does a small product, whose extra reads (`MIN_REREAD_BYTES`) cost
    less than a launch; and a producer with a reduction, which `_contraction_operand`
    already keeps apart."""
    if reduction_iterations(producer.kernel) or not _contraction_operand(consumer, position):
        return False
    loads = _argument_loads(consumer, position)
    if min(_statistic_rows(consumer, load) for load in loads) >= MIN_TILED_EXTENT:
        return False
    if _recomputing_columns(consumer, position) <= MAX_RECOMPUTING_COLUMNS:
        return False
    dims = _reduced_dimensions(consumer, position)
    moving = computed_from(
        [iv for iv, dim in producer.iv_dims.items() if dim in dims], producer.ops
    )
    read = sum(
        byte_size(op.res.type)
        for op in producer.ops
        if isinstance(op, loop.LoadOp) and any(index in moving for index in op.indices)
    )
    extra = read - byte_size(producer.store.value.type)
    elements = prod(producer.store.memref.type.get_shape())
    return extra * elements * _recomputing_columns(consumer, position) >= MIN_REREAD_BYTES


def _reads_a_reduction(module: ModuleOp, func: FuncOp, launch: loop.LaunchOp) -> bool:
    """Whether the launch reads, directly or through elementwise kernels (the copies and
    reshapes a linear leaves before fusion), the output of a kernel that reduces."""
    work, seen = [launch], set()
    while work:
        current = work.pop()
        kernel = kernel_of(module, current)
        if current in seen or kernel is None:
            continue
        seen.add(current)
        if current is not launch and reduction_iterations(kernel) > 0:
            return True
        for r in read_arguments(kernel):
            work.extend(_writers(module, func, current.args[r]))
    return False


class EraseDeadLaunch(RewritePattern):
    """Erases a launch whose output buffers nobody reads, with its buffers and kernel."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.LaunchOp, rewriter: PatternRewriter) -> None:
        if (host := _host(op)) is None:
            return
        func, _, kernel = host
        outputs = {op.args[w] for w in written_arguments(kernel)}
        for buffer in outputs:
            if not isinstance(buffer, OpResult) or not isinstance(buffer.op, loop.AllocOp):
                return
            if any(use.operation is not op for use in buffer.uses):
                return
        rewriter.erase(op)
        for buffer in outputs:
            assert isinstance(buffer, OpResult)
            rewriter.erase(buffer.op)
        if _launch_count(func, kernel) == 0:
            rewriter.erase(kernel)


class DropUnusedArguments(RewritePattern):
    """Drops the buffers a kernel no longer touches from it and from its launch.

    Inlining can leave an argument behind: a fused producer's index that folded to a
    constant (a decode step's cache row `clamp(r - position, 0, T - 1)` is 0 when `T = 1`).
    Passed on, the buffer still counts as read, so its producer's launch would stay; dropped,
    `EraseDeadLaunch` takes the producer away."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.LaunchOp, rewriter: PatternRewriter) -> None:
        if (host := _host(op)) is None:
            return
        func, _, kernel = host
        unused = [arg for arg in kernel.body.block.args if not arg.uses]
        if not unused or _launch_count(func, kernel) != 1:
            return
        kept = [value for value, arg in zip(op.args, kernel.body.block.args, strict=True)
                if arg.uses]  # fmt: skip
        for arg in unused:
            kernel.body.block.erase_arg(arg)
        rewriter.replace(op, loop.LaunchOp(op.callee, kept))


@dataclass(frozen=True)
class LoopFusionPass(ModulePass):
    """Producer/consumer fusion of loop kernels by inlining, bounded by `max-recompute`."""

    name = "loop-fusion"

    max_recompute: int = 8
    #: Fuse row statistics into narrow contractions (`_row_statistic`); false keeps them
    #: kernels of their own (to compare, or to look at one alone).
    row_statistics: bool = True
    #: Fuse a score matrix into the softmax and product that read it (`_score_matrix`):
    #: attention in one kernel; false keeps the scores a kernel of their own.
    attention: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        names = FusedNames()
        patterns: list[RewritePattern] = [
            EraseDeadLaunch(),
            DropUnusedArguments(),
            FuseProducers(self.max_recompute, self.row_statistics, self.attention, names=names),
        ]
        PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns, dce_enabled=False),
            apply_recursively=True,
            walk_reverse=True,
        ).rewrite_module(op)
        rename_kernels(op, names.base)
