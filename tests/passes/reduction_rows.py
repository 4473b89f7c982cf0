"""Shared by the `tile-rows` and `tile-row-on-chip` tests: reducing programs (RMSNorm,
LayerNorm, softmax, row sum) lowered to the loop level, scheduled with chosen knobs, and run
at the tile level, after `convert-tile-to-kernel` (kernel interpreter, race detector on) and
as emitted CUDA C on the CPU, each compared with PyTorch's float64 result."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.dialects import make_context, tile
from deplodock.driver import max_relative_error
from deplodock.passes import get_all_passes
from deplodock.passes.pipelines import STAGE_PASSES, lower
from tests.e2e.test_ops_all_levels import captured_expression, lowered_expression

TOLERANCE = 1e-5

OPS = {
    "rms_norm": "nn.RMSNorm({L})(torch.randn({N}, {L}))",
    "layer_norm": "nn.LayerNorm({L})(torch.randn({N}, {L}))",
    "softmax": "torch.randn({N}, {L}).softmax(-1)",
    "sum": "torch.randn({N}, {L}).sum(-1)",
}
LENGTHS = (1, 7, 100, 2048, 5000)
ROWS = (1, 3, 33)


def expression(op: str, rows: int, length: int) -> str:
    return OPS[op].format(N=rows, L=length)


def passes(names: Sequence[str], options: dict[str, dict[str, int]]) -> list[ModulePass]:
    registry = get_all_passes()
    return [registry[name]()(**options.get(name, {})) for name in names]


def schedule_tile(
    expr: str,
    knobs: dict[str, int],
    options: dict[str, dict[str, int]] | None = None,
    skip: Sequence[str] = (),
) -> ModuleOp:
    """The tile level of `expr` by the `tile` stage, with `knobs` set on every kernel
    right after `convert-loop-to-tile` (and pass `options`; passes in `skip` left out)."""
    module = lowered_expression(expr, "loop").clone()
    ctx = make_context()
    first, *rest = STAGE_PASSES["tile"]
    PassPipeline(tuple(passes([first], {}))).apply(ctx, module)
    for kernel in [op for op in module.ops if isinstance(op, tile.KernelOp)]:
        if knobs:
            kernel.schedule = DictionaryAttr({k: IntegerAttr(v, 64) for k, v in knobs.items()})
    names = [name for name in rest if name not in skip]
    PassPipeline(tuple(passes(names, options or {}))).apply(ctx, module)
    module.verify()
    return module


def kernels(module: ModuleOp) -> list[tile.KernelOp]:
    return [op for op in module.ops if isinstance(op, tile.KernelOp)]


@functools.cache
def _reference(expr: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    _, arguments, expected = captured_expression(expr)
    return arguments, expected


def check_all_levels(
    expr: str, module: ModuleOp, cuda: bool = True, tolerance: float = TOLERANCE
) -> None:
    """`module` (tile level) matches PyTorch at tile, kernel and (emitted CUDA) cuda levels."""
    arguments, expected = _reference(expr)
    levels = ["tile", "kernel", "cuda"] if cuda else ["tile", "kernel"]
    current = module.clone()
    for level in levels:
        if level != "tile":
            current = lower(current, level, start="tile")
        actual = run_on_cpu(current, arguments)
        for out, ref in zip(actual, expected, strict=True):
            error = max_relative_error(out, ref)
            assert error <= tolerance, f"{expr} at {level}: rel. error {error:.3e}"
