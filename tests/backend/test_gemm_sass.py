"""The default schedule of real GEMMs, as the GPU would run it: nvcc and the SASS.

For projections of the kernel suite (fp32 and bf16), the kernel's `schedule` says what the
passes asked for: asynchronous copies into shared memory (`async = 1`) and tensor-core MMAs
(`mma = 1`: bf16 m16n8k16, fp32 as tf32x3 m16n8k8). The SASS of the emitted CUDA must then
hold `LDGSTS` (`cp.async`) and `HMMA.16816.F32.BF16` or `HMMA.1688.F32.TF32`, and ptxas must
report no register spills. On the FMA pipe (`tile-thread{tf32x3=0}`) an fp32 GEMM reads its
slabs with vector loads (`vector = W` elements): `LDS.128` for 4 fp32. A control without
`tile-async-copy` shows the check can fail: its SASS has no `LDGSTS`.

Needs nvcc (skipped without it) and cuobjdump (`pip install nvidia-cuda-cuobjdump`, in the
test extras; skipped with the reason where it is missing).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin
from deplodock.cli.opt import DeplodockOptMain
from deplodock.dialects import cuda, make_context, tile
from deplodock.dialects.element_types import byte_size
from deplodock.driver import lower_program, program_from_expression
from deplodock.passes.pipelines import STAGE_PASSES, lower
from deplodock.passes.tile.thread import TileThreadPass
from tests.backend.sass import needs_nvcc, sass_of

#: Each test builds GEMMs with nvcc and reads their SASS (seconds each): slow (issue #39).
pytestmark = [needs_nvcc, pytest.mark.slow]

#: Kernel-suite projections at 512 tokens (`bench/cases.py`): TinyLlama's q_proj and Qwen's
#: k/v projection with its bias, in both dtypes.
CASES = {
    "q_proj-fp32": "nn.Linear(2048, 2048, bias=False)(torch.randn(1, 512, 2048))",
    "kv_proj-fp32": "nn.Linear(3584, 1024, bias=True)(torch.randn(1, 512, 3584))",
    "q_proj-bf16": (
        "nn.Linear(2048, 2048, bias=False, dtype=torch.bfloat16)"
        "(torch.randn(1, 512, 2048, dtype=torch.bfloat16))"
    ),
}


@functools.cache
def tile_level(expression: str) -> ModuleOp:
    program = program_from_expression(expression)
    lower_program(program, "tile")
    return program.module


def contraction(module: ModuleOp) -> tile.KernelOp:
    (kernel,) = [
        op
        for op in module.ops
        if isinstance(op, tile.KernelOp) and op.schedule and "bm" in op.schedule.data
    ]
    return kernel


def knob(kernel: tile.KernelOp, name: str) -> int:
    assert kernel.schedule is not None
    return kernel.schedule.data[name].value.data  # type: ignore[attr-defined]


def cuda_source(module: ModuleOp) -> str:
    module = module.clone()
    lower(module, "cuda", start="tile")
    return kernels_text([op for op in module.ops if isinstance(op, cuda.KernelOp)])


def slab_element_bytes(kernel: tile.KernelOp) -> int:
    slab = next(op for op in kernel.walk() if isinstance(op, tile.SharedAllocOp))
    return byte_size(slab.result.type.element_type)  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_schedule_asked_for_is_in_the_sass(case: str, tmp_path: Path) -> None:
    module = tile_level(CASES[case])
    kernel = contraction(module)
    assert knob(kernel, "async") == 1, "the default schedule stages through cp.async"
    assert knob(kernel, "mma") == 1, "GEMMs multiply on tensor cores (fp32 as tf32x3)"
    bf16 = case.endswith("bf16")
    # bf16 fragments are read as 2-element pairs, tf32 ones one element at a time
    vector_bytes = (2 if bf16 else 1) * slab_element_bytes(kernel)
    source = cuda_source(module)
    resources = compile_cubin(source, arch="sm_90").kernels[kernel.sym_name.data]
    assert (resources.spill_stores, resources.spill_loads) == (0, 0)
    sass = sass_of(source, tmp_path)
    assert "LDGSTS" in sass
    assert ("HMMA.16816.F32.BF16" in sass) == bf16
    assert ("HMMA.1688.F32.TF32" in sass) == (not bf16)
    # bf16 fragments come from shared memory by ldmatrix (`tile-ldmatrix`); tf32 ones do not
    assert ("LDSM.16.M88.4" in sass) == bf16
    assert knob(kernel, "ldmatrix") == 1 if bf16 else "ldmatrix" not in kernel.schedule.data
    if vector_bytes > 4:  # the asked width or wider (ptxas may merge neighbouring reads)
        widths = [int(bits) for bits in re.findall(r"\bLDS(?:\.U)?\.(\d+)", sass)]
        assert widths and max(widths) >= 8 * vector_bytes


def test_without_ldmatrix_the_bf16_fragments_are_plain_shared_loads(tmp_path: Path) -> None:
    """The fallback (`tile-ldmatrix{ldmatrix=0}`, the mma.sync path of sm_80 code without
    it): still `HMMA`, its fragments read by `LDS`, no `LDSM`."""
    program = program_from_expression(CASES["q_proj-bf16"])
    lower_program(program, "loop")
    passes = ",".join(STAGE_PASSES["tile"])
    spec = passes.replace("tile-ldmatrix", "tile-ldmatrix{ldmatrix=0}")
    opt = DeplodockOptMain(args=["-p", spec])
    opt.setup_pipeline()
    opt.pipeline.apply(make_context(), program.module)
    sass = sass_of(cuda_source(program.module), tmp_path)
    assert "HMMA.16816.F32.BF16" in sass
    assert "LDSM" not in sass
    assert re.search(r"\bLDS(?:\.U)?\.\d+|\bLDS\b", sass)


def test_without_async_copies_there_is_no_ldgsts(tmp_path: Path) -> None:
    from deplodock.passes import get_all_passes
    from deplodock.passes.pipelines import STAGE_PASSES

    program = program_from_expression(CASES["q_proj-fp32"])
    lower_program(program, "loop")
    passes = get_all_passes()
    for name in STAGE_PASSES["tile"]:
        if name != "tile-async-copy":
            scheduler = TileThreadPass(tf32x3=0) if name == "tile-thread" else passes[name]()()
            scheduler.apply(make_context(), program.module)
    sass = sass_of(cuda_source(program.module), tmp_path)
    assert "LDGSTS" not in sass
    assert "LDS.128" in sass  # the slabs are still read 16 bytes at a time


def k_loop_mix(sass: str) -> Counter[str]:
    """Opcodes (without modifiers) of the kernel's longest loop: the K loop of a GEMM, from
    the target of its backward branch to that branch."""
    code = [
        (int(address, 16), instruction)
        for address, instruction in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)
    ]
    branches = [
        (int(target.group(1), 16), address)
        for address, instruction in code
        if (target := re.search(r"\bBRA (0x[0-9a-f]+)", instruction))
    ]
    loops = [(target, address) for target, address in branches if target < address]
    start, end = max(loops, key=lambda loop: loop[1] - loop[0])
    opcodes = (re.sub(r"^@!?U?P\w+\s+", "", text).split()[0] for address, text in code)
    addresses = (address for address, _ in code)
    return Counter(
        opcode.split(".")[0]
        for address, opcode in zip(addresses, opcodes, strict=True)
        if start <= address <= end
    )


@pytest.mark.parametrize("strided", [True, False])
def test_the_k_loop_issues_little_but_ffma(strided: bool, tmp_path: Path) -> None:
    """TinyLlama's fp32 q_proj at 512 tokens: `tile-unroll` makes the cooperative copies
    count trips, so each unrolled copy is one `LDGSTS` at a constant offset. Its K loop is
    then 90 % FFMA (per chunk of 32: 2048 FFMAs, 131 `LDS`, 12 `LDGSTS` and about 70 other
    instructions). The control, `tile-unroll{strided=false}`, leaves the copies as loops
    over the threads, which nvcc compiles to remainder loops with index arithmetic per copy:
    even counted once (statically), its K loop is 83 % FFMA."""
    from deplodock.passes import get_all_passes
    from deplodock.passes.pipelines import STAGE_PASSES
    from deplodock.passes.tile.unroll import TileUnrollPass

    program = program_from_expression(CASES["q_proj-fp32"])
    lower_program(program, "loop")
    passes = get_all_passes()
    for name in STAGE_PASSES["tile"]:
        scheduler = {
            "tile-unroll": TileUnrollPass(strided=strided),
            "tile-thread": TileThreadPass(tf32x3=0),  # the FMA schedule of an fp32 GEMM
        }.get(name) or passes[name]()()
        scheduler.apply(make_context(), program.module)
    mix = k_loop_mix(sass_of(cuda_source(program.module), tmp_path))
    share = mix["FFMA"] / sum(mix.values())
    if strided:
        assert mix["FFMA"] == 2048 and mix["LDGSTS"] == 12
        assert share > 0.89, mix
    else:
        assert share < 0.86, mix


def test_atomic_split_k_adds_in_l2(tmp_path: Path) -> None:
    """`tile-split-k{atomic=true}`: the slices' `atomicAdd`, whose result is unused, is a
    fire-and-forget reduction in L2 (`REDG`), and nothing spills."""
    from tests.passes.test_tile_split_k import PLAIN, tile_stage

    module = tile_stage(PLAIN, "tile-split-k{splits=4 atomic=true}")
    source = cuda_source(module)
    assert "atomicAdd(&" in source
    kernels = compile_cubin(source, arch="sm_90").kernels
    assert set(kernels) == {"mm", "mm_zero"}
    assert not any(resources.spills for resources in kernels.values())
    assert "REDG.E.ADD.F32" in sass_of(source, tmp_path)


def test_a_fused_prologue_is_copied_with_128_bit_loads(tmp_path: Path) -> None:
    """The MLP's down projection at 128 tokens: silu(gate) * up is computed in the copy
    (`tile-stage`), which loads 16 bytes per access (`tile-vectorize`); the weight still
    goes through `cp.async`, and nothing spills."""
    module = tile_level(
        "nn.Linear(5632, 2048, bias=False)"
        "(F.silu(torch.randn(1, 128, 5632)) * torch.randn(1, 128, 5632))"
    )
    kernel = contraction(module)
    source = cuda_source(module)
    resources = compile_cubin(source, arch="sm_90").kernels[kernel.sym_name.data]
    assert (resources.spill_stores, resources.spill_loads) == (0, 0)
    sass = sass_of(source, tmp_path)
    assert "LDGSTS" in sass
    assert "LDG.E.128" in sass
    assert "STS.128" in sass
    assert "MUFU.EX2" in sass


def test_a_swizzled_slab_keeps_16_byte_copies_and_reads(tmp_path: Path) -> None:
    """The XOR of a swizzle moves whole 16-byte chunks: with both slabs swizzled, the
    copies stay 16-byte `LDGSTS` and the reads `LDS.128`, and the XOR costs no spill."""
    from deplodock.cli.opt import DeplodockOptMain
    from deplodock.passes.pipelines import STAGE_PASSES

    program = program_from_expression(CASES["q_proj-fp32"])
    lower_program(program, "loop")
    module = program.module
    passes = [*STAGE_PASSES["tile"], *STAGE_PASSES["kernel"], *STAGE_PASSES["cuda"]]
    spec = (
        ",".join(passes)
        .replace("tile-pad-shared", "tile-pad-shared{swizzle_a=2 swizzle_b=2}")
        .replace("tile-thread", "tile-thread{tf32x3=0}")  # the FMA path reads LDS.128
    )
    opt = DeplodockOptMain(args=["-p", spec])
    opt.setup_pipeline()
    opt.pipeline.apply(make_context(), module)
    source = kernels_text([op for op in module.ops if isinstance(op, cuda.KernelOp)])
    assert source.count(" ^ ") >= 2  # the XOR of the copy and of the read
    (resources,) = compile_cubin(source, arch="sm_90").kernels.values()
    assert (resources.spill_stores, resources.spill_loads) == (0, 0)
    sass = sass_of(source, tmp_path)
    assert re.search(r"\bLDGSTS\S*\.128\b", sass)
    assert re.search(r"\bLDS(?:\.U)?\.128\b", sass)


def test_bf16_attention_on_tensor_cores_does_not_spill() -> None:
    """TinyLlama's attention at 512 tokens in bf16: the P.V product takes the softmax as a
    fused prologue, prefetched through registers (`tile-register-prefetch`); a 32-deep MMA
    chunk of it spilled at 255 registers, so a computed operand keeps 16 (`tile-chunk-k`)."""
    dt = "dtype=torch.bfloat16"
    module = tile_level(
        f"torch.softmax(torch.randn(1, 32, 512, 64, {dt}) @ torch.randn(1, 32, 512, 64, {dt})"
        f".transpose(-1, -2) / 8.0 + torch.randn(1, 1, 512, 512, {dt}), dim=-1)"
        f" @ torch.randn(1, 32, 512, 64, {dt})"
    )
    source = cuda_source(module)
    assert "dd_mma_m16n8k16(" in source
    kernels = compile_cubin(source, arch="sm_90").kernels
    assert not {name: r.spills for name, r in kernels.items() if r.spills}
