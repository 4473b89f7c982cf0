# ruff: noqa: E501  (IR text is kept on one line per op, as it prints)
"""`convert-tensor-to-loop`: structure of the lifted module and its numerics.

Each case is tensor-level IR written by hand, a float64 numpy reference, and the shapes of
its inputs. The tensor interpreter runs the input, the loop interpreter the lifted module;
both must match the reference.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import loop, make_context
from deplodock.passes.convert_tensor_to_loop import ConvertTensorToLoopPass
from deplodock.passes.loop_utils import trip_product
from tests.helpers import parse, rel_err, run

Reference = Callable[..., np.ndarray]


def lift(module: ModuleOp) -> ModuleOp:
    ConvertTensorToLoopPass().apply(make_context(), module)
    module.verify()
    return module


def _binary(op: str, shape: str) -> str:
    t = f"tensor<{shape}xf32>"
    return f"""tensor.elementwise(%a, %b) : ({t}, {t}) -> {t} {{
  ^bb0(%p: f32, %q: f32):
    %two = arith.constant 2.000000e+00 : f32
    %m = arith.{op} %p, %q : f32
    %n = arith.addf %m, %two : f32
    %e = math.exp %n : f32
    tensor.yield %e : f32
  }}"""


CASES: dict[str, tuple[str, list[tuple[int, ...]], Reference]] = {
    "elementwise": (
        f"""func.func @forward(%a: tensor<3x1x5xf32>, %b: tensor<3x1x5xf32>) -> tensor<3x1x5xf32> {{
  %r = {_binary("mulf", "3x1x5")}
  func.return %r : tensor<3x1x5xf32>
}}""",
        [(3, 1, 5), (3, 1, 5)],
        lambda a, b: np.exp(a * b + 2.0),
    ),
    "reduce_kinds": (
        """func.func @forward(%x: tensor<2x3x4xf32>) -> (tensor<2x1x4xf32>, tensor<1x3x1xf32>, tensor<2x3x1xf32>, tensor<1x1x1xf32>) {
  %s = tensor.reduce add %x dims [1] : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %m = tensor.reduce max %x dims [0, 2] : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %p = tensor.reduce mul %x dims [2] : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %n = tensor.reduce min %x dims [0, 1, 2] : tensor<2x3x4xf32> -> tensor<1x1x1xf32>
  func.return %s, %m, %p, %n : tensor<2x1x4xf32>, tensor<1x3x1xf32>, tensor<2x3x1xf32>, tensor<1x1x1xf32>
}""",
        [(2, 3, 4)],
        lambda x: (
            x.sum(1, keepdims=True),
            x.max((0, 2), keepdims=True),
            x.prod(2, keepdims=True),
            x.min((0, 1, 2), keepdims=True),
        ),
    ),
    "index_maps": (
        """func.func @forward(%x: tensor<2x3x4xf32>, %b: tensor<4xf32>) -> (tensor<4x2x3xf32>, tensor<6x4xf32>, tensor<3x5x4xf32>, tensor<2x2x4xf32>) {
  %p = tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d1, d2, d0)>] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %r = tensor.index_map(%x) [affine_map<(d0, d1) -> ((d0 * 4 + d1) floordiv 12, ((d0 * 4 + d1) mod 12) floordiv 4, (d0 * 4 + d1) mod 4)>] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %e = tensor.index_map(%b) [affine_map<(d0, d1, d2) -> (d2)>] : (tensor<4xf32>) -> tensor<3x5x4xf32>
  %s = tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d0, d1 * 2, 3 - d2)>] : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  func.return %p, %r, %e, %s : tensor<4x2x3xf32>, tensor<6x4xf32>, tensor<3x5x4xf32>, tensor<2x2x4xf32>
}""",
        [(2, 3, 4), (4,)],
        lambda x, b: (
            np.transpose(x, (2, 0, 1)),
            x.reshape(6, 4),
            np.broadcast_to(b, (3, 5, 4)),
            x[:, ::2, ::-1],
        ),
    ),
    "concat": (
        """func.func @forward(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>, %c: tensor<3x3xf32>) -> tensor<6x3xf32> {
  %r = tensor.index_map(%a, %b, %c) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 - 2, d1)>, affine_map<(d0, d1) -> (d0 - 3, d1)>] concat 0 offsets [0, 2, 3] : (tensor<2x3xf32>, tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<6x3xf32>
  func.return %r : tensor<6x3xf32>
}""",
        [(2, 3), (1, 3), (3, 3)],
        lambda a, b, c: np.concatenate([a, b, c], 0),
    ),
    "rank0_and_splat": (
        """func.func @forward(%x: tensor<f32>) -> (tensor<f32>, tensor<2x2xf32>) {
  %e = tensor.elementwise(%x) : (tensor<f32>) -> tensor<f32> {
  ^bb0(%p: f32):
    %t = math.tanh %p : f32
    tensor.yield %t : f32
  }
  %s = tensor.elementwise() : () -> tensor<2x2xf32> {
    %c = arith.constant -1.250000e+00 : f32
    tensor.yield %c : f32
  }
  func.return %e, %s : tensor<f32>, tensor<2x2xf32>
}""",
        [()],
        lambda x: (np.tanh(x), np.full((2, 2), -1.25)),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lifted_numerics(name: str) -> None:
    text, shapes, reference = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    inputs = [rng.uniform(0.5, 1.5, s).astype(np.float32) * rng.choice([-1, 1], s) for s in shapes]
    expected = reference(*(x.astype(np.float64) for x in inputs))
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    module = parse(text)
    for out, ref in zip(run(module, *inputs), expected, strict=True):
        assert rel_err(out, ref) <= 1e-5, "tensor interpreter"
    primitives = ("tensor.elementwise", "tensor.reduce", "tensor.index_map")
    tensor_ops = sum(1 for op in module.walk() if op.name in primitives)
    lift(module)
    assert not any(op.dialect_name() == "tensor" for op in module.walk())
    kernels = [op for op in module.ops if isinstance(op, loop.KernelOp)]
    assert len(kernels) == tensor_ops
    for out, ref in zip(run(module, *inputs), expected, strict=True):
        assert out.shape == ref.shape
        assert rel_err(out, ref) <= 1e-5, "loop interpreter"


def test_kernel_interfaces() -> None:
    """Kernel args: distinct read buffers, then the written one; launch matches them."""
    module = lift(parse(CASES["elementwise"][0].replace("(%a, %b)", "(%a, %a)")))
    kernel = next(op for op in module.ops if isinstance(op, loop.KernelOp))
    assert [a.name_hint for a in kernel.body.block.args] == ["a", "r"]
    launch = next(op for op in module.walk() if isinstance(op, loop.LaunchOp))
    assert launch.callee.string_value() == kernel.sym_name.data
    assert [a.type for a in launch.args] == list(kernel.arg_types)
    # a size-1 dim has no loop, and the elementwise body's constant sits at the kernel top
    assert [f.upper for f in kernel.walk() if isinstance(f, loop.ForOp)] == [3, 5]
    assert kernel.body.block.first_op is not None
    assert kernel.body.block.first_op.name == "arith.constant"


def test_no_forward_fails() -> None:
    module = parse(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  func.return %x : tensor<2xf32>\n}"
    )
    with pytest.raises(PassFailedException, match="no @forward"):
        lift(module)


GATHER_CASES = {
    "gather_rows": (
        """func.func @forward(%w: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
  %g = tensor.gather %w[%ids] dim 0 : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  func.return %g : tensor<2x3x8xf32>
}""",
        lambda w, i: np.take(w, i, axis=0),
    ),
    "gather_cols_i32": (
        """func.func @forward(%w: tensor<16x8xf32>, %ids: tensor<5xi32>) -> tensor<16x5xf32> {
  %g = tensor.gather %w[%ids] dim 1 : (tensor<16x8xf32>, tensor<5xi32>) -> tensor<16x5xf32>
  func.return %g : tensor<16x5xf32>
}""",
        lambda w, i: np.take(w, i, axis=1),
    ),
}


@pytest.mark.parametrize("name", list(GATHER_CASES))
def test_gather_lifts_to_an_index_load(name: str) -> None:
    text, ref = GATHER_CASES[name]
    module = parse(text)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    shape = (2, 3) if name == "gather_rows" else (5,)
    ids = rng.integers(0, 8, shape).astype(np.int64 if name == "gather_rows" else np.int32)
    (before,) = run(module, w, ids)
    lifted = lift(module)
    names = [op.name for op in lifted.walk()]
    assert "tensor.gather" not in names and "arith.index_cast" in names
    (after,) = run(lifted, w, ids)
    np.testing.assert_array_equal(before, ref(w, ids))
    np.testing.assert_array_equal(after, ref(w, ids))


def test_index_and_integer_reduce_lift() -> None:
    """An iota from tensor.index, masked and summed as i64 (a cumsum of ones)."""
    text = """func.func @forward(%x: tensor<3x6x6xi1>) -> tensor<3x6x1xi64> {
  %m = tensor.elementwise(%x) : (tensor<3x6x6xi1>) -> tensor<3x6x6xi64> {
  ^bb0(%b: i1):
    %i = tensor.index 1 : index
    %j = tensor.index 2 : index
    %keep = arith.cmpi sle, %j, %i : index
    %one = arith.extui %b : i1 to i64
    %zero = arith.constant 0 : i64
    %v = arith.select %keep, %one, %zero : i64
    tensor.yield %v : i64
  }
  %r = tensor.reduce add %m dims [2] : tensor<3x6x6xi64> -> tensor<3x6x1xi64>
  func.return %r : tensor<3x6x1xi64>
}"""
    x = np.random.default_rng(1).random((3, 6, 6)) < 0.5
    ref = np.cumsum(x[:, 0, :], axis=-1)[:, :, None]  # every row i of x[b] is the same mask
    x = np.broadcast_to(x[:, :1, :], x.shape).copy()
    module = lift(parse(text))
    (out,) = run(module, x)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize(
    ("elt", "dim", "kind", "ufunc"),
    [("f32", 1, "add", np.cumsum), ("i64", 0, "add", np.cumsum), ("f32", 1, "max", None)],
)
def test_scan_lifts_to_one_linear_recurrence(elt: str, dim: int, kind: str, ufunc) -> None:
    """A scan costs n per row: its kernel's loops run numel iterations in all (a masked
    sum would run n² per row), and the loop interpreter matches numpy's accumulate."""
    t = f"tensor<6x200x{elt}>"
    text = f"""func.func @forward(%x: {t}) -> {t} {{
  %s = tensor.scan {kind} %x dim {dim} : {t}
  func.return %s : {t}
}}"""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 200)) if elt == "f32" else rng.integers(-9, 9, (6, 200))
    x = x.astype(np.float32 if elt == "f32" else np.int64)
    module = lift(parse(text))
    (store,) = [op for op in module.walk() if isinstance(op, loop.StoreOp)]
    assert trip_product(store, module) == 6 * 200  # each element stored once, in n steps
    carried = store.parent_op()
    assert (
        isinstance(carried, loop.ForOp) and carried.is_reduce and carried.trip_count == x.shape[dim]
    )
    (out,) = run(module, x)
    ref = ufunc(x.astype(np.float64), axis=dim) if ufunc else np.maximum.accumulate(x, axis=dim)
    if elt == "i64":
        np.testing.assert_array_equal(out, ref.astype(np.int64))
    else:
        assert rel_err(out, ref) < 1e-5
