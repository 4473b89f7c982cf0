"""The `tensor` dialect: three primitives every torch op decomposes into, plus gather.

`tensor.elementwise` (a scalar `arith`/`math` body applied at every coordinate; inside it
`tensor.index` reads the coordinate itself), `tensor.reduce` (add/mul/max/min over some
dims, rank kept) and `tensor.index_map` (out[c] = in[map(c)] with an affine map: transpose,
reshape, slice, broadcast, concat...). `tensor.gather` is the one data-dependent read
(embedding lookups, advanced indexing). Broadcasting is never implicit: it is an index map.
See docs/ir.md section 2.

The dialect is named `tensor` and replaces xDSL's own `tensor` dialect in our tools.

The dialect is a package: `elementwise` (elementwise, yield, index), `reduce` (reduce and the
reduction kinds), `index_map`, `gather`, and `base` with the shared type helpers.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from deplodock.dialects.tensor.base import element_type, shape_of
from deplodock.dialects.tensor.elementwise import ElementwiseOp, IndexOp, YieldOp
from deplodock.dialects.tensor.gather import GatherOp, gather_shape
from deplodock.dialects.tensor.index_map import IndexMapOp, expr_bounds
from deplodock.dialects.tensor.reduce import ReduceKind, ReduceKindAttr, ReduceOp

__all__ = [
    "ElementwiseOp",
    "GatherOp",
    "IndexMapOp",
    "IndexOp",
    "ReduceKind",
    "ReduceKindAttr",
    "ReduceOp",
    "TensorDialect",
    "YieldOp",
    "element_type",
    "expr_bounds",
    "gather_shape",
    "shape_of",
]

TensorDialect = Dialect(
    "tensor",
    [ElementwiseOp, YieldOp, IndexOp, ReduceOp, IndexMapOp, GatherOp],
    [ReduceKindAttr],
)
