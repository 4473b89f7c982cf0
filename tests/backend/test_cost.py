"""The kernel cost model counts exactly what the threads execute (hand-computed totals)."""

from __future__ import annotations

from xdsl.parser import Parser

from deplodock.backend.cost import kernel_cost, launch_counts, program_costs
from deplodock.dialects import kernel, make_context
from deplodock.driver import lower_program, program_from_expression


def parse_kernel(text: str) -> kernel.FuncOp:
    module = Parser(make_context(), f"builtin.module {{\n{text}\n}}").parse_module()
    module.verify()
    (fn,) = [op for op in module.ops if isinstance(op, kernel.FuncOp)]
    return fn


GRID_STRIDE = """
kernel.func @k(%x: memref<1200xf32>, %y: memref<1200xf32>) grid 5 block 256 {
  %t = kernel.thread_id : index
  %b = kernel.block_id : index
  %c256 = arith.constant 256 : index
  %c1000 = arith.constant 1000 : index
  %0 = arith.muli %b, %c256 : index
  %start = arith.addi %0, %t : index
  kernel.for %i = %start to 1200 step 1280 {
    %v = kernel.load %x[%i] : memref<1200xf32>
    %w = arith.mulf %v, %v : f32
    %lt = arith.cmpi slt, %i, %c1000 : index
    kernel.if %lt {
      kernel.store %w, %y[%i] : memref<1200xf32>
    }
  }
  kernel.return
}
"""


def test_grid_stride_loop_with_a_bounds_check_on_the_iv() -> None:
    cost = kernel_cost(parse_kernel(GRID_STRIDE))
    # 1280 lanes cover 1200 elements once; the store runs for the first 1000 only
    assert cost.exact
    assert (cost.load_bytes, cost.store_bytes, cost.flops) == (1200 * 4, 1000 * 4, 1200)
    assert cost.footprint_bytes == 1200 * 4 + 1000 * 4
    assert cost.loaded == {"x": 4800} and cost.stored == {"y": 4000}


TRIANGLE = """
kernel.func @tri(%x: memref<64x8xf32>, %y: memref<64x8xf32>) grid 1 block 64 {
  %t = kernel.thread_id : index
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.000000e+00 : f32
  kernel.for %j = %c0 to 8 {
    %s = kernel.for %k = %j to 8 iter_args(%acc = %zero) -> (f32) {
      %v = kernel.load %x[%t, %k] : memref<64x8xf32>
      %a = arith.addf %acc, %v : f32
      kernel.yield %a : f32
    }
    kernel.store %s, %y[%t, %j] : memref<64x8xf32>
  }
  kernel.return
}
"""


def test_triangular_nest_is_walked() -> None:
    cost = kernel_cost(parse_kernel(TRIANGLE))
    per_lane = sum(8 - j for j in range(8))  # 36
    assert cost.exact
    assert cost.load_bytes == 64 * per_lane * 4 and cost.flops == 64 * per_lane
    assert cost.store_bytes == 64 * 8 * 4
    assert cost.footprint_bytes == 64 * 8 * 4 * 2  # each buffer counted at most once


DATA_DEPENDENT = """
kernel.func @relu_store(%x: memref<32xf32>, %y: memref<32xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %zero = arith.constant 0.000000e+00 : f32
  %v = kernel.load %x[%t] : memref<32xf32>
  %pos = arith.cmpf ogt, %v, %zero : f32
  kernel.if %pos {
    kernel.store %v, %y[%t] : memref<32xf32>
  }
  kernel.return
}
"""


def test_data_dependent_control_is_an_upper_bound_marked_inexact() -> None:
    cost = kernel_cost(parse_kernel(DATA_DEPENDENT))
    assert not cost.exact
    assert (cost.load_bytes, cost.store_bytes, cost.flops) == (128, 128, 0)


def kernel_level(code: str):
    program = program_from_expression(code)
    lower_program(program, "kernel")
    return program.module


def test_rms_norm_counts() -> None:
    (cost,) = program_costs(kernel_level("nn.RMSNorm(64)(torch.randn(1, 4, 64))")).values()
    lanes = 4 * 64  # one trip per lane in each strided loop
    assert (cost.grid, cost.block) == (4, 64)
    # sum of squares (2), 5 shuffle adds, 2 adds of the warp partials, mean/eps/rsqrt (3),
    # normalise and scale (2): 14 float ops per lane
    assert cost.flops == 14 * lanes == 3584
    # the row is read once: `tile-row-on-chip` keeps it in registers for the second sweep
    assert cost.loaded == {"x0": lanes * 4, "p_0_weight": lanes * 4}
    assert cost.stored == {"rms_norm": lanes * 4}
    assert cost.shared_bytes == (2 * 4) * 4 + lanes * 2 * 4  # lane-0 stores, 2 reads per lane
    assert cost.footprint_bytes == 1024 + 256 + 1024
    assert cost.exact


def test_linear_counts_two_flops_per_multiply_add() -> None:
    module = kernel_level("nn.Linear(64, 32, bias=False)(torch.randn(1, 4, 64))")
    (cost,) = program_costs(module).values()
    m, n, k = 4, 32, 64
    assert (cost.grid, cost.block) == (m * n, 64)
    lanes = m * n * 64
    assert cost.flops == 2 * m * n * k + 5 * lanes + 2 * lanes
    assert cost.load_bytes == 2 * m * n * k * 4  # every product reads both operands
    assert cost.store_bytes == m * n * 4  # thread 0 of each block
    assert cost.footprint_bytes == (m * k + n * k + m * n) * 4


def test_bf16_elements_are_two_bytes() -> None:
    module = kernel_level(
        "torch.randn(4, 96, dtype=torch.bfloat16) * torch.randn(4, 96, dtype=torch.bfloat16)"
    )
    (cost,) = program_costs(module).values()
    assert cost.load_bytes == 2 * 4 * 96 * 2 and cost.store_bytes == 4 * 96 * 2
    assert cost.flops == 4 * 96


def test_costs_are_keyed_by_the_names_the_cuda_kernels_keep() -> None:
    program = program_from_expression("torch.softmax(torch.randn(2, 8, 40), dim=-1) * 2.0")
    lower_program(program, "kernel")
    costs = program_costs(program.module)
    counts = launch_counts(program.module)
    lower_program(program, "cuda")
    names = {op.sym_name.data for op in program.module.ops if op.name == "cuda.kernel"}
    assert set(costs) == names == set(counts)
    assert all(c.exact and c.flops > 0 for c in costs.values())
