"""`tile-ldmatrix`: bf16/f16 MMA fragments loaded by `ldmatrix`.

The numerics of GEMMs whose sizes are not multiples of the tiles, at the tile and kernel
levels (interpreters, race detector on) and through the emitted CUDA C (plain and under
memcheck): against PyTorch at the dtype's tolerance, against the loop level, and bit for bit
against the same schedule with `ldmatrix=0` (the fragments hold the same values, so the
MMAs must give the same bits). A planted bug, lanes pointing at the wrong matrix rows, is
caught by the same check. The slabs' layout keeps every `ldmatrix` phase conflict-free, tf32
fragments keep their scalar loads, and the knob is the tuner's to choose.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.dialects import tile
from deplodock.dialects.queries import constant_index
from deplodock.driver import Program, lower_program, program_from_expression, run_and_compare
from deplodock.driver.checking import arguments_and_reference
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.passes.tile import banks, schedule
from deplodock.passes.tile.ldmatrix import TileLdmatrixPass
from tests.passes.test_tile_stage_prologue import apply_tile_pipeline, contraction

BF16 = ", dtype=torch.bfloat16"
F16 = ", dtype=torch.float16"

#: GEMMs whose M, N (and K for the slab edges) are not multiples of the tiles.
GEMMS = {
    "linear-bf16": f"nn.Linear(80, 40, bias=True{BF16})(torch.randn(33, 80{BF16}))",
    "linear-f16": f"nn.Linear(96, 50, bias=False{F16})(torch.randn(70, 96{F16}))",
    # x1 stored K x N: the B slab is [k][n], loaded with `.trans`
    "matmul-k-major-b": f"torch.randn(37, 80{BF16}) @ torch.randn(80, 29{BF16})",
}


def tile_pipeline(ldmatrix: int) -> str:
    return ",".join(STAGE_PASSES["tile"][1:]).replace(
        "tile-ldmatrix", f"tile-ldmatrix{{ldmatrix={ldmatrix}}}"
    )


def at_tile(code: str, ldmatrix: int = 1) -> Program:
    program = program_from_expression(code, seed=1)
    lower_program(program, "loop")
    apply_tile_pipeline(program, tile_pipeline(ldmatrix))
    return program


def ldmatrices(program: Program) -> list[tile.LdmatrixOp]:
    return [op for op in program.module.walk() if isinstance(op, tile.LdmatrixOp)]


def outputs(program: Program) -> list[np.ndarray]:
    arguments, _ = arguments_and_reference(program, seed=2)
    return run_on_cpu(program.module, arguments)


@pytest.mark.parametrize("name", sorted(GEMMS))
def test_gemms_match_pytorch_the_loop_level_and_the_scalar_loads(name: str) -> None:
    loop = program_from_expression(GEMMS[name], seed=1)
    lower_program(loop, "loop")
    (at_loop,) = outputs(loop)
    on, off = at_tile(GEMMS[name], 1), at_tile(GEMMS[name], 0)
    fragments = [(op.count, op.is_trans) for op in ldmatrices(on)]
    assert (4, False) in fragments and len(fragments) >= 2
    assert ((2, True) in fragments) == name.startswith("matmul")
    assert not ldmatrices(off)
    for stage in ("tile", "kernel", "cuda"):
        if stage != "tile":
            lower_program(on, stage)
            lower_program(off, stage)
        report = run_and_compare(on, seed=2, memcheck=stage == "cuda")
        assert report.ok, f"{stage}: {report.summary()}"
        (got,), (scalar,) = outputs(on), outputs(off)
        np.testing.assert_array_equal(got, scalar, err_msg=stage)
        tolerance = on.tolerance or 1e-2
        np.testing.assert_allclose(got, at_loop, rtol=tolerance, atol=tolerance, err_msg=stage)


def test_a_lane_pointing_at_the_wrong_row_is_caught() -> None:
    """The planted bug: lane t points at row t % 8 of the A tile instead of t % 16, so
    matrices 1 and 3 repeat rows 0..7 and rows 8..15 of every tile are never loaded."""
    program = at_tile(GEMMS["linear-bf16"])
    assert run_and_compare(program, seed=2).ok
    (row,) = [
        op
        for op in program.module.walk()
        if isinstance(op, arith.RemSIOp) and op.result.name_hint == "ldm_l16"
    ]
    eight = next(
        op
        for op in program.module.walk()
        if isinstance(op, arith.ConstantOp) and constant_index(op.result) == 8
    )
    row.operands[1] = eight.result
    report = run_and_compare(program, seed=2)
    assert not report.ok, "the wrong rows went unnoticed"


@pytest.mark.parametrize("name", sorted(GEMMS))
def test_every_ldmatrix_phase_is_conflict_free(name: str) -> None:
    """`tile-pad-shared` counts `ldmatrix`'s phases: each 8x8 matrix one wavefront."""
    program = at_tile(GEMMS[name])
    kernel = contraction(program)
    assert schedule.has_knob(kernel, "pad_a")
    for op in ldmatrices(program):
        memref = op.memref.type
        row_length = memref.get_shape()[-1]  # type: ignore[attr-defined]
        assert banks.wavefronts(op, row_length) == op.count, op


def test_tf32_fragments_keep_their_scalar_loads() -> None:
    program = at_tile("nn.Linear(64, 48, bias=False)(torch.randn(40, 64))")
    assert any(isinstance(op, tile.MmaSyncOp) for op in program.module.walk())
    assert not ldmatrices(program)
    assert not schedule.has_knob(contraction(program), "ldmatrix")


def test_the_tuner_may_choose_either() -> None:
    program = program_from_expression(GEMMS["linear-bf16"], seed=1)
    lower_program(program, "loop")
    passes = STAGE_PASSES["tile"]
    apply_tile_pipeline(program, ",".join(passes[1 : passes.index("tile-ldmatrix")]))
    kernel = contraction(program)
    choices = TileLdmatrixPass().legal_choices(kernel)
    assert [dict(choice) for choice in choices] == [{"ldmatrix": 0}, {"ldmatrix": 1}]


def test_swizzled_slabs_are_loaded_through_the_xor() -> None:
    """A swizzle moves whole 16-byte chunks, so each lane's row stays one chunk: its address
    goes through the same XOR as the copy's (`convert-tile-to-kernel`), conflict-free."""
    pipeline = tile_pipeline(1).replace(
        "tile-pad-shared", "tile-pad-shared{pad_a=0 pad_b=0 swizzle_a=2 swizzle_b=2}"
    )
    program = program_from_expression(GEMMS["linear-bf16"], seed=1)
    lower_program(program, "loop")
    apply_tile_pipeline(program, pipeline)
    kernel = contraction(program)
    assert schedule.read_knob(kernel, "swizzle_a", 0) == 2
    for op in ldmatrices(program):
        memref = op.memref.type
        layout = tile.Swizzle.of(memref, 2)  # type: ignore[arg-type]
        row_length = memref.get_shape()[-1]  # type: ignore[attr-defined]
        assert banks.wavefronts(op, row_length, swizzle=layout) == op.count
    for stage in ("tile", "kernel", "cuda"):
        if stage != "tile":
            lower_program(program, stage)
        report = run_and_compare(program, seed=2, memcheck=stage == "cuda")
        assert report.ok, f"{stage}: {report.summary()}"


@pytest.mark.parametrize("name", ["linear-bf16", "matmul-k-major-b"])
def test_two_b_tiles_share_one_x4(name: str) -> None:
    """A warp 32 columns wide (`fn=8`: four 8-column B tiles) loads its B fragments in two
    x4, each two neighbouring tiles' (the second tile's matrices as registers 4..7), along K
    or transposed; the result is bit for bit the scalar loads'."""
    knobs = 'tile-schedule{knobs="bm=16 bn=32 fm=2 fn=8 mma=1 threads=32"},'
    programs = {}
    for ldmatrix in (1, 0):
        program = program_from_expression(GEMMS[name], seed=1)
        lower_program(program, "loop")
        apply_tile_pipeline(program, knobs + tile_pipeline(ldmatrix))
        programs[ldmatrix] = program
    trans = name.startswith("matmul")
    loads = sorted((op.count, op.is_trans) for op in ldmatrices(programs[1]))
    assert loads == sorted([(4, False), (4, trans), (4, trans)])
    for stage in ("tile", "cuda"):
        if stage != "tile":
            for program in programs.values():
                lower_program(program, stage)
        report = run_and_compare(programs[1], seed=2, memcheck=stage == "cuda")
        assert report.ok, f"{stage}: {report.summary()}"
        (got,), (scalar,) = outputs(programs[1]), outputs(programs[0])
        np.testing.assert_array_equal(got, scalar, err_msg=stage)


def test_a_wrong_address_table_is_refused_by_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass plays its row addresses through the PTX ISA's rule before it rewrites
    (`delivers`): with the A table's lane terms swapped (lane t at row 8 (t / 16), column
    t % 16) no A fragment is taken, and the scalar loads stay."""
    from deplodock.passes.tile import ldmatrix

    wrong = {**ldmatrix.ADDRESSES, ("a", False): (("l16",), ("hi16",))}
    monkeypatch.setattr(ldmatrix, "ADDRESSES", wrong)
    program = at_tile(GEMMS["linear-bf16"])
    assert [(op.count, op.is_trans) for op in ldmatrices(program)] == [(2, False)]
    assert run_and_compare(program, seed=2).ok
