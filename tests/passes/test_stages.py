"""The one home of stage order (`passes/pipelines.py`): every slice of `STAGES` goes through
`stages_between`, `previous_stage` and `is_below`."""

from __future__ import annotations

import pytest

from deplodock.passes.pipelines import (
    STAGE_PASSES,
    STAGES,
    input_stage,
    is_below,
    pipeline_pass_names,
    previous_stage,
    stages_between,
)


def test_stages_between_excludes_the_start_and_includes_the_end() -> None:
    assert stages_between("loop", "cuda") == ("tile", "kernel", "cuda")
    assert stages_between("torch", "torch") == ()
    assert stages_between("torch", "cuda") == STAGES[1:]
    assert stages_between("kernel", "loop") == ()  # nothing lowers upward


def test_previous_stage_and_order() -> None:
    assert [previous_stage(s) for s in STAGES] == ["torch", *STAGES[:-1]]
    assert is_below("cuda", "torch") and not is_below("torch", "cuda")
    assert not is_below("tile", "tile")


def test_unknown_stage_is_one_line() -> None:
    with pytest.raises(ValueError, match="unknown stage 'gpu'"):
        stages_between("torch", "gpu")


def test_pipelines_and_input_stages_follow_the_order() -> None:
    assert pipeline_pass_names("tile", "loop") == STAGE_PASSES["tile"]
    assert input_stage("convert-loop-to-tile") == "loop"
    assert input_stage("tile-mma") == "tile"
    assert input_stage("cse") is None
