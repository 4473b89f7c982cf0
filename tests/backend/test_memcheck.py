"""`run --memcheck`: the emitted C run on the CPU with checked buffers (backend/memcheck.py),
in a forked process, so an access outside a global or `__shared__` buffer, or a read of a
shared element the block never wrote, is reported with the kernel, the buffer, the element,
the thread, the block and the source line instead of reading garbage.

The planted bugs are one-line edits of the printed C; each test checks the exact report."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr
from xdsl.utils.exceptions import InterpretationError

from deplodock.backend.cpu_runner import HEADER_PATH, STUB_INCLUDES, run_kernel, run_on_cpu
from deplodock.backend.memcheck import MemcheckSourceError, instrument
from deplodock.cli.main import main
from deplodock.dialects import cuda
from deplodock.driver import arguments_and_reference, lower_program, program_from_expression
from deplodock.interpreters.shared_memory import UninitializedReadError
from tests.helpers import fma_tile_pipeline


def cuda_program(expression: str, fma: bool = False):
    """`expression` at the cuda level (with `fma`, an fp32 product on FMAs, not tf32x3)."""
    program = program_from_expression(expression)
    arguments, _ = arguments_and_reference(program, 0)
    if fma:
        from tests.passes.test_tile_stage_prologue import apply_tile_pipeline

        lower_program(program, "loop")
        apply_tile_pipeline(program, fma_tile_pipeline())
    lower_program(program, "cuda")
    return program, arguments


def planted(expression: str, old: str, new: str, fma: bool = False):
    """The program of `expression` at the cuda level, its one kernel's C edited (`old`, which
    must occur once, becomes `new`), and its arguments."""
    program, arguments = cuda_program(expression, fma)
    (kernel,) = [op for op in program.module.walk() if isinstance(op, cuda.KernelOp)]
    source = kernel.source.data
    assert source.count(old) == 1, source
    kernel.properties["source"] = StringAttr(source.replace(old, new))
    return program, arguments


def test_a_planted_off_by_one_is_caught_and_located() -> None:
    program, arguments = cuda_program("torch.relu(torch.randn(4, 33))")
    (kernel,) = [op for op in program.module.walk() if isinstance(op, cuda.KernelOp)]
    source = kernel.source.data
    assert "lin < 132;" in source
    kernel.properties["source"] = StringAttr(source.replace("lin < 132;", "lin <= 132;"))
    with pytest.raises(
        InterpretationError,
        match=r"out-of-bounds access in kernel relu_kernel: thread 132 of block 0 touches "
        r"%x0 at element 132, past its 132 elements "
        r"\(kernel\.cu:7: const float v0 = x0\[i0 \* 33 \+ i1\];\)",
    ):
        run_on_cpu(program.module, arguments, memcheck=True)


def test_an_overflow_inside_the_last_granule_is_caught() -> None:
    # 33 floats end 12 bytes into a 16-byte granule: element 33 is before the guard page
    program, arguments = planted("torch.relu(torch.randn(33))", "i0 < 33;", "i0 <= 33;")
    with pytest.raises(
        InterpretationError,
        match=r"^out-of-bounds access in kernel relu_kernel: thread 33 of block 0 touches %x0 "
        r"at element 33, past its 33 elements \(kernel\.cu:5: const float v0 = x0\[i0\];\)(?:\n|$)",
    ):
        run_on_cpu(program.module, arguments, memcheck=True)


def test_an_underflow_is_caught() -> None:
    program, arguments = planted(
        "torch.relu(torch.randn(4, 33))", "x0[i0 * 33 + i1]", "x0[i0 * 33 + i1 - 1]"
    )
    with pytest.raises(
        InterpretationError,
        match=r"^out-of-bounds access in kernel relu_kernel: thread 0 of block 0 touches %x0 "
        r"at element -1, before the first of its 132 elements "
        r"\(kernel\.cu:7: const float v0 = x0\[i0 \* 33 \+ i1 - 1\];\)(?:\n|$)",
    ):
        run_on_cpu(program.module, arguments, memcheck=True)


RMSNORM = "nn.RMSNorm(64)(torch.randn(1, 5, 64))"  # grid 5, block 64, `__shared__ float red[2]`


def test_a_wrong_shared_index_is_caught() -> None:
    program, arguments = planted(RMSNORM, "red[warp] = ", "red[warp + 1] = ")
    with pytest.raises(
        InterpretationError,
        match=r"^out-of-bounds access in kernel rms_norm_kernel: thread 32 of block 0 touches "
        r"shared array red at element 2, past its 2 elements "
        r"\(kernel\.cu:19: red\[warp \+ 1\] = add_warp_4;\)(?:\n|$)",
    ):
        run_on_cpu(program.module, arguments, memcheck=True)


def test_a_missing_shared_write_is_an_uninitialized_read() -> None:
    # only warp 0 writes its partial sum: red[1] holds the previous block's (or nothing).
    # Every block fails; the report is block 0's, whatever the workers' timing.
    program, arguments = planted(RMSNORM, "if (t % 32 == 0)", "if (t % 64 == 0)")
    with pytest.raises(
        UninitializedReadError,
        match=r"^uninitialized read in kernel rms_norm_kernel: thread 0 of block 0 reads "
        r"shared array red at element 1, which nothing in this block has written "
        r"\(kernel\.cu:24: const float add_part = red\[wid\];\)(?:\n|$)",
    ):
        run_on_cpu(program.module, arguments, memcheck=True)
    run_on_cpu(program.module, arguments)  # the plain run reads garbage and says nothing


#: cp.async into shared, 16-byte vector loads (on the FMA pipe: tf32x3 reads single elements)
LINEAR = "nn.Linear(96, 40)(torch.randn(33, 96))"


@pytest.mark.parametrize(
    ("old", "new", "report"),
    [
        (  # the source row clamped one row too far: the 16-byte copy reads past the weight
            "n0 + row_1 : 39)",
            "n0 + row_1 : 40)",
            r"out-of-bounds access in kernel linear_kernel: thread 56 of block 2 touches "
            r"%p_0_weight at element 3840, past its 3840 elements \(kernel\.cu:31: "
            r"dd_cp_async_16\(&p_0_weight_b_s",
        ),
        (  # the next stage's copy one stage too far into the shared ring
            "&x0_a_s[slot_next * 1152 + ",
            "&x0_a_s[1152 + slot_next * 1152 + ",
            r"out-of-bounds access in kernel linear_kernel: thread 0 of block 0 touches "
            r"shared array x0_a_s at element 3456, past its 3456 elements \(kernel\.cu:62: "
            r"dd_cp_async_16\(&x0_a_s\[1152 \+ slot_next",
        ),
        (  # the first stage's weight copies dropped: the vector loads read nothing written
            "dd_cp_async_16(&p_0_weight_b_s[row_1",
            "if (false) dd_cp_async_16(&p_0_weight_b_s[row_1",
            r"uninitialized read in kernel linear_kernel: thread 0 of block 0 reads shared array "
            r"p_0_weight_b_s at element 0, which nothing in this block has written "
            r"\(kernel\.cu:87: const dd_vec<float, 4> vec_2 = dd_load_vector<float, 4>",
        ),
    ],
    ids=["cp-async-source", "cp-async-destination", "vector-load-uninitialized"],
)
def test_cp_async_and_vector_accesses_are_checked_over_their_span(
    old: str, new: str, report: str
) -> None:
    program, arguments = planted(LINEAR, old, new, fma=True)
    with pytest.raises(InterpretationError, match="^" + report):
        run_on_cpu(program.module, arguments, memcheck=True)


#: Shared atomics, vector stores into shared memory and a scalar parameter: what the printer
#: may emit besides the loads and stores above. y[k] = x[k] + x[k + 4], plus `bias`.
SUMS = """#include <cpu_simt.h>
extern "C" __global__ void sums(const float* __restrict__ x, float* __restrict__ y, float bias) {
  __shared__ float acc[4];
  __shared__ __align__(16) float tile[8];
  const int t = threadIdx.x;
  if (t < 4) acc[t] = bias;
  if (t < 2) dd_store_vector<float, 4>(&tile[t * 4], dd_load_vector<float, 4>(&x[t * 4]));
  __syncthreads();
  atomicAdd(&acc[t % 4], tile[t]);
  __syncthreads();
  if (t < 4) y[t] = acc[t];
}
"""


def test_shared_atomics_and_vector_stores_are_checked() -> None:
    x = np.arange(8, dtype=np.float32)
    for memcheck in (False, True):
        y = np.zeros(4, np.float32)
        run_kernel(SUMS, "sums", [x, y, np.array(0.5, np.float32)], 1, 8, memcheck=memcheck)
        np.testing.assert_array_equal(y, x[:4] + x[4:] + 0.5)
    unset = SUMS.replace("if (t < 4) acc[t] = bias;", "")
    with pytest.raises(
        UninitializedReadError,
        match=r"thread 0 of block 0 reads shared array acc at element 0, which nothing in this "
        r"block has written \(kernel\.cu:9: atomicAdd\(&acc\[t % 4\], tile\[t\]\);\)(?:\n|$)",
    ):
        run_kernel(unset, "sums", [x, np.zeros(4, np.float32), np.array(0.5)], 1, 8, memcheck=True)


def test_instrument_rewrites_buffers_line_for_line() -> None:
    source = (
        'extern "C" __global__ void __launch_bounds__(64) k(const float* __restrict__ x, '
        "__nv_bfloat16* __restrict__ y, int n) {\n"
        "  __shared__ __align__(16) long long s[256];\n"
        "  y[n] = x[s[0]];\n"
        "}\n"
    )
    assert instrument(source) == (
        'extern "C" __global__ void __launch_bounds__(64) k(deplodock_simt::GlobalArg<const '
        "float> x, deplodock_simt::GlobalArg<__nv_bfloat16> y, int n) {\n"
        '  __shared__ __align__(16) deplodock_simt::SharedArray<long long, 256> s{"s"};\n'
        "  y[n] = x[s[0]];\n"
        "}\n"
    )
    with pytest.raises(
        MemcheckSourceError,
        match=r"^memcheck cannot instrument kernel\.cu:2: extern __shared__ float d\[\]; "
        r"\(expected __shared__ \[__align__\(A\)\] T name\[N\]; with a literal N\)$",
    ):
        instrument('extern "C" __global__ void k(float* y) {\n  extern __shared__ float d[];\n}')


@pytest.mark.parametrize(
    "expression",
    [
        "nn.RMSNorm(64)(torch.randn(1, 5, 64))",
        "nn.Linear(96, 40)(torch.randn(33, 96))",  # cp.async and 16-byte vector accesses
        "torch.softmax(torch.randn(3, 7, 50, dtype=torch.bfloat16), -1)",
    ],
)
def test_correct_kernels_give_the_same_results_under_memcheck(expression: str) -> None:
    # bit-identical: the checks change no arithmetic
    program, arguments = cuda_program(expression)
    plain = run_on_cpu(program.module, arguments)
    checked = run_on_cpu(program.module, arguments, memcheck=True)
    for a, b in zip(plain, checked, strict=True):
        np.testing.assert_array_equal(a, b)


def test_memcheck_is_for_the_cuda_level(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-c", "torch.relu(torch.randn(4))", "--memcheck"]) == 1
    assert capsys.readouterr().err.strip() == (
        "deplodock: error: --memcheck goes with --ir cuda (the interpreters always check)"
    )
    assert main(["run", "-c", "torch.relu(torch.randn(4))", "--ir", "cuda", "--memcheck"]) == 0


def test_the_gpu_side_of_the_header_ignores_memcheck() -> None:
    # what nvcc sees of cpu_simt.h is the same with DEPLODOCK_MEMCHECK defined or not (the
    # empty stubs stand for the CUDA headers it includes there)
    def device_view(*defines: str) -> str:
        command = ["g++", "-E", "-P", "-x", "c++", "-D__CUDACC__", "-D__CUDA_ARCH__=900"]
        command.append(f"-I{STUB_INCLUDES}")
        out = subprocess.run(
            [*command, *defines, str(HEADER_PATH)], capture_output=True, text=True, check=True
        )
        return out.stdout

    plain = device_view()
    assert "dd_cp_async" in plain and "dd_mma_m16n8k16" in plain and "SharedArray" not in plain
    assert device_view("-DDEPLODOCK_MEMCHECK") == plain
