"""Every stage of a lowered program prints in MLIR's generic form (`--print-op-generic`,
for tools that do not know our syntax) and parses back with our own tools to the same IR."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.parser import Parser
from xdsl.printer import Printer

from deplodock.dialects import make_context
from deplodock.driver import lower_program, program_from_expression
from deplodock.passes.pipelines import STAGES, stages_between

PROGRAMS = {
    "rmsnorm": "nn.RMSNorm(256)(torch.randn(1, 8, 256))",
    "linear": "nn.Linear(96, 64)(torch.randn(40, 96))",  # every GEMM scheduling pass
    "attention": (
        "F.scaled_dot_product_attention(torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8),"
        " torch.randn(1, 2, 16, 8), is_causal=True)"
    ),
    "cumsum_bf16": "torch.randn(3, 40, dtype=torch.bfloat16).cumsum(1)",
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_stage_round_trips_through_the_generic_form(name: str) -> None:
    program = program_from_expression(PROGRAMS[name])
    for stage in (program.stage, *stages_between(program.stage, STAGES[-1])):
        lower_program(program, stage)
        module = program.module
        generic = StringIO()
        Printer(generic, print_generic_format=True).print_op(module)
        assert '"builtin.module"()' in generic.getvalue()
        parsed = Parser(make_context(), generic.getvalue(), f"{name}.{stage}").parse_module()
        parsed.verify()
        assert str(parsed) == str(module), f"{name} at {stage} does not round-trip"
