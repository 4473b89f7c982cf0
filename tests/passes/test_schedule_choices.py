"""The schedule's search space (`passes/tile/choices.py`): what each pass declares legal.

The tuner's contract: walking the tile pipeline and taking *any* legal choice at every pass
gives a program that verifies and computes what the loop program computes; the default
heuristic's own choice is always in the space; a pass declares nothing for a kernel it does
not schedule.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from deplodock.dialects import make_context, tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.driver import lower_program, program_from_expression
from deplodock.passes import get_all_passes
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable
from tests.helpers import parse, random_inputs, rel_err, run
from tests.passes.test_tile_split_k import loop_ir

PROGRAMS: dict[str, str] = {
    "linear": "",  # loop_ir(17, 100, 96): odd M and N, bias and ReLU
    "rmsnorm": "nn.RMSNorm(96)(torch.randn(5, 96))",
    "softmax": "torch.softmax(torch.randn(6, 200), -1)",
    "silu_mul": "nn.functional.silu(torch.randn(4, 40)) * torch.randn(4, 40)",
}


def loop_module(name: str) -> ModuleOp:
    if name == "linear":
        return parse(loop_ir(17, 100, 96))
    program = program_from_expression(PROGRAMS[name])
    lower_program(program, "loop")
    return program.module


def tile_passes() -> list:
    passes = get_all_passes()
    return [passes[name]()() for name in STAGE_PASSES["tile"]]


def walk(module: ModuleOp, pick) -> list[tuple[str, str, list[Schedule], Schedule | None]]:
    """Runs the tile stage on `module`; before each tunable pass, `pick(choices)` chooses
    for every kernel it applies to. Returns (pass, kernel, choices, picked) per decision."""
    decisions = []
    for scheduling_pass in tile_passes():
        if isinstance(scheduling_pass, Tunable):
            for kernel in [op for op in module.ops if isinstance(op, tile.KernelOp)]:
                if not scheduling_pass.applies_to(kernel):
                    continue
                choices = scheduling_pass.legal_choices(kernel)
                picked = pick(choices)
                if picked is not None:
                    schedule.write_knobs(kernel, picked)
                decisions.append((scheduling_pass.name, kernel.sym_name.data, choices, picked))
        scheduling_pass.apply(make_context(), module)
        module.verify()
    return decisions


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_any_legal_walk_computes_the_loop_program(name: str, seed: int) -> None:
    module = loop_module(name)
    inputs = random_inputs(module, seed=seed)
    expected = run(module, *inputs)
    rng = random.Random(seed)
    decisions = walk(module, lambda choices: rng.choice(choices) if choices else None)
    assert decisions, "no pass declared a choice"
    assert all(choices for _, _, choices, _ in decisions), "a pass applies but allows nothing"
    actual = run(module, *inputs)
    for out, ref in zip(actual, expected, strict=True):
        assert rel_err(out, ref.astype(np.float64)) < 1e-5


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_default_choice_is_in_the_space(name: str) -> None:
    module = loop_module(name)
    seen: list[tuple[str, list[Schedule]]] = []

    def keep_default(choices: list[Schedule]) -> None:
        seen.append(("", choices))
        return None

    decisions = walk(module, keep_default)
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, tile.KernelOp)}
    for pass_name, kernel_name, choices, _ in decisions:
        knobs = kernels[kernel_name].schedule.data  # type: ignore[union-attr]
        names = choices[0].keys()
        made = {key: knobs[key].value.data for key in names if key in knobs}  # type: ignore[attr-defined]
        if len(made) == len(names):
            assert made in choices, f"{pass_name} on @{kernel_name}: default {made} not legal"


def test_a_contraction_space_is_what_its_passes_accept() -> None:
    from deplodock.passes.convert_loop_to_tile import ConvertLoopToTilePass
    from deplodock.passes.tile.block import TileBlockPass
    from deplodock.passes.tile.rows import TileRowsPass
    from deplodock.passes.tile.split_k import TileSplitKPass

    module = parse(loop_ir(17, 100, 96))
    ConvertLoopToTilePass().apply(make_context(), module)
    (kernel,) = [op for op in module.ops if isinstance(op, tile.KernelOp)]
    # K = 96 splits into slices of at least 8: 1, 2, 4 and 8 ways.
    assert TileSplitKPass().legal_choices(kernel) == [{"splits": s} for s in (1, 2, 4, 8)]
    blocks = TileBlockPass().legal_choices(kernel)
    assert {"bm": 32, "bn": 128, "group": 8} in blocks
    assert all(c["bm"] <= 34 for c in blocks)  # no tile more than twice the 17 rows
    # Unblocked, the contraction is also a kernel of rows (the baseline schedule of it);
    # once tile-block has taken it, the row passes declare nothing.
    assert TileRowsPass().legal_choices(kernel)
    TileBlockPass().apply(make_context(), module)
    assert TileRowsPass().legal_choices(kernel) == []
    assert TileBlockPass().legal_choices(kernel) == []
