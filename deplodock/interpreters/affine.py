"""Vectorised evaluation of xDSL affine expressions and maps over numpy index arrays.

`AffineMap.eval` works on one integer point at a time; the interpreters need a map applied
to a whole grid of coordinates at once (every output element of a `tensor.index_map`, every
iteration of a vectorised loop), so the dims here may be numpy integer arrays that broadcast.
Division and modulo follow the affine semantics (floor, non-negative remainder for a
positive divisor), which are numpy's `//` and `%`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineExpr, AffineMap
from xdsl.ir.affine.affine_expr import AffineConstantExpr, AffineDimExpr, AffineSymExpr

#: an integer or an integer numpy array (broadcastable with the other dims)
IndexValue = Any


def eval_affine_expr(
    expr: AffineExpr, dims: Sequence[IndexValue], symbols: Sequence[IndexValue] = ()
) -> IndexValue:
    """The value of `expr` with `dims`/`symbols` substituted (arrays broadcast)."""
    if isinstance(expr, AffineConstantExpr):
        return expr.value
    if isinstance(expr, AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, AffineSymExpr):
        return symbols[expr.position]
    assert isinstance(expr, AffineBinaryOpExpr), f"unknown affine expression {expr}"
    lhs = eval_affine_expr(expr.lhs, dims, symbols)
    rhs = eval_affine_expr(expr.rhs, dims, symbols)
    match expr.kind:
        case AffineBinaryOpKind.Add:
            return lhs + rhs
        case AffineBinaryOpKind.Mul:
            return lhs * rhs
        case AffineBinaryOpKind.FloorDiv:
            return np.floor_divide(lhs, rhs)
        case AffineBinaryOpKind.CeilDiv:
            return -np.floor_divide(-np.asarray(lhs), rhs)
        case AffineBinaryOpKind.Mod:
            return np.mod(lhs, rhs)


def eval_affine_map(
    amap: AffineMap, dims: Sequence[IndexValue], symbols: Sequence[IndexValue] = ()
) -> tuple[IndexValue, ...]:
    """Each result of `amap` evaluated at `dims` (one value or array per result)."""
    if len(dims) != amap.num_dims or len(symbols) != amap.num_symbols:
        raise ValueError(
            f"affine map {amap} takes {amap.num_dims} dims and {amap.num_symbols} symbols, "
            f"got {len(dims)} and {len(symbols)}"
        )
    return tuple(eval_affine_expr(e, dims, symbols) for e in amap.results)
