"""The measured evaluator on a real GPU: time, check, and survive a fault and a hang.

Marked `gpu` (skipped with the reason where no CUDA device, pycuda or nvcc is usable); the
same paths run on the CPU with fakes and the emulation in tests/tune/test_measure.py. The
faulting and the hanging kernel are hand-written cuda-level modules sent straight to the
evaluator's worker, as a candidate whose schedule went wrong would be.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from deplodock.passes.pipelines import lower
from deplodock.tune.evaluate import FAILED, OK, TIMEOUT, WRONG
from deplodock.tune.kernels import loop_kernels, standalone
from deplodock.tune.measure import MeasuredEvaluator, TimeJob, TimingPolicy

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup_ms=5.0, target_ms=20.0, min_runs=5, max_runs=100)


def kernel_module(code: str) -> ModuleOp:
    from deplodock.driver import lower_program, program_from_expression

    program = program_from_expression(code)
    lower_program(program, "loop")
    (kernel,) = loop_kernels(program.module)
    return lower(standalone(kernel), "kernel", start="loop")


def one_kernel(name: str, body: str) -> str:
    """A cuda-level module of one kernel `name(const float* x, float* y)` with `body`."""
    source = (
        rf"extern \22C\22 __global__ void {name}(const float* __restrict__ x, "
        rf"float* __restrict__ y) {{\0A{body}\0A}}\0A"
    )
    return f"""builtin.module {{
      cuda.kernel @{name} grid 1 block 32 smem 0 args [memref<32xf32>, memref<32xf32>]
      readonly [true, false] includes [] source "{source}"
      func.func @forward(%x: memref<32xf32>, %y: memref<32xf32>) -> memref<32xf32> {{
        cuda.launch @{name}(%x, %y) : (memref<32xf32>, memref<32xf32>) -> ()
        func.return %y : memref<32xf32>
      }}
    }}"""


def test_candidates_are_timed_checked_and_retimed_on_the_gpu() -> None:
    twice = kernel_module("torch.randn(2048, 1024) * 2.0")
    thrice = kernel_module("torch.randn(2048, 1024) * 3.0")
    with MeasuredEvaluator(timeout_s=60, policy=QUICK, retime_policy=QUICK) as evaluator:
        assert evaluator.target.startswith("cuda:") and " sm_" in evaluator.target
        assert evaluator.toolchain.startswith("nvcc ") and "-O3" in evaluator.toolchain
        evaluator.set_reference(twice)
        right = evaluator.evaluate(twice)
        wrong = evaluator.evaluate(thrice)
        evaluator.set_reference(None)
        norm = evaluator.evaluate(kernel_module("nn.RMSNorm(2048)(torch.randn(1, 32, 2048))"))
        retimed = evaluator.retime([twice, thrice])
        starts = evaluator.worker.starts
    assert right.status == OK and right.time_us is not None and 0.5 < right.time_us < 5000
    assert wrong.status == WRONG and "max relative error 0.5" in wrong.detail
    assert norm.status == OK and norm.time_us is not None and norm.time_us > 0
    assert [s.status for s in retimed] == [OK, OK]
    assert all(s.detail.endswith("interleaved runs") for s in retimed)
    assert starts == 1  # a wrong candidate does not cost the worker


def test_a_faulting_and_a_hanging_kernel_cost_one_score_each() -> None:
    fault = one_kernel("wild", r"  y[threadIdx.x * 400000000LL] = x[0];")
    hang = one_kernel("spin", r"  while (clock64() >= 0) {}\0A  y[threadIdx.x] = x[0];")
    good = one_kernel("copy", r"  y[threadIdx.x] = x[threadIdx.x];")
    with MeasuredEvaluator(timeout_s=60, policy=QUICK) as evaluator:
        faulted = evaluator.worker.call(TimeJob(fault, None, QUICK), timeout_s=60)
        hung = evaluator.worker.call(TimeJob(hang, None, QUICK), timeout_s=10)
        after = evaluator.worker.call(TimeJob(good, None, QUICK), timeout_s=60)
        starts = evaluator.worker.starts
    assert faulted.status == FAILED and "wild" in faulted.detail, faulted
    assert hung.status == TIMEOUT, hung
    assert after.status == OK and after.value.score().status == OK, after
    assert starts == 3
