"""The differential fuzzer: generator, shrinker, reproducers, and a fixed-seed run in CI."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from deplodock.fuzz.__main__ import fuzz, levels_for
from deplodock.fuzz.check import (
    LEVELS,
    Outcome,
    check,
    check_source,
    excess_error,
    instantiate,
    save_reproducer,
    shrink,
)
from deplodock.fuzz.generate import generate

#: What CI checks: this many programs from seed 0 (the long run is a documented command).
CI_PROGRAMS = 150


def test_generation_is_reproducible_and_well_formed():
    for seed in range(40):
        program = generate(seed)
        assert program.source() == generate(seed).source()
        module, inputs = instantiate(program)
        outputs = module(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        assert len(outputs) == len(program.outputs)
        shapes = {f"v{i}": shape for i, shape in enumerate(program.shapes)}
        for name, value in zip(program.outputs, outputs, strict=True):
            assert tuple(value.shape) == shapes[name], (seed, name)


def test_programs_are_dags_with_several_op_families():
    sources = "\n".join(generate(seed).source() for seed in range(200))
    for fragment in ("@", "softmax", "permute", "torch.cat", ".sum(", "layer_norm", "expand"):
        assert fragment in sources

    def reuses_a_value(program) -> bool:
        operands = [re.findall(r"\bv\d+\b", line.split(" = ")[1]) for line in program.statements]
        used = [name for names in operands for name in set(names)]
        return len(used) > len(set(used))

    reused = sum(reuses_a_value(generate(seed)) for seed in range(200))
    assert reused > 0


def test_the_shrinker_keeps_the_failure_and_drops_the_rest():
    program = next(
        p
        for p in map(generate, range(500))
        if len(p.statements) >= 4 and any("softmax" in line for line in p.statements)
    )

    def fails(p):
        return any("softmax" in line for line in p.statements)

    small = shrink(program, fails)
    assert fails(small)
    assert len(small.statements) == 1
    assert "softmax" in small.statements[0]
    assert check(small, ("tensor",)).status in ("ok", "unsupported")  # still a valid program


def test_the_judge_allows_the_spread_of_an_ill_conditioned_output_and_no_more():
    """An output that cancels to ~0 (the sum of a layer-normed row): PyTorch's own f32 result
    may be exact by luck (error 1e-16), but one-ulp input changes move it by ~2e-8, so an
    error of 3e-8 is as good as f32 allows; 30 times the spread is not."""
    expected = np.array([1.0e-17])
    lucky = np.array([1.1e-16])
    assert excess_error(np.array([3e-8]), expected, lucky, 1e-5) is not None  # no spread
    assert excess_error(np.array([3e-8]), expected, lucky, 1e-5, spread=2e-8) is None
    failure = excess_error(np.array([6e-7]), expected, lucky, 1e-5, spread=2e-8)
    assert failure is not None and "(and 2.000e-08 under one-ulp input changes)" in failure[1]


def test_a_reproducer_reruns(tmp_path: Path):
    program = generate(3)
    outcome = Outcome("mismatch", "loop", 1.0, ir="builtin.module {\n}\n")
    path = save_reproducer(program, outcome, tmp_path)
    assert (tmp_path / "fuzz-3.loop.mlir").exists()
    assert "mismatch at loop" in path.read_text().splitlines()[0]
    assert check_source(str(path), ("tensor",)).status == "ok"


def test_cuda_level_every_nth_program():
    assert levels_for(0, 10) == LEVELS
    assert "cuda" not in levels_for(3, 10)
    assert "cuda" not in levels_for(0, 0)


@pytest.mark.slow
def test_fixed_seed_fuzz_run_finds_no_miscompile():
    """Every level of 150 random programs (the cuda level for one in ten) matches PyTorch."""
    lines: list[str] = []
    summary = fuzz(CI_PROGRAMS, seed=0, cuda_every=10, echo=lines.append)
    counts = summary["counts"]
    assert not counts.get("mismatch") and not counts.get("crash"), "\n".join(lines)
    assert counts.get("ok", 0) >= CI_PROGRAMS // 2, lines[-1]


REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("fuzz-*.py"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_fixed_reproducers_stay_fixed(path: Path):
    """Programs the fuzzer once found miscompiled, at every level."""
    assert check_source(str(path)).status == "ok"
