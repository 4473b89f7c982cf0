"""`tile-mma` and the MMA thread layout: bf16/f16 contractions on tensor cores, and fp32 ones
as tf32x3 (three tf32 MMAs per tile on operands split into `hi + lo`).

The fragment layout is checked against the PTX ISA's table, the heuristic's grid choice, the
rewrite's shape, and the numerics of every schedule against PyTorch (float64 reference, the
dtype's tolerance: 1e-5 for fp32, so tf32x3 must be as accurate as FMAs) at the tile level,
the kernel level (race detector on) and, for the default pipeline, through the emitted CUDA
C run on the CPU. A missing barrier before the MMAs and an MMA in a partly active warp are
reported.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import InterpretationError, VerifyException

from deplodock.dialects import make_context, tile
from deplodock.dialects.common.mma import MMA_M16N8K16
from deplodock.driver import Program, lower_program, program_from_expression, run_and_compare
from deplodock.interpreters.shared_memory import RaceError
from deplodock.passes.convert_tile_to_kernel import ConvertTileToKernelPass
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.passes.tile import schedule
from deplodock.passes.tile.thread import mma_grid
from tests.helpers import parse, run
from tests.passes.test_tile_stage_prologue import apply_tile_pipeline, contraction

BF16 = ", dtype=torch.bfloat16"
F16 = ", dtype=torch.float16"


def linear(m: int, k: int, n: int, dt: str = BF16, bias: bool = True) -> str:
    return f"nn.Linear({k}, {n}, bias={bias}{dt})(torch.randn({m}, {k}{dt}))"


def at_tile(code: str, pipeline: str | None = None) -> Program:
    program = program_from_expression(code, seed=1)
    if pipeline is None:
        lower_program(program, "tile")
    else:
        lower_program(program, "loop")
        apply_tile_pipeline(program, pipeline)
    return program


def check(program: Program, stages: tuple[str, ...] = ("tile", "kernel")) -> None:
    for stage in stages:
        if stage != "tile":
            lower_program(program, stage)
        report = run_and_compare(program, seed=2)
        assert report.ok, f"{stage}: {report.summary()}"


def mmas(program: Program) -> list[tile.MmaSyncOp]:
    return [op for op in program.module.walk() if isinstance(op, tile.MmaSyncOp)]


# --- the fragment layout, from the PTX ISA's table ------------------------------------------


@pytest.mark.parametrize(
    ("operand", "lane", "register", "position"),
    [
        # lane 5: groupID 1, threadID_in_group 1 (PTX ISA, mma.m16n8k16 .bf16/.f16 fragments)
        ("a", 5, 0, (1, 2)),
        ("a", 5, 3, (9, 3)),
        ("a", 5, 4, (1, 10)),
        ("a", 5, 7, (9, 11)),
        ("b", 5, 0, (2, 1)),
        ("b", 5, 3, (11, 1)),
        ("c", 5, 1, (1, 3)),
        ("c", 5, 2, (9, 2)),
        ("c", 31, 3, (15, 7)),
    ],
)
def test_fragment_positions_follow_the_ptx_table(
    operand: str, lane: int, register: int, position: tuple[int, int]
) -> None:
    where = {
        "a": MMA_M16N8K16.a_position,
        "b": MMA_M16N8K16.b_position,
        "c": MMA_M16N8K16.c_position,
    }
    assert where[operand](lane, register) == position


@pytest.mark.parametrize("operand", ["a", "b", "c"])
def test_every_matrix_element_is_held_by_exactly_one_lane_register(operand: str) -> None:
    rows, cols = MMA_M16N8K16.positions(operand)
    extent = {"a": (16, 16), "b": (16, 8), "c": (16, 8)}[operand]
    flat = rows * extent[1] + cols
    assert sorted(flat.ravel().tolist()) == list(range(extent[0] * extent[1]))


# --- the thread layout ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bm", "bn", "threads", "cells"),
    [
        (128, 128, 256, (8, 8)),
        (32, 32, 256, (2, 2)),
        (128, 112, 256, (4, 14)),  # 7 columns per thread cannot pair: 32 x 8 threads
        (16, 8, 32, (2, 2)),
        (16, 24, 256, None),
    ],
)
def test_mma_grid(bm: int, bn: int, threads: int, cells: tuple[int, int] | None) -> None:
    assert mma_grid(bm, bn, threads) == cells


def test_the_mma_layout_gives_every_cell_of_the_tile_to_one_thread() -> None:
    rows = tile.ThreadTileOp(_index_value(), 0, (16, 16), 4, "mma")
    cols = tile.ThreadTileOp(_index_value(), 1, (16, 16), 4, "mma")
    owners = {}
    for thread in range(256):
        for i in range(4):
            for j in range(4):
                cell = (rows.position(thread, i), cols.position(thread, j))
                assert cell not in owners
                owners[cell] = thread
    assert set(owners) == {(r, c) for r in range(64) for c in range(64)}
    # thread 37 is lane 5 of warp 1 (warp row 0, warp column 1 of a 2 x 4 grid of warps):
    # its cells are the C fragment rows 1, 9 and columns 16 + 2, 16 + 3 of each MMA tile
    assert [rows.position(37, i) for i in range(4)] == [1, 9, 17, 25]
    assert [cols.position(37, j) for j in range(4)] == [18, 19, 26, 27]


def _index_value():
    from xdsl.dialects.builtin import IndexType
    from xdsl.ir import Block

    return Block(arg_types=[IndexType()]).args[0]


def test_the_verifier_rejects_an_mma_layout_the_fragments_cannot_cover() -> None:
    text = """
    builtin.module {
      tile.kernel @k() {
        tile.grid %b to 1 {
          tile.threads %t to 64 {
            %mm:3 = tile.thread_tile %t dim 0 of [16, 4] cells 3 mma
          }
        }
        tile.return
      }
    }
    """
    with pytest.raises(VerifyException, match=r"mma layout needs .* even cell count"):
        parse(text)


# --- the rewrite ----------------------------------------------------------------------------


def test_the_default_bf16_linear_multiplies_on_tensor_cores() -> None:
    program = at_tile(linear(64, 64, 96))
    kernel = contraction(program)
    assert schedule.read_knob(kernel, "mma", 0) == 1
    fm, fn = schedule.read_knob(kernel, "fm", 0), schedule.read_knob(kernel, "fn", 0)
    assert len(mmas(program)) == fm // 2 * (fn // 2)
    ki = mmas(program)[0].parent_op()
    assert isinstance(ki, tile.ForOp) and ki.step_value == 16
    assert not any(isinstance(op, arith.MulfOp) for op in ki.walk())
    # the fragments come by `ldmatrix` (`tile-ldmatrix`): an x4 per A tile, an x4 per two B
    # tiles (an x2 for an odd one)
    loads = sorted((op.count, op.is_trans) for op in ki.walk() if isinstance(op, tile.LdmatrixOp))
    b_tiles = fn // 2
    b_loads = [(4, False)] * (b_tiles // 2) + [(2, False)] * (b_tiles % 2)
    assert loads == sorted([(4, False)] * (fm // 2) + b_loads)
    assert not any(isinstance(op, tile.LoadVectorOp) for op in ki.walk())


def test_without_ldmatrix_the_fragments_are_read_in_pairs() -> None:
    pipeline = ",".join(STAGE_PASSES["tile"][1:]).replace(
        "tile-ldmatrix", "tile-ldmatrix{ldmatrix=0}"
    )
    program = at_tile(linear(64, 64, 96), pipeline)
    ki = mmas(program)[0].parent_op()
    assert isinstance(ki, tile.ForOp)
    pairs = [op for op in ki.walk() if isinstance(op, tile.LoadVectorOp)]
    assert pairs and all(len(op.res) == 2 for op in pairs)


def test_off_keeps_the_fma_inner_product() -> None:
    pipeline = (
        "tile-block{bm=32 bn=32},tile-thread{mma=0},tile-chunk-k{bk=16},tile-stage,"
        "tile-mma,tile-vectorize,tile-pad-shared"
    )
    program = at_tile(linear(40, 64, 48), pipeline)
    assert not mmas(program)
    assert schedule.read_knob(contraction(program), "mma", -1) == 0
    check(program)


def test_fp32_multiplies_as_tf32x3_by_default() -> None:
    program = at_tile(linear(40, 64, 48, dt=""))
    kernel = contraction(program)
    assert schedule.read_knob(kernel, "mma", 0) == 1
    fm, fn = schedule.read_knob(kernel, "fm", 0), schedule.read_knob(kernel, "fn", 0)
    ops = mmas(program)
    assert len(ops) == 3 * (fm // 2) * (fn // 2)  # two corrections, then the main product
    assert [op.is_correction for op in ops[:3]] == [True, True, False]
    assert all(op.is_tf32 for op in ops)
    ki = ops[0].parent_op()
    assert isinstance(ki, tile.ForOp) and ki.step_value == 8
    splits = [op for op in ki.walk() if isinstance(op, tile.SplitTf32Op)]
    assert len(splits) == 4 * (fm // 2) + 2 * (fn // 2)  # each fragment element split once
    check(program, ("tile", "kernel", "cuda"))


def test_tf32x3_off_keeps_the_fp32_fma_inner_product() -> None:
    from deplodock.passes.tile.thread import TileThreadPass

    program = program_from_expression(linear(40, 64, 48, dt=""), seed=1)
    lower_program(program, "loop")
    apply_tile_pipeline(program, "tile-block")
    TileThreadPass(tf32x3=0).apply(make_context(), program.module)
    apply_tile_pipeline(program, "tile-chunk-k,tile-stage,tile-mma")
    assert not mmas(program)
    assert schedule.read_knob(contraction(program), "mma", -1) == 0
    check(program)


FP32 = {
    "odd-m-k-tail": linear(17, 40, 18, dt=""),
    "k-4096": linear(24, 4096, 32, dt="", bias=False),
    "bmm-batched": "torch.randn(2, 3, 33, 32) @ torch.randn(2, 3, 32, 48)",
    "split-k": linear(16, 2048, 64, dt="", bias=False),
}


@pytest.mark.parametrize("name", sorted(FP32))
def test_tf32x3_matches_pytorch_at_fp32_tolerance(name: str) -> None:
    """Every level against a float64 reference at the fp32 tolerance (1e-5, 1e-4 for
    K >= 4096): the split products are as accurate as FMAs."""
    program = at_tile(FP32[name])
    assert mmas(program), f"{name}: no MMA"
    check(program, ("tile", "kernel", "cuda"))


def test_tf32x3_error_is_at_fma_level_and_one_tf32_pass_would_not_be() -> None:
    """On K = 512 of standard normals, tf32x3's error against float64 is within a few times
    that of fp32 FMAs, while rounding the operands to tf32 once (what one tf32 MMA would
    multiply) is hundreds of times worse: the split is what makes it fp32."""
    from deplodock.dialects.common.mma import split_tf32

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 512), np.float32), rng.standard_normal((512, 48), np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    program = at_tile("torch.randn(64, 512) @ torch.randn(512, 48)")
    assert mmas(program)
    lower_program(program, "kernel")
    (got,) = run(program.module, a, b)
    fma = (a @ b).astype(np.float64)
    one_pass = split_tf32(a)[0].astype(np.float64) @ split_tf32(b)[0].astype(np.float64)
    scale = np.abs(exact).max()
    err, err_fma = np.abs(got - exact).max() / scale, np.abs(fma - exact).max() / scale
    err_one = np.abs(one_pass - exact).max() / scale
    assert err < 8 * err_fma + 1e-7, (err, err_fma)
    assert err_one > 100 * err, (err_one, err)


def test_a_k_major_b_slab_reads_its_pairs_one_element_at_a_time() -> None:
    """`x @ w` with w stored K x N: the B slab's rows run along N (without `ldmatrix`,
    which loads such a slab transposed: `tests/passes/test_tile_ldmatrix.py`)."""
    pipeline = ",".join(STAGE_PASSES["tile"][1:]).replace(
        "tile-ldmatrix", "tile-ldmatrix{ldmatrix=0}"
    )
    program = at_tile(f"torch.randn(48, 64{BF16}) @ torch.randn(64, 40{BF16})", pipeline)
    assert mmas(program)
    b_reads = [
        op
        for op in program.module.walk()
        if isinstance(op, tile.LoadOp) and op.memref.name_hint and "_b_s" in op.memref.name_hint
    ]
    assert b_reads, "expected scalar reads of a B slab laid out K x N"
    check(program)


SHAPES = {
    "odd-m-k-tail": linear(17, 40, 18),
    "m100-f16": linear(100, 64, 24, dt=F16, bias=False),
    "k-not-a-multiple-of-16": linear(33, 72, 40),
    "bmm-batched": (f"torch.randn(2, 3, 33, 32{BF16}) @ torch.randn(2, 3, 32, 48{BF16})"),
    "attention-scores": (
        f"torch.softmax(torch.randn(1, 2, 40, 32{BF16}) @ "
        f"torch.randn(1, 2, 40, 32{BF16}).transpose(-1, -2), dim=-1)"
    ),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_default_schedules_match_pytorch_at_the_tile_and_kernel_levels(name: str) -> None:
    program = at_tile(SHAPES[name])
    assert mmas(program), f"{name}: no MMA"
    check(program)


PIPELINES = {
    "depth3-async": (
        "tile-block{bm=64 bn=32},tile-thread,tile-chunk-k{bk=32},tile-stage,tile-mma,"
        "tile-vectorize,tile-pad-shared,tile-multibuffer{depth=3},tile-pipeline,"
        "tile-async-copy,tile-unroll,tile-hoist-invariant,tile-cse"
    ),
    "split-k": (
        "tile-split-k{splits=2},tile-block{bm=32 bn=32},tile-thread,tile-chunk-k{bk=16},"
        "tile-stage,tile-mma,tile-vectorize,tile-pad-shared,tile-multibuffer{depth=2},"
        "tile-pipeline,tile-async-copy"
    ),
    "128-threads": (
        "tile-block{bm=32 bn=32},tile-thread{fm=4 fn=2 mma=1},tile-chunk-k{bk=16},"
        "tile-stage,tile-mma,tile-vectorize,tile-pad-shared"
    ),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_pipelines_match_pytorch_at_the_tile_and_kernel_levels(name: str) -> None:
    program = at_tile(linear(40, 96, 48), PIPELINES[name])
    assert mmas(program)
    check(program)


def test_the_emitted_cuda_runs_on_the_cpu() -> None:
    program = at_tile(linear(33, 64, 40))
    assert mmas(program)
    check(program, ("tile", "kernel", "cuda"))


# --- what goes wrong is reported ------------------------------------------------------------


@pytest.mark.parametrize("dt", [BF16, ""], ids=["bf16", "fp32-tf32x3"])
def test_a_missing_barrier_before_the_mmas_is_a_race(dt: str) -> None:
    pipeline = "tile-block{bm=32 bn=32},tile-thread,tile-chunk-k{bk=16},tile-stage,tile-mma"
    program = at_tile(linear(32, 64, 32, dt=dt), pipeline)
    ki = mmas(program)[0].parent_op()
    barrier = ki.prev_op
    assert isinstance(barrier, tile.BarrierOp)
    Rewriter.erase_op(barrier)
    for stage in ("tile", "kernel"):
        if stage != "tile":
            lower_program(program, stage)
        with pytest.raises(RaceError):
            run_and_compare(program, seed=2)


PARTIAL_WARP = """
builtin.module {
  tile.kernel @k(%x: memref<64xbf16>, %y: memref<64xf32>) {
    tile.grid %b to 2 {
      tile.threads %t to 64 {
        %c16 = arith.constant 16 : index
        %z = arith.constant 0.0 : f32
        %a = tile.load %x[%t] : memref<64xbf16>
        %lo = arith.cmpi slt, %t, %c16 : index
        tile.if %lo {
          %d0, %d1, %d2, %d3 = tile.mma_sync a(%a, %a, %a, %a, %a, %a, %a, %a)
              b(%a, %a, %a, %a) c(%z, %z, %z, %z) : bf16
          tile.store %d0, %y[%t] : memref<64xf32>
        }
      }
    }
    tile.return
  }
  func.func @forward(%x: memref<64xbf16>) -> memref<64xf32> {
    %y = tile.alloc : memref<64xf32>
    tile.launch @k(%x, %y) : (memref<64xbf16>, memref<64xf32>) -> ()
    func.return %y : memref<64xf32>
  }
}
"""


@pytest.mark.parametrize("stage", ["tile", "kernel"])
def test_an_mma_in_a_partly_active_warp_is_an_error(stage: str) -> None:
    module = parse(PARTIAL_WARP)
    if stage == "kernel":
        ConvertTileToKernelPass().apply(make_context(), module)
    with pytest.raises(InterpretationError, match="thread 16, block 0 is inactive while its warp"):
        run(module, np.ones(64, dtype=np.float32))


def test_the_op_verifier_counts_fragment_registers_and_types() -> None:
    text = PARTIAL_WARP.replace("b(%a, %a, %a, %a)", "b(%a, %a, %a)")
    with pytest.raises(VerifyException, match="takes 8 A, 4 B and 4 C values per lane"):
        parse(text)


# --- large tensor-core tiles: 8 x 16 cells, three slots, dynamic shared memory ---------------


def knob_values(program: Program, *names: str) -> tuple[int, ...]:
    kernel = contraction(program)
    return tuple(schedule.read_knob(kernel, name, -1) for name in names)


def test_a_large_bf16_product_takes_256_by_128_tiles_three_slots_deep() -> None:
    """Qwen2.5-7B's gate_proj at 512 tokens: 256 x 128 tiles, a 64 x 64 tile per warp (8 x 16
    MMA cells on 256 threads), BK 32 in three slots: 92 KiB, past the static 48 KiB."""
    program = at_tile(linear(512, 3584, 18944, bias=False))
    names = ("bm", "bn", "fm", "fn", "mma", "threads", "bk", "depth")
    assert knob_values(program, *names) == (256, 128, 8, 16, 1, 256, 32, 3)
    assert 48 * 1024 < tile.shared_bytes(contraction(program)) <= 99 * 1024


def test_an_explicit_depth_is_kept_and_a_fused_prologue_keeps_two_slots() -> None:
    pipeline = (
        "tile-block{bm=64 bn=64},tile-thread,tile-chunk-k{bk=32},tile-stage,tile-mma,"
        "tile-vectorize,tile-pad-shared,tile-multibuffer{depth=2}"
    )
    assert knob_values(at_tile(linear(128, 128, 128), pipeline), "mma", "depth") == (1, 2)
    fp32 = at_tile(linear(512, 3584, 18944, dt="", bias=False))
    assert knob_values(fp32, "mma", "bk", "depth") == (1, 32, 3)  # 3 x 24 KiB, tf32x3
    # attention's P.V computes softmax in its copy (a fused prologue): two slots (over 72
    # keys, not whole chunks of 16, the scores keep a kernel of their own: `loop-fusion`)
    scores = f"torch.randn(1, 4, 64, 32{BF16}) @ torch.randn(1, 4, 72, 32{BF16}).transpose(-1, -2)"
    program = at_tile(f"torch.softmax({scores}, dim=-1) @ torch.randn(1, 4, 72, 32{BF16})")
    kernels = [k for k in program.module.ops if isinstance(k, tile.KernelOp) and k.schedule]
    depths = [schedule.read_knob(k, "depth", -1) for k in kernels if "depth" in k.schedule.data]
    assert sorted(depths) == [2, 3]


def test_a_256_by_128_mma_tile_matches_pytorch_through_the_emitted_c() -> None:
    """The large tile's layout on a small product: two row tiles (one partial), 8 x 16 cells,
    three slots of 32-deep chunks, asynchronous copies."""
    pipeline = (
        "tile-block{bm=256 bn=128},tile-thread,tile-chunk-k{bk=32},tile-stage,tile-mma,"
        "tile-vectorize,tile-pad-shared,tile-multibuffer,tile-pipeline,tile-async-copy,"
        "tile-unroll,tile-hoist-invariant,tile-cse"
    )
    program = at_tile(linear(300, 96, 128), pipeline)
    assert knob_values(program, "fm", "fn", "threads", "depth") == (8, 16, 256, 3)
    check(program, ("tile", "kernel", "cuda"))
