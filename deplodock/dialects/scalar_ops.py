"""What deplodock relies on about xDSL's `arith` and `math` ops, in one place.

The interpreters (numpy), the CUDA printer (C) and the cost model (flop counts) each walk
the same scalar ops and must agree on how to classify them; the classes live here, and so do
the ops whose traits xDSL leaves out (`UNDECLARED_PURE`, read by `effects.is_pure`).
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

#: The scalar ops xDSL 0.74 declares no memory effects for, though they compute only their
#: result, like their declared siblings (`remsi`, `extui`): without them `is_side_effect_free`
#: calls them unknown. `effects.is_pure` counts them pure; drop an entry once xDSL declares it
#: (`tests/dialects/test_effects.py` fails then).
UNDECLARED_PURE: tuple[type[Operation], ...] = (arith.RemUIOp, arith.ExtSIOp)
