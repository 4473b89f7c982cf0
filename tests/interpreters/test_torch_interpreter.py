"""The torch-dialect interpreter against PyTorch itself, op by op, on random inputs."""

from collections.abc import Callable, Sequence

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, bf16, f16, f32
from xdsl.interpreter import Interpreter
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Attribute, SSAValue

from deplodock.dialects import torch as T
from deplodock.interpreters.torch import TorchFunctions

_RNG = np.random.default_rng(0)


def _run(arg_types: Sequence[TensorType], body: Callable[..., SSAValue], inputs) -> np.ndarray:
    fn = func.FuncOp("forward", (list(arg_types), []))
    with ImplicitBuilder(fn.body) as args:
        out = body(*args)
        func.ReturnOp(out)
    fn.function_type = func.FunctionType.from_lists(list(arg_types), [out.type])
    module = ModuleOp([fn])
    module.verify()
    interpreter = Interpreter(module)
    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(TorchFunctions())
    (result,) = interpreter.call_op("forward", tuple(inputs))
    assert isinstance(result, np.ndarray)
    assert result.shape == tuple(out.type.get_shape())
    return result


def _rel_err(out: np.ndarray, ref: torch.Tensor) -> float:
    ref64 = ref.double().numpy()
    return float(np.max(np.abs(out.astype(np.float64) - ref64)) / max(np.max(np.abs(ref64)), 1e-30))


def _rand(*shape: int, positive: bool = False) -> np.ndarray:
    x = _RNG.standard_normal(shape).astype(np.float32)
    return np.abs(x) + 0.1 if positive else x


def _t(a: np.ndarray, elt: Attribute = f32) -> TensorType:
    return TensorType(elt, a.shape)


def _ref(fn: Callable[..., torch.Tensor], *arrays: np.ndarray) -> torch.Tensor:
    """PyTorch in float64: the reference every output is compared with."""
    return fn(*(torch.from_numpy(a).double() for a in arrays))


UNARY = [
    (T.NegOp, torch.neg, False),
    (T.ExpOp, torch.exp, False),
    (T.LogOp, torch.log, True),
    (T.SqrtOp, torch.sqrt, True),
    (T.RsqrtOp, torch.rsqrt, True),
    (T.AbsOp, torch.abs, False),
    (T.ReluOp, torch.relu, False),
    (T.SigmoidOp, torch.sigmoid, False),
    (T.TanhOp, torch.tanh, False),
    (T.SiluOp, F.silu, False),
]


@pytest.mark.parametrize(("op", "ref", "positive"), UNARY, ids=lambda v: getattr(v, "name", ""))
def test_unary(op, ref, positive):
    x = _rand(3, 5, positive=positive)
    out = _run([_t(x)], lambda a: op(a).result, [x])
    assert out.dtype == np.float32
    assert _rel_err(out, _ref(ref, x)) <= 1e-5


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    x = _rand(4, 7)
    out = _run([_t(x)], lambda a: T.GeluOp(a, approximate).result, [x])
    assert _rel_err(out, _ref(lambda t: F.gelu(t, approximate=approximate), x)) <= 1e-5


def test_pow():
    x = _rand(4, 7, positive=True)
    out = _run([_t(x)], lambda a: T.PowOp(a, 2.5).result, [x])
    assert _rel_err(out, _ref(lambda t: t**2.5, x)) <= 1e-5


@pytest.mark.parametrize(
    ("op", "ref"),
    [(T.AddOp, torch.add), (T.SubOp, torch.sub), (T.MulOp, torch.mul), (T.DivOp, torch.div)],
)
def test_binary_broadcast(op, ref):
    a, b = _rand(2, 3, 4), _rand(3, 1)
    out = _run([_t(a), _t(b)], lambda x, y: op(x, y).result, [a, b])
    assert _rel_err(out, _ref(ref, a, b)) <= 1e-5


def test_constant_is_a_splat():
    x = _rand(2, 3)
    body = lambda a: T.MulOp(a, T.ConstantOp(-1.5, TensorType(f32, [])).result).result  # noqa: E731
    out = _run([_t(x)], body, [x])
    assert _rel_err(out, _ref(lambda t: t * -1.5, x)) <= 1e-6


@pytest.mark.parametrize(
    ("op", "ref"),
    [
        (T.SumOp, lambda t, d, k: t.sum(d, keepdim=k)),
        (T.MeanOp, lambda t, d, k: t.mean(d, keepdim=k)),
        (T.AmaxOp, lambda t, d, k: t.amax(d, keepdim=k)),
    ],
)
@pytest.mark.parametrize(("dims", "keepdim"), [([1], False), ([0, 2], True), ([0, 1, 2], False)])
def test_reductions(op, ref, dims, keepdim):
    x = _rand(3, 4, 5)
    out = _run([_t(x)], lambda a: op(a, dims, keepdim).result, [x])
    assert _rel_err(out, _ref(lambda t: ref(t, dims, keepdim), x)) <= 1e-5


@pytest.mark.parametrize(("op", "ref"), [(T.SoftmaxOp, F.softmax), (T.LogSoftmaxOp, F.log_softmax)])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax(op, ref, dim):
    x = _rand(6, 9) * 4
    out = _run([_t(x)], lambda a: op(a, dim).result, [x])
    assert _rel_err(out, _ref(lambda t: ref(t, dim=dim), x)) <= 1e-5


@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm(with_weight):
    x, w = _rand(2, 3, 16), _rand(16)
    types, inputs = ([_t(x), _t(w)], [x, w]) if with_weight else ([_t(x)], [x])
    body = lambda a, *p: T.RmsNormOp(a, p[0] if p else None, [16], 1e-6).result  # noqa: E731
    out = _run(types, body, inputs)
    ref = _ref(lambda t, *p: F.rms_norm(t, [16], p[0] if p else None, 1e-6), *inputs)
    assert _rel_err(out, ref) <= 1e-5


@pytest.mark.parametrize("params", ["", "w", "wb", "b"])
def test_layer_norm(params):
    x, w, b = _rand(4, 3, 8) + 2, _rand(3, 8), _rand(3, 8)
    arrays = [x] + [{"w": w, "b": b}[p] for p in params]

    def body(a, *ps):
        it = iter(ps)
        weight = next(it) if "w" in params else None
        bias = next(it) if "b" in params else None
        return T.LayerNormOp(a, weight, bias, [3, 8], 1e-5).result

    def ref(t, *ps):
        it = iter(ps)
        weight = next(it) if "w" in params else None
        bias = next(it) if "b" in params else None
        return F.layer_norm(t, [3, 8], weight, bias, 1e-5)

    out = _run([_t(a) for a in arrays], body, arrays)
    assert _rel_err(out, _ref(ref, *arrays)) <= 1e-5


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((4, 8), (8, 3)),
        ((8,), (8,)),
        ((8,), (2, 8, 3)),
        ((2, 4, 8), (8,)),
        ((2, 1, 4, 8), (3, 8, 5)),
    ],
)
def test_matmul(a_shape, b_shape):
    a, b = _rand(*a_shape), _rand(*b_shape)
    out = _run([_t(a), _t(b)], lambda x, y: T.MatmulOp(x, y).result, [a, b])
    assert _rel_err(out, _ref(torch.matmul, a, b)) <= 1e-5


def test_bmm_and_linear():
    a, b = _rand(3, 4, 8), _rand(3, 8, 2)
    out = _run([_t(a), _t(b)], lambda x, y: T.BmmOp(x, y).result, [a, b])
    assert _rel_err(out, _ref(torch.bmm, a, b)) <= 1e-5
    x, w, bias = _rand(2, 3, 8), _rand(5, 8), _rand(5)
    out = _run([_t(x), _t(w), _t(bias)], lambda *v: T.LinearOp(*v).result, [x, w, bias])
    assert _rel_err(out, _ref(F.linear, x, w, bias)) <= 1e-5


@pytest.mark.parametrize(
    ("make", "ref"),
    [
        (lambda a: T.TransposeOp(a, 0, 2), lambda t: t.transpose(0, 2)),
        (lambda a: T.PermuteOp(a, [2, 0, 1]), lambda t: t.permute(2, 0, 1)),
        (lambda a: T.ReshapeOp(a, [6, 4]), lambda t: t.reshape(6, 4)),
        (lambda a: T.UnsqueezeOp(a, 1), lambda t: t.unsqueeze(1)),
        (
            lambda a: T.ExpandOp(T.UnsqueezeOp(a, 0).result, [5, 2, 3, 4]),
            lambda t: t.expand(5, -1, -1, -1),
        ),
        (lambda a: T.SliceOp(a, 2, 1, 4, 2), lambda t: t[:, :, 1:4:2]),
        (lambda a: T.CatOp([a, a], 1), lambda t: torch.cat([t, t], 1)),
    ],
)
def test_layout_ops(make, ref):
    x = _rand(2, 3, 4)
    out = _run([_t(x)], lambda a: make(a).result, [x])
    np.testing.assert_array_equal(out, ref(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize(
    ("elt", "dtype", "tol"), [(f16, torch.float16, 1e-3), (bf16, torch.bfloat16, 8e-3)]
)
def test_half_precision_rounds_to_the_result_type(elt, dtype, tol):
    """f16/bf16 results carry no more precision than the type: compare to PyTorch in that type."""
    x = _rand(4, 16)
    xh = torch.from_numpy(x).to(dtype)
    arg = xh.float().numpy().astype(np.float16 if elt == f16 else np.float32)
    out = _run(
        [TensorType(elt, [4, 16])], lambda a: T.SoftmaxOp(T.ExpOp(a).result, 1).result, [arg]
    )
    ref = torch.softmax(torch.exp(xh), 1)
    np.testing.assert_allclose(out.astype(np.float32), ref.float().numpy(), rtol=tol, atol=tol)
    # the output is exactly representable in the element type
    np.testing.assert_array_equal(
        torch.from_numpy(out.astype(np.float32)).to(dtype).float().numpy(), out
    )
