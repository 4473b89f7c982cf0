"""Contractions of the torch dialect: matmul, bmm, linear, scaled dot-product attention."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, Float64Type, FloatAttr, TensorType, f64, i1
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, prop_def

from deplodock.dialects.queries import element_type_of, shape_of
from deplodock.dialects.torch.base import (
    BinaryOp,
    Props,
    TorchOp,
    Types,
    broadcast_shapes,
    fail,
    fmt,
    int_prop,
    like,
    matmul_shape,
)


@irdl_op_definition
class MatmulOp(BinaryOp):
    """`torch.matmul`: 1-D..N-D operands, batch dims broadcast."""

    name = "torch.matmul"

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        return like(types[0], matmul_shape(cls.name, shape_of(types[0]), shape_of(types[1])))


@irdl_op_definition
class BmmOp(BinaryOp):
    """Batched matmul of two rank-3 tensors with equal batch sizes."""

    name = "torch.bmm"

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        a, b = shape_of(types[0]), shape_of(types[1])
        if len(a) != 3 or len(b) != 3:
            fail(cls.name, f"operands must have rank 3, got {fmt(a)} and {fmt(b)}")
        if a[0] != b[0]:
            fail(cls.name, f"batch sizes {a[0]} and {b[0]} differ")
        return like(types[0], matmul_shape(cls.name, a, b))


@irdl_op_definition
class LinearOp(TorchOp):
    """`input @ weight.T + bias` with weight `(out, in)` and bias `(out,)`."""

    name = "torch.linear"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)

    def __init__(self, input: SSAValue, weight: SSAValue, bias: SSAValue | None = None):
        self._init([input, weight, bias], {})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        x, w = shape_of(types[0]), shape_of(types[1])
        if len(w) != 2 or not x:
            fail(cls.name, f"weight must have rank 2 and input rank >= 1, got {fmt(w)}, {fmt(x)}")
        if x[-1] != w[1]:
            fail(cls.name, f"inner dimensions {x[-1]} and {w[1]} differ")
        if types[2] is not None and shape_of(types[2]) != (w[0],):
            fail(cls.name, f"bias shape {fmt(shape_of(types[2]))} is not {w[0]}")
        return like(types[0], (*x[:-1], w[0]))


@irdl_op_definition
class ScaledDotProductAttentionOp(TorchOp):
    """`softmax(q @ k^T * scale + mask) @ v` over the last two dims, as
    `F.scaled_dot_product_attention` (no dropout).

    q is `(..., Hq, L, E)`, k `(..., Hk, S, E)`, v `(..., Hk, S, Ev)`, the result
    `(..., Hq, L, Ev)`. `is_causal` keeps the keys `s <= l`; `attn_mask` (broadcast to
    `(..., Hq, L, S)`) is a bool keep-mask or an additive float mask. `enable_gqa` lets query
    head `h` read key/value head `h floordiv (Hq / Hk)`. `scale` is explicit (the frontend
    fills in PyTorch's default `1 / sqrt(E)`).
    """

    name = "torch.scaled_dot_product_attention"
    query = operand_def(TensorType)
    key = operand_def(TensorType)
    value = operand_def(TensorType)
    attn_mask = opt_operand_def(TensorType)
    is_causal = prop_def(BoolAttr)
    scale = prop_def(FloatAttr[Float64Type])
    enable_gqa = prop_def(BoolAttr)
    SAME_OPERAND_TYPES: ClassVar[bool] = False

    def __init__(
        self,
        query: SSAValue,
        key: SSAValue,
        value: SSAValue,
        attn_mask: SSAValue | None,
        scale: float,
        is_causal: bool = False,
        enable_gqa: bool = False,
    ):
        props = {
            "is_causal": BoolAttr.from_bool(is_causal),
            "scale": FloatAttr(scale, f64),
            "enable_gqa": BoolAttr.from_bool(enable_gqa),
        }
        self._init([query, key, value, attn_mask], props)

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        q, k, v = (shape_of(t) for t in types[:3])
        elt = element_type_of(types[0])
        if element_type_of(types[1]) != elt or element_type_of(types[2]) != elt:
            fail(cls.name, "query, key and value must have the same element type")
        if not len(q) == len(k) == len(v) >= 2:
            fail(cls.name, f"query, key, value need one rank >= 2: {fmt(q)}, {fmt(k)}, {fmt(v)}")
        if q[-1] != k[-1] or k[-2] != v[-2] or k[:-2] != v[:-2]:
            fail(cls.name, f"shapes {fmt(q)}, {fmt(k)}, {fmt(v)} do not match")
        group = query_group(cls.name, q, k, int_prop(props, "enable_gqa") != 0)
        if group and (q[:-3] != k[:-3]):
            fail(cls.name, f"batch dims of {fmt(q)} and {fmt(k)} differ")
        out = (*q[:-1], v[-1])
        if types[3] is not None:
            m, m_elt = shape_of(types[3]), element_type_of(types[3])
            if m_elt not in (i1, elt):
                fail(cls.name, f"attn_mask must be i1 or {elt}, got {m_elt}")
            scores = (*q[:-1], k[-2])
            if broadcast_shapes(cls.name, m, scores) != scores:
                fail(cls.name, f"attn_mask {fmt(m)} does not broadcast to {fmt(scores)}")
        return like(types[0], out)


def query_group(op: str, q: tuple[int, ...], k: tuple[int, ...], enable_gqa: bool) -> int:
    """Query heads per key/value head (1 without GQA); 0 for rank-2 operands (no heads)."""
    if len(q) < 3:
        return 0
    if q[-3] == k[-3]:
        return 1
    if not enable_gqa or k[-3] == 0 or q[-3] % k[-3]:
        fail(op, f"{q[-3]} query heads and {k[-3]} key/value heads need enable_gqa (divisible)")
    return q[-3] // k[-3]


OPS: tuple[type[TorchOp], ...] = (MatmulOp, BmmOp, LinearOp, ScaledDotProductAttentionOp)
"""The ops of this module, in the order the `Torch` dialect lists them."""

__all__ = ["query_group", *(op.__name__ for op in OPS)]
