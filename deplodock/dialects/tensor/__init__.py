"""The `tensor` dialect: three primitives every torch op decomposes into, plus gather and scan.

`tensor.elementwise` (a scalar `arith`/`math` body applied at every coordinate; inside it
`tensor.index` reads the coordinate itself), `tensor.reduce` (add/mul/max/min over some
dims, rank kept) and `tensor.index_map` (out[c] = in[map(c)] with an affine map: transpose,
reshape, slice, broadcast, concat...). `tensor.gather` is the one data-dependent read
(embedding lookups, advanced indexing), `tensor.scan` the one prefix combination (cumsum),
`tensor.recurrence` the one carried recurrence (an RNN, LSTM or GRU layer over a sequence).
Broadcasting is never implicit: it is an index map. See docs/ir.md section 2.

The dialect is named `tensor` and replaces xDSL's own `tensor` dialect in our tools.

The dialect is a package: `elementwise` (elementwise, yield, index), `reduce` (the reduce op;
the kinds are `dialects/reduce_kind.py`), `index_map`, `gather`, `scan` and `recurrence` (the
cells are `dialects/cell_kind.py`); shapes and element types come from `dialects/queries.py`.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from deplodock.dialects.cell_kind import CellKind, CellKindAttr
from deplodock.dialects.reduce_kind import ReduceKind, ReduceKindAttr
from deplodock.dialects.tensor.elementwise import ElementwiseOp, IndexOp, YieldOp
from deplodock.dialects.tensor.gather import GatherOp, gather_shape
from deplodock.dialects.tensor.index_map import IndexMapOp, expr_bounds
from deplodock.dialects.tensor.recurrence import RecurrenceOp
from deplodock.dialects.tensor.reduce import ReduceOp
from deplodock.dialects.tensor.scan import ScanOp

__all__ = [
    "CellKind",
    "CellKindAttr",
    "ElementwiseOp",
    "GatherOp",
    "IndexMapOp",
    "IndexOp",
    "RecurrenceOp",
    "ReduceKind",
    "ReduceKindAttr",
    "ReduceOp",
    "ScanOp",
    "TensorDialect",
    "YieldOp",
    "expr_bounds",
    "gather_shape",
]

TensorDialect = Dialect(
    "tensor",
    [ElementwiseOp, YieldOp, IndexOp, ReduceOp, IndexMapOp, GatherOp, ScanOp, RecurrenceOp],
    [ReduceKindAttr, CellKindAttr],
)
