"""The tensor dialect: builders, verifiers, round-trip of the docs/ir.md examples."""

from __future__ import annotations

import math

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, TensorType, f16, f32
from xdsl.ir import Block, Region
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from deplodock.dialects.tensor import (
    ElementwiseOp,
    IndexMapOp,
    ReduceKind,
    ReduceOp,
    YieldOp,
    expr_bounds,
)
from tests.helpers import parse

T48 = TensorType(f32, [4, 8])

DOC_EXAMPLE = """\
func.func @forward(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %e = tensor.elementwise(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    tensor.yield %s : f32
  }
  %r = tensor.reduce add %e dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  %t = tensor.index_map(%r) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %c = tensor.index_map(%a, %t) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 - 8)>] concat 1 offsets [0, 8] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}
"""  # noqa: E501


def test_doc_example_round_trips() -> None:
    module = parse(DOC_EXAMPLE)
    printed = str(module)
    assert str(parse(printed)) == printed
    assert "tensor.reduce add %e dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>" in printed
    assert "concat 1 offsets [0, 8]" in printed


def test_reduce_kind_identities() -> None:
    assert ReduceKind.ADD.identity == 0.0
    assert ReduceKind.MUL.identity == 1.0
    assert ReduceKind.MAX.identity == -math.inf
    assert ReduceKind.MIN.identity == math.inf
    assert ReduceKind("max") is ReduceKind.MAX


def test_elementwise_build_with_body() -> None:
    a, b = create_ssa_value(T48), create_ssa_value(T48)

    def body(block: Block, args):
        add = arith.AddfOp(args[0], args[1])
        block.add_op(add)
        return add.result

    op = ElementwiseOp.build_with_body([a, b], T48, body)
    op.verify()
    assert [arg.type for arg in op.body.block.args] == [f32, f32]
    assert isinstance(op.body.block.last_op, YieldOp)


def test_elementwise_rejects_shape_mismatch() -> None:
    a = create_ssa_value(TensorType(f32, [8]))
    op = ElementwiseOp.build_with_body([a], T48, lambda block, args: args[0])
    with pytest.raises(VerifyException, match=r"input 0 has shape \[8\], expected"):
        op.verify()


def test_elementwise_rejects_wrong_yield_type() -> None:
    a = create_ssa_value(T48)
    op = ElementwiseOp.build_with_body([a], TensorType(f16, [4, 8]), lambda block, args: args[0])
    with pytest.raises(VerifyException, match="body yields f32, expected the result element"):
        op.verify()


def test_elementwise_zero_inputs_is_a_splat() -> None:
    def body(block: Block, args):
        c = arith.ConstantOp(FloatAttr(2.0, f32))
        block.add_op(c)
        return c.result

    ElementwiseOp.build_with_body([], T48, body).verify()


def test_reduce_infers_rank_kept_result() -> None:
    x = create_ssa_value(TensorType(f32, [2, 3, 4]))
    op = ReduceOp(x, ReduceKind.MAX, [0, 2])
    op.verify()
    assert op.result.type == TensorType(f32, [1, 3, 1])
    assert op.reduce_kind is ReduceKind.MAX
    assert op.reduce_dims == (0, 2)


def test_reduce_rejects_bad_result_shape() -> None:
    x = create_ssa_value(T48)
    with pytest.raises(VerifyException, match="result shape"):
        ReduceOp(x, "add", [1], TensorType(f32, [4])).verify()


def _map(n: int, *results: AffineExpr) -> AffineMap:
    return AffineMap(n, 0, results)


def test_index_map_concat_builder() -> None:
    a, b = create_ssa_value(T48), create_ssa_value(T48)
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    op = IndexMapOp(
        [a, b], [_map(2, d0, d1), _map(2, d0, d1 - 8)], TensorType(f32, [4, 16]), (1, [0, 8])
    )
    op.verify()
    assert op.concat_info == (1, (0, 8))
    assert op.input_regions() == [[(0, 3), (0, 7)], [(0, 3), (8, 15)]]


def test_index_map_rejects_out_of_bounds_slice() -> None:
    a = create_ssa_value(T48)
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    op = IndexMapOp([a], [_map(2, d0, d1 * 2 + 1)], TensorType(f32, [4, 5]))
    with pytest.raises(VerifyException, match=r"ranges over \[1, 9\]"):
        op.verify()
    IndexMapOp([a], [_map(2, d0, d1 * 2 + 1)], TensorType(f32, [4, 4])).verify()


def test_index_map_rejects_wrong_arity() -> None:
    a = create_ssa_value(T48)
    op = IndexMapOp([a], [_map(2, AffineExpr.dimension(0))], T48)
    with pytest.raises(VerifyException, match="must have 2 dims, no symbols and 2 results"):
        op.verify()


def test_expr_bounds_of_reshape_maps() -> None:
    d0 = AffineExpr.dimension(0)
    box = [(0, 23)]
    assert expr_bounds(d0 // 4, box) == (0, 5)
    assert expr_bounds(d0 % 4, box) == (0, 3)
    assert expr_bounds((d0 // 4) % 3, box) == (0, 2)
    assert expr_bounds(d0.ceil_div(4), box) == (0, 6)
    assert expr_bounds(d0 * -1 + 23, box) == (0, 23)
    assert expr_bounds(d0 % 8, [(2, 5)]) == (2, 5)


def test_generic_form_round_trips() -> None:
    from io import StringIO

    from xdsl.printer import Printer

    module = parse(DOC_EXAMPLE)
    stream = StringIO()
    Printer(stream, print_generic_format=True).print_op(module)
    assert "#tensor<kind add>" in stream.getvalue()
    assert str(parse(stream.getvalue())) == str(module)


def test_region_builder_types() -> None:
    a = create_ssa_value(T48)
    block = Block(arg_types=[f16])
    block.add_op(YieldOp(block.args[0]))
    op = ElementwiseOp([a], TensorType(f16, [4, 8]), Region(block))
    with pytest.raises(VerifyException, match="body argument 0 has type f16"):
        op.verify()
