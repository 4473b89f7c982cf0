"""Reference CPU semantics of the `torch` dialect on whole numpy arrays.

This is the oracle every lower level is compared with, so each op is the plain textbook
formula. f16/bf16 inputs are computed in float32 (as PyTorch's CPU kernels accumulate) and the
result is rounded back to the result's element type with `round_to_type`, so an op's output
has exactly the precision its type promises.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from xdsl.dialects.builtin import TensorType
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.ir import Operation

from deplodock.dialects import torch as T
from deplodock.dialects.element_types import numpy_dtype, round_to_type


def _wide(x: Any) -> np.ndarray:
    """The array to compute with: f16 widened to f32, everything else as it is."""
    a = np.asarray(x)
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _out(op: Operation, value: Any) -> PythonValues:
    """The op's single result, cast (and bf16-rounded) to its tensor type, as a fresh array."""
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return (np.array(round_to_type(value, t.element_type), copy=True).reshape(t.get_shape()),)


def erf(x: np.ndarray) -> np.ndarray:
    """erf has no numpy ufunc; torch's is exact to the last ulp and vectorised."""
    return torch.special.erf(torch.from_numpy(np.ascontiguousarray(x))).numpy()


def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + erf(x * (1 / math.sqrt(2))))


def hardswish(x: np.ndarray) -> np.ndarray:
    """x * relu6(x + 3) / 6, relu6 being the clip to [0, 6] (NaN propagates)."""
    return x * np.clip(x + 3, 0, 6) / 6


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def hardsigmoid(x: np.ndarray) -> np.ndarray:
    """relu6(x + 3) / 6 (NaN propagates through the clip)."""
    return np.clip(x + 3, 0, 6) / 6


def softplus(x: np.ndarray, beta: float = 1.0, threshold: float = math.inf) -> np.ndarray:
    """log(1 + exp(beta x)) / beta, and x where beta x > threshold (as PyTorch)."""
    bx = x * x.dtype.type(beta)
    with np.errstate(over="ignore"):
        soft = np.log1p(np.exp(bx)) / x.dtype.type(beta)
    return np.where(bx > threshold, x, soft)


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), which cannot overflow."""
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def elu(x: np.ndarray, alpha: float, scale: float, input_scale: float) -> np.ndarray:
    """scale * x for x > 0, else scale * alpha * (exp(input_scale * x) - 1)."""
    with np.errstate(over="ignore"):
        negative = np.expm1(x * x.dtype.type(input_scale)) * x.dtype.type(alpha * scale)
    return np.where(x > 0, x * x.dtype.type(scale), negative)


def softmax(x: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    shifted = x - np.max(x, axis=dim, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))


def _trailing(x: np.ndarray, n: int) -> tuple[int, ...]:
    return tuple(range(x.ndim - n, x.ndim))


def rms_norm(x: np.ndarray, w: np.ndarray | None, n: int, eps: float) -> np.ndarray:
    ms = np.mean(x * x, axis=_trailing(x, n), keepdims=True)
    y = x / np.sqrt(ms + x.dtype.type(eps))
    return y if w is None else y * w


def layer_norm(
    x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, n: int, eps: float
) -> np.ndarray:
    axes = _trailing(x, n)
    centered = x - np.mean(x, axis=axes, keepdims=True)
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    y = centered / np.sqrt(var + x.dtype.type(eps))
    y = y if w is None else y * w
    return y if b is None else y + b


_UNARY: dict[type[Operation], Callable[[np.ndarray], np.ndarray]] = {
    T.NegOp: np.negative,
    T.ExpOp: np.exp,
    T.LogOp: np.log,
    T.SqrtOp: np.sqrt,
    T.RsqrtOp: lambda x: 1 / np.sqrt(x),
    T.AbsOp: np.abs,
    T.ReluOp: lambda x: np.maximum(x, 0),
    T.SigmoidOp: sigmoid,
    T.TanhOp: np.tanh,
    T.ErfOp: erf,
    T.HardswishOp: hardswish,
    T.HardsigmoidOp: hardsigmoid,
    T.MishOp: lambda x: x * np.tanh(softplus(x)),
    T.LogSigmoidOp: log_sigmoid,
    T.SiluOp: lambda x: x * sigmoid(x),
    T.CosOp: np.cos,
    T.SinOp: np.sin,
    T.LogicalNotOp: np.logical_not,
    T.AcosOp: np.arccos,
    T.AcoshOp: np.arccosh,
    T.AsinOp: np.arcsin,
    T.AsinhOp: np.arcsinh,
    T.AtanOp: np.arctan,
    T.AtanhOp: np.arctanh,
    T.CoshOp: np.cosh,
    T.SinhOp: np.sinh,
    T.TanOp: np.tan,
    T.Expm1Op: np.expm1,
    T.Log1pOp: np.log1p,
    T.Log2Op: np.log2,
    T.Log10Op: np.log10,
    T.CeilOp: np.ceil,
    T.FloorOp: np.floor,
    T.RoundOp: np.rint,
    T.TruncOp: np.trunc,
}

_BINARY: dict[type[Operation], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    T.AddOp: np.add,
    T.SubOp: np.subtract,
    T.MulOp: np.multiply,
    T.DivOp: lambda a, b: a / b if np.issubdtype(a.dtype, np.floating) else a // b,
    T.MaximumOp: np.maximum,
    T.MinimumOp: np.minimum,
    T.MatmulOp: np.matmul,
    T.BmmOp: np.matmul,
    T.EqOp: np.equal,
    T.NeOp: np.not_equal,
    T.LtOp: np.less,
    T.LeOp: np.less_equal,
    T.GtOp: np.greater,
    T.GeOp: np.greater_equal,
    T.LogicalAndOp: np.logical_and,
    T.LogicalOrOp: np.logical_or,
    T.Atan2Op: np.arctan2,
    T.PowTensorOp: np.power,
    T.BitwiseAndOp: np.bitwise_and,
    T.BitwiseOrOp: np.bitwise_or,
    T.BitwiseXorOp: np.bitwise_xor,
}


def scaled_dot_product_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None,
    scale: float,
    is_causal: bool,
) -> np.ndarray:
    """softmax(q k^T * scale + mask) v; key/value heads are repeated for GQA, and a row
    whose keys are all masked gives zeros (PyTorch's safe softmax)."""
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * q.dtype.type(scale)
    length, source = scores.shape[-2:]
    keep = np.ones((length, source), dtype=bool)
    if is_causal:
        keep = np.tril(keep)
    if mask is not None and mask.dtype == np.bool_:
        keep = keep & mask
    elif mask is not None:
        scores = scores + mask
    scores = np.where(keep, scores, -np.inf)
    peak = np.max(scores, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - peak)
        p = np.where(peak == -np.inf, 0.0, e / np.sum(e, axis=-1, keepdims=True))
    return np.matmul(p.astype(q.dtype), v)


_REDUCE: dict[type[Operation], Callable[..., np.ndarray]] = {
    T.SumOp: np.sum,
    T.ProdOp: np.prod,
    T.MeanOp: np.mean,
    T.AmaxOp: np.max,
    T.AminOp: np.min,
}


def _run_unary(
    _: InterpreterFunctions, __: Interpreter, op: Operation, args: PythonValues
) -> PythonValues:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # log(0) = -inf, ...
        return _out(op, _UNARY[type(op)](_wide(args[0])))


def _run_binary(
    _: InterpreterFunctions, __: Interpreter, op: Operation, args: PythonValues
) -> PythonValues:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # IEEE, as PyTorch
        return _out(op, _BINARY[type(op)](_wide(args[0]), _wide(args[1])))


def _run_reduce(
    _: InterpreterFunctions, __: Interpreter, op: T.ReductionOp, args: PythonValues
) -> PythonValues:
    dims = tuple(int(d) for d in op.dims.get_values())
    keep = bool(op.keepdim.value.data)
    return _out(op, _REDUCE[type(op)](_wide(args[0]), axis=dims, keepdims=keep))


def _table_functions() -> type[InterpreterFunctions]:
    """The ops that are one entry of `_UNARY`, `_BINARY` or `_REDUCE`: their `@impl`s are
    made from the tables (as a base class `register_impls` finds), not written one by one."""
    methods: dict[str, Any] = {}
    for table, run in ((_UNARY, _run_unary), (_BINARY, _run_binary), (_REDUCE, _run_reduce)):
        for op_type in table:
            methods[f"run_{op_type.__name__}"] = impl(op_type)(run)
    return type("TorchTableFunctions", (InterpreterFunctions,), methods)


_TorchTableFunctions = _table_functions()


@register_impls
class TorchFunctions(_TorchTableFunctions):
    """numpy implementations of every torch op: the table-driven ones from the base class,
    the others one `@impl` each."""

    @classmethod
    def implemented_op_types(cls) -> frozenset[type[Operation]]:
        """The ops with an `@impl` (the table-driven ones included), as registered with
        xDSL: what `tests/test_op_registry.py` compares with the dialect."""
        return frozenset(op_type for op_type, _ in cls._impls())

    @impl(T.ConstantOp)
    def run_constant(self, i: Interpreter, op: T.ConstantOp, args: PythonValues) -> PythonValues:
        t = op.result.type
        return _out(op, np.full(t.get_shape(), op.value.value.data, numpy_dtype(t.element_type)))

    @impl(T.WhereOp)
    def run_where(self, i: Interpreter, op: T.WhereOp, args: PythonValues) -> PythonValues:
        condition, x, y = (np.asarray(a) for a in args)
        return _out(op, np.where(condition, x, y))

    @impl(T.CastOp)
    def run_cast(self, i: Interpreter, op: T.CastOp, args: PythonValues) -> PythonValues:
        """Rounding to the result type is the cast (float -> int truncates, -> bool is != 0)."""
        return _out(op, np.asarray(args[0]))

    @impl(T.ArangeOp)
    def run_arange(self, i: Interpreter, op: T.ArangeOp, args: PythonValues) -> PythonValues:
        (n,) = op.result.type.get_shape()
        start, step = op.start.value.data, op.step.value.data
        return _out(op, start + step * np.arange(n, dtype=np.float64))

    @impl(T.CumsumOp)
    def run_cumsum(self, i: Interpreter, op: T.CumsumOp, args: PythonValues) -> PythonValues:
        x = _wide(args[0])
        dtype = np.int64 if not np.issubdtype(x.dtype, np.floating) else x.dtype
        return _out(op, np.cumsum(x, axis=op.dim.value.data, dtype=dtype))

    @impl(T.CumprodOp)
    def run_cumprod(self, i: Interpreter, op: T.CumprodOp, args: PythonValues) -> PythonValues:
        x = _wide(args[0])
        dtype = np.int64 if not np.issubdtype(x.dtype, np.floating) else x.dtype
        return _out(op, np.cumprod(x, axis=op.dim.value.data, dtype=dtype))

    @impl(T.EmbeddingOp)
    def run_embedding(self, i: Interpreter, op: T.EmbeddingOp, args: PythonValues) -> PythonValues:
        weight, indices = (np.asarray(a) for a in args)
        return _out(op, np.take(weight, indices, axis=0))

    @impl(T.IndexOp)
    def run_index(self, i: Interpreter, op: T.IndexOp, args: PythonValues) -> PythonValues:
        x, *indices = (np.asarray(a) for a in args)
        return _out(op, x[tuple(indices)])

    @impl(T.ScaledDotProductAttentionOp)
    def run_sdpa(
        self, i: Interpreter, op: T.ScaledDotProductAttentionOp, args: PythonValues
    ) -> PythonValues:
        q, k, v, *mask = (_wide(a) for a in args)
        is_causal = bool(op.is_causal.value.data)
        y = scaled_dot_product_attention(
            q, k, v, mask[0] if mask else None, op.scale.value.data, is_causal
        )
        return _out(op, y)

    @impl(T.RecurrenceOp)
    def run_recurrence(
        self, i: Interpreter, op: T.RecurrenceOp, args: PythonValues
    ) -> PythonValues:
        gates, weight, bias, h0, *c0 = (_wide(a) for a in args)
        states = op.cell_kind.run(gates, weight, bias, h0, c0[0] if c0 else None, op.is_reverse)
        return _out(op, states)

    @impl(T.ArgmaxOp)
    def run_argmax(self, i: Interpreter, op: T.ArgmaxOp, args: PythonValues) -> PythonValues:
        """numpy's argmax: the first maximum, or the first NaN (as PyTorch)."""
        keep = bool(op.keepdim.value.data)
        return _out(op, np.argmax(args[0], axis=op.dim.value.data, keepdims=keep))

    @impl(T.ArgminOp)
    def run_argmin(self, i: Interpreter, op: T.ArgminOp, args: PythonValues) -> PythonValues:
        keep = bool(op.keepdim.value.data)
        return _out(op, np.argmin(args[0], axis=op.dim.value.data, keepdims=keep))

    @impl(T.GeluOp)
    def run_gelu(self, i: Interpreter, op: T.GeluOp, args: PythonValues) -> PythonValues:
        return _out(op, gelu(_wide(args[0]), op.approximate.data))

    @impl(T.ClampOp)
    def run_clamp(self, i: Interpreter, op: T.ClampOp, args: PythonValues) -> PythonValues:
        """`np.clip` is max-then-min, so NaN propagates and `min > max` gives `max`."""
        low, high = (None if b is None else b.value.data for b in (op.min, op.max))
        return _out(op, np.clip(_wide(args[0]), low, high))

    @impl(T.LeakyReluOp)
    def run_leaky_relu(self, i: Interpreter, op: T.LeakyReluOp, args: PythonValues) -> PythonValues:
        x = _wide(args[0])
        return _out(op, np.where(x > 0, x, x * x.dtype.type(op.negative_slope.value.data)))

    @impl(T.EluOp)
    def run_elu(self, i: Interpreter, op: T.EluOp, args: PythonValues) -> PythonValues:
        alpha, scale, input_scale = (p.value.data for p in (op.alpha, op.scale, op.input_scale))
        return _out(op, elu(_wide(args[0]), alpha, scale, input_scale))

    @impl(T.SoftplusOp)
    def run_softplus(self, i: Interpreter, op: T.SoftplusOp, args: PythonValues) -> PythonValues:
        beta, threshold = op.beta.value.data, op.threshold.value.data
        return _out(op, softplus(_wide(args[0]), beta, threshold))

    @impl(T.TriuOp)
    def run_triu(self, i: Interpreter, op: T.TriuOp, args: PythonValues) -> PythonValues:
        return _out(op, np.triu(np.asarray(args[0]), op.diagonal.value.data))

    @impl(T.TrilOp)
    def run_tril(self, i: Interpreter, op: T.TrilOp, args: PythonValues) -> PythonValues:
        return _out(op, np.tril(np.asarray(args[0]), op.diagonal.value.data))

    @impl(T.PowOp)
    def run_pow(self, i: Interpreter, op: T.PowOp, args: PythonValues) -> PythonValues:
        x = _wide(args[0])
        return _out(op, np.power(x, np.asarray(op.exponent.value.data, dtype=x.dtype)))

    @impl(T.SoftmaxOp)
    def run_softmax(self, i: Interpreter, op: T.SoftmaxOp, args: PythonValues) -> PythonValues:
        return _out(op, softmax(_wide(args[0]), op.dim.value.data))

    @impl(T.LogSoftmaxOp)
    def run_log_softmax(
        self, i: Interpreter, op: T.LogSoftmaxOp, args: PythonValues
    ) -> PythonValues:
        return _out(op, log_softmax(_wide(args[0]), op.dim.value.data))

    @impl(T.RmsNormOp)
    def run_rms_norm(self, i: Interpreter, op: T.RmsNormOp, args: PythonValues) -> PythonValues:
        x, *rest = (_wide(a) for a in args)
        n = len(op.normalized_shape.get_values())
        return _out(op, rms_norm(x, rest[0] if rest else None, n, op.eps.value.data))

    @impl(T.LayerNormOp)
    def run_layer_norm(self, i: Interpreter, op: T.LayerNormOp, args: PythonValues) -> PythonValues:
        params = iter(_wide(a) for a in args[1:])
        w = next(params) if op.weight is not None else None
        b = next(params) if op.bias is not None else None
        n = len(op.normalized_shape.get_values())
        return _out(op, layer_norm(_wide(args[0]), w, b, n, op.eps.value.data))

    @impl(T.LinearOp)
    def run_linear(self, i: Interpreter, op: T.LinearOp, args: PythonValues) -> PythonValues:
        x, w, *b = (_wide(a) for a in args)
        y = np.matmul(x, w.T)
        return _out(op, y + b[0] if b else y)

    @impl(T.TransposeOp)
    def run_transpose(self, i: Interpreter, op: T.TransposeOp, args: PythonValues) -> PythonValues:
        return _out(op, np.swapaxes(args[0], op.dim0.value.data, op.dim1.value.data))

    @impl(T.PermuteOp)
    def run_permute(self, i: Interpreter, op: T.PermuteOp, args: PythonValues) -> PythonValues:
        return _out(op, np.transpose(args[0], op.dims.get_values()))

    @impl(T.ReshapeOp)
    def run_reshape(self, i: Interpreter, op: T.ReshapeOp, args: PythonValues) -> PythonValues:
        return _out(op, np.reshape(args[0], op.result.type.get_shape()))

    @impl(T.UnsqueezeOp)
    def run_unsqueeze(self, i: Interpreter, op: T.UnsqueezeOp, args: PythonValues) -> PythonValues:
        return _out(op, np.expand_dims(args[0], op.dim.value.data))

    @impl(T.ExpandOp)
    def run_expand(self, i: Interpreter, op: T.ExpandOp, args: PythonValues) -> PythonValues:
        return _out(op, np.broadcast_to(args[0], op.result.type.get_shape()))

    @impl(T.SliceOp)
    def run_slice(self, i: Interpreter, op: T.SliceOp, args: PythonValues) -> PythonValues:
        x = np.asarray(args[0])
        index = [slice(None)] * x.ndim
        index[op.dim.value.data] = slice(op.start.value.data, op.end.value.data, op.step.value.data)
        return _out(op, x[tuple(index)])

    @impl(T.WindowOp)
    def run_window(self, i: Interpreter, op: T.WindowOp, args: PythonValues) -> PythonValues:
        """Pad, take every window of the dilated span, keep every `stride`-th position and
        every `dilation`-th element of each window."""
        kernel, stride, dilation = (
            tuple(a.get_values()) for a in (op.kernel, op.stride, op.dilation)
        )
        x = np.asarray(args[0])
        lead = x.ndim - len(kernel)
        pads = [(0, 0)] * lead + list(zip(op.low.get_values(), op.high.get_values(), strict=True))
        padded = np.pad(x, pads, constant_values=op.pad_value.value.data)
        spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
        axes = tuple(range(lead, x.ndim))
        windows = np.lib.stride_tricks.sliding_window_view(padded, spans, axis=axes)
        index = (slice(None),) * lead
        index += tuple(slice(None, None, s) for s in stride)
        index += tuple(slice(None, None, d) for d in dilation)
        return _out(op, windows[index])

    @impl(T.CatOp)
    def run_cat(self, i: Interpreter, op: T.CatOp, args: PythonValues) -> PythonValues:
        return _out(op, np.concatenate([np.asarray(a) for a in args], axis=op.dim.value.data))
