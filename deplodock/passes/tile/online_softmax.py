"""`tile-online-softmax`: softmax's max sweep and sum-of-exponentials sweep fused into one.

Trigger: in a scheduled kernel, two thread-strided reduce sweeps over the same elements
(same start, bound and step; see `tile-row-on-chip`), each with one carried value:

- sweep A computes a per-thread max `%m_p` of some element `y`, reduced by
  `%m = tile.combine max %m_p`;
- sweep B sums `exp(z - %m)` (its only use of `%m` is that `arith.subf`, whose result feeds
  only the `math.exp` that is summed), reduced by `%s = tile.combine add %s_p`.

Knob `online_softmax` (0|1) on the kernel's `schedule`. Default 1 only when the row does not
stay in registers (more than `max_cells` elements a thread, as in `tile-row-on-chip`): a
row in registers is re-swept for free, while the fused sweep computes two exponentials per
element.

Rewrite: one sweep carrying the running max and the sum rescaled to it,

    m' = max(m, y);  s' = s * exp(m - m') + exp(z - m')

(with a max of -inf treated as 0 in the shifts, so that elements and threads that saw only
-inf add 0 instead of NaN). After it, `%m = tile.combine max %m_p` as before, each thread's
sum is rescaled to the block's max, `%s_p * exp(%m_p - %m)`, and combined with add. The
row is read from memory one time fewer (softmax: 2 sweeps instead of 3).

    %m_p = tile.for %k = %t to L step T iter_args(%a = %ninf) {      ==>
      %x = tile.load ...; %mx = arith.maximumf %a, %x; tile.yield %mx }
    %m = tile.combine max %m_p
    %s_p = tile.for %k2 = %t to L step T iter_args(%b = %zero) {
      %x2 = tile.load ...; %d = arith.subf %x2, %m; %e = math.exp %d; ... }
    %s = tile.combine add %s_p

    %m_p, %s_q = tile.for %k = %t to L step T iter_args(%a = %ninf, %b = %zero) {
      %x = tile.load ...; %mx = arith.maximumf %a, %x
      %b2 = %b * exp(%a - %mx); %x2 = tile.load ...; %d = arith.subf %x2, %mx; ... }
    %m = tile.combine max %m_p
    %s_p = %s_q * exp(%m_p - %m)
    %s = tile.combine add %s_p
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.queries import written_buffers
from deplodock.dialects.reduce_kind import ReduceKind
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.nests import body_ops, combiner_of
from deplodock.passes.tile.row_on_chip import _defined_in, _sweep_key


@dataclass
class _Pair:
    max_loop: tile.ForOp
    max_combine: tile.CombineOp
    sum_loop: tile.ForOp
    sum_combine: tile.CombineOp
    shift: arith.SubfOp
    #: Constants B uses that are defined after A: moved before the fused sweep.
    constants: list[arith.ConstantOp]


def _only_combine(loop: tile.ForOp) -> tile.CombineOp | None:
    if len(loop.res) != 1 or not loop.res[0].has_one_use():
        return None
    user = next(iter(loop.res[0].uses)).operation
    return user if isinstance(user, tile.CombineOp) else None


def _defined_before(value: SSAValue, anchor: Operation) -> bool:
    """Whether `value` is available at `anchor` (defined before it in its block, or above)."""
    owner = value.owner
    if not isinstance(owner, Operation):
        return not anchor.is_ancestor(owner.parent_op())  # type: ignore[union-attr, arg-type]
    ancestor = anchor.parent_block()
    op: Operation | None = owner
    while op is not None and op.parent_block() is not ancestor:
        op = op.parent_op()
    if op is None:
        return True
    return op.is_before_in_block(anchor)


def find_pair(kernel: tile.KernelOp) -> _Pair | None:
    threads = schedule.threads_of(kernel)
    if threads is None:
        return None
    loops = [loop for loop in schedule.top_loops(threads) if _sweep_key(loop, threads)]
    for a, b in itertools.pairwise(loops):
        if _sweep_key(a, threads) != _sweep_key(b, threads):
            continue
        if not (a.is_reduce and b.is_reduce):
            continue
        ca, cb = _only_combine(a), _only_combine(b)
        fa, fb = combiner_of(a, 0) if ca else None, combiner_of(b, 0) if cb else None
        if ca is None or cb is None or fa is None or fb is None:
            continue
        if (fa.kind, fb.kind) != (ReduceKind.MAX, ReduceKind.ADD) or ca.width != cb.width:
            continue
        if not (ca.result.type == cb.result.type and ca.parent_op() is threads):
            continue
        uses = [u.operation for u in ca.result.uses if b.is_ancestor(u.operation)]
        if len(uses) != 1 or not isinstance(shift := uses[0], arith.SubfOp):
            continue
        if shift.rhs is not ca.result or shift.parent_op() is not b:
            continue
        if not shift.result.has_one_use():
            continue
        exp = next(iter(shift.result.uses)).operation
        element = fb.op.operands[1 - fb.acc_position]
        if not isinstance(exp, math.ExpOp) or exp.result is not element:
            continue
        external = {v for op in b.body.walk() for v in op.operands if not _defined_in(v, b)}
        external = (external | set(b.inits)) - {ca.result}
        late = [v.owner for v in external if not _defined_before(v, a)]
        if all(isinstance(op, arith.ConstantOp) for op in late):
            return _Pair(a, ca, b, cb, shift, late)  # type: ignore[arg-type]
    return None


def _emit(op: Operation, point: InsertPoint, name: str | None = None) -> SSAValue:
    Rewriter.insert_op(op, point)
    if name:
        op.results[0].name_hint = name
    return op.results[0]


@dataclass
class _Safe:
    """`safe(v)`: `v`, or 0 where it is -inf (so `x - safe(v)` stays -inf for x = -inf)."""

    ninf: SSAValue
    zero: SSAValue

    @staticmethod
    def at(point: InsertPoint, element_type) -> _Safe:
        ninf = _emit(arith.ConstantOp(FloatAttr(float("-inf"), element_type)), point, "ninf")
        zero = _emit(arith.ConstantOp(FloatAttr(0.0, element_type)), point, "fzero")
        return _Safe(ninf, zero)

    def __call__(self, value: SSAValue, point: InsertPoint) -> SSAValue:
        is_ninf = _emit(arith.CmpfOp(value, self.ninf, "oeq"), point)
        return _emit(arith.SelectOp(is_ninf, self.zero, value), point, "shift")


def _share_loads(block_ops: list[Operation], readonly: set[SSAValue]) -> None:
    """A load of the same element as an earlier load in the same block reuses it."""
    first: dict[tuple, SSAValue] = {}
    for op in block_ops:
        if isinstance(op, tile.LoadOp) and op.memref in readonly:
            key = (op.memref, *op.indices)
            if key in first:
                op.res.replace_all_uses_with(first[key])
                Rewriter.erase_op(op)
            else:
                first[key] = op.res


def fuse(pair: _Pair, readonly: set[SSAValue]) -> None:
    a, b = pair.max_loop, pair.sum_loop
    for const in pair.constants:
        const.detach()
        Rewriter.insert_op(const, InsertPoint.before(a))
    safe = _Safe.at(InsertPoint.before(a), pair.max_combine.result.type)
    fused = tile.ForOp(a.lb, a.upper, a.step_value, [a.inits[0], b.inits[0]])
    Rewriter.insert_op(fused, InsertPoint.before(a))
    iv, m_run, s_run = fused.body.block.args
    iv.name_hint = a.induction_var.name_hint
    m_run.name_hint, s_run.name_hint = "m_run", "s_run"
    end = InsertPoint.at_end(fused.body.block)
    mapper: dict[SSAValue, SSAValue] = {a.induction_var: iv, a.iter_args[0]: m_run}
    for op in body_ops(a):
        Rewriter.insert_op(op.clone(value_mapper=mapper), end)
    a_yield = a.body.block.last_op
    assert isinstance(a_yield, tile.YieldOp)
    m_new = mapper[a_yield.arguments[0]]
    shift = safe(m_new, end)
    delta = _emit(arith.SubfOp(m_run, shift), end)
    scale = _emit(math.ExpOp(delta), end, "rescale")
    s_scaled = _emit(arith.MulfOp(s_run, scale), end)
    mapper = {b.induction_var: iv, b.iter_args[0]: s_scaled, pair.max_combine.result: shift}
    for op in body_ops(b):
        Rewriter.insert_op(op.clone(value_mapper=mapper), end)
    b_yield = b.body.block.last_op
    assert isinstance(b_yield, tile.YieldOp)
    Rewriter.insert_op(tile.YieldOp(m_new, mapper[b_yield.arguments[0]]), end)
    _share_loads(list(fused.body.block.ops), readonly)
    m_p, s_q = fused.res
    m_p.name_hint = a.res[0].name_hint
    s_q.name_hint = f"{b.res[0].name_hint or 's'}_run"
    a.res[0].replace_all_uses_with(m_p)
    # Each thread's sum, rescaled to the block's max, then the add combine.
    point = InsertPoint.before(pair.sum_combine)
    total_max = safe(pair.max_combine.result, point)
    delta = _emit(arith.SubfOp(m_p, total_max), point)
    rescaled = _emit(arith.MulfOp(s_q, _emit(math.ExpOp(delta), point)), point)
    rescaled.name_hint = b.res[0].name_hint
    b.res[0].replace_all_uses_with(rescaled)
    Rewriter.erase_op(a)
    Rewriter.erase_op(b)


def online_softmax(kernel: tile.KernelOp, max_cells: int) -> None:
    pair = find_pair(kernel)
    if pair is None:
        return
    cells = -(-pair.max_loop.upper // pair.max_loop.step_value)
    if schedule.read_knob(kernel, "online_softmax", int(cells > max_cells)):
        fuse(pair, {a for a in kernel.body.block.args} - written_buffers(kernel))
        schedule.write_knob(kernel, "online_softmax", 1)
    else:
        schedule.write_knob(kernel, "online_softmax", 0)


@dataclass(frozen=True)
class TileOnlineSoftmaxPass(Tunable):
    """Max and sum-of-exp sweeps fused into one online sweep (see module doc)."""

    name = "tile-online-softmax"
    knobs = ("online_softmax",)

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return find_pair(kernel) is not None and not schedule.has_knob(kernel, "online_softmax")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(online_softmax=(0, 1))

    #: Rows of at most this many elements a thread stay in registers: not fused.
    max_cells: int = 32

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not schedule.is_tiled_contraction(kernel):
            online_softmax(kernel, self.max_cells)
