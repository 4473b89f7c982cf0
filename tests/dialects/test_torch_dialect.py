"""Typed constructors, result-type inference and verifier messages of the torch dialect."""

import pytest
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, bf16, f16, f32, i1, i32, i64
from xdsl.ir import SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import make_context
from deplodock.dialects import torch as T


def _t(*shape: int, elt=f32) -> TensorType:
    return TensorType(elt, shape)


def _build(arg_types, body) -> ModuleOp:
    """A verified `@forward` whose body is built by `body(*args) -> result value`."""
    fn = func.FuncOp("forward", (arg_types, []))
    with ImplicitBuilder(fn.body) as args:
        out: SSAValue = body(*args)
        func.ReturnOp(out)
    fn.function_type = func.FunctionType.from_lists(arg_types, [out.type])
    module = ModuleOp([fn])
    module.verify()
    return module


@pytest.mark.parametrize(
    ("make", "args", "expected"),
    [
        (lambda a, b: T.AddOp(a, b), [_t(4, 8), _t(8)], _t(4, 8)),
        (lambda a, b: T.MulOp(a, b), [_t(4, 1), _t(1, 8)], _t(4, 8)),
        (lambda a, b: T.DivOp(a, b), [_t(), _t(3)], _t(3)),
        (lambda a: T.SumOp(a, [1]), [_t(4, 8)], _t(4)),
        (lambda a: T.MeanOp(a, [0, 2], keepdim=True), [_t(2, 3, 4)], _t(1, 3, 1)),
        (lambda a: T.AmaxOp(a, [0, 1]), [_t(2, 3)], _t()),
        (lambda a: T.AminOp(a, [1], keepdim=True), [_t(2, 3)], _t(2, 1)),
        (lambda a: T.ArgmaxOp(a, 1), [_t(2, 3, 4)], _t(2, 4, elt=i64)),
        (lambda a: T.ArgminOp(a, 0, keepdim=True), [_t(5, elt=i32)], _t(1, elt=i64)),
        (lambda a, b: T.MatmulOp(a, b), [_t(4, 8), _t(8, 2)], _t(4, 2)),
        (lambda a, b: T.MatmulOp(a, b), [_t(8), _t(8)], _t()),
        (lambda a, b: T.MatmulOp(a, b), [_t(8), _t(3, 8, 2)], _t(3, 2)),
        (lambda a, b: T.MatmulOp(a, b), [_t(2, 1, 4, 8), _t(3, 8, 5)], _t(2, 3, 4, 5)),
        (lambda a, b: T.BmmOp(a, b), [_t(2, 4, 8), _t(2, 8, 3)], _t(2, 4, 3)),
        (lambda a, w: T.LinearOp(a, w), [_t(2, 3, 8), _t(16, 8)], _t(2, 3, 16)),
        (lambda a: T.TransposeOp(a, 0, 2), [_t(2, 3, 4)], _t(4, 3, 2)),
        (lambda a: T.PermuteOp(a, [1, 2, 0]), [_t(2, 3, 4)], _t(3, 4, 2)),
        (lambda a: T.UnsqueezeOp(a, 1), [_t(2, 3)], _t(2, 1, 3)),
        (lambda a: T.UnsqueezeOp(a, 2), [_t(2, 3)], _t(2, 3, 1)),
        (lambda a: T.ReshapeOp(a, [6]), [_t(2, 3)], _t(6)),
        (lambda a: T.ExpandOp(a, [5, 2, 3]), [_t(1, 3)], _t(5, 2, 3)),
        (lambda a: T.SliceOp(a, 1, 1, 7, 2), [_t(2, 8)], _t(2, 3)),
        (lambda a: T.SliceOp(a, 0, 2, 2), [_t(4, 8)], _t(0, 8)),
        (lambda a, b: T.CatOp([a, b, a], 1), [_t(2, 3), _t(2, 5)], _t(2, 11)),
        (lambda a: T.SoftmaxOp(a, 1), [_t(2, 3)], _t(2, 3)),
        (lambda a: T.GeluOp(a, "tanh"), [_t(2, 3, elt=f16)], _t(2, 3, elt=f16)),
        (lambda a: T.PowOp(a, 3.0), [_t(5)], _t(5)),
        (lambda a: T.ErfOp(a), [_t(2, 3, elt=bf16)], _t(2, 3, elt=bf16)),
        (lambda a: T.HardswishOp(a), [_t(4, 8)], _t(4, 8)),
        (lambda a: T.ClampOp(a, -1.0, 1.0), [_t(4, 8)], _t(4, 8)),
        (lambda a: T.ClampOp(a, max=0.5), [_t(3, elt=f16)], _t(3, elt=f16)),
        (lambda a: T.ClampOp(a, min=2.0), [_t(3, elt=i64)], _t(3, elt=i64)),
        (lambda a: T.LeakyReluOp(a, 0.1), [_t(4, 8, elt=bf16)], _t(4, 8, elt=bf16)),
        (lambda a: T.EluOp(a, 0.5, 1.0, 2.0), [_t(4, 8)], _t(4, 8)),
        (lambda a: T.SoftplusOp(a, 2.0, 5.0), [_t(4, 8)], _t(4, 8)),
        (lambda a: T.MishOp(a), [_t(3, elt=f16)], _t(3, elt=f16)),
        (lambda a, b: T.MaximumOp(a, b), [_t(4, 1), _t(8)], _t(4, 8)),
        (lambda a, b: T.MinimumOp(a, b), [_t(3, elt=i64), _t(elt=i64)], _t(3, elt=i64)),
        (lambda a: T.TriuOp(a, -1), [_t(2, 3, 4)], _t(2, 3, 4)),
        (lambda a: T.WindowOp(a, [3], [2], [1], [1], [1]), [_t(2, 8)], _t(2, 4, 3)),
        (
            lambda a: T.WindowOp(a, [2, 2], [1, 2], [2, 1], [0, 0], [0, 1], -1.0),
            [_t(3, 5, 5)],
            _t(3, 3, 3, 2, 2),
        ),
        (lambda a: T.TrilOp(a), [_t(3, 4, elt=i1)], _t(3, 4, elt=i1)),
        (lambda a, w: T.RmsNormOp(a, w, [8], 1e-6), [_t(2, 8), _t(8)], _t(2, 8)),
        (lambda a: T.LayerNormOp(a, None, None, [2, 8], 1e-5), [_t(2, 8)], _t(2, 8)),
    ],
)
def test_inferred_result_type(make, args, expected):
    module = _build(args, lambda *xs: make(*xs).result)
    assert module.body.block.first_op.function_type.outputs.data == (expected,)


def test_layer_norm_segments_round_trip():
    """Bias without weight must survive print + parse (the one ambiguous operand count)."""
    module = _build([_t(4, 8), _t(8)], lambda x, b: T.LayerNormOp(x, None, b, [8], 1e-5).result)
    text = str(module)
    assert "operandSegmentSizes = array<i32: 1, 0, 1>" in text
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    ln = next(op for op in parsed.walk() if isinstance(op, T.LayerNormOp))
    assert ln.weight is None and ln.bias is not None
    assert str(parsed) == text


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (lambda a, b: T.MatmulOp(a, b), [_t(4, 64), _t(32, 16)], "inner dimensions 64 and 32"),
        (lambda a, b: T.AddOp(a, b), [_t(4, 8), _t(3)], "not broadcastable"),
        (lambda a: T.SumOp(a, [2]), [_t(4, 8)], "dim 2 out of range"),
        (lambda a: T.SliceOp(a, 0, 3, 2), [_t(4, 8)], "not normalized"),
        (lambda a, w: T.RmsNormOp(a, w, [8], 1e-6), [_t(2, 8), _t(4)], "parameter shape"),
        (lambda a, w: T.LinearOp(a, w), [_t(2, 8), _t(8)], "weight must have rank 2"),
        (lambda a, b: T.BmmOp(a, b), [_t(4, 8), _t(8, 4)], "rank 3"),
        (lambda a: T.ClampOp(a), [_t(4)], "needs a min or a max bound"),
        (lambda a: T.ClampOp(a, min=0.5), [_t(4, elt=i64)], "bounds of an i64 tensor must be"),
        (lambda a: T.ClampOp(a, max=1.0), [_t(4, elt=i1)], "bool tensors cannot be clamped"),
        (lambda a: T.ErfOp(a), [_t(4, elt=i32)], "needs a float tensor, got i32"),
        (lambda a: T.HardswishOp(a), [_t(4, elt=i64)], "needs a float tensor, got i64"),
        (lambda a: T.LeakyReluOp(a, 0.1), [_t(4, elt=i64)], "needs a float tensor, got i64"),
        (lambda a: T.SoftplusOp(a, 0.0), [_t(4)], "beta must be nonzero"),
        (lambda a, b: T.MaximumOp(a, b), [_t(4, elt=i1), _t(4, elt=i1)], "bool tensors"),
        (lambda a: T.TriuOp(a), [_t(4)], "needs rank >= 2, got 4"),
        (lambda a: T.ArgmaxOp(a, 2), [_t(4, 8)], "dim 2 out of range"),
        (lambda a: T.WindowOp(a, [9], [1], [1], [0], [0]), [_t(4, 8)], "does not fit in 8"),
        (lambda a: T.WindowOp(a, [2], [0], [1], [0], [0]), [_t(4, 8)], "must be >= 1"),
        (lambda a: T.WindowOp(a, [2, 2], [1], [1], [0], [0]), [_t(4, 8)], "one entry per dim"),
        (
            lambda a: T.WindowOp(a, [2, 2, 2], [1] * 3, [1] * 3, [0] * 3, [0] * 3),
            [_t(4, 8)],
            "rank 2",
        ),
        (lambda a: T.ArgminOp(a, 0), [_t(4, elt=i1)], "bool tensors have no order"),
        (lambda a: T.ArgmaxOp(a, 1), [_t(4, 0)], "dim 1 is empty"),
    ],
)
def test_constructor_rejects_bad_shapes(make, args, message):
    with pytest.raises(VerifyException, match=message) as info:
        _build(args, lambda *xs: make(*xs).result)
    assert str(info.value).startswith("torch.")


def test_reshape_checks_element_count():
    with pytest.raises(VerifyException, match=r"torch\.reshape: cannot reshape 2x3"):
        _build([_t(2, 3)], lambda x: T.ReshapeOp(x, [4]).result)


def test_constant_prints_functional_type():
    module = _build([], lambda: T.ConstantOp(0.5, _t(2, 2)).result)
    assert "torch.constant {value = 5.000000e-01 : f64} : () -> tensor<2x2xf32>" in str(module)


# --- the LLM ops: mixed element types --------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "args", "expected"),
    [
        (lambda a, b: T.LtOp(a, b), [_t(4, 1), _t(8)], _t(4, 8, elt=i1)),
        (lambda a, b: T.LogicalAndOp(a, b), [_t(4, elt=i1), _t(elt=i1)], _t(4, elt=i1)),
        (lambda c, a, b: T.WhereOp(c, a, b), [_t(4, 1, elt=i1), _t(8), _t()], _t(4, 8)),
        (lambda a: T.CastOp(a, bf16), [_t(2, 3)], _t(2, 3, elt=bf16)),
        (lambda a: T.CumsumOp(a, 1), [_t(2, 3, elt=i1)], _t(2, 3, elt=i64)),
        (lambda a: T.CumsumOp(a, 0), [_t(2, 3, elt=f16)], _t(2, 3, elt=f16)),
        (lambda w, i: T.EmbeddingOp(w, i), [_t(10, 4), _t(2, 3, elt=i64)], _t(2, 3, 4)),
        (
            lambda x, i, j: T.IndexOp(x, [i, j]),
            [_t(5, 6, 7), _t(3, 1, elt=i64), _t(4, elt=i32)],
            _t(3, 4, 7),
        ),
        (
            lambda q, k, v: T.ScaledDotProductAttentionOp(q, k, v, None, 0.5, True, True),
            [_t(1, 4, 6, 8), _t(1, 2, 9, 8), _t(1, 2, 9, 5)],
            _t(1, 4, 6, 5),
        ),
        (
            lambda q, m: T.ScaledDotProductAttentionOp(q, q, q, m, 0.5),
            [_t(2, 6, 8), _t(6, 6, elt=i1)],
            _t(2, 6, 8),
        ),
    ],
)
def test_llm_op_inferred_result_type(make, args, expected):
    module = _build(args, lambda *xs: make(*xs).result)
    assert module.body.block.first_op.function_type.outputs.data == (expected,)


def test_arange_and_bool_constant_take_their_type_from_the_result():
    module = _build([], lambda: T.ArangeOp(2.0, 3.0, _t(5, elt=i64)).result)
    assert "torch.arange {start = 2.000000e+00 : f64, step = 3.000000e+00 : f64}" in str(module)
    with pytest.raises(VerifyException, match="bool constant must be 0 or 1"):
        _build([], lambda: T.ConstantOp(0.5, _t(2, elt=i1)).result)


def test_query_group_needs_enable_gqa():
    assert T.query_group("op", (1, 4, 6, 8), (1, 2, 6, 8), True) == 2
    assert T.query_group("op", (1, 4, 6, 8), (1, 4, 6, 8), False) == 1
    assert T.query_group("op", (6, 8), (6, 8), False) == 0
    with pytest.raises(VerifyException, match="need enable_gqa"):
        T.query_group("op", (1, 4, 6, 8), (1, 2, 6, 8), False)
    with pytest.raises(VerifyException, match="need enable_gqa"):
        T.query_group("op", (1, 4, 6, 8), (1, 3, 6, 8), True)
