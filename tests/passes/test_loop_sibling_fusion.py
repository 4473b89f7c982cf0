"""`loop-sibling-fusion`: independent elementwise kernels over one nest share a launch.

Three unrelated elementwise outputs become one kernel whose emitted C matches PyTorch on
random inputs, and so do two GEMVs (fp32 and bf16); a decode step's key and value
projections, its cache writes and its rotary cosines and sines are one launch each instead
of two, counted against the same lowering without the pass; a kernel that reads what the
other writes, and a reduction under two free loops, are kept apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.parser import Parser

from deplodock.dialects import loop, make_context
from deplodock.dialects.queries import written_buffers
from deplodock.driver import (
    lower_program,
    program_from_expression,
    program_from_model,
    run_and_compare,
)
from deplodock.passes import loop_sibling_fusion as siblings
from deplodock.passes import pipelines

FILECHECK = Path(__file__).parents[1] / "filecheck/passes/loop-sibling-fusion/siblings.mlir"


def kernels(module) -> list[loop.KernelOp]:
    return [op for op in module.ops if isinstance(op, loop.KernelOp)]


def launches(module) -> list[loop.LaunchOp]:
    return [op for op in module.walk() if isinstance(op, loop.LaunchOp)]


def test_independent_outputs_share_a_kernel_and_match_pytorch() -> None:
    program = program_from_expression(
        "(torch.randn(64, 128).cos(), torch.randn(64, 128).sin() * 2, torch.randn(64, 128).exp())"
    )
    lower_program(program, "loop")
    assert len(kernels(program.module)) == 1
    assert len(launches(program.module)) == 1
    lower_program(program, "cuda")
    report = run_and_compare(program)
    assert report.ok, report.summary()


def cache_writers(monkeypatch: pytest.MonkeyPatch, with_pass: bool) -> tuple[int, int]:
    """(kernels writing a returned cache, launches) of a one-layer TinyLlama decode step."""
    if not with_pass:
        stages = dict(pipelines.STAGE_PASSES)
        stages["loop"] = tuple(p for p in stages["loop"] if p != "loop-sibling-fusion")
        monkeypatch.setattr(pipelines, "STAGE_PASSES", stages)
    program = program_from_model("TinyLlama/TinyLlama-1.1B-Chat-v1.0", layers=1, kv_len=64)
    lower_program(program, "loop")
    func = next(op for op in program.module.ops if op.name == "func.func")
    returned = set(func.body.block.last_op.operands)
    writers = 0
    for launch in launches(program.module):
        name = launch.callee.root_reference
        kernel = next(k for k in kernels(program.module) if k.sym_name == name)
        host = dict(zip(kernel.body.block.args, launch.args, strict=True))
        writes = {host[b] for b in written_buffers(kernel)}
        caches = {b for b in writes & returned if b.type.get_shape()[-2] == 64}
        writers += bool(caches)
    return writers, len(launches(program.module))


@pytest.mark.parametrize("cast", ["", ".bfloat16()"])
def test_two_gemvs_share_a_kernel_and_match_pytorch(cast: str) -> None:
    gemv = f"F.linear(torch.randn(1, 256){cast}, torch.randn(96, 256){cast})"
    program = program_from_expression(f"({gemv}, {gemv})")
    lower_program(program, "loop")
    assert len(launches(program.module)) == 1
    lower_program(program, "cuda")
    report = run_and_compare(program)
    assert report.ok, report.summary()


def test_a_decode_step_writes_both_caches_of_a_layer_in_one_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fused_writers, fused_launches = cache_writers(monkeypatch, with_pass=True)
    apart_writers, apart_launches = cache_writers(monkeypatch, with_pass=False)
    assert (fused_writers, apart_writers) == (1, 2)
    assert apart_launches - fused_launches == 3  # caches, cosines with sines, k with v


def test_dependent_kernels_and_reductions_are_not_siblings() -> None:
    module = Parser(make_context(), FILECHECK.read_text()).parse_module()
    by_name = {k.sym_name.data: k for k in kernels(module)}
    cos, sin, scale = (by_name[f"{n}_kernel"] for n in ("cos", "sin", "scale"))
    first, second, third, _ = launches(module)
    assert siblings.independent(first, cos, second, sin)
    assert not siblings.independent(first, cos, third, scale)  # scale reads the cosines
    assert siblings.sibling_nest(by_name["row_sum_kernel"]) is None
    assert siblings.sibling_nest(cos) is not None
