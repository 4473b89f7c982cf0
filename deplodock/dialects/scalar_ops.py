"""What deplodock relies on about xDSL's `arith` and `math` ops, in one place.

The interpreters (numpy), the CUDA printer (C) and the cost model (flop counts) each walk
the same scalar ops and must agree on how to classify them; the classes live here.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.ir import Operation

#: The casts: the result is the operand converted to the result type (rounded for floats,
#: wrapped or extended for integers). They move a value between types; they are no flops.
CAST_OPS: tuple[type[Operation], ...] = (
    arith.IndexCastOp,
    arith.SIToFPOp,
    arith.UIToFPOp,
    arith.FPToSIOp,
    arith.FPToUIOp,
    arith.ExtFOp,
    arith.TruncFOp,
    arith.ExtSIOp,
    arith.ExtUIOp,
    arith.TruncIOp,
)

#: Scalar ops that produce a float without computing one: constants, selects, conversions
#: and comparisons (whose result is i1). The cost model counts every other float op.
NOT_FLOPS: tuple[type[Operation], ...] = (
    arith.ConstantOp,
    arith.SelectOp,
    *CAST_OPS,
    arith.BitcastOp,
    arith.CmpfOp,
)
