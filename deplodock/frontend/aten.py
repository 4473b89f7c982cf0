"""The aten -> torch-dialect table of the PyTorch frontend.

Each handler turns one FX node of an exported program into torch-dialect ops. Arguments
arrive normalized by the op's schema (`torch.fx.operator_schemas.normalize_function`), so a
handler reads `a["input"]`, `a["dim"]`, ... with PyTorch's defaults filled in. Python scalars
become rank-0 `torch.constant`s of the tensor's element type; negative dims and out-of-range
slice bounds are normalized here, because the dialect only admits canonical forms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.builder import Builder
from xdsl.dialects.builtin import TensorType, bf16, f16, f32, i64
from xdsl.ir import Attribute, SSAValue

from deplodock.dialects import torch as T

aten = torch.ops.aten

#: PyTorch dtype -> element type of the torch dialect.
DTYPES: dict[torch.dtype, Attribute] = {
    torch.float32: f32,
    torch.float16: f16,
    torch.bfloat16: bf16,
    torch.int64: i64,
}


class AtenImportError(Exception):
    """A node the table knows but cannot express (dtype promotion, training-mode dropout...)."""


def tensor_type(val: Any, what: str) -> TensorType:
    """The builtin tensor type of a (fake) tensor from `node.meta["val"]`."""
    if not isinstance(val, torch.Tensor):
        raise AtenImportError(f"{what} is not a tensor ({type(val).__name__})")
    if val.dtype not in DTYPES:
        raise AtenImportError(f"{what} has unsupported dtype {val.dtype}")
    return TensorType(DTYPES[val.dtype], [int(s) for s in val.shape])


class Emitter:
    """Inserts torch ops for FX nodes; `env` maps already imported nodes to SSA values."""

    def __init__(self, builder: Builder, env: dict[torch.fx.Node, SSAValue]):
        self.builder = builder
        self.env = env

    def emit(self, op: T.TorchOp) -> SSAValue:
        self.builder.insert(op)
        return op.result

    def tensor(self, x: Any) -> SSAValue:
        if not isinstance(x, torch.fx.Node) or x not in self.env:
            raise AtenImportError(f"expected a tensor argument, got {x!r}")
        return self.env[x]

    def scalar(self, value: float, like: SSAValue) -> SSAValue:
        """A rank-0 constant with the element type of `like` (how aten scalars enter)."""
        elt = _elt(like)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise AtenImportError(f"unsupported scalar argument {value!r}")
        if isinstance(value, float) and elt == i64:
            raise AtenImportError("float scalar with an integer tensor needs dtype promotion")
        return self.emit(T.ConstantOp(float(value), TensorType(elt, [])))

    def value(self, x: Any, like: SSAValue | None = None) -> SSAValue:
        """An SSA value for a node, an already built value, or a scalar (typed like `like`)."""
        if isinstance(x, SSAValue):
            return x
        if isinstance(x, torch.fx.Node) or like is None:
            return self.tensor(x)
        return self.scalar(x, like)

    def binary(self, op: type[T.BinaryOp], lhs: Any, rhs: Any) -> SSAValue:
        like = self.value(lhs if isinstance(lhs, SSAValue | torch.fx.Node) else rhs)
        a, b = self.value(lhs, like), self.value(rhs, like)
        if _elt(a) != _elt(b):
            raise AtenImportError(f"mixed element types {_elt(a)} and {_elt(b)} need promotion")
        return self.emit(op(a, b))

    def scaled(self, x: Any, alpha: Any, like: SSAValue) -> SSAValue:
        """`alpha * x` folded into a mul, skipped for the common alpha == 1."""
        value = self.value(x, like)
        return value if alpha == 1 else self.binary(T.MulOp, value, alpha)


Handler = Callable[[Emitter, dict[str, Any], TensorType], SSAValue]
HANDLERS: dict[Any, Handler] = {}


def _elt(v: SSAValue) -> Attribute:
    assert isinstance(v.type, TensorType)
    return v.type.element_type


def _rank(v: SSAValue) -> int:
    assert isinstance(v.type, TensorType)
    return v.type.get_num_dims()


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _dims(ds: Sequence[int] | int | None, rank: int) -> list[int]:
    if ds is None or (not isinstance(ds, int) and not ds):
        return list(range(rank))
    return sorted({_dim(d, rank) for d in ([ds] if isinstance(ds, int) else ds)})


def handles(*targets: Any) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for t in targets:
            HANDLERS[t] = fn
        return fn

    return register


# --- elementwise ------------------------------------------------------------------------------


def _binary_handler(op: type[T.BinaryOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        like = e.tensor(a["input"])
        rhs = e.scaled(a["other"], a.get("alpha", 1), like)
        return e.binary(op, a["input"], rhs)

    return handler


for _ops, _op in [
    ((aten.add.Tensor, aten.add.Scalar), T.AddOp),
    ((aten.sub.Tensor, aten.sub.Scalar), T.SubOp),
    ((aten.mul.Tensor, aten.mul.Scalar), T.MulOp),
    ((aten.div.Tensor, aten.div.Scalar), T.DivOp),
]:
    handles(*_ops)(_binary_handler(_op))


@handles(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.scaled(a["input"], a["alpha"], e.tensor(a["input"]))
    return e.binary(T.SubOp, a["other"], x)


def _unary_handler(op: type[T.UnaryOp]) -> Handler:
    return lambda e, a, out: e.emit(op(e.tensor(a["input"])))


for _target, _uop in [
    (aten.neg.default, T.NegOp),
    (aten.exp.default, T.ExpOp),
    (aten.log.default, T.LogOp),
    (aten.sqrt.default, T.SqrtOp),
    (aten.rsqrt.default, T.RsqrtOp),
    (aten.abs.default, T.AbsOp),
    (aten.relu.default, T.ReluOp),
    (aten.sigmoid.default, T.SigmoidOp),
    (aten.tanh.default, T.TanhOp),
    (aten.silu.default, T.SiluOp),
]:
    handles(_target)(_unary_handler(_uop))


@handles(aten.reciprocal.default)
def _reciprocal(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.binary(T.DivOp, 1.0, a["input"])


@handles(aten.gelu.default)
def _gelu(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.GeluOp(e.tensor(a["input"]), a["approximate"]))


@handles(aten.pow.Tensor_Scalar)
def _pow(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.PowOp(e.tensor(a["input"]), float(a["exponent"])))


# --- reductions and normalizations ---------------------------------------------------------------


def _reduce_handler(op: type[T.ReductionOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        if a.get("dtype") is not None:
            raise AtenImportError("reductions with a dtype= argument need a cast")
        x = e.tensor(a["input"])
        return e.emit(op(x, _dims(a.get("dim"), _rank(x)), bool(a.get("keepdim", False))))

    return handler


handles(aten.sum.dim_IntList, aten.sum.default)(_reduce_handler(T.SumOp))
handles(aten.mean.dim, aten.mean.default)(_reduce_handler(T.MeanOp))
handles(aten.amax.default)(_reduce_handler(T.AmaxOp))


def _softmax_handler(op: type[T.SoftmaxLikeOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        if a.get("dtype") is not None or a.get("half_to_float"):
            raise AtenImportError("softmax with a dtype change needs a cast")
        x = e.tensor(a["input"])
        return e.emit(op(x, _dim(a["dim"], _rank(x))))

    return handler


handles(aten.softmax.int, aten._softmax.default)(_softmax_handler(T.SoftmaxOp))
handles(aten.log_softmax.int, aten._log_softmax.default)(_softmax_handler(T.LogSoftmaxOp))


def _optional(e: Emitter, x: Any) -> SSAValue | None:
    return None if x is None else e.tensor(x)


@handles(aten.rms_norm.default)
def _rms_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    eps = a["eps"]
    if eps is None:  # PyTorch's default: the machine epsilon of the input dtype
        eps = torch.finfo(next(k for k, v in DTYPES.items() if v == _elt(x))).eps
    return e.emit(T.RmsNormOp(x, _optional(e, a["weight"]), a["normalized_shape"], eps))


@handles(aten.layer_norm.default)
def _layer_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x, w, b = e.tensor(a["input"]), _optional(e, a["weight"]), _optional(e, a["bias"])
    return e.emit(T.LayerNormOp(x, w, b, a["normalized_shape"], float(a["eps"])))


# --- contractions ----------------------------------------------------------------------------


@handles(aten.matmul.default, aten.mm.default)
def _matmul(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.MatmulOp(e.tensor(a["input"]), e.tensor(a.get("other", a.get("mat2")))))


@handles(aten.bmm.default)
def _bmm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.BmmOp(e.tensor(a["input"]), e.tensor(a["mat2"])))


@handles(aten.linear.default)
def _linear(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x, w = e.tensor(a["input"]), e.tensor(a["weight"])
    return e.emit(T.LinearOp(x, w, _optional(e, a["bias"])))


@handles(aten.addmm.default)
def _addmm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`beta * input + alpha * (mat1 @ mat2)`."""
    bias = e.tensor(a["input"])
    mm = e.emit(T.MatmulOp(e.tensor(a["mat1"]), e.tensor(a["mat2"])))
    return e.binary(T.AddOp, e.scaled(mm, a["alpha"], mm), e.scaled(bias, a["beta"], bias))


# --- layout ------------------------------------------------------------------------------------


@handles(aten.t.default)
def _t(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return x if _rank(x) < 2 else e.emit(T.TransposeOp(x, 0, 1))


@handles(aten.transpose.int)
def _transpose(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return e.emit(T.TransposeOp(x, _dim(a["dim0"], _rank(x)), _dim(a["dim1"], _rank(x))))


@handles(aten.permute.default)
def _permute(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return e.emit(T.PermuteOp(x, [_dim(d, _rank(x)) for d in a["dims"]]))


@handles(
    aten.view.default,
    aten.reshape.default,
    aten._unsafe_view.default,
    aten.flatten.using_ints,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
)
def _reshape(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return x if x.type == out else e.emit(T.ReshapeOp(x, out.get_shape()))


@handles(aten.expand.default)
def _expand(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return x if x.type == out else e.emit(T.ExpandOp(x, out.get_shape()))


@handles(aten.unsqueeze.default)
def _unsqueeze(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return e.emit(T.UnsqueezeOp(x, _dim(a["dim"], _rank(x) + 1)))


@handles(aten.slice.Tensor)
def _slice(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    assert isinstance(x.type, TensorType)
    dim = _dim(a["dim"], _rank(x))
    size = x.type.get_shape()[dim]
    start, end, step = slice(a["start"], a["end"], a["step"]).indices(size)
    end = max(start, end)
    if (start, end, step) == (0, size, 1):
        return x
    return e.emit(T.SliceOp(x, dim, start, end, step))


@handles(aten.select.int)
def _select(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    assert isinstance(x.type, TensorType)
    dim = _dim(a["dim"], _rank(x))
    index = _dim(a["index"], x.type.get_shape()[dim])
    sliced = e.emit(T.SliceOp(x, dim, index, index + 1))
    return e.emit(T.ReshapeOp(sliced, out.get_shape()))


@handles(aten.cat.default)
def _cat(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    xs = [e.tensor(t) for t in a["tensors"]]
    return e.emit(T.CatOp(xs, _dim(a["dim"], _rank(xs[0]))))


@handles(
    aten.clone.default,
    aten.contiguous.default,
    aten.alias.default,
    aten.detach.default,
    aten.lift_fresh_copy.default,
    aten._to_copy.default,
    aten.to.dtype,
    aten.to.dtype_layout,
    aten.type_as.default,
)
def _identity(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Copies and same-dtype conversions: values are immutable, so these are no-ops."""
    x = e.tensor(a["input"])
    if x.type != out:
        raise AtenImportError(f"conversion {x.type} -> {out} needs a cast")
    return x


@handles(aten.dropout.default)
def _dropout(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    if a["train"] and a["p"] > 0:
        raise AtenImportError("dropout in training mode is random; capture the module in eval()")
    return e.tensor(a["input"])


def target_name(target: Any) -> str:
    """`aten.cumsum.default` for an OpOverload, `_operator.getitem` for a Python callable."""
    if isinstance(target, torch._ops.OpOverload | torch._ops.HigherOrderOperator):
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', target)}".lstrip(".")
