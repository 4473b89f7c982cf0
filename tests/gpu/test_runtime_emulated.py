"""The GPU runtime's host side, run on the CPU (no GPU needed).

`CudaProgram` replays `@forward` (allocations as torch tensors, launches with raw
`data_ptr()` pointers). Here the "device" is the CPU SIMT emulation of `backend/cpu_runner.py`,
whose `launch_<kernel>(void** args, grid, block)` takes the same pointer array a CUDA launch
does, so the slots, the pointer passing, bf16 storage, poisoning, the output wiring and the
error paths are all exercised on the real generated CUDA source, with PyTorch as reference.
"""

from __future__ import annotations

import time

import pytest
import torch
from xdsl.parser import Parser

from deplodock.backend.benchmark import format_bench_table, run_interleaved, torch_contenders
from deplodock.backend.build import Build
from deplodock.backend.device import Ceilings
from deplodock.backend.profile import format_profile_table, kernel_profiles
from deplodock.backend.runtime import CudaProgram, KernelLaunchError
from deplodock.dialects import make_context
from deplodock.driver import float64_outputs, lower_program, program_from_expression
from deplodock.driver.cuda import (
    check_on_cuda,
    device_arguments,
    prepare_on_cuda,
    program_dtype,
    relative_error,
    tolerance_for,
)
from deplodock.frontend.expression import randomize_parameters
from tests.gpu.emulation import DRIVER, FAKE_DEVICE, emulated_load, emulated_module


def emulated(code: str, failing: tuple[str, ...] = (), seed: int = 0):
    program = program_from_expression(code, seed=seed)
    tolerance = tolerance_for(program.module)
    lower_program(program, "cuda")
    build = Build(b"", "cpu-simt", (), "none", "key")
    compiled = CudaProgram(
        program.module, build, emulated_module(program.module, failing), DRIVER, device="cpu"
    )
    randomize_parameters(program.torch_module, seed)
    inputs, arguments = device_arguments(program, "cpu")
    return program, compiled, inputs, arguments, tolerance


@pytest.mark.parametrize(
    "code",
    [
        "nn.RMSNorm(96)(torch.randn(2, 3, 96))",
        "torch.softmax(torch.randn(2, 5, 40), dim=-1) * torch.randn(2, 5, 40)",
        "nn.Linear(48, 24)(torch.randn(3, 48)) + torch.randn(3, 24)",
    ],
)
def test_programs_match_pytorch(code: str) -> None:
    program, compiled, inputs, arguments, tolerance = emulated(code)
    outputs = compiled(*arguments, poison=True, check=True)
    expected = float64_outputs(program.torch_module, inputs)
    assert len(outputs) == len(expected) == 1
    assert relative_error(outputs[0], expected[0]) <= tolerance
    assert all(len(f.calls) == 1 for f in compiled.cuda_module.functions.values())


def test_intermediate_buffers_and_launch_order() -> None:
    code = "torch.softmax(torch.randn(4, 64), dim=-1).sum(dim=0) * 2.0"
    program, compiled, inputs, arguments, tolerance = emulated(code)
    assert len(compiled.launches) >= 2
    (out,) = compiled(*arguments, poison=True)
    (ref,) = float64_outputs(program.torch_module, inputs)
    assert relative_error(out, ref) <= tolerance
    # the inputs are passed by pointer and left as they were
    assert torch.equal(inputs[0], program.example_inputs[0])


def test_bf16_tensors_are_passed_in_their_16_bit_storage() -> None:
    code = (
        "nn.RMSNorm(64, dtype=torch.bfloat16)(torch.randn(2, 64, dtype=torch.bfloat16))"
        " * torch.randn(2, 64, dtype=torch.bfloat16)"
    )
    program, compiled, inputs, arguments, tolerance = emulated(code)
    assert tolerance == 1e-2 and all(a.dtype == torch.bfloat16 for a in arguments)
    (out,) = compiled(*arguments, poison=True)
    assert out.dtype == torch.bfloat16
    (ref,) = float64_outputs(program.torch_module, inputs)
    assert ref.dtype == torch.float64
    assert relative_error(out, ref) <= 1e-2


HALF_SOURCE = (  # MLIR-escaped: \22 is a quote, \0A a newline
    r"extern \22C\22 __global__ void half(const float* __restrict__ x, "
    r"float* __restrict__ y) {\0A  const int t = threadIdx.x;\0A  y[t] = x[t];\0A}\0A"
)
HALF_WRITER = f"""
builtin.module {{
  cuda.kernel @half grid 1 block 32 smem 0 args [memref<64xf32>, memref<64xf32>]
      readonly [true, false] includes []
      source "{HALF_SOURCE}"
  func.func @forward(%x: memref<64xf32>) -> memref<64xf32> {{
    %y = cuda.alloc : memref<64xf32>
    cuda.launch @half(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
    func.return %y : memref<64xf32>
  }}
}}
"""


def half_writer(failing: tuple[str, ...] = ()) -> CudaProgram:
    module = Parser(make_context(), HALF_WRITER).parse_module()
    module.verify()
    build = Build(b"", "cpu-simt", (), "none", "key")
    return CudaProgram(module, build, emulated_module(module, failing), DRIVER, "cpu")


def test_poisoned_outputs_expose_unwritten_elements() -> None:
    x = torch.randn(64)
    (y,) = half_writer()(x, poison=True)
    assert torch.equal(y[:32], x[:32]) and torch.isnan(y[32:]).all()
    assert relative_error(y, x) == float("inf")


def test_a_failing_kernel_is_named() -> None:
    with pytest.raises(KernelLaunchError, match=r"kernel @half \(grid 1, block 32\) failed: an "):
        half_writer(failing=("half",))(torch.randn(64), check=True)


def test_arguments_are_checked() -> None:
    program = half_writer()
    with pytest.raises(ValueError, match=r"argument #0: expected torch.float32 \(64,\)"):
        program(torch.randn(32))
    with pytest.raises(ValueError, match="takes 1 tensors, got 2"):
        program(torch.randn(64), torch.randn(64))
    with pytest.raises(ValueError, match="contiguous cpu tensor"):
        program(torch.randn(128)[::2])


def test_launch_hooks_bracket_every_launch() -> None:
    _, compiled, _, arguments, _ = emulated("torch.softmax(torch.randn(4, 64), dim=-1) * 2.0")
    events: list[tuple[str, int]] = []
    compiled(
        *arguments,
        before_launch=lambda i: events.append(("start", i)),
        after_launch=lambda i: events.append(("end", i)),
    )
    n = len(compiled.launches)
    assert events == [(kind, i) for i in range(n) for kind in ("start", "end")]


def test_tolerances_follow_dtype_and_matmuls() -> None:
    def module(code: str):
        return program_from_expression(code).module

    assert tolerance_for(module("nn.RMSNorm(8)(torch.randn(2, 8))")) == 1e-5
    assert tolerance_for(module("nn.Linear(8, 4)(torch.randn(2, 8))")) == 1e-4
    assert tolerance_for(module("torch.randn(2, 8) @ torch.randn(8, 3)")) == 1e-4
    bf16 = module("torch.randn(2, 8, dtype=torch.bfloat16) * 2.0")
    assert program_dtype(bf16) == "bf16" and tolerance_for(bf16) == 1e-2


class WallClock:
    def time(self, fn) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3


def test_the_run_device_cuda_path_on_the_emulation() -> None:
    """prepare -> check -> bench -> profile, as `run --device cuda` chains them."""
    program = program_from_expression("torch.softmax(torch.randn(2, 6, 50), dim=-1) * 3.0")
    prepared = prepare_on_cuda(program, FAKE_DEVICE, 0, emulated_load, tensor_device="cpu")
    assert program.stage == "cuda" and prepared.tolerance == 1e-5 and prepared.dtype == "fp32"
    assert set(prepared.costs) == set(prepared.compiled.kernels)
    report = check_on_cuda(prepared, FAKE_DEVICE)
    assert report.ok, report.summary()
    assert report.summary().startswith("OK: cuda program on Emulated GPU (sm_90), 1 kernel(s)")

    contenders = torch_contenders(
        prepared.program.torch_module,
        prepared.inputs,
        lambda: prepared.compiled(*prepared.arguments),
        compile_fn=lambda m, args: m,
    )
    results = run_interleaved(contenders, WallClock(), warmup=1, iters=3)
    assert all(m.ok and len(m.times) == 3 for m in results.values())
    assert "deplodock speedup" in format_bench_table(results, 1, 3)

    launches = [(s.name, s.grid, s.block) for s in prepared.compiled.launches]
    rows = kernel_profiles(launches, [[0.01]] * len(launches), prepared.costs, {})
    table = format_profile_table(rows, Ceilings(3000.0, 50_000.0, 500_000.0), prepared.dtype)
    assert rows[0].gbps > 0 and launches[0][0] in table


def test_a_measured_profile_prints_the_model_beside_each_kernel() -> None:
    program = program_from_expression("torch.softmax(torch.randn(2, 6, 50), dim=-1) * 3.0")
    prepared = prepare_on_cuda(
        program, FAKE_DEVICE, 0, emulated_load, tensor_device="cpu", model="h100"
    )
    assert set(prepared.modeled_us) == set(prepared.compiled.kernels)
    launches = [(s.name, s.grid, s.block) for s in prepared.compiled.launches]
    rows = kernel_profiles(launches, [[0.01]] * len(launches), {}, {}, prepared.modeled_us)
    table = format_profile_table(rows, Ceilings(3000.0, 50_000.0, 500_000.0), prepared.dtype)
    head, row = table.splitlines()[1:3]
    assert "model us" in head
    assert float(row.split()[2]) == round(prepared.modeled_us[launches[0][0]], 1)
    assert "performance model's prediction (modeled)" in table


def test_a_mismatch_is_reported() -> None:
    program = program_from_expression("torch.randn(4, 64) * 2.0")
    prepared = prepare_on_cuda(program, FAKE_DEVICE, 0, emulated_load, tensor_device="cpu")
    with torch.no_grad():
        prepared.program.torch_module.code = compile("x0 * 2.5", "<expression>", "eval")
    report = check_on_cuda(prepared, FAKE_DEVICE)
    assert not report.ok and report.summary().startswith("MISMATCH: cuda program")


def test_a_program_with_its_own_reference_like_a_model() -> None:
    """Models bring (argument values, float64 outputs) as numpy arrays, bf16 as float32."""
    code = "nn.Linear(32, 16, dtype=torch.bfloat16)(torch.randn(3, 32, dtype=torch.bfloat16))"
    program = program_from_expression(code)
    randomize_parameters(program.torch_module, 0)
    _, arguments = device_arguments(program, "cpu")  # inputs, then parameters by name
    values = [a.float().numpy() for a in arguments]
    (wide,) = float64_outputs(program.torch_module, program.example_inputs)
    program.reference = lambda seed: (values, [wide.numpy()])
    program.tolerance = 3e-2
    prepared = prepare_on_cuda(program, FAKE_DEVICE, 0, emulated_load, tensor_device="cpu")
    assert prepared.inputs == [] and prepared.tolerance == 3e-2
    assert [a.dtype for a in prepared.arguments] == [torch.bfloat16] * 3
    assert all(torch.equal(a, b) for a, b in zip(prepared.arguments, arguments, strict=True))
    report = check_on_cuda(prepared, FAKE_DEVICE)
    assert report.ok, report.summary()
