"""`tile-clamp-masked-loads`: a load whose value a mask throws away reads the mask's edge.

Trigger: a scalar global `tile.load` whose only use, through single-use float arithmetic, is
the value a `select` keeps where a mask `key <= query` (or `key < query`) holds (causal
attention's `select(key <= query, s * scale, -inf)`), with `key` one of the load's indices
and both `key` and `query` non-negative.

Rewrite: that index becomes `min(key, query)`. Where the mask holds it is `key`, as before;
where it does not, the value is thrown away, and the load reads the element at `query`
instead, which is in bounds (it is at most `key`) and which the lane at the edge reads anyway.
A warp whose keys all lie past the diagonal then asks for one sector instead of four, and
the row's masked half never leaves DRAM: the causal softmax statistics of SDPA read the
scores below the diagonal only.

    %s = tile.load %x[%row, %key]                  %safe = arith.minsi %key, %row : index
    %v = arith.mulf %s, %scale : f32        ==>    %s = tile.load %x[%row, %safe]
    %keep = arith.cmpi sle, %key, %row : index     ... (unchanged)
    %p = arith.select %keep, %v, %neg_inf : f32

Vector loads are left alone (their lanes share one address), and so are loads whose value
has another use.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.hardware import is_shared
from deplodock.dialects.queries import constant_index
from deplodock.passes.tile.causal_skip import key_bound
from deplodock.passes.tile.kernel_pass import TileKernelPass

#: Index arithmetic that keeps non-negative operands non-negative.
_NON_NEGATIVE_OPS = (
    arith.AddiOp,
    arith.MuliOp,
    arith.DivSIOp,
    arith.FloorDivSIOp,
    arith.RemSIOp,
    arith.MinSIOp,
    arith.MaxSIOp,
)


def non_negative(value: SSAValue) -> bool:
    """Whether `value` is provably >= 0: a non-negative constant, a block or thread id, a
    loop index from a non-negative start, or sums, products, quotients, remainders and
    extremes of those."""
    if isinstance(value, BlockArgument):
        owner = value.block.parent_op()
        if isinstance(owner, tile.GridOp | tile.ThreadsOp):
            return True
        return (
            isinstance(owner, tile.ForOp)
            and value is owner.induction_var
            and non_negative(owner.lb)
        )
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        constant = constant_index(value)
        return constant is not None and constant >= 0
    if isinstance(op, tile.BlockTileOp):
        return True
    return isinstance(op, _NON_NEGATIVE_OPS) and all(non_negative(v) for v in op.operands)


def _kept_by(load: tile.LoadOp) -> arith.SelectOp | None:
    """The `select` that alone decides whether `load`'s value is used: its value flows only
    through single-use float ops into the select's kept operand."""
    value: SSAValue = load.res
    while len(uses := list(value.uses)) == 1:
        (use,) = uses
        user = use.operation
        if isinstance(user, arith.SelectOp):
            return user if use.index == 1 else None
        if isinstance(user, arith.CmpfOp) or not _is_float_math(user):
            return None
        value = user.results[0]
    return None


def _is_float_math(op: Operation) -> bool:
    return isinstance(
        op,
        arith.MulfOp
        | arith.AddfOp
        | arith.SubfOp
        | arith.DivfOp
        | arith.NegfOp
        | arith.ExtFOp
        | arith.TruncFOp
        | math.ExpOp,
    )


def _mask_bounds(select: arith.SelectOp) -> tuple[SSAValue, SSAValue] | None:
    """(key, query) of the select's condition when it keeps only keys up to the query
    (`key <= query` or `key < query`, `causal_skip.key_bound`): there `min(key, query)` is
    the key itself."""
    cmp = select.cond.owner
    if not isinstance(cmp, arith.CmpiOp) or (bound := key_bound(cmp)) is None:
        return None
    key, query, _ = bound
    return key, query


def clamp(load: tile.LoadOp) -> bool:
    """Rewrites `load`'s key index to `min(key, query)` where the pass applies (module doc)."""
    if is_shared(load.memref.type) or (select := _kept_by(load)) is None:
        return False
    bounds = _mask_bounds(select)
    if bounds is None:
        return False
    key, query = bounds
    positions = [i for i, index in enumerate(load.indices) if index is key]
    if not positions or not non_negative(key) or not non_negative(query):
        return False
    safe = arith.MinSIOp(key, query)
    safe.result.name_hint = "safe"
    Rewriter.insert_op(safe, InsertPoint.before(load))
    for position in positions:
        load.operands[1 + position] = safe.result  # operand 0 is the memref
    return True


@dataclass(frozen=True)
class TileClampMaskedLoadsPass(TileKernelPass):
    """Loads whose value a `key <= query` mask discards read at `min(key, query)`."""

    name = "tile-clamp-masked-loads"

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        for load in [o for o in kernel.walk() if isinstance(o, tile.LoadOp)]:
            clamp(load)
