"""Every kernel the printer emits compiles with nvcc for sm_90, without register spills."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.parser import Parser

from deplodock.backend.cuda_source import kernels_text, module_to_cuda_source
from deplodock.backend.nvcc import (
    NvccError,
    compile_cubin,
    first_error,
    parse_ptxas_report,
)
from deplodock.dialects import cuda, make_context
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass
from tests.backend.sass import needs_nvcc

INPUTS = Path(__file__).resolve().parent / "inputs"

PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'rms_norm' for 'sm_90'
ptxas info    : Function properties for rms_norm
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 32 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'matmul' for 'sm_90'
ptxas info    : Function properties for matmul
    48 bytes stack frame, 44 bytes spill stores, 40 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem, 384 bytes cmem[0]
"""


def cuda_kernels(name: str) -> list[cuda.KernelOp]:
    ctx = make_context()
    module = Parser(ctx, (INPUTS / name).read_text()).parse_module()
    ConvertKernelToCudaPass().apply(ctx, module)
    return [op for op in module.ops if isinstance(op, cuda.KernelOp)]


def test_parse_ptxas_report() -> None:
    kernels = parse_ptxas_report(PTXAS_LOG)
    assert set(kernels) == {"rms_norm", "matmul"}
    rms, mm = kernels["rms_norm"], kernels["matmul"]
    assert (rms.registers, rms.spill_stores, rms.spill_loads, rms.shared_bytes) == (32, 0, 0, 32)
    assert not rms.spills
    assert (mm.registers, mm.spill_stores, mm.spill_loads, mm.shared_bytes) == (255, 44, 40, 8192)
    assert mm.stack_frame == 48 and mm.spills


def test_first_error_prefers_the_error_line() -> None:
    log = 'k.cu(3): warning: unused\nk.cu(7): error: identifier "q" is undefined\n'
    assert first_error(log) == 'k.cu(7): error: identifier "q" is undefined'


@needs_nvcc
def test_every_printed_kernel_compiles_without_spills() -> None:
    kernels = [k for f in sorted(INPUTS.glob("*.mlir")) for k in cuda_kernels(f.name)]
    names = [k.sym_name.data for k in kernels]
    assert len(set(names)) == len(names) >= 7
    result = compile_cubin(kernels_text(kernels), arch="sm_90")
    assert result.cubin
    assert set(result.kernels) == set(names)
    for name, res in result.kernels.items():
        assert not res.spills, f"{name} spills: {res}"
        assert 0 < res.registers <= 255
    assert result.kernels["rms_norm"].shared_bytes == 4 * 4
    assert result.kernels["transpose"].shared_bytes == 32 * 33 * 2


@needs_nvcc
def test_whole_translation_unit_with_host_code_compiles() -> None:
    ctx = make_context()
    module = Parser(ctx, (INPUTS / "two_kernels.mlir").read_text()).parse_module()
    source = module_to_cuda_source(module)
    assert "cudaMalloc" in source and "deplodock_forward" in source
    result = compile_cubin(source)
    assert set(result.kernels) == {"row_mean", "center", "scale_bf16"}


@needs_nvcc
def test_nvcc_errors_name_the_first_error() -> None:
    with pytest.raises(NvccError, match=r"nvcc failed: .*error: identifier \"nope\" is undefined"):
        compile_cubin('extern "C" __global__ void k(float* y) { y[0] = nope; }')


#: What `compile -o x.cu` writes for these builds with a plain nvcc, warnings as errors: the
#: bf16 linear uses every device primitive (cp.async, vector accesses, mma.sync, dynamic
#: shared memory), the fp32 one the tf32 MMA, and GQA attention printed index variables
#: nothing read (`const int v0 = b / 4;`) before issue #39.
STANDALONE = (
    "nn.Linear(256, 512).bfloat16()(torch.randn(64, 256).bfloat16())",
    "nn.Linear(256, 256)(torch.randn(64, 256))",
    "F.scaled_dot_product_attention(torch.randn(1, 4, 16, 16), torch.randn(1, 2, 16, 16),"
    " torch.randn(1, 2, 16, 16), is_causal=True, enable_gqa=True)",
)


@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("code", STANDALONE, ids=["bf16-linear", "fp32-linear", "gqa"])
def test_the_written_cu_builds_alone_without_warnings(code: str, tmp_path: Path) -> None:
    """Issue #39: `nvcc -c qwen.cu` failed ("cpu_simt.h: No such file") unless the user found
    the package's backend folder, and warned of unused variables once it did."""
    import subprocess

    from tests.cli.invoke import invoke

    written = tmp_path / "x.cu"
    result = invoke("deplodock", ["compile", "-c", code, "-o", str(written)])
    assert result.status == 0, result.output
    assert "#include <cpu_simt.h>" not in written.read_text()
    build = subprocess.run(
        ["nvcc", "-arch=sm_90", "-c", "x.cu", "-o", "x.o", "--Werror", "all-warnings"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert build.returncode == 0 and not build.stderr.strip(), build.stderr
