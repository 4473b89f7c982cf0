"""The reduction kinds (add, mul, max, min) and everything each one means.

A reduction appears at every level: `tensor.reduce`, a reduce loop's combining op in `loop`,
`tile.combine` across threads, the warp shuffles and shared partials of `kernel`, and the
numpy reductions of the interpreters. All of them ask the same questions of a kind (which
`arith` op combines two partials, what the identity is, which numpy ufunc folds an array),
so the answers live here, on `ReduceKind`, and nowhere else.

```python
ReduceKind.MAX.combiner(f32)            # arith.MaximumfOp: combines two partials
ReduceKind.MAX.identity_attr(i32)       # -2147483648 : i32, the neutral element
ReduceKind.of_combiner(arith.MaxnumfOp) # ReduceKind.MAX: recognizes a reduce loop's update
ReduceKind.ADD.numpy_ufunc.reduce(a)    # np.add.reduce: what the interpreters fold with
```
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.str_enum import StrEnum


class ReduceKind(StrEnum):
    """A reduction combiner: associative and commutative, so partials may be combined in
    any order (up to floating-point rounding)."""

    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"

    @property
    def identity(self) -> float:
        """The neutral element as a Python float (0, 1, -inf, +inf)."""
        return _IDENTITY[self]

    def identity_attr(self, element_type: Attribute) -> FloatAttr | IntegerAttr:
        """The neutral element as a constant of `element_type`; for integers, max and min
        start from the type's extremes (there is no integer infinity)."""
        if isinstance(element_type, AnyFloat):
            return FloatAttr(self.identity, element_type)
        if not isinstance(element_type, IntegerType | IndexType):
            raise TypeError(f"no {self.value} identity for element type {element_type}")
        bits = element_type.width.data if isinstance(element_type, IntegerType) else 64
        extremes = {ReduceKind.MAX: -(2 ** (bits - 1)), ReduceKind.MIN: 2 ** (bits - 1) - 1}
        value = extremes[self] if self in extremes else int(self.identity)
        return IntegerAttr(value, element_type)

    def combiner(self, element_type: Attribute) -> type[Operation]:
        """The `arith` op class that combines two partials of `element_type`.

        Float max/min are `maximumf`/`minimumf`, which propagate NaN like `torch.amax`.
        """
        table = _FLOAT_COMBINERS if isinstance(element_type, AnyFloat) else _INT_COMBINERS
        return table[self]

    def combine(self, lhs: SSAValue, rhs: SSAValue) -> Operation:
        """A new op combining two SSA values of one type (not inserted anywhere)."""
        return self.combiner(lhs.type)(lhs, rhs)  # type: ignore[call-arg]

    @property
    def numpy_ufunc(self) -> np.ufunc:
        """The numpy ufunc whose `reduce` folds an array with this kind (NaN propagates)."""
        return _UFUNCS[self]

    @staticmethod
    def of_combiner(op_type: type[Operation]) -> ReduceKind | None:
        """The kind an `arith` op combines with when it is the update of a reduce loop's
        accumulator (`acc = op(acc, x)`), or None when it is not a combiner."""
        return _KIND_OF_COMBINER.get(op_type)


_IDENTITY: dict[ReduceKind, float] = {
    ReduceKind.ADD: 0.0,
    ReduceKind.MUL: 1.0,
    ReduceKind.MAX: -math.inf,
    ReduceKind.MIN: math.inf,
}

_FLOAT_COMBINERS: dict[ReduceKind, type[Operation]] = {
    ReduceKind.ADD: arith.AddfOp,
    ReduceKind.MUL: arith.MulfOp,
    ReduceKind.MAX: arith.MaximumfOp,
    ReduceKind.MIN: arith.MinimumfOp,
}

_INT_COMBINERS: dict[ReduceKind, type[Operation]] = {
    ReduceKind.ADD: arith.AddiOp,
    ReduceKind.MUL: arith.MuliOp,
    ReduceKind.MAX: arith.MaxSIOp,
    ReduceKind.MIN: arith.MinSIOp,
}

#: Every op recognized as a combiner: the canonical ones, plus the NaN-ignoring float forms.
_KIND_OF_COMBINER: dict[type[Operation], ReduceKind] = {
    **{op: kind for kind, op in _FLOAT_COMBINERS.items()},
    **{op: kind for kind, op in _INT_COMBINERS.items()},
    arith.MaxnumfOp: ReduceKind.MAX,
    arith.MinnumfOp: ReduceKind.MIN,
}

_UFUNCS: dict[ReduceKind, np.ufunc] = {
    ReduceKind.ADD: np.add,
    ReduceKind.MUL: np.multiply,
    ReduceKind.MAX: np.maximum,
    ReduceKind.MIN: np.minimum,
}


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """`#tensor<kind add>` in generic form; printed as a bare keyword by the ops."""

    name = "tensor.kind"
