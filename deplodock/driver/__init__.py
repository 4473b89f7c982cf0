"""What the `compile` and `run` commands do, as functions the tests and the docs call too.

A `Program` (`driver/program.py`) is a module plus, when it came from PyTorch, the
`nn.Module` and example inputs that define its meaning. Loading (`sources.py`), lowering and
printing (`lowering.py`) and checking against the reference (`checking.py`) all start from
it; this package re-exports their functions (a constant is patched where it is read:
`driver.checking.LONG_RUN_SECONDS`). `run --device cuda` (build, run on the GPU, bench,
profile) is `driver/cuda.py`.
"""

from __future__ import annotations

from deplodock.driver.checking import (
    RunReport,
    arguments_and_reference,
    check_tolerance,
    describe_mismatch,
    float64_outputs,
    forward_arguments,
    long_run_warning,
    narrow_float_tolerance,
    pytorch_own_error,
    reference_outputs,
    run_and_compare,
)
from deplodock.driver.lowering import (
    check_lowerable,
    compile_summary,
    computes_nothing,
    kernel_counts,
    lower_program,
    lower_stage,
    render,
)
from deplodock.driver.program import Program, StageProgress
from deplodock.driver.sources import (
    capture_causal_lm,
    capture_kv_step,
    compile_program_from_expression,
    load_program,
    program_from_expression,
    program_from_file,
    program_from_model,
)
from deplodock.numerics import NARROW_FLOAT_TOLERANCE, PYTORCH_ERROR_FACTOR, max_relative_error

__all__ = [
    "NARROW_FLOAT_TOLERANCE",
    "PYTORCH_ERROR_FACTOR",
    "Program",
    "RunReport",
    "StageProgress",
    "arguments_and_reference",
    "capture_causal_lm",
    "capture_kv_step",
    "check_lowerable",
    "check_tolerance",
    "compile_program_from_expression",
    "compile_summary",
    "computes_nothing",
    "describe_mismatch",
    "float64_outputs",
    "forward_arguments",
    "kernel_counts",
    "load_program",
    "long_run_warning",
    "lower_program",
    "lower_stage",
    "max_relative_error",
    "narrow_float_tolerance",
    "program_from_expression",
    "program_from_file",
    "program_from_model",
    "pytorch_own_error",
    "reference_outputs",
    "render",
    "run_and_compare",
]
