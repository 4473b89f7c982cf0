"""A `Program`: a module at some stage and what it must compute, which loading makes,
lowering advances and checking compares (`driver/sources.py`, `lowering.py`, `checking.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

if TYPE_CHECKING:  # torch is imported where a program comes from PyTorch, not for .mlir
    import torch


@dataclass
class Program:
    """A module at some stage, and (for PyTorch sources) what it must compute."""

    module: ModuleOp
    stage: str
    torch_module: torch.nn.Module | None = None
    example_inputs: tuple[torch.Tensor, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    #: One line naming the source (models: id, layers, sequence length, dtype).
    name: str = ""
    #: seed -> (`@forward` argument values, float64 reference outputs), for sources whose
    #: reference is not `torch_module(*example_inputs)` on random parameters (models).
    reference: Callable[[int], tuple[list[np.ndarray], list[np.ndarray]]] | None = None
    #: The `run` tolerance of this source, when it needs its own (models: 1e-4 in fp32).
    tolerance: float | None = None
    #: The stage of the module `reference` interprets, for a `.mlir` file (its own stage):
    #: run at that stage, the program would be compared with itself, so it is not compared.
    reference_stage: str | None = None
    #: Repeated layers (models: `model.layers`): torch-level ops whose module path is
    #: `<layer_prefix>.<i>...` form layer `i`, and identical layers are lowered once
    #: (`deplodock.stamp`). `op_paths` maps each torch-level op to its module path.
    layer_prefix: str | None = None
    op_paths: dict[Operation, str] | None = None
    #: Which weights a model's `reference` bound (`run`): the checkpoint's, or random ones,
    #: for the verdict to say (a random model matching says less than a real one); "" else.
    weights: str = ""
    #: After a stamped lowering: (segments, distinct segments lowered).
    segments: tuple[int, int] | None = None


#: Told the name of each phase of a compile as it starts (`model`, `torch`, `segment`, the
#: stages, `stitch`): what a progress bar shows.
StageProgress = Callable[[str], None]


def announce_phase(progress: StageProgress | None, phase: str) -> None:
    """Tells `progress` (when there is one) that `phase` starts: loading and lowering both
    report their phases to one bar."""
    if progress is not None:
        progress(phase)
