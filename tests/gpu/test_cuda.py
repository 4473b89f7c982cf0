"""On a GPU: build, run and check real programs; bench, profile and the suite end to end.

Every test here is marked `gpu` and skipped (with the reason) where there is no CUDA device,
pycuda or nvcc (see conftest.py). Shapes are small except the issue's own examples.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deplodock.cli.main import main

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(["run", *argv])
    out, err = capsys.readouterr()
    return status, out + err


@pytest.mark.parametrize(
    "code",
    [
        "nn.RMSNorm(3584)(torch.randn(1, 128, 3584))",  # the issue's example
        "torch.softmax(torch.randn(2, 8, 100, 100), dim=-1)",
        "nn.Linear(1024, 512)(torch.randn(1, 32, 1024)) + torch.randn(1, 32, 512)",
        "F.silu(torch.randn(1, 32, 640)) * torch.randn(1, 32, 640)",
        "nn.Linear(256, 128, dtype=torch.bfloat16)(torch.randn(1, 64, 256, dtype=torch.bfloat16))",
        "F.scaled_dot_product_attention(torch.randn(1, 8, 64, 32), torch.randn(1, 2, 64, 32), "
        "torch.randn(1, 2, 64, 32), is_causal=True, enable_gqa=True)",
        # past the static 48 KiB: 55 KiB of slabs (128 x 64 tiles, BK 32, two slots) and
        # 92 KiB (256 x 128 tiles of MMA cells, BK 32, three slots), opted into at launch
        "nn.Linear(2048, 2048, bias=False)(torch.randn(1, 512, 2048))",
        "nn.Linear(1024, 5632, bias=False, dtype=torch.bfloat16)"
        "(torch.randn(1, 512, 1024, dtype=torch.bfloat16))",
    ],
)
def test_programs_match_pytorch_on_the_gpu(capsys, code: str) -> None:
    status, out = run_cli(capsys, "-c", code, "--device", "cuda")
    assert status == 0, out
    assert out.startswith("OK: cuda program on ") and "(sm_" in out


def test_softmax_bench_and_profile(capsys) -> None:
    code = "torch.nn.Softmax(dim=-1)(torch.randn(1, 28, 256, 256))"
    status, out = run_cli(
        capsys, "--bench", "--profile", "--warmup", "2", "--iters", "5", "-c", code
    )
    assert status == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("OK: cuda program")
    bench = next(i for i, ln in enumerate(lines) if ln.startswith("bench:"))
    eager, compiled, mine = (ln.split() for ln in lines[bench + 2 : bench + 5])
    assert eager[:2] == ["PyTorch", "eager"] and eager[-1].endswith("x")
    assert compiled[0] == "torch.compile" and mine[0] == "deplodock" and float(mine[1]) > 0
    prof = next(i for i, ln in enumerate(lines) if ln.startswith("profile:"))
    header, row = lines[prof + 1], lines[prof + 2].split()
    modeled = "model us" in header  # a GPU the performance model knows (H100, H200, ...)
    time_us, gb_per_s = float(row[1]), float(row[4 if modeled else 3])
    assert row[0] == "softmax_kernel" and time_us > 0 and gb_per_s > 0
    assert not modeled or float(row[2]) > 0
    assert lines[-1].lstrip().startswith("ceilings")


def test_the_issue_softmax_example(capsys) -> None:
    code = "torch.nn.Softmax(dim=-1)(torch.randn(1, 28, 2048, 2048))"
    status, out = run_cli(capsys, "--bench", "--profile", "--iters", "10", "-c", code)
    assert status == 0, out
    assert "deplodock" in out and "profile:" in out


def test_zero_copy_exchange_and_poisoning() -> None:
    import torch

    from deplodock.backend.device import require_cuda
    from deplodock.backend.runtime import CudaProgram
    from deplodock.driver import lower_program, program_from_expression
    from deplodock.driver.cuda import device_arguments, relative_error

    device = require_cuda()
    program = program_from_expression("torch.randn(4, 300) * 2.0")
    lower_program(program, "cuda")
    compiled = CudaProgram.load(program.module, device)
    again = CudaProgram.load(program.module, device)
    assert again.build.cached and again.build.cubin == compiled.build.cubin
    inputs, arguments = device_arguments(program)
    (out,) = compiled(*arguments, poison=True, check=True)
    assert out.is_cuda and out.dtype == torch.float32
    assert relative_error(out, inputs[0] * 2.0) == 0.0
    assert arguments[0].data_ptr() == inputs[0].data_ptr()  # passed by pointer, not copied


def test_a_faulting_kernel_is_named(tmp_path: Path) -> None:
    # an illegal address poisons the CUDA context, so this runs in its own process
    script = textwrap.dedent(
        r'''
        import torch
        from xdsl.parser import Parser
        from deplodock.backend.device import require_cuda
        from deplodock.backend.runtime import CudaProgram, KernelLaunchError
        from deplodock.dialects import make_context
        src = (r"extern \22C\22 __global__ void wild(const float* __restrict__ x, "
               r"float* __restrict__ y) {\0A  y[threadIdx.x * 400000000LL] = x[0];\0A}\0A")
        text = f"""builtin.module {{
          cuda.kernel @wild grid 1 block 32 smem 0 args [memref<4xf32>, memref<4xf32>]
          readonly [true, false] includes []
              source "{src}"
          func.func @forward(%x: memref<4xf32>) -> memref<4xf32> {{
            %y = cuda.alloc : memref<4xf32>
            cuda.launch @wild(%x, %y) : (memref<4xf32>, memref<4xf32>) -> ()
            func.return %y : memref<4xf32>
          }}
        }}"""
        program = CudaProgram.load(Parser(make_context(), text).parse_module(), require_cuda())
        try:
            program(torch.randn(4, device="cuda"), check=True)
        except KernelLaunchError as error:
            print("NAMED:", error)
        '''
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert "NAMED: kernel @wild (grid 1, block 32) failed:" in result.stdout, result.stderr


def test_ceilings_are_measured_and_cached(tmp_path: Path, monkeypatch) -> None:
    from deplodock.backend.device import load_ceilings, measure_ceilings, require_cuda

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    name = require_cuda().name
    ceilings = load_ceilings(name, lambda: measure_ceilings(runs=3))
    assert 100 < ceilings.copy_gbps < 20_000
    assert 1_000 < ceilings.fp32_gflops < ceilings.bf16_gflops
    assert name in json.loads((tmp_path / "deplodock" / "ceilings.json").read_text())


def test_suite_on_two_cases(tmp_path: Path) -> None:
    argv = ["-m", "bench.kernels", "--dtype", "bf16", "--out", str(tmp_path)]
    argv += ["-k", "rmsnorm/tinyllama-1.1b/s32", "-k", "silu_mul/tinyllama-1.1b/s32"]
    argv += ["--warmup", "2", "--iters", "5"]
    result = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    (json_path,) = tmp_path.glob("kernels-bf16-*.json")
    doc = json.loads(json_path.read_text())
    assert doc["device"] and doc["driver"] and doc["torch"] and doc["nvcc"] and doc["date"]
    assert [r["status"] for r in doc["rows"]] == ["ok", "ok"], doc["rows"]
    assert all(r["deplodock_ms"] > 0 and r["speedup_eager"] > 0 for r in doc["rows"])
    assert list(tmp_path.glob("kernels-bf16-*.png"))
    assert "geomean speedup" in result.stdout


def test_device_timing_leaves_the_host_out() -> None:
    """torch.compile's host work per call (guards, wrappers: about 0.1-0.4 ms on an H200)
    outlasts the L2 flush, so it shows in a tiny program's latency; with the GPU kept busy
    while the host issues the call (`timing="device"`), it does not."""
    from deplodock.backend.benchmark import COMPILE, DEPLODOCK
    from deplodock.backend.device import require_cuda
    from deplodock.driver import program_from_expression
    from deplodock.driver.cuda import bench_on_cuda, prepare_on_cuda

    device = require_cuda()
    prepared = prepare_on_cuda(
        program_from_expression("torch.softmax(torch.randn(8, 64), -1)"), device
    )
    latency, _ = bench_on_cuda(prepared, device, 3, 20, timing="latency")
    device_time, _ = bench_on_cuda(prepared, device, 3, 20, timing="device")
    assert device_time[COMPILE].median < latency[COMPILE].median
    assert 0 < device_time[DEPLODOCK].median <= latency[DEPLODOCK].median * 1.1
