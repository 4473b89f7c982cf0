"""Structured aten ops: reductions and norms, prefix sums and differences, contractions
and attention, layout ops and gathers."""

from __future__ import annotations

import math
from typing import Any

import torch
from xdsl.dialects.builtin import TensorType, i1
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.dialects.element_types import torch_dtype
from deplodock.dialects.queries import shape_of
from deplodock.frontend.aten.core import (
    AtenImportError,
    Emitter,
    Handler,
    aten,
    elt_of,
    handles,
    norm_dim,
    norm_dims,
    rank_of,
)

# --- reductions and normalizations ---------------------------------------------------------------


def _reduce_handler(op: type[T.ReductionOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        if a.get("dtype") is not None:
            raise AtenImportError("reductions with a dtype= argument need a cast")
        x = e.tensor(a["input"])
        return e.emit(op(x, norm_dims(a.get("dim"), rank_of(x)), bool(a.get("keepdim", False))))

    return handler


for _ops, _reduce in [
    ((aten.sum.dim_IntList, aten.sum.default), T.SumOp),
    ((aten.mean.dim, aten.mean.default), T.MeanOp),
    ((aten.amax.default, aten.max.default), T.AmaxOp),
    ((aten.amin.default, aten.min.default), T.AminOp),
]:
    handles(*_ops, emits=_reduce)(_reduce_handler(_reduce))


def _arg_extremum_handler(op: type[T.ArgExtremumOp]) -> Handler:
    """`argmax(x, dim, keepdim)`; without a dim, over the flattened tensor (a reshape to 1-D
    first, and to the all-ones shape after for `keepdim`)."""

    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        x = e.tensor(a["input"])
        if a.get("dim") is not None:
            return e.emit(op(x, norm_dim(a["dim"], rank_of(x)), bool(a.get("keepdim", False))))
        assert isinstance(x.type, TensorType)
        size = math.prod(x.type.get_shape())
        flat = x if x.type.get_shape() == (size,) else e.emit(T.ReshapeOp(x, [size]))
        index = e.emit(op(flat, 0))
        return index if index.type == out else e.emit(T.ReshapeOp(index, out.get_shape()))

    return handler


for _target, _arg in [(aten.argmax.default, T.ArgmaxOp), (aten.argmin.default, T.ArgminOp)]:
    handles(_target, emits=(_arg, T.ReshapeOp))(_arg_extremum_handler(_arg))


def _softmax_handler(op: type[T.SoftmaxLikeOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        if a.get("dtype") is not None or a.get("half_to_float"):
            raise AtenImportError("softmax with a dtype change needs a cast")
        x = e.tensor(a["input"])
        return e.emit(op(x, norm_dim(a["dim"], rank_of(x))))

    return handler


for _ops, _softmax in [
    ((aten.softmax.int, aten._softmax.default), T.SoftmaxOp),
    ((aten.log_softmax.int, aten._log_softmax.default), T.LogSoftmaxOp),
]:
    handles(*_ops, emits=_softmax)(_softmax_handler(_softmax))


def _optional(e: Emitter, x: Any) -> SSAValue | None:
    return None if x is None else e.tensor(x)


@handles(aten.rms_norm.default, emits=T.RmsNormOp)
def _rms_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    eps = a["eps"]
    if eps is None:  # PyTorch's default: the machine epsilon of the input dtype
        eps = torch.finfo(torch_dtype(elt_of(x))).eps
    return e.emit(T.RmsNormOp(x, _optional(e, a["weight"]), a["normalized_shape"], eps))


@handles(aten.layer_norm.default, emits=T.LayerNormOp)
def _layer_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x, w, b = e.tensor(a["input"]), _optional(e, a["weight"]), _optional(e, a["bias"])
    return e.emit(T.LayerNormOp(x, w, b, a["normalized_shape"], float(a["eps"])))


# --- contractions ----------------------------------------------------------------------------


@handles(aten.matmul.default, aten.mm.default, emits=T.MatmulOp)
def _matmul(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.MatmulOp(e.tensor(a["input"]), e.tensor(a.get("other", a.get("mat2")))))


@handles(aten.bmm.default, emits=T.BmmOp)
def _bmm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.BmmOp(e.tensor(a["input"]), e.tensor(a["mat2"])))


@handles(aten.linear.default, emits=T.LinearOp)
def _linear(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x, w = e.tensor(a["input"]), e.tensor(a["weight"])
    return e.emit(T.LinearOp(x, w, _optional(e, a["bias"])))


@handles(aten.addmm.default, emits=(T.MatmulOp, T.MulOp, T.AddOp))
def _addmm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`beta * input + alpha * (mat1 @ mat2)`."""
    bias = e.tensor(a["input"])
    mm = e.emit(T.MatmulOp(e.tensor(a["mat1"]), e.tensor(a["mat2"])))
    return e.binary(T.AddOp, e.scaled(mm, a["alpha"], mm), e.scaled(bias, a["beta"], bias))


# --- layout ------------------------------------------------------------------------------------


@handles(aten.t.default, emits=T.TransposeOp)
def _t(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return x if rank_of(x) < 2 else e.emit(T.TransposeOp(x, 0, 1))


@handles(aten.numpy_T.default, emits=T.PermuteOp)
def _numpy_t(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x.T` reverses all dims (a 0-d or 1-d tensor is itself)."""
    x = e.tensor(a["input"])
    rank = rank_of(x)
    return x if rank < 2 else e.emit(T.PermuteOp(x, list(reversed(range(rank)))))


@handles(aten.mT.default, aten.mH.default, aten.adjoint.default, emits=T.TransposeOp)
def _matrix_t(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x.mT` swaps the last two dims; `mH` and `adjoint` are the same on real tensors."""
    x = e.tensor(a["input"])
    if rank_of(x) < 2:
        raise AtenImportError("mT needs a tensor of rank >= 2")
    return e.emit(T.TransposeOp(x, rank_of(x) - 2, rank_of(x) - 1))


def _triangle_handler(op: type[T.TriangleOp]) -> Handler:
    return lambda e, a, out: e.emit(op(e.tensor(a["input"]), int(a["diagonal"])))


for _target, _triangle in [(aten.triu.default, T.TriuOp), (aten.tril.default, T.TrilOp)]:
    handles(_target, emits=_triangle)(_triangle_handler(_triangle))


@handles(aten.transpose.int, emits=T.TransposeOp)
def _transpose(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return e.emit(
        T.TransposeOp(x, norm_dim(a["dim0"], rank_of(x)), norm_dim(a["dim1"], rank_of(x)))
    )


@handles(aten.permute.default, emits=T.PermuteOp)
def _permute(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return e.emit(T.PermuteOp(x, [norm_dim(d, rank_of(x)) for d in a["dims"]]))


@handles(
    aten.view.default,
    aten.reshape.default,
    aten._unsafe_view.default,
    aten.flatten.using_ints,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    emits=T.ReshapeOp,
)
def _reshape(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return x if x.type == out else e.emit(T.ReshapeOp(x, out.get_shape()))


@handles(aten.expand.default, aten.expand_as.default, emits=T.ExpandOp)
def _expand(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return x if x.type == out else e.emit(T.ExpandOp(x, out.get_shape()))


@handles(aten.unsqueeze.default, emits=T.UnsqueezeOp)
def _unsqueeze(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return e.emit(T.UnsqueezeOp(x, norm_dim(a["dim"], rank_of(x) + 1)))


@handles(aten.slice.Tensor, emits=T.SliceOp)
def _slice(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    assert isinstance(x.type, TensorType)
    dim = norm_dim(a["dim"], rank_of(x))
    size = x.type.get_shape()[dim]
    start, end, step = slice(a["start"], a["end"], a["step"]).indices(size)
    end = max(start, end)
    if (start, end, step) == (0, size, 1):
        return x
    return e.emit(T.SliceOp(x, dim, start, end, step))


@handles(aten.select.int, emits=(T.SliceOp, T.ReshapeOp))
def _select(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    assert isinstance(x.type, TensorType)
    dim = norm_dim(a["dim"], rank_of(x))
    index = norm_dim(a["index"], x.type.get_shape()[dim])
    sliced = e.emit(T.SliceOp(x, dim, index, index + 1))
    return e.emit(T.ReshapeOp(sliced, out.get_shape()))


@handles(aten.cat.default, emits=T.CatOp)
def _cat(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`torch.cat`; like PyTorch it skips 1-D empty inputs whatever the others' rank (the
    legacy rule a KV cache that starts as `torch.tensor([])` relies on)."""
    xs = [e.cast(e.tensor(t), out.element_type) for t in a["tensors"]]  # cat promotes
    xs = [x for x in xs if tuple(shape_of(x.type)) != (0,)] or xs[:1]
    if len(xs) == 1:
        return xs[0]
    return e.emit(T.CatOp(xs, norm_dim(a["dim"], rank_of(xs[0]))))


# --- prefix sums and differences ---------------------------------------------------------------


@handles(aten.cumsum.default, emits=T.CumsumOp)
def _cumsum(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    if a.get("dtype") is not None:
        x = e.cast(x, out.element_type)
    return e.cast(e.emit(T.CumsumOp(x, norm_dim(a["dim"], rank_of(x)))), out.element_type)


@handles(aten.diff.default, emits=(T.CatOp, T.SliceOp, T.SubOp))
def _diff(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`diff(x) = y[1:] - y[:-1]` along `dim`, with `y = cat(prepend, x, append)`."""
    x = e.tensor(a["input"])
    if a["n"] != 1:
        raise AtenImportError("diff with n != 1 is not supported")
    if elt_of(x) == i1:
        raise AtenImportError("diff of bool tensors (logical xor) is not supported")
    dim = norm_dim(a["dim"], rank_of(x))
    parts = [e.cast(e.value(p), elt_of(x)) for p in (a["prepend"], x, a["append"]) if p is not None]
    y = parts[0] if len(parts) == 1 else e.emit(T.CatOp(parts, dim))
    assert isinstance(y.type, TensorType)
    size = y.type.get_shape()[dim]
    upper = e.emit(T.SliceOp(y, dim, 1, size))
    lower = e.emit(T.SliceOp(y, dim, 0, size - 1))
    return e.emit(T.SubOp(upper, lower))


# --- gathers and attention ---------------------------------------------------------------------


@handles(aten.embedding.default, emits=T.EmbeddingOp)
def _embedding(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.EmbeddingOp(e.tensor(a["weight"]), e.tensor(a["indices"])))


@handles(aten.scaled_dot_product_attention.default, emits=T.ScaledDotProductAttentionOp)
def _sdpa(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    if a["dropout_p"]:
        raise AtenImportError("scaled_dot_product_attention with dropout_p > 0")
    q, k, v = (e.tensor(a[n]) for n in ("query", "key", "value"))
    assert isinstance(q.type, TensorType)
    scale = a["scale"]
    if scale is None:  # PyTorch's default
        scale = 1.0 / math.sqrt(q.type.get_shape()[-1])
    mask = a["attn_mask"]
    if mask is not None:
        mask = e.tensor(mask)
        mask = mask if elt_of(mask) == i1 else e.cast(mask, elt_of(q))
    return e.emit(
        T.ScaledDotProductAttentionOp(
            q, k, v, mask, float(scale), bool(a["is_causal"]), bool(a["enable_gqa"])
        )
    )
