"""Layout ops of the torch dialect (views, slices, concatenation) and the gathers
(`torch.embedding`, `torch.index`): every output element is one input element."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from math import prod
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    f64,
    i32,
    i64,
)
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, var_operand_def

from deplodock.dialects.queries import element_type_of, shape_of
from deplodock.dialects.torch.base import (
    DimOp,
    Props,
    Shape,
    ShapedByResultOp,
    TorchOp,
    Types,
    UnaryOp,
    array_attr,
    broadcast_shapes,
    check_dim,
    fail,
    fmt,
    i64_attr,
    int_prop,
    ints_prop,
    like,
)


@irdl_op_definition
class TransposeOp(UnaryOp):
    name = "torch.transpose"
    dim0 = prop_def(IntegerAttr[I64])
    dim1 = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, dim0: int, dim1: int):
        super().__init__(input, dim0=i64_attr(dim0), dim1=i64_attr(dim1))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, d0, d1 = list(shape_of(types[0])), int_prop(props, "dim0"), int_prop(props, "dim1")
        check_dim(cls.name, "dim0", d0, len(shape))
        check_dim(cls.name, "dim1", d1, len(shape))
        shape[d0], shape[d1] = shape[d1], shape[d0]
        return like(types[0], shape)


@irdl_op_definition
class PermuteOp(UnaryOp):
    name = "torch.permute"
    dims = prop_def(DenseArrayBase.constr(i64))

    def __init__(self, input: SSAValue, dims: Sequence[int]):
        super().__init__(input, dims=array_attr(dims))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dims = shape_of(types[0]), ints_prop(props, "dims")
        if sorted(dims) != list(range(len(shape))):
            fail(cls.name, f"dims {list(dims)} are not a permutation of rank {len(shape)}")
        return like(types[0], [shape[d] for d in dims])


@irdl_op_definition
class ReshapeOp(ShapedByResultOp):
    """view / reshape / flatten / squeeze: same elements, row-major, new shape."""

    name = "torch.reshape"

    def check(self, src: Shape, dst: Shape) -> None:
        if prod(src) != prod(dst):
            fail(self.name, f"cannot reshape {fmt(src)} ({prod(src)} elements) to {fmt(dst)}")


@irdl_op_definition
class ExpandOp(ShapedByResultOp):
    """Broadcast to the result shape (size-1 or missing leading dims stretch)."""

    name = "torch.expand"

    def check(self, src: Shape, dst: Shape) -> None:
        pairs = zip(reversed(src), reversed(dst), strict=False)
        if len(dst) < len(src) or any(s not in (1, d) for s, d in pairs):
            fail(self.name, f"cannot expand {fmt(src)} to {fmt(dst)}")


@irdl_op_definition
class UnsqueezeOp(DimOp):
    """A size-1 dim inserted at `dim` (which may be the rank)."""

    name = "torch.unsqueeze"

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dim = list(shape_of(types[0])), int_prop(props, "dim")
        check_dim(cls.name, "dim", dim, len(shape) + 1)
        return like(types[0], [*shape[:dim], 1, *shape[dim:]])


@irdl_op_definition
class SliceOp(UnaryOp):
    """Elements `start, start+step, ... < end` along `dim`; 0 <= start <= end <= size."""

    name = "torch.slice"
    dim = prop_def(IntegerAttr[I64])
    start = prop_def(IntegerAttr[I64])
    end = prop_def(IntegerAttr[I64])
    step = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, dim: int, start: int, end: int, step: int = 1):
        bounds = {"start": start, "end": end, "step": step}
        super().__init__(input, dim=i64_attr(dim), **{k: i64_attr(v) for k, v in bounds.items()})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dim = list(shape_of(types[0])), int_prop(props, "dim")
        start, end, step = int_prop(props, "start"), int_prop(props, "end"), int_prop(props, "step")
        check_dim(cls.name, "dim", dim, len(shape))
        if not (0 <= start <= end <= shape[dim] and step >= 1):
            fail(cls.name, f"bounds {start}:{end}:{step} not normalized for size {shape[dim]}")
        shape[dim] = (end - start + step - 1) // step
        return like(types[0], shape)


@irdl_op_definition
class CatOp(TorchOp):
    """Concatenation along `dim`; all other dims must agree."""

    name = "torch.cat"
    inputs = var_operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])

    def __init__(self, inputs: Sequence[SSAValue], dim: int):
        self._init([inputs], {"dim": i64_attr(dim)})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        ts, dim = types[0], int_prop(props, "dim")
        assert isinstance(ts, Sequence)
        if not ts:
            fail(cls.name, "needs at least one input")
        shapes = [shape_of(t) for t in ts]
        check_dim(cls.name, "dim", dim, len(shapes[0]))
        drop = [s[:dim] + s[dim + 1 :] for s in shapes]
        if any(len(s) != len(shapes[0]) or d != drop[0] for s, d in zip(shapes, drop, strict=True)):
            fail(cls.name, f"input shapes {', '.join(map(fmt, shapes))} differ outside dim {dim}")
        out = list(shapes[0])
        out[dim] = sum(s[dim] for s in shapes)
        return like(ts[0], out)


# --- gathers ---------------------------------------------------------------------------------


def _check_indices(op: str, types: Sequence[TensorType | Sequence[TensorType] | None]) -> None:
    for t in types:
        if element_type_of(t) not in (i64, i32):  # type: ignore[arg-type]
            fail(op, f"indices must be i64 or i32, got {element_type_of(t)}")  # type: ignore[arg-type]


@irdl_op_definition
class WindowOp(UnaryOp):
    """The sliding windows of pooling and convolution over the trailing `k = len(kernel)`
    dims: `out[..., o_1..o_k, j_1..j_k] = padded[..., o_i * stride_i + j_i * dilation_i]`,
    where `padded` is the input with `low` / `high` elements of `pad_value` added on each
    side of those dims. The result is `input.shape[:-k] + outputs + kernel`, every output
    position with its whole window (reductions over the last `k` dims then pool)."""

    name = "torch.window"
    kernel = prop_def(DenseArrayBase.constr(i64))
    stride = prop_def(DenseArrayBase.constr(i64))
    dilation = prop_def(DenseArrayBase.constr(i64))
    low = prop_def(DenseArrayBase.constr(i64))
    high = prop_def(DenseArrayBase.constr(i64))
    pad_value = prop_def(FloatAttr[Float64Type])

    def __init__(
        self,
        input: SSAValue,
        kernel: Sequence[int],
        stride: Sequence[int],
        dilation: Sequence[int],
        low: Sequence[int],
        high: Sequence[int],
        pad_value: float = 0.0,
    ):
        arrays = {"kernel": kernel, "stride": stride, "dilation": dilation}
        arrays |= {"low": low, "high": high}
        super().__init__(
            input,
            **{k: array_attr(v) for k, v in arrays.items()},
            pad_value=FloatAttr(pad_value, f64),
        )

    @staticmethod
    def output_sizes(sizes: Sequence[int], props: Props) -> tuple[int, ...] | str:
        """The number of window positions per windowed dim, or why there is none."""
        kernel, stride, dilation = (ints_prop(props, n) for n in ("kernel", "stride", "dilation"))
        low, high = ints_prop(props, "low"), ints_prop(props, "high")
        if not len(kernel) == len(stride) == len(dilation) == len(low) == len(high):
            return "kernel, stride, dilation, low and high must have one entry per dim"
        if min((*kernel, *stride, *dilation), default=1) < 1 or min((*low, *high), default=0) < 0:
            return "kernel, stride and dilation must be >= 1, padding >= 0"
        spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
        padded = [n + lo + hi for n, lo, hi in zip(sizes, low, high, strict=True)]
        if any(p < span for p, span in zip(padded, spans, strict=True)):
            return f"a window of span {fmt(spans)} does not fit in {fmt(padded)}"
        return tuple(
            (p - span) // st + 1 for p, span, st in zip(padded, spans, stride, strict=True)
        )

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, k = shape_of(types[0]), len(ints_prop(props, "kernel"))
        if not 1 <= k <= len(shape):
            fail(cls.name, f"{k} windowed dims for an input of rank {len(shape)}")
        outputs = cls.output_sizes(shape[len(shape) - k :], props)
        if isinstance(outputs, str):
            fail(cls.name, outputs)
        return like(types[0], [*shape[: len(shape) - k], *outputs, *ints_prop(props, "kernel")])


@irdl_op_definition
class EmbeddingOp(TorchOp):
    """`weight[indices]`: one row of `weight` per index; the result shape is
    `indices.shape + weight.shape[1:]`. Indices must be in `[0, weight.shape[0])`."""

    name = "torch.embedding"
    weight = operand_def(TensorType)
    indices = operand_def(TensorType)
    SAME_OPERAND_TYPES: ClassVar[bool] = False

    def __init__(self, weight: SSAValue, indices: SSAValue):
        self._init([weight, indices], {})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        w = shape_of(types[0])
        if not w:
            fail(cls.name, "weight must have rank >= 1")
        _check_indices(cls.name, [types[1]])
        return like(types[0], (*shape_of(types[1]), *w[1:]))


@irdl_op_definition
class IndexOp(TorchOp):
    """`input[indices_0, ..., indices_k-1]` (advanced indexing of the leading `k` dims):
    the index tensors broadcast to one shape `B` and the result is `B + input.shape[k:]`.
    Negative indices count from the end, as in PyTorch."""

    name = "torch.index"
    input = operand_def(TensorType)
    indices = var_operand_def(TensorType)
    SAME_OPERAND_TYPES: ClassVar[bool] = False

    def __init__(self, input: SSAValue, indices: Sequence[SSAValue]):
        self._init([input, indices], {})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, index_types = shape_of(types[0]), types[1]
        assert isinstance(index_types, Sequence)
        if not 1 <= len(index_types) <= len(shape):
            fail(cls.name, f"needs 1 to {len(shape)} index tensors, got {len(index_types)}")
        _check_indices(cls.name, index_types)
        shapes = [shape_of(t) for t in index_types]
        batch = reduce(lambda a, b: broadcast_shapes(cls.name, a, b), shapes)
        return like(types[0], (*batch, *shape[len(shapes) :]))


OPS: tuple[type[TorchOp], ...] = (
    TransposeOp,
    PermuteOp,
    ReshapeOp,
    UnsqueezeOp,
    ExpandOp,
    SliceOp,
    CatOp,
    WindowOp,
    EmbeddingOp,
    IndexOp,
)
"""The ops of this module, in the order the `Torch` dialect lists them."""

__all__ = [op.__name__ for op in OPS]
