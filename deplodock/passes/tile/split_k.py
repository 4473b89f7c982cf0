"""`tile-split-k`: a contraction with too few output tiles to fill the GPU splits its K loop.

Trigger: an unscheduled contraction (`contraction.find_contraction`) whose reduction starts
from zero (`acc = 0; acc += a * b`) and whose output tiles, as `tile-block` would choose
them, leave most SMs idle: TinyLlama's k and v projections at 32 tokens (M = 32, N = 512,
K = 2048) are 16 blocks of 32 x 32 on 132 SMs, each walking all 2048 values of K alone.

Rewrite: the kernel becomes two kernels and a workspace `ws` of `S x <output loops>`
accumulators.

- The *partial* kernel (the original symbol) gets a new outermost output loop `s < S` and
  walks only its slice `k = s * (K / S) + k'` of the outermost K loop; it stores the raw
  sum to `ws[s, i, j]` instead of running the epilogue. `s` is used by both operands, so
  to `tile-block` it is a batch axis: the grid grows S-fold.
- The *combine* kernel (`@<name>_combine`) is the original kernel with its K nest replaced
  by the sum of the S partials, written out in order `ws[0] + ws[1] + ...`: a deterministic
  reduction, so the result does not depend on how blocks were scheduled. The epilogue
  (bias, activation, residual) runs there, once per output element. With no loop left,
  it is an elementwise kernel: `tile-grid-stride` and `tile-vectorize` schedule it with
  coalesced, 128-bit reads of `ws`.

    tile.kernel @k(%x, %w, %y) {                tile.kernel @k(%x, %w, %ws) {
      tile.for %i, %j {                           tile.for %s = %c0 to 4 { tile.for %i, %j {
        %acc = tile.for %r = %c0 to 2048  ==>       %acc = tile.for %r = %c0 to 512 { s*512+r ...
        tile.store f(%acc), %y[%i, %j]              tile.store %acc, %ws[%s, %i, %j] }}
                                                tile.kernel @k_combine(%y, %ws) {
                                                  tile.for %i, %j {
                                                    %acc = ws[0,i,j] + ws[1,i,j] + ... + ws[3,i,j]
                                                    tile.store f(%acc), %y[%i, %j]

The host function allocates `ws` and launches `@k` then `@k_combine` where it launched `@k`.

Atomics, only when asked (`atomic=true`, knob `split_atomic`): where the epilogue is one f32
store of the sum, a kernel `@k_zero` zeroes the output and the slices `tile.atomic_add`
their sums into it; no workspace and no combine, but the additions land in whatever order
the blocks run, so the last bits of the result may differ from run to run. Kernels with an
epilogue keep the deterministic combine.

Knob (`schedule`): `splits` (S; 1 leaves the kernel whole). Legal values divide the
outermost K extent and leave each slice at least `MIN_SLICE` long (`legal_splits`). The
default heuristic (`default_splits`) scores each S by `tile-block`'s own `tile_score` of the
tiles it would pick for the S-fold grid (data reuse x SM balance), discounted by the
workspace round trip (`2 S M N` accumulators against the `K (M + N)` operands), and splits
when the best S beats the whole kernel by `MIN_GAIN`. On the H100 model this takes
TinyLlama's q_proj at 128 tokens from 74.3 us to 51.5 us (S = 8).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, ModuleOp, StringAttr, f32
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import erase_dead
from deplodock.dialects.hardware import is_shared
from deplodock.dialects.reduce_kind import ReduceKind
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.block import DEFAULT_SMS, default_block, tile_score
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.contraction import (
    Contraction,
    find_contraction,
    sixteen_bit_product,
)
from deplodock.passes.tile.nests import body_ops, is_identity, trip_count

#: Split counts the pass accepts (and the tuner may choose from).
SPLITS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)

#: The shortest K slice a split may leave a block (one chunk of the smallest BK).
MIN_SLICE = 8

#: The shortest slice the heuristic picks: shorter ones spend more time filling and
#: draining the K pipeline than streaming.
MIN_DEFAULT_SLICE = 128

#: How much better than the unsplit kernel a split must score to pay for its second
#: launch and the workspace round trip the score does not see.
MIN_GAIN = 1.2


# --- the decision ----------------------------------------------------------------------------


def legal_splits(found: Contraction) -> list[int]:
    """The split counts the tuner may try: S divides the outermost K loop and leaves each
    slice at least `MIN_SLICE` iterations of the whole K nest."""
    outer = trip_count(found.reduce[0])
    return [s for s in SPLITS if s == 1 or (outer % s == 0 and found.k // s >= MIN_SLICE)]


def split_score(found: Contraction, splits: int, sms: int = DEFAULT_SMS) -> float:
    """How well the contraction should run split `splits` ways: `tile-block`'s `tile_score`
    of the tiles it would choose for the S-fold grid, times the share of the traffic that
    is operands rather than the workspace (`k (m + n)` against `2 S m n` per batch)."""
    m, n, batch = found.m, found.n, found.batch * splits
    tensor_cores = sixteen_bit_product(found.kernel)
    bm, bn = default_block(m, n, batch, sms, tensor_cores)
    score = tile_score(m, n, batch, bm, bn, sms, tensor_cores)
    if splits > 1:
        operands = found.k * (m + n)
        score *= operands / (operands + 2 * splits * m * n)
    return score


def default_splits(found: Contraction, sms: int = DEFAULT_SMS) -> int:
    """The heuristic S: the best `split_score` among the legal splits that leave slices of
    at least `MIN_DEFAULT_SLICE`, when it beats the unsplit kernel by `MIN_GAIN`; else 1.

    TinyLlama's k_proj at 32 tokens (M = 32, N = 256, K = 2048) splits 16 ways; a 512-token
    q_proj, whose 128 x 64 tiles already fill the SMs, stays whole.
    """
    candidates = [s for s in legal_splits(found) if found.k // s >= MIN_DEFAULT_SLICE]
    if not candidates:
        return 1
    best = max(candidates, key=lambda s: split_score(found, s, sms))
    if split_score(found, best, sms) < MIN_GAIN * split_score(found, 1, sms):
        return 1
    return best


def can_split(found: Contraction) -> bool:
    """A split sums partial accumulators, so the accumulator must start at zero; and each
    slice would redo the row statistics over the whole row, so a contraction with some
    (SDPA's P.V) is not split."""
    root = found.reduce[0]
    return is_identity(root.inits[0], ReduceKind.ADD) and not found.statistics


# --- the rewrite -----------------------------------------------------------------------------


def _workspace_type(found: Contraction, splits: int) -> MemRefType:
    accumulator = found.reduce[0].res[0].type
    return MemRefType(accumulator, [splits, *(loop.upper for loop in found.free)])


def _slice_k(found: Contraction, splits: int) -> tile.ForOp:
    """An `s` loop outside the output loops, and the outer K loop walking only slice `s`
    (`k = s * (K / S) + k'`); returns the `s` loop."""
    pool = ConstantPool.adopting(found.threads.body.block)
    root, reduce_root = found.free[0], found.reduce[0]
    slice_len = trip_count(reduce_root) // splits

    outer = tile.ForOp(pool.index(0), splits, 1, [])
    outer.induction_var.name_hint = "s"
    outer.body.block.add_op(tile.YieldOp())
    Rewriter.insert_op(outer, InsertPoint.before(root))
    root.detach()
    Rewriter.insert_op(root, InsertPoint.at_start(outer.body.block))

    _shorten(reduce_root, slice_len)
    local = reduce_root.induction_var
    base = arith.MuliOp(outer.induction_var, pool.index(slice_len))
    index = arith.AddiOp(base, local)
    base.result.name_hint = "slice"
    index.result.name_hint = "k"
    Rewriter.insert_op([base, index], InsertPoint.at_start(reduce_root.body.block))
    local.replace_uses_with_if(index.result, lambda use: use.operation is not index)
    return outer


def _epilogue(found: Contraction) -> list[Operation]:
    """The ops after the K nest in the innermost output loop (bias, activation, stores)."""
    ops = body_ops(found.free[-1])
    return ops[ops.index(found.reduce[0]) + 1 :]


def _split_partial(found: Contraction, splits: int, workspace: SSAValue) -> None:
    """The partial kernel: an `s` loop outside, a K slice inside, the raw sum to `ws`."""
    outer = _slice_k(found, splits)
    for op in reversed(_epilogue(found)):
        Rewriter.erase_op(op)
    ivs = [outer.induction_var, *(loop.induction_var for loop in found.free)]
    store = tile.StoreOp(found.reduce[0].res[0], workspace, ivs)
    innermost = found.free[-1]
    Rewriter.insert_op(store, InsertPoint.before(innermost.body.block.last_op))  # type: ignore[arg-type]


def _shorten(loop: tile.ForOp, count: int) -> None:
    """Sets a serial loop (start 0, step 1) to run `count` iterations."""
    loop.ub = IntegerAttr(count, 64)


def _make_combine(found: Contraction, splits: int, workspace: SSAValue) -> None:
    """The combine kernel: the K nest becomes `ws[0, ...] + ws[1, ...] + ...`, in order.

    Written out rather than as a loop, the combine is an elementwise kernel: the baseline
    passes stride it over the whole grid and widen its accesses, and no pass may split its
    sum between threads, so the order of the additions is fixed."""
    reduce_root = found.reduce[0]
    ivs = [loop.induction_var for loop in found.free]
    pool = ConstantPool.adopting(found.threads.body.block)
    point = InsertPoint.before(reduce_root)
    total: SSAValue | None = None
    for s in range(splits):
        partial = tile.LoadOp(workspace, [pool.index(s), *ivs])
        Rewriter.insert_op(partial, point)
        if total is None:
            total = partial.res
        else:
            add = arith.AddfOp(total, partial.res)
            Rewriter.insert_op(add, point)
            total = add.result
    assert total is not None
    total.name_hint = reduce_root.res[0].name_hint
    reduce_root.res[0].replace_all_uses_with(total)
    Rewriter.erase_op(reduce_root)


def added_kernel_name(name: str, atomic: bool) -> str:
    """The symbol of the kernel the pass adds beside `@name`: its combine kernel, or with
    atomics its zeroing kernel (`tile-schedule` knobs for it are written after this pass)."""
    return f"{name}_zero" if atomic else f"{name}_combine"


def _launch_sites(module: ModuleOp, name: str) -> list[tile.LaunchOp]:
    return [
        op
        for op in module.walk()
        if isinstance(op, tile.LaunchOp) and op.callee.string_value() == name
    ]


def split_contraction(module: ModuleOp, found: Contraction, splits: int) -> tile.KernelOp:
    """Rewrites one contraction into partial + combine kernels (see the module docstring);
    returns the combine kernel."""
    kernel = found.kernel
    name = kernel.sym_name.data
    ws_type = _workspace_type(found, splits)
    combine = kernel.clone()
    combine.sym_name = StringAttr(added_kernel_name(name, atomic=False))
    combine.schedule = None
    Rewriter.insert_op(combine, InsertPoint.after(kernel))

    workspace = kernel.body.block.insert_arg(ws_type, len(kernel.body.block.args))
    workspace.name_hint = "ws"
    _split_partial(found, splits, workspace)
    erase_dead(list(kernel.walk()))

    found_again = find_contraction(combine)
    assert found_again is not None, "a clone of a contraction is a contraction"
    combine_ws = combine.body.block.insert_arg(ws_type, len(combine.body.block.args))
    combine_ws.name_hint = "ws"
    _make_combine(found_again, splits, combine_ws)
    erase_dead(list(combine.walk()))

    partial_args = _drop_unused_arguments(kernel)
    combine_args = _drop_unused_arguments(combine)
    for launch in _launch_sites(module, name):
        alloc = tile.AllocOp(ws_type)
        alloc.res.name_hint = "ws"
        args = [*launch.args, alloc.res]
        partial_launch = tile.LaunchOp(name, [args[k] for k in partial_args])
        combine_launch = tile.LaunchOp(combine.sym_name.data, [args[k] for k in combine_args])
        Rewriter.replace_op(launch, [alloc, partial_launch, combine_launch], [])
    return combine


def adds_atomically(found: Contraction) -> bool:
    """Whether the slices may add straight into the output (`atomic`): the epilogue is one
    store of the f32 sum to a global f32 buffer, so adding partial sums to a zeroed output
    is the same sum."""
    epilogue = _epilogue(found)
    if len(epilogue) != 1 or not isinstance(store := epilogue[0], tile.StoreOp):
        return False
    memref = store.memref.type
    return (
        store.value is found.reduce[0].res[0]
        and isinstance(memref, MemRefType)
        and memref.element_type == f32
        and not is_shared(memref)
    )


def split_atomically(module: ModuleOp, found: Contraction, splits: int) -> tile.KernelOp:
    """Rewrites one contraction into a zeroing kernel `@<name>_zero` and a partial kernel
    whose slices `tile.atomic_add` their sums into the output; returns the zeroing kernel.

    No workspace and no second pass over the output, but the order of the S additions to
    an element is whatever order the blocks run in: the float result may differ in its last
    bits from run to run. Hence only on request."""
    kernel = found.kernel
    name = kernel.sym_name.data
    zero = kernel.clone()
    zero.sym_name = StringAttr(added_kernel_name(name, atomic=True))
    zero.schedule = None
    Rewriter.insert_op(zero, InsertPoint.before(kernel))

    (store,) = _epilogue(found)
    _slice_k(found, splits)
    assert isinstance(store, tile.StoreOp)
    add = tile.AtomicAddOp(store.value, store.memref, store.indices)
    Rewriter.replace_op(store, add)
    erase_dead(list(kernel.walk()))

    found_zero = find_contraction(zero)
    assert found_zero is not None, "a clone of a contraction is a contraction"
    nothing = arith.ConstantOp(FloatAttr(0.0, f32))
    nothing.result.name_hint = "zero"
    Rewriter.insert_op(nothing, InsertPoint.before(found_zero.reduce[0]))
    found_zero.reduce[0].res[0].replace_all_uses_with(nothing.result)
    Rewriter.erase_op(found_zero.reduce[0])
    erase_dead(list(zero.walk()))

    partial_args = _drop_unused_arguments(kernel)
    zero_args = _drop_unused_arguments(zero)
    for launch in _launch_sites(module, name):
        args = list(launch.args)
        zero_launch = tile.LaunchOp(zero.sym_name.data, [args[k] for k in zero_args])
        partial_launch = tile.LaunchOp(name, [args[k] for k in partial_args])
        Rewriter.replace_op(launch, [zero_launch, partial_launch], [])
    return zero


def _drop_unused_arguments(kernel: tile.KernelOp) -> list[int]:
    """Erases the buffer arguments the kernel no longer touches (the partial kernel writes
    only `ws`; the combine reads no operand); returns the positions kept."""
    block = kernel.body.block
    kept = [k for k, arg in enumerate(block.args) if arg.uses]
    for arg in [arg for arg in block.args if not arg.uses]:
        block.erase_arg(arg)
    return kept


@dataclass(frozen=True)
class TileSplitKPass(Tunable):
    """Contractions with too few output tiles: S partial sums over K slices, combined in
    order by a second kernel (see the module docstring).

    `splits` 0 means "the heuristic's choice", 1 never splits; a kernel's `schedule` knob
    `splits` wins over both.
    """

    name = "tile-split-k"
    knobs = ("splits",)

    splits: int = 0
    sms: int = DEFAULT_SMS
    #: Slices add into a zeroed output with `tile.atomic_add` instead of a combine kernel,
    #: where the epilogue is a plain f32 store (knob `split_atomic`); not deterministic.
    atomic: bool = False

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        found = find_contraction(kernel)
        return found is not None and can_split(found) and not schedule.has_knob(kernel, "splits")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(splits=SPLITS)

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        module = kernel.parent_op()  # the helper kernels go beside this one
        assert isinstance(module, ModuleOp)
        found = find_contraction(kernel)
        if found is None or not can_split(found):
            return
        splits = schedule.read_knob(
            kernel, "splits", self.splits or default_splits(found, self.sms)
        )
        if splits == 1:
            return
        if splits not in legal_splits(found):
            raise PassFailedException(
                f"tile.kernel @{kernel.sym_name.data}: splits {splits} must be one of "
                f"{legal_splits(found)} (they divide the outer K extent "
                f"{trip_count(found.reduce[0])} into slices of at least {MIN_SLICE})"
            )
        atomic = schedule.read_knob(kernel, "split_atomic", int(self.atomic))
        if atomic and adds_atomically(found):
            split_atomically(module, found, splits)
        else:
            atomic = 0
            split_contraction(module, found, splits)
        schedule.write_knob(kernel, "splits", splits)
        if atomic:
            schedule.write_knob(kernel, "split_atomic", 1)
