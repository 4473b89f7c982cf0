"""`run --memcheck`: the emitted C run on the CPU with every buffer right before an
inaccessible page, in a forked process, so an access past a buffer's end is reported with
the kernel, the buffer, the element, the thread and the block instead of reading garbage."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr
from xdsl.utils.exceptions import InterpretationError

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.cli.main import main
from deplodock.dialects import cuda
from deplodock.driver import arguments_and_reference, lower_program, program_from_expression


def cuda_program(expression: str):
    program = program_from_expression(expression)
    arguments, _ = arguments_and_reference(program, 0)
    lower_program(program, "cuda")
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


@pytest.mark.parametrize(
    "expression",
    [
        "nn.RMSNorm(64)(torch.randn(1, 5, 64))",
        "nn.Linear(96, 40)(torch.randn(33, 96))",  # cp.async and 16-byte vector accesses
        "torch.softmax(torch.randn(3, 7, 50, dtype=torch.bfloat16), -1)",
    ],
)
def test_correct_kernels_give_the_same_results_under_memcheck(expression: str) -> None:
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
