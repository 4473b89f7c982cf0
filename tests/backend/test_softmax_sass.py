"""A softmax row kernel divides once per row: the SASS has one slow-path division call.

A correctly rounded fp32 division compiles to a reciprocal, a refinement and a call to a
slow path for hard operands. Softmax multiplies by the reciprocal of the row sum
(`torch_to_tensor/reductions.py`), so its row kernel carries one such call, not one per
element held by a lane (16 for a 512-wide row on a warp).

The exponentials of the sum and of the output are the same values: in fp32 nvcc merged
them (16 `MUFU.EX2`, one per element), in bf16 it did not (32: each goes through
`__bfloat162float`). `tile-cse` now merges them in the tile IR: 16 in both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deplodock.backend.build import kernels_source
from deplodock.driver import lower_program, program_from_expression
from tests.backend.sass import needs_nvcc, sass_of

pytestmark = needs_nvcc


@pytest.mark.parametrize(("dtype", "exponentials"), [("", 16), (", dtype=torch.bfloat16", 16)])
def test_one_division_per_row(dtype: str, exponentials: int, tmp_path: Path) -> None:
    program = program_from_expression(f"torch.softmax(torch.randn(1, 28, 512, 512{dtype}), -1)")
    lower_program(program, "cuda")
    sass = sass_of(kernels_source(program.module), tmp_path)
    assert sass.count("CALL.REL") == 1, "one slow-path division per row"
    assert sass.count("MUFU.EX2") == exponentials
