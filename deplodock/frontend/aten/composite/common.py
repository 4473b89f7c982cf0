"""Shape helpers the composite handlers share: a value's static shape, a reshape only where
the shape changes, and a per-channel `(C,)` parameter shaped to broadcast along dim 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.core import Emitter


def tensor_shape(x: SSAValue) -> tuple[int, ...]:
    assert isinstance(x.type, TensorType)
    return tuple(x.type.get_shape())


def reshaped(e: Emitter, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    return x if tensor_shape(x) == tuple(shape) else e.emit(T.ReshapeOp(x, shape))


def per_channel(e: Emitter, p: Any, rank: int) -> SSAValue | None:
    """A `(C,)` parameter as `(C, 1, ..., 1)`, to broadcast along dim 1 of a rank-`rank`
    input (None stays None)."""
    if p is None:
        return None
    value = e.tensor(p)
    return reshaped(e, value, [tensor_shape(value)[0]] + [1] * (rank - 2))
