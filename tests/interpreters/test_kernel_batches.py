"""The kernel interpreter runs batches of blocks in lock-step: the same results as one block
at a time, bit for bit, and every check still names the right thread and block.

Each program runs with one block per batch (the reference: the plain block-after-block
semantics), with a batch size that does not divide the grid (a short last batch), and with
the default batch size.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import kernel, make_context
from deplodock.driver import lower_program, program_from_expression
from deplodock.interpreters import run_module
from deplodock.interpreters.blocks import BlockState
from deplodock.interpreters.shared_memory import RaceError, SharedBuffer, UninitializedReadError
from deplodock.interpreters.simt import LockstepState
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from tests.helpers import parse, random_inputs, rel_err
from tests.passes.test_tile_split_k import PLAIN, plain_reference, tile_stage

#: Batch sizes every program runs with: one block at a time, a size that leaves a short
#: last batch, the default.
BATCHES = (1, 3, None)


def kernel_program(expression: str) -> ModuleOp:
    program = program_from_expression(expression)
    lower_program(program, "kernel")
    return program.module


def grids(module: ModuleOp) -> list[int]:
    return [op.grid_size for op in module.walk() if isinstance(op, kernel.FuncOp)]


def run_batched(module: ModuleOp, inputs: list[np.ndarray], batch: int | None) -> np.ndarray:
    (out,) = run_module(module, inputs, blocks_per_batch=batch)
    return out


def assert_batch_independent(module: ModuleOp, inputs: list[np.ndarray]) -> np.ndarray:
    """Runs `module` with every batch size of `BATCHES`; all results are bit-identical."""
    reference = run_batched(module, inputs, 1)
    for batch in BATCHES[1:]:
        np.testing.assert_array_equal(run_batched(module, inputs, batch), reference)
    return reference


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def rms_norm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    eps = np.finfo(np.float32).eps
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    tensors = (torch.from_numpy(a).double() for a in (q, k, v))
    return torch.nn.functional.scaled_dot_product_attention(*tensors, is_causal=True).numpy()


PROGRAMS = {
    # shared stages filled by cp.async, commit/wait groups, a barrier per stage
    "gemm": ("torch.randn(128, 96) @ torch.randn(96, 256)", lambda a, b: a @ b),
    # warp shuffles and block combines through shared memory, three barriers
    "softmax": ("torch.softmax(torch.randn(10, 1000), dim=-1)", softmax),
    "rms_norm": ("nn.RMSNorm(512)(torch.randn(2, 5, 512))", rms_norm),
    # four kernels: cp.async, vector loads, shuffles
    "attention": (
        "F.scaled_dot_product_attention(torch.randn(1, 2, 64, 32), torch.randn(1, 2, 64, 32),"
        " torch.randn(1, 2, 64, 32), is_causal=True)",
        attention,
    ),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_batches_give_bit_identical_results(name: str) -> None:
    expression, reference = PROGRAMS[name]
    module = kernel_program(expression)
    assert any(grid % 3 for grid in grids(module))  # a short last batch of 3
    inputs = random_inputs(module, seed=7)
    out = assert_batch_independent(module, inputs)
    expected = reference(*(a.astype(np.float64) for a in inputs))
    assert rel_err(out, expected) < 1e-5


def test_atomic_split_k_slices_add_alike_in_batches() -> None:
    """Eight K slices per output tile `atomic_add` into a zeroed output: the adds to one
    element come from different blocks, in block order either way."""
    module = tile_stage(PLAIN, "tile-split-k{splits=8 atomic=true}", "tile-block{bm=16 bn=32}")
    ConvertTileToKernelPass().apply(make_context(), module)
    assert any(isinstance(op, kernel.AtomicAddOp) for op in module.walk())
    inputs = random_inputs(module, seed=5)
    out = assert_batch_independent(module, inputs)
    assert rel_err(out, plain_reference(inputs)) < 1e-5


# --------------------------------------------------------------------------------------------
# A block-uniform loop around barriers: only some blocks of a batch reach them


def uniform_skip(body_barrier: bool = True, runs: str = "every third") -> str:
    """Blocks `b % 3 == 0` (or only block 3) run a one-trip loop that reverses their row in
    shared memory between barriers; the others skip it, so the barriers inside advance
    only some blocks of a batch. `body_barrier=False` plants a missing barrier."""
    inner = "kernel.barrier" if body_barrier else ""
    if runs == "every third":
        start = "%lb = arith.remsi %b, %c3 : index"
    else:  # only block 3: start 0 there, 1 (no trip) elsewhere
        start = """%is3 = arith.cmpi eq, %b, %c3 : index
    %lb = arith.select %is3, %c0, %c1 : index"""
    return f"""
builtin.module {{
  kernel.func @uniform_skip(%x: memref<10x64xf32>, %y: memref<10x64xf32>) grid 10 block 64 {{
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c63 = arith.constant 63 : index
    %two = arith.constant 2.000000e+00 : f32
    %s = kernel.shared_alloc : memref<64xf32, 3 : i64>
    %r = arith.subi %c63, %t : index
    {start}
    %v = kernel.load %x[%b, %t] : memref<10x64xf32>
    kernel.store %v, %s[%t] : memref<64xf32, 3 : i64>
    kernel.barrier
    kernel.for %i = %lb to 1 step 1 {{
      %w = kernel.load %s[%r] : memref<64xf32, 3 : i64>
      {inner}
      %w2 = arith.mulf %w, %two : f32
      kernel.store %w2, %s[%t] : memref<64xf32, 3 : i64>
      kernel.barrier
    }}
    %u = kernel.load %s[%r] : memref<64xf32, 3 : i64>
    kernel.store %u, %y[%b, %t] : memref<10x64xf32>
    kernel.return
  }}
  func.func @forward(%x: memref<10x64xf32>) -> memref<10x64xf32> {{
    %y = kernel.alloc : memref<10x64xf32>
    kernel.launch @uniform_skip(%x, %y) : (memref<10x64xf32>, memref<10x64xf32>) -> ()
    func.return %y : memref<10x64xf32>
  }}
}}
"""


def test_a_block_uniform_loop_around_barriers_advances_only_its_blocks() -> None:
    module = parse(uniform_skip())
    x = np.random.default_rng(1).standard_normal((10, 64)).astype(np.float32)
    out = assert_batch_independent(module, [x])
    expected = x[:, ::-1].copy()
    expected[::3] = 2 * x[::3]  # reversed twice, doubled
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("batch", [1, 4, 10])
def test_a_race_planted_in_block_3_is_reported_as_block_3(batch: int) -> None:
    module = parse(uniform_skip(body_barrier=False, runs="only block 3"))
    x = np.ones((10, 64), dtype=np.float32)
    with pytest.raises(
        RaceError,
        match=r"race on shared buffer %s \(@uniform_skip, block 3\): thread 0 writes element "
        r"\[0\] read by thread 63 in the same barrier epoch \(kernel.store\)",
    ):
        run_batched(module, [x], batch)


@pytest.mark.parametrize("batch", [1, 4, 10])
def test_an_uninitialized_read_in_block_3_names_block_3(batch: int) -> None:
    """Block 3 alone skips the store that fills its shared row."""
    text = uniform_skip(runs="only block 3")
    text = text.replace(
        "    kernel.store %v, %s[%t] : memref<64xf32, 3 : i64>\n    kernel.barrier\n",
        """    %not3 = arith.cmpi ne, %b, %c3 : index
    kernel.if %not3 {
      kernel.store %v, %s[%t] : memref<64xf32, 3 : i64>
    }
    kernel.barrier
""",
    )
    x = np.ones((10, 64), dtype=np.float32)
    with pytest.raises(
        UninitializedReadError,
        match=r"uninitialized read of shared buffer %s \(@uniform_skip, block 3\): thread 0 "
        r"reads element \[63\]",
    ):
        run_batched(parse(text), [x], batch)


@pytest.mark.parametrize("batch", [1, 4])
def test_a_global_index_out_of_bounds_names_thread_and_block(batch: int) -> None:
    """Block 7 reads row 7 + 3 = 10 of a 10-row buffer (thread 0 first)."""
    text = uniform_skip().replace(
        "%v = kernel.load %x[%b, %t]",
        "%b3 = arith.addi %b, %c3 : index\n    %v = kernel.load %x[%b3, %t]",
    )
    x = np.ones((10, 64), dtype=np.float32)
    with pytest.raises(
        InterpretationError, match=re.escape("index 10 out of bounds") + r".*thread 0, block 7"
    ):
        run_batched(parse(text), [x], batch)


SKIPPED_BARRIER = """
builtin.module {
  kernel.func @skip(%x: memref<10x64xf32>, %y: memref<10x64xf32>) grid 10 block 64 {
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c63 = arith.constant 63 : index
    %s = kernel.shared_alloc : memref<64xf32, 3 : i64>
    %r = arith.subi %c63, %t : index
    %is3 = arith.cmpi eq, %b, %c3 : index
    %lb = arith.select %is3, %c1, %c0 : index
    %v = kernel.load %x[%b, %t] : memref<10x64xf32>
    kernel.store %v, %s[%t] : memref<64xf32, 3 : i64>
    kernel.for %i = %lb to 1 step 1 {
      kernel.barrier
    }
    %u = kernel.load %s[%r] : memref<64xf32, 3 : i64>
    kernel.store %u, %y[%b, %t] : memref<10x64xf32>
    kernel.return
  }
  func.func @forward(%x: memref<10x64xf32>) -> memref<10x64xf32> {
    %y = kernel.alloc : memref<10x64xf32>
    kernel.launch @skip(%x, %y) : (memref<10x64xf32>, memref<10x64xf32>) -> ()
    func.return %y : memref<10x64xf32>
  }
}
"""


@pytest.mark.parametrize("batch", [1, 4, 10])
def test_a_block_skipping_the_barrier_the_rest_of_its_batch_passes_still_races(
    batch: int,
) -> None:
    """Every block but 3 passes a barrier between its shared store and load; block 3's
    epoch must not move with the others of its batch."""
    x = np.ones((10, 64), dtype=np.float32)
    with pytest.raises(
        RaceError,
        match=r"race on shared buffer %s \(@skip, block 3\): thread 0 reads element \[63\] "
        r"written by thread 63",
    ):
        run_batched(parse(SKIPPED_BARRIER), [x], batch)


def test_conflicting_global_stores_of_two_blocks_of_a_batch_are_reported() -> None:
    """Every block stores its row to row 0: blocks run concurrently, so that is a race."""
    text = uniform_skip().replace("kernel.store %u, %y[%b, %t]", "kernel.store %u, %y[%c0, %t]")
    x = np.random.default_rng(2).standard_normal((10, 64)).astype(np.float32)
    with pytest.raises(
        InterpretationError,
        match=r"thread 0 \(block 0\) and thread 0 \(block 1\) write different values",
    ):
        run_batched(parse(text), [x], 4)


# --------------------------------------------------------------------------------------------
# Per-block state of a batch, directly


def test_lanes_know_their_thread_and_block() -> None:
    lanes = LockstepState(32, first_block=8, num_blocks=3)
    assert lanes.num_lanes == 96
    assert lanes.thread_ids.tolist() == list(range(32)) * 3
    assert np.asarray(lanes.block_ids).tolist() == [8] * 32 + [9] * 32 + [10] * 32
    assert lanes.describe_lane(70) == "thread 6, block 10"
    assert LockstepState(32, first_block=4).block_ids == 4  # a lone block: a scalar


def test_a_barrier_reached_by_part_of_a_block_is_an_error() -> None:
    state = BlockState(LockstepState(32, first_block=4, num_blocks=3))
    with state.lanes.masked(state.lanes.lane_blocks != 1):  # block 5 skips: fine
        state.barrier()
    assert state.epochs.tolist() == [1, 0, 1]
    with (
        state.lanes.masked(state.lanes.lane_ids < 40),
        pytest.raises(InterpretationError, match="reached by only some threads of block 5"),
    ):
        state.barrier()


def test_combine_and_once_are_per_block() -> None:
    lanes = LockstepState(4, num_blocks=3)
    values = np.arange(12, dtype=np.float32)
    assert lanes.combine("add", values).tolist() == [6.0] * 4 + [22.0] * 4 + [38.0] * 4
    with lanes.masked(lanes.thread_ids >= 2):
        assert lanes.combine("max", values).tolist() == [3.0] * 4 + [7.0] * 4 + [11.0] * 4
        assert lanes.combine("add", values, width=2)[::2].tolist() == [0, 5, 0, 13, 0, 21]
        out = np.zeros(1, dtype=np.float32)
        lanes.accumulate(out, (0,), values, once=True)
    assert out[0] == 2 + 6 + 10  # thread 2 of each block


def test_shuffles_stay_in_their_block() -> None:
    module = parse(
        uniform_skip().replace(
            "%v = kernel.load %x[%b, %t] : memref<10x64xf32>",
            "%v0 = kernel.load %x[%b, %t] : memref<10x64xf32>\n"
            "    %v = kernel.shfl_xor %v0, 1 : f32",
        )
    )
    x = np.random.default_rng(3).standard_normal((10, 64)).astype(np.float32)
    out = assert_batch_independent(module, [x])
    swapped = x.reshape(10, 32, 2)[:, :, ::-1].reshape(10, 64)
    np.testing.assert_array_equal(out[1], swapped[1, ::-1])


def test_a_batched_shared_buffer_keeps_blocks_and_their_epochs_apart() -> None:
    buf = SharedBuffer(["%s (block 4)", "%s (block 5)"], np.zeros(4, dtype=np.float32))
    one = np.array([1, 1])
    # thread 0 of each block writes element 1, in one access: two elements, no race
    buf.store([one], np.array([1.0, 2.0]), np.array([0, 0]), 0, "kernel.store", np.array([0, 1]))
    with pytest.raises(
        RaceError,
        match=r"%s \(block 5\): thread 3 reads element \[1\] written by thread 0 in the same",
    ):
        buf.load([one[:1]], np.array([3]), np.array([0]), "kernel.load", np.array([1]))
    # block 5 passed a barrier (epoch 1), block 4 did not: only block 4 still races
    got = buf.load([one], np.array([3, 3]), np.array([1, 1]), "kernel.load", np.array([1, 1]))
    assert got.tolist() == [2.0, 2.0]
    with pytest.raises(RaceError, match=r"%s \(block 4\): thread 3 reads"):
        buf.load([one], np.array([2, 3]), np.array([1, 0]), "kernel.load", np.array([1, 0]))


ASYNC = """
builtin.module {
  kernel.func @blk(%x: memref<4x64xf32>, %y: memref<4x64xf32>) grid 4 block 32 {
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %s = kernel.shared_alloc : memref<64xf32, 3 : i64>
    %i = arith.muli %t, %c2 : index
    %is2 = arith.cmpi eq, %b, %c2 : index
    %lb = arith.select %is2, LB2, %c0 : index
    %off = arith.select %is2, OFF2, %c0 : index
    %j = arith.addi %i, %off : index
    kernel.cp_async %s[%i], %x[%b, %i], 8 : memref<64xf32, 3 : i64>, memref<4x64xf32>
    kernel.cp_async_commit
    kernel.for %k = %lb to 1 step 1 {
      kernel.cp_async_wait 0
      kernel.barrier
      %u, %v = kernel.load_vector %s[%i] width 2 : memref<64xf32, 3 : i64>
      %w, %z = kernel.load_vector %x[%b, %j] width 2 : memref<4x64xf32>
      %a = arith.addf %u, %w : f32
      %c = arith.addf %v, %z : f32
      kernel.store_vector %a, %c, %y[%b, %i] : memref<4x64xf32>
    }
    kernel.return
  }
  func.func @forward(%x: memref<4x64xf32>) -> memref<4x64xf32> {
    %y = kernel.alloc : memref<4x64xf32>
    kernel.launch @blk(%x, %y) : (memref<4x64xf32>, memref<4x64xf32>) -> ()
    func.return %y : memref<4x64xf32>
  }
}
"""


def async_kernel(skip_wait_in_block_2: bool = False, misaligned_in_block_2: bool = False) -> str:
    lb2 = "%c1" if skip_wait_in_block_2 else "%c0"
    off2 = "%c1" if misaligned_in_block_2 else "%c0"
    return ASYNC.replace("LB2", lb2).replace("OFF2", off2)


def test_copies_and_vector_accesses_in_batches() -> None:
    x = np.random.default_rng(4).standard_normal((4, 64)).astype(np.float32)
    out = assert_batch_independent(parse(async_kernel()), [x])
    np.testing.assert_array_equal(out, 2 * x)


@pytest.mark.parametrize("batch", [1, 4])
def test_a_copy_block_2_never_waits_for_names_block_2(batch: int) -> None:
    x = np.ones((4, 64), dtype=np.float32)
    with pytest.raises(
        InterpretationError,
        match=r"kernel.func @blk block 2: thread 0 ends with a cp.async to shared buffer "
        r"%s \(@blk, block 2\) not yet waited for \(missing cp.async wait\)",
    ):
        run_batched(parse(async_kernel(skip_wait_in_block_2=True)), [x], batch)


@pytest.mark.parametrize("batch", [1, 4])
def test_a_misaligned_vector_load_in_block_2_names_thread_and_block(batch: int) -> None:
    x = np.ones((4, 64), dtype=np.float32)
    with pytest.raises(
        InterpretationError,
        match=r"kernel.load_vector: misaligned access to buffer %x: innermost index 1 is not "
        r"a multiple of 2 \(thread 0, block 2\)",
    ):
        run_batched(parse(async_kernel(misaligned_in_block_2=True)), [x], batch)
