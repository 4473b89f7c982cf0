# ruff: noqa: E501  (IR text is kept on one line per op, as it prints)
"""`loop-fusion` on decomposed RMSNorm, softmax and relu((x + b) @ w), written at the tensor
level by hand: each becomes ONE kernel, and the numerics hold at every stage (tensor
interpreter, lifted loop module, fused loop module) against a float64 numpy reference.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from xdsl.dialects.builtin import MemRefType, ModuleOp

from deplodock.dialects import loop, make_context
from deplodock.passes.convert_tensor_to_loop import ConvertTensorToLoopPass
from deplodock.passes.loop_fusion import LoopFusionPass
from deplodock.passes.loop_utils import work
from tests.helpers import parse, random_inputs, rel_err, run

RMS_NORM = """
func.func @forward(%x: tensor<2x8x32xf32> {deplodock.input = "x"}, %w: tensor<32xf32> {deplodock.param = "weight"}) -> tensor<2x8x32xf32> {
  %sq = tensor.elementwise(%x, %x) : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    tensor.yield %m : f32
  }
  %s = tensor.reduce add %sq dims [2] : tensor<2x8x32xf32> -> tensor<2x8x1xf32>
  %ms = tensor.elementwise(%s) : (tensor<2x8x1xf32>) -> tensor<2x8x1xf32> {
  ^bb0(%a: f32):
    %n = arith.constant 3.125000e-02 : f32
    %m = arith.mulf %a, %n : f32
    tensor.yield %m : f32
  }
  %v = tensor.elementwise(%ms) : (tensor<2x8x1xf32>) -> tensor<2x8x1xf32> {
  ^bb0(%a: f32):
    %eps = arith.constant 1.000000e-05 : f32
    %m = arith.addf %a, %eps : f32
    tensor.yield %m : f32
  }
  %r = tensor.elementwise(%v) : (tensor<2x8x1xf32>) -> tensor<2x8x1xf32> {
  ^bb0(%a: f32):
    %m = math.rsqrt %a : f32
    tensor.yield %m : f32
  }
  %rb = tensor.index_map(%r) [affine_map<(d0, d1, d2) -> (d0, d1, 0)>] : (tensor<2x8x1xf32>) -> tensor<2x8x32xf32>
  %xn = tensor.elementwise(%x, %rb) : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    tensor.yield %m : f32
  }
  %wb = tensor.index_map(%w) [affine_map<(d0, d1, d2) -> (d2)>] : (tensor<32xf32>) -> tensor<2x8x32xf32>
  %y = tensor.elementwise(%xn, %wb) : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    tensor.yield %m : f32
  }
  func.return %y : tensor<2x8x32xf32>
}
"""

SOFTMAX = """
func.func @forward(%x: tensor<4x16xf32> {deplodock.input = "x"}) -> tensor<4x16xf32> {
  %m = tensor.reduce max %x dims [1] : tensor<4x16xf32> -> tensor<4x1xf32>
  %mb = tensor.index_map(%m) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x16xf32>
  %d = tensor.elementwise(%x, %mb) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.subf %a, %b : f32
    tensor.yield %t : f32
  }
  %e = tensor.elementwise(%d) : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32):
    %t = math.exp %a : f32
    tensor.yield %t : f32
  }
  %s = tensor.reduce add %e dims [1] : tensor<4x16xf32> -> tensor<4x1xf32>
  %sb = tensor.index_map(%s) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x16xf32>
  %y = tensor.elementwise(%e, %sb) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.divf %a, %b : f32
    tensor.yield %t : f32
  }
  func.return %y : tensor<4x16xf32>
}
"""

MATMUL_RELU = """
func.func @forward(%x: tensor<16x64xf32> {deplodock.input = "x"}, %b: tensor<64xf32> {deplodock.param = "b"}, %w: tensor<64x16xf32> {deplodock.param = "w"}) -> tensor<16x16xf32> {
  %bb = tensor.index_map(%b) [affine_map<(d0, d1) -> (d1)>] : (tensor<64xf32>) -> tensor<16x64xf32>
  %xb = tensor.elementwise(%x, %bb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32> {
  ^bb0(%p: f32, %q: f32):
    %t = arith.addf %p, %q : f32
    tensor.yield %t : f32
  }
  %xe = tensor.index_map(%xb) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<16x64xf32>) -> tensor<16x64x16xf32>
  %we = tensor.index_map(%w) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<64x16xf32>) -> tensor<16x64x16xf32>
  %pr = tensor.elementwise(%xe, %we) : (tensor<16x64x16xf32>, tensor<16x64x16xf32>) -> tensor<16x64x16xf32> {
  ^bb0(%p: f32, %q: f32):
    %t = arith.mulf %p, %q : f32
    tensor.yield %t : f32
  }
  %s = tensor.reduce add %pr dims [1] : tensor<16x64x16xf32> -> tensor<16x1x16xf32>
  %mm = tensor.index_map(%s) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<16x1x16xf32>) -> tensor<16x16xf32>
  %r = tensor.elementwise(%mm) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%p: f32):
    %z = arith.constant 0.000000e+00 : f32
    %t = arith.maximumf %p, %z : f32
    tensor.yield %t : f32
  }
  func.return %r : tensor<16x16xf32>
}
"""


def _rms_norm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _matmul_relu(x: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.maximum((x + b) @ w, 0.0)


MODELS: dict[str, tuple[str, Callable[..., np.ndarray]]] = {
    "rms_norm": (RMS_NORM, _rms_norm),
    "softmax": (SOFTMAX, _softmax),
    "matmul_relu": (MATMUL_RELU, _matmul_relu),
}


def kernels(module: ModuleOp) -> list[loop.KernelOp]:
    return [op for op in module.ops if isinstance(op, loop.KernelOp)]


def memref_shapes(module: ModuleOp) -> set[tuple[int, ...]]:
    types = {r.type for op in module.walk() for r in op.results}
    types |= {a.type for op in module.walk() for r in op.regions for b in r.blocks for a in b.args}
    return {tuple(t.get_shape()) for t in types if isinstance(t, MemRefType)}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_fuses_into_one_kernel(name: str) -> None:
    text, reference = MODELS[name]
    module = parse(text)
    inputs = random_inputs(module, seed=len(name))
    expected = reference(*(x.astype(np.float64) for x in inputs))

    (out,) = run(module, *inputs)
    assert rel_err(out, expected) <= 1e-5, "tensor interpreter"

    ConvertTensorToLoopPass().apply(make_context(), module)
    module.verify()
    assert len(kernels(module)) > 1
    (out,) = run(module, *inputs)
    assert rel_err(out, expected) <= 1e-5, "lifted loop module"

    LoopFusionPass().apply(make_context(), module)
    module.verify()
    assert len(kernels(module)) == 1
    assert sum(1 for op in module.walk() if isinstance(op, loop.LaunchOp)) == 1
    assert sum(1 for op in module.walk() if isinstance(op, loop.AllocOp)) == 1
    (out,) = run(module, *inputs)
    assert out.shape == expected.shape
    assert rel_err(out, expected) <= 1e-5, "fused loop module"


def test_matmul_product_is_never_materialised() -> None:
    module = parse(MATMUL_RELU)
    ConvertTensorToLoopPass().apply(make_context(), module)
    assert (16, 64, 16) in memref_shapes(module)
    LoopFusionPass().apply(make_context(), module)
    assert (16, 64, 16) not in memref_shapes(module)
    assert memref_shapes(module) == {(16, 64), (64,), (64, 16), (16, 16)}


def _reduce_loops_per_row(kernel: loop.KernelOp) -> list[str]:
    """Combiners of the reduce loops in the block of the first one (the row loop's body)."""
    first = next(op for op in kernel.walk() if isinstance(op, loop.ForOp) and op.is_reduce)
    row = first.parent_block()
    assert row is not None and isinstance(row.parent_op(), loop.ForOp)
    found = []
    for op in row.ops:
        if isinstance(op, loop.ForOp) and op.is_reduce:
            yielded = op.body.block.last_op
            assert yielded is not None
            found.append(yielded.operands[0].owner.name)  # type: ignore[union-attr]
    return found


def test_row_reductions_run_once_per_row() -> None:
    """Reductions that depend on the row only are hoisted out of the write sweep and
    deduplicated: softmax has a max sweep and a sum sweep, RMSNorm one sum of squares."""
    for text, expected in ((SOFTMAX, ["arith.maximumf", "arith.addf"]), (RMS_NORM, ["arith.addf"])):
        module = parse(text)
        ConvertTensorToLoopPass().apply(make_context(), module)
        LoopFusionPass().apply(make_context(), module)
        (kernel,) = kernels(module)
        assert _reduce_loops_per_row(kernel) == expected
        reduce_loops = [op for op in kernel.walk() if isinstance(op, loop.ForOp) and op.is_reduce]
        assert len(reduce_loops) == len(expected)


TWO_MATMULS = """
func.func @forward(%x: tensor<4x64xf32> {deplodock.input = "x"}, %w1: tensor<64x16xf32> {deplodock.param = "w1"}, %w2: tensor<16x64xf32> {deplodock.param = "w2"}) -> tensor<4x64xf32> {
  %xe = tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<4x64xf32>) -> tensor<4x64x16xf32>
  %w1e = tensor.index_map(%w1) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<64x16xf32>) -> tensor<4x64x16xf32>
  %p1 = tensor.elementwise(%xe, %w1e) : (tensor<4x64x16xf32>, tensor<4x64x16xf32>) -> tensor<4x64x16xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.mulf %a, %b : f32
    tensor.yield %t : f32
  }
  %s1 = tensor.reduce add %p1 dims [1] : tensor<4x64x16xf32> -> tensor<4x1x16xf32>
  %h = tensor.index_map(%s1) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<4x1x16xf32>) -> tensor<4x16xf32>
  %r = tensor.elementwise(%h) : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32):
    %z = arith.constant 0.000000e+00 : f32
    %t = arith.maximumf %a, %z : f32
    tensor.yield %t : f32
  }
  %re = tensor.index_map(%r) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<4x16xf32>) -> tensor<4x16x64xf32>
  %w2e = tensor.index_map(%w2) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<16x64xf32>) -> tensor<4x16x64xf32>
  %p2 = tensor.elementwise(%re, %w2e) : (tensor<4x16x64xf32>, tensor<4x16x64xf32>) -> tensor<4x16x64xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.mulf %a, %b : f32
    tensor.yield %t : f32
  }
  %s2 = tensor.reduce add %p2 dims [1] : tensor<4x16x64xf32> -> tensor<4x1x64xf32>
  %y = tensor.index_map(%s2) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<4x1x64xf32>) -> tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}
"""


def test_two_matmuls_materialise_the_hidden_activation() -> None:
    """relu(x @ w1) @ w2: recomputing the first matmul for each of the 64 output columns
    is over budget, so the cut falls at the first matmul's result (4x1x16); neither
    broadcast product (4x64x16, 4x16x64) is materialised and relu is inlined into the
    second matmul."""
    module = parse(TWO_MATMULS)
    inputs = random_inputs(module, seed=5)
    x, w1, w2 = (a.astype(np.float64) for a in inputs)
    ConvertTensorToLoopPass().apply(make_context(), module)
    LoopFusionPass().apply(make_context(), module)
    module.verify()
    assert [k.sym_name.data for k in kernels(module)] == ["s1_kernel", "s2_y_kernel"]
    assert memref_shapes(module) == {(4, 64), (64, 16), (16, 64), (4, 1, 16)}
    (out,) = run(module, *inputs)
    assert rel_err(out, np.maximum(x @ w1, 0.0) @ w2) <= 1e-5


EXP_MATMUL = """
loop.kernel @p(%x: memref<16x16xf32>, %e: memref<16x16xf32>) {
  loop.for %i = 0 to 16 {
    loop.for %j = 0 to 16 {
      %v = loop.load %x[%i, %j] : memref<16x16xf32>
      %w = math.exp %v : f32
      loop.store %w, %e[%i, %j] : memref<16x16xf32>
    }
  }
  loop.return
}
loop.kernel @mm(%e: memref<16x16xf32>, %w: memref<16x16xf32>, %y: memref<16x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  loop.for %i = 0 to 16 {
    loop.for %j = 0 to 16 {
      %s = loop.for %k = 0 to 16 iter_args(%acc = %zero) -> (f32) {
        %a = loop.load %e[%i, %k] : memref<16x16xf32>
        %b = loop.load %w[%k, %j] : memref<16x16xf32>
        %m = arith.mulf %a, %b : f32
        %n = arith.addf %acc, %m : f32
        loop.yield %n : f32
      }
      loop.store %s, %y[%i, %j] : memref<16x16xf32>
    }
  }
  loop.return
}
func.func @forward(%x: memref<16x16xf32>, %w: memref<16x16xf32>) -> RESULT_TYPES {
  %e = loop.alloc : memref<16x16xf32>
  loop.launch @p(%x, %e) : (memref<16x16xf32>, memref<16x16xf32>) -> ()
  %y = loop.alloc : memref<16x16xf32>
  loop.launch @mm(%e, %w, %y) : (memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>) -> ()
  func.return RESULTS
}
"""


@pytest.mark.parametrize(
    ("max_recompute", "return_e", "expected"),
    [
        (8, False, ["mm_kernel"]),
        (8, True, ["p_kernel", "mm_kernel"]),
        (1, False, ["p_kernel", "mm_kernel"]),
    ],
)
def test_recompute_guard(max_recompute: int, return_e: bool, expected: list[str]) -> None:
    """exp(x) @ w: inlining the exp recomputes it for every output column (16x). That fits
    the default budget (8x the work of both kernels) but not max-recompute=1. When exp(x)
    is also a result of @forward, its kernel stays after being inlined."""
    results = (
        "%y, %e : memref<16x16xf32>, memref<16x16xf32>" if return_e else "%y : memref<16x16xf32>"
    )
    types = "(memref<16x16xf32>, memref<16x16xf32>)" if return_e else "memref<16x16xf32>"
    module = parse(EXP_MATMUL.replace("RESULT_TYPES", types).replace("RESULTS", results))
    inputs = random_inputs(module, seed=3)
    x, w = (a.astype(np.float64) for a in inputs)
    before = sum(work(k) for k in kernels(module))
    LoopFusionPass(max_recompute=max_recompute).apply(make_context(), module)
    module.verify()
    assert [k.sym_name.data for k in kernels(module)] == expected
    fused = kernels(module)[-1]
    assert work(fused) <= max_recompute * before
    outputs = run(module, *inputs)
    assert rel_err(outputs[0], np.exp(x) @ w) <= 1e-5
    if return_e:
        assert rel_err(outputs[1], np.exp(x)) <= 1e-5


def test_a_reduction_is_never_recomputed_per_consumer_element() -> None:
    """q = x @ wq feeding q @ k: inlining the first matmul into the second would redo it for
    every output column (the attention blow-up); fusion keeps q as a buffer instead."""
    from deplodock.driver import lower_program, program_from_expression
    from deplodock.passes.loop_utils import reduction_iterations

    program = program_from_expression(
        "torch.matmul(torch.randn(8, 16) @ torch.randn(16, 32), torch.randn(32, 8))"
    )
    lower_program(program, "loop")
    fused = [op for op in program.module.ops if isinstance(op, loop.KernelOp)]
    assert len(fused) == 2
    # 8*32*16 iterations for x @ wq, 8*8*32 for q @ k: exactly once each.
    assert sum(reduction_iterations(k) for k in fused) == 8 * 32 * 16 + 8 * 8 * 32


#: A normalisation feeding a contraction: RMSNorm before a linear, softmax before P @ V;
#: `{n}` is the number of output columns.
NORM_INTO_CONTRACTION = {
    "rmsnorm-linear": "nn.Linear(48, {n}, bias=False)(nn.RMSNorm(48)(torch.randn(3, 7, 48)))",
    "softmax-matmul": (
        "torch.softmax(torch.randn(2, 37, 16) @ torch.randn(2, 37, 16).transpose(-1, -2), dim=-1)"
        " @ torch.randn(2, 37, {n})"
    ),
}


def _scheduled(name: str, columns: int):
    from deplodock.dialects import tile
    from deplodock.driver import lower_program, program_from_expression, run_and_compare

    program = program_from_expression(NORM_INTO_CONTRACTION[name].format(n=columns), seed=1)
    lower_program(program, "loop")
    assert run_and_compare(program, seed=2).ok
    lower_program(program, "tile")
    kernels = [op for op in program.module.ops if isinstance(op, tile.KernelOp)]
    contractions = [k for k in kernels if k.schedule and "bm" in k.schedule.data]
    assert kernels[-1] in contractions, "the final product is a blocked contraction"
    assert run_and_compare(program, seed=2).ok
    return kernels, contractions


@pytest.mark.parametrize("name", sorted(NORM_INTO_CONTRACTION))
def test_a_reduction_feeding_a_wide_contraction_stays_a_kernel(name: str) -> None:
    """Over 320 output columns (three blocks of them) the row statistics are not fused into
    the contraction, which would recompute them per block of columns; the elementwise rest
    is, as its prologue, and the contraction is still blocked by the tile passes."""
    kernels, contractions = _scheduled(name, 320)
    assert len(contractions) == (1 if name == "rmsnorm-linear" else 2)
    assert len(kernels) > len(contractions)  # the statistics kernel(s)


@pytest.mark.parametrize("name", sorted(NORM_INTO_CONTRACTION))
def test_the_statistics_of_a_narrow_contraction_are_computed_in_it(name: str) -> None:
    """Over 40 output columns the row statistics fuse into the contraction: no kernel of
    their own, the contraction still blocked, its warps computing them once per block row
    into a shared array (`tile-shared-statistics`); tile level and PyTorch agree."""
    from deplodock.dialects import tile

    kernels, contractions = _scheduled(name, 40)
    assert kernels == contractions
    statistics = [
        op
        for op in kernels[-1].walk()
        if isinstance(op, tile.SharedAllocOp) and "statistics" in op.attributes
    ]
    assert len(statistics) == 1
    assert any(isinstance(op, tile.CombineOp) for op in kernels[-1].walk())


#: Statistics that feed a contraction, and the launches left: the attention product with
#: the statistics kept kernels of their own (QK^T, the softmax's max and sum in one kernel,
#: P.V) and LayerNorm before a linear of 320 columns.
STATISTICS = {
    "softmax-pv": (
        "torch.softmax(torch.randn(2, 4, 16, 8) @ torch.randn(2, 4, 16, 8).transpose(-1, -2),"
        " dim=-1) @ torch.randn(2, 4, 16, 8)",
        3,
        2,
    ),
    "layernorm-linear": ("nn.Linear(64, 320)(nn.LayerNorm(64)(torch.randn(4, 64)))", 2, 3),
}


@pytest.mark.parametrize("name", list(STATISTICS))
def test_statistics_of_the_same_rows_are_one_kernel(name: str) -> None:
    """The row statistics a contraction reads, where they stay kernels of their own (the
    linear is wide; `row-statistics=false` for the attention product), are computed by one
    kernel that writes each of them (`_takes_over`), and the program still matches PyTorch
    at the loop level and through the emitted CUDA executed on the CPU."""
    from deplodock.passes.pipelines import lower
    from tests.e2e.test_ops_all_levels import captured_expression, lowered_expression

    expr, launches, outputs = STATISTICS[name]
    _, arguments, expected = captured_expression(expr)
    module = lowered_expression(expr, "tensor").clone()
    ConvertTensorToLoopPass().apply(make_context(), module)
    LoopFusionPass(row_statistics=False).apply(make_context(), module)
    assert sum(1 for op in module.walk() if isinstance(op, loop.LaunchOp)) == launches
    statistics = kernels(module)[-2]
    stores = [op for op in statistics.walk() if isinstance(op, loop.StoreOp)]
    assert len({store.memref for store in stores}) == outputs
    (out,) = run(module, *arguments)
    assert rel_err(out, expected[0]) <= 1e-5, "loop"
    (out,) = run(lower(module, "cuda", start="loop"), *arguments)
    assert rel_err(out, expected[0]) <= 1e-5, "cuda"


#: The MLP of a Llama-style block at a hidden size of 320 (down's output columns) and 64.
MLP = (
    "nn.Linear(64, {h}, bias=False)(F.silu(nn.Linear({h}, 64, bias=False)(torch.randn(1, 4, {h})))"
    " * nn.Linear({h}, 64, bias=False)(torch.randn(1, 4, {h})))"
)


def _exp_kernels(module: ModuleOp) -> list[str]:
    from xdsl.dialects import math

    return [
        k.sym_name.data for k in kernels(module) if any(isinstance(o, math.ExpOp) for o in k.walk())
    ]


def test_silu_is_the_gate_projections_epilogue_past_two_column_blocks() -> None:
    """With 320 output columns the down projection would recompute silu's exp in every
    block of columns: silu stays with the gate projection, as its epilogue, and only the
    multiply by up is the down projection's prologue; loop level and CUDA match PyTorch."""
    from tests.e2e.test_ops_all_levels import captured_expression, lowered_expression

    expr = MLP.format(h=320)
    _, arguments, expected = captured_expression(expr)
    module = lowered_expression(expr, "loop")
    assert sum(1 for op in module.walk() if isinstance(op, loop.LaunchOp)) == 3
    gate = kernels(module)[0]
    assert _exp_kernels(module) == [gate.sym_name.data]
    assert any(op.is_reduce for op in gate.walk() if isinstance(op, loop.ForOp))
    for stage in ("loop", "cuda"):
        (out,) = run(lowered_expression(expr, stage), *arguments)
        assert rel_err(out, expected[0]) <= 1e-5, stage


def test_silu_of_inputs_and_of_few_columns_still_fuses_as_the_prologue() -> None:
    """Where nothing reduces before silu (its input is the program's), a kernel of its own
    would cost a launch and a round trip: it stays the prologue. So does the MLP with 64
    output columns, one block (SDPA's softmax before `@ V` is the same case, 128 columns)."""
    from tests.e2e.test_ops_all_levels import lowered_expression

    inputs = "nn.Linear(64, 320, bias=False)(F.silu(torch.randn(4, 64)) * torch.randn(4, 64))"
    module = lowered_expression(inputs, "loop")
    assert len(kernels(module)) == 1 and len(_exp_kernels(module)) == 1
    narrow = lowered_expression(MLP.format(h=64), "loop")
    exp_kernels = _exp_kernels(narrow)
    assert len(exp_kernels) == 1 and exp_kernels[0] == kernels(narrow)[-1].sym_name.data


@pytest.mark.parametrize(("queries", "launches"), [(1, 3), (8, 3), (24, 1)])
def test_a_statistic_fuses_only_into_a_product_with_rows_to_block(
    queries: int, launches: int
) -> None:
    """Attention over 40 keys: with 24 queries the keys are padded to 48 (three whole
    chunks) and the whole attention is one kernel; decoding one query (or 8, fewer than a
    16-row tile) the softmax statistics keep their kernel, since the tile passes could not
    block that product. Loop level matches PyTorch."""
    from tests.e2e.test_ops_all_levels import captured_expression, lowered_expression

    expr = (
        f"F.scaled_dot_product_attention(torch.randn(1, 4, {queries}, 16), "
        "torch.randn(1, 4, 40, 16), torch.randn(1, 4, 40, 16))"
    )
    _, arguments, expected = captured_expression(expr)
    module = lowered_expression(expr, "loop")
    assert sum(1 for op in module.walk() if isinstance(op, loop.LaunchOp)) == launches
    (out,) = run(module, *arguments)
    assert rel_err(out, expected[0]) <= 1e-5
