"""The tensor interpreter (whole-array elementwise, keepdims reductions, affine gathers) and
the vectorised affine evaluator it uses."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from xdsl.ir.affine import AffineExpr, AffineMap

from deplodock.interpreters.affine import eval_affine_map
from tests.helpers import rel_err, run

RNG = np.random.default_rng(0)


def test_elementwise_runs_body_on_whole_arrays() -> None:
    text = """
func.func @forward(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.elementwise(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    %c = arith.constant 0.5 : f32
    %m = arith.mulf %s, %c : f32
    %t = math.tanh %m : f32
    tensor.yield %t : f32
  }
  func.return %e : tensor<4x8xf32>
}"""
    a = RNG.standard_normal((4, 8)).astype(np.float32)
    b = RNG.standard_normal((4, 8)).astype(np.float32)
    (out,) = run(text, a, b)
    assert out.dtype == np.float32 and out.shape == (4, 8)
    assert rel_err(out, np.tanh((a.astype(np.float64) + b) * 0.5)) <= 1e-6


def test_zero_input_elementwise_is_a_splat() -> None:
    text = """
func.func @forward() -> tensor<2x3xf32> {
  %e = tensor.elementwise() : () -> tensor<2x3xf32> {
    %c = arith.constant 2.5 : f32
    tensor.yield %c : f32
  }
  func.return %e : tensor<2x3xf32>
}"""
    (out,) = run(text)
    assert out.shape == (2, 3) and out.dtype == np.float32
    assert np.all(out == 2.5)


def test_elementwise_f16_keeps_its_type() -> None:
    text = """
func.func @forward(%a: tensor<5xf16>) -> tensor<5xf16> {
  %e = tensor.elementwise(%a) : (tensor<5xf16>) -> tensor<5xf16> {
  ^bb0(%x: f16):
    %n = math.exp %x : f16
    tensor.yield %n : f16
  }
  func.return %e : tensor<5xf16>
}"""
    a = RNG.standard_normal(5).astype(np.float16)
    (out,) = run(text, a)
    assert out.dtype == np.float16
    assert rel_err(out, np.exp(a.astype(np.float64))) <= 2e-3


@pytest.mark.parametrize(
    ("kind", "fn"), [("add", np.sum), ("mul", np.prod), ("max", np.max), ("min", np.min)]
)
@pytest.mark.parametrize("dims", [[1], [0, 2], []])
def test_reduce(kind: str, fn, dims: list[int]) -> None:
    out_shape = [1 if i in dims else s for i, s in enumerate((2, 3, 4))]
    out_t = "tensor<" + "x".join(map(str, out_shape)) + "xf32>"
    dims_text = ", ".join(map(str, dims))
    text = f"""
func.func @forward(%a: tensor<2x3x4xf32>) -> {out_t} {{
  %r = tensor.reduce {kind} %a dims [{dims_text}] : tensor<2x3x4xf32> -> {out_t}
  func.return %r : {out_t}
}}"""
    a = (RNG.standard_normal((2, 3, 4)) + 0.1).astype(np.float32)
    (out,) = run(text, a)
    ref = fn(a.astype(np.float64), axis=tuple(dims), keepdims=True) if dims else a
    assert out.shape == tuple(out_shape)
    assert rel_err(out, ref) <= 1e-6


INDEX_MAPS = [
    # (input shape, output shape, map text, numpy reference)
    ((4, 8), (8, 4), "(d0, d1) -> (d1, d0)", lambda a: a.T),
    ((2, 3, 4), (6, 4), "(d0, d1) -> (d0 floordiv 3, d0 mod 3, d1)", lambda a: a.reshape(6, 4)),
    (
        (2, 3, 4),
        (4, 6),
        "(d0, d1) -> ((d0 * 6 + d1) floordiv 12, ((d0 * 6 + d1) floordiv 4) mod 3, "
        "(d0 * 6 + d1) mod 4)",
        lambda a: a.reshape(4, 6),
    ),
    ((4, 1), (4, 8), "(d0, d1) -> (d0, 0)", lambda a: np.broadcast_to(a, (4, 8))),
    ((8,), (3, 8), "(d0, d1) -> (d1)", lambda a: np.broadcast_to(a, (3, 8))),
    ((3, 8), (3, 3), "(d0, d1) -> (d0, d1 * 2 + 1)", lambda a: a[:, 1:7:2]),
    ((5,), (2,), "(d0) -> (d0 ceildiv 2 + 1)", lambda a: a[[1, 2]]),
    ((1, 1), (), "() -> (0, 0)", lambda a: a.reshape(())),
    ((), (2, 2), "(d0, d1) -> ()", lambda a: np.broadcast_to(a, (2, 2))),
]


def _t(shape: tuple[int, ...]) -> str:
    return "tensor<" + "".join(f"{s}x" for s in shape) + "f32>"


@pytest.mark.parametrize(("src", "dst", "amap", "ref"), INDEX_MAPS)
def test_index_map_gathers(src, dst, amap, ref) -> None:
    text = f"""
func.func @forward(%a: {_t(src)}) -> {_t(dst)} {{
  %r = tensor.index_map(%a) [affine_map<{amap}>] : ({_t(src)}) -> {_t(dst)}
  func.return %r : {_t(dst)}
}}"""
    a = RNG.standard_normal(src).astype(np.float32)
    (out,) = run(text, a)
    assert out.shape == dst
    np.testing.assert_array_equal(out, ref(a))


def test_index_map_concat() -> None:
    text = """
func.func @forward(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>, %c: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %r = tensor.index_map(%a, %b, %c) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 - 3)>, affine_map<(d0, d1) -> (d0, d1 - 4)>] concat 1 offsets [0, 3, 4] : (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  func.return %r : tensor<2x8xf32>
}"""  # noqa: E501
    a, b, c = (RNG.standard_normal(s).astype(np.float32) for s in ((2, 3), (2, 1), (2, 4)))
    (out,) = run(text, a, b, c)
    np.testing.assert_array_equal(out, np.concatenate([a, b, c], axis=1))


def test_affine_evaluator_matches_xdsl_eval_pointwise() -> None:
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    flat = d0 * 5 + d1
    amap = AffineMap(
        2, 0, (flat // 3, flat % 3, flat.ceil_div(4), d1 * -2 + 7, AffineExpr.constant(2))
    )
    i, j = np.ogrid[0:4, 0:5]
    results = [np.broadcast_to(r, (4, 5)) for r in eval_affine_map(amap, [i, j])]
    for x, y in itertools.product(range(4), range(5)):
        assert tuple(int(r[x, y]) for r in results) == amap.eval([x, y], [])


def test_affine_evaluator_checks_arity() -> None:
    with pytest.raises(ValueError, match="takes 2 dims"):
        eval_affine_map(AffineMap.identity(2), [np.arange(3)])


def test_index_is_the_coordinate_grid() -> None:
    text = """
func.func @forward() -> tensor<3x4xi64> {
  %e = tensor.elementwise() : () -> tensor<3x4xi64> {
    %i = tensor.index 0 : index
    %j = tensor.index 1 : index
    %c10 = arith.constant 10 : index
    %t = arith.muli %i, %c10 : index
    %s = arith.addi %t, %j : index
    %v = arith.index_cast %s : index to i64
    tensor.yield %v : i64
  }
  func.return %e : tensor<3x4xi64>
}"""
    (out,) = run(text)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, 10 * np.arange(3)[:, None] + np.arange(4))


def test_causal_mask_selects_with_index_comparisons() -> None:
    text = """
func.func @forward(%s: tensor<5x5xf32>) -> tensor<5x5xf32> {
  %e = tensor.elementwise(%s) : (tensor<5x5xf32>) -> tensor<5x5xf32> {
  ^bb0(%v: f32):
    %i = tensor.index 0 : index
    %j = tensor.index 1 : index
    %keep = arith.cmpi sle, %j, %i : index
    %ninf = arith.constant 0xff800000 : f32
    %r = arith.select %keep, %v, %ninf : f32
    tensor.yield %r : f32
  }
  func.return %e : tensor<5x5xf32>
}"""
    x = RNG.standard_normal((5, 5)).astype(np.float32)
    (out,) = run(text, x)
    np.testing.assert_array_equal(out, np.where(np.tril(np.ones((5, 5), bool)), x, -np.inf))


@pytest.mark.parametrize("dim", [0, 1])
def test_gather_is_take_along_dim(dim: int) -> None:
    out = "tensor<2x3x5xf32>" if dim == 0 else "tensor<6x2x3xf32>"
    text = f"""
func.func @forward(%w: tensor<6x5xf32>, %i: tensor<2x3xi64>) -> {out} {{
  %g = tensor.gather %w[%i] dim {dim} : (tensor<6x5xf32>, tensor<2x3xi64>) -> {out}
  func.return %g : {out}
}}"""
    w = RNG.standard_normal((6, 5)).astype(np.float32)
    i = RNG.integers(0, 5, (2, 3))
    (got,) = run(text, w, i)
    np.testing.assert_array_equal(got, np.take(w, i, axis=dim))


def test_gather_out_of_range_raises() -> None:
    text = """
func.func @forward(%w: tensor<6x5xf32>, %i: tensor<2xi64>) -> tensor<2x5xf32> {
  %g = tensor.gather %w[%i] dim 0 : (tensor<6x5xf32>, tensor<2xi64>) -> tensor<2x5xf32>
  func.return %g : tensor<2x5xf32>
}"""
    w = RNG.standard_normal((6, 5)).astype(np.float32)
    with pytest.raises(Exception, match="out of range"):
        run(text, w, np.array([1, 6]))


def test_integer_reduce_keeps_integers() -> None:
    text = """
func.func @forward(%x: tensor<3x4xi64>) -> tensor<3x1xi64> {
  %r = tensor.reduce max %x dims [1] : tensor<3x4xi64> -> tensor<3x1xi64>
  func.return %r : tensor<3x1xi64>
}"""
    x = RNG.integers(-50, 50, (3, 4))
    (out,) = run(text, x)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, x.max(1, keepdims=True))
