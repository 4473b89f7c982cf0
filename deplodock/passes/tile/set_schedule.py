"""`tile-schedule`: writes given knobs on a kernel's `schedule`, for the passes after it to read.

A schedule is data (`schedule.py`): every scheduling pass reads its knobs from the kernel's
`schedule` before its options and writes back what it used. So a schedule chosen by the
tuner replays as text: this pass, right after `convert-loop-to-tile`, puts the knobs on the
kernel, and the unchanged tile stage then takes every decision they fix (`schedule_pipeline`
prints that pipeline; `deplodock-opt k.loop.mlir -p "$(cat best.txt)"` reproduces the CUDA).
It is not in the default pipeline.

Trigger: the `tile.kernel` named by `kernel` (every tile kernel when it is empty).

Rewrite: `knobs` (space-separated `name=int` pairs) are written on the kernel's `schedule`,
in their order; a knob already there takes the new value in its place. Nothing else changes.
With `tile-schedule{kernel="linear_kernel" knobs="bm=64 bn=32 group=4"}`:

    tile.kernel @linear_kernel(...) {     ==>    tile.kernel @linear_kernel(...) attributes
                                                   {schedule = {bm = 64 : i64, bn = 32 : i64,
                                                                group = 4 : i64}} {

A kernel that `tile-split-k` adds (`@<name>_combine`) does not exist yet after
`convert-loop-to-tile`: `schedule_pipeline` writes its knobs right after `tile-split-k`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule, ScheduleError
from deplodock.passes.pipelines import STAGE_PASSES
from deplodock.passes.tile import schedule
from deplodock.passes.tile.kernel_pass import TileKernelPass, tile_kernels
from deplodock.passes.tile.schedule import knob_error
from deplodock.passes.tile.split_k import TileSplitKPass, added_kernel_name

NAME = "tile-schedule"


def parse_knobs(text: str) -> Schedule:
    """The `knobs` option (`"bm=128 bn=64"`) as a schedule; a malformed pair is one line."""
    try:
        return Schedule.parse(text)
    except ScheduleError as error:
        raise PassFailedException(f'{NAME}: {error} in knobs="{text}"') from None


def schedule_pipeline(schedules: Mapping[str, Schedule]) -> str:
    """The pipeline from the loop level to CUDA that lowers each kernel named in `schedules`
    with those knobs: `convert-loop-to-tile`, one `tile-schedule` per kernel, then the rest
    of the tile stage and the kernel and cuda stages. A kernel that `tile-split-k` adds (the
    combine or zeroing kernel of one whose knobs split it) gets its `tile-schedule` right
    after that pass, once it exists."""
    added = split_kernels(schedules)
    passes: list[str] = []
    for name in STAGE_PASSES["tile"]:
        passes.append(name)
        if name == STAGE_PASSES["tile"][0]:
            passes += [_setting(k, v) for k, v in schedules.items() if k not in added]
        if name == TileSplitKPass.name:
            passes += [_setting(k, v) for k, v in schedules.items() if k in added]
    return ",".join([*passes, *STAGE_PASSES["kernel"], *STAGE_PASSES["cuda"]])


def split_kernels(schedules: Mapping[str, Schedule]) -> set[str]:
    """The kernels of `schedules` that `tile-split-k` adds, given the others' `splits`."""
    return {
        added_kernel_name(name, atomic)
        for name, knobs in schedules.items()
        if knobs.get("splits", 1) > 1
        for atomic in (False, True)
    }


def _setting(kernel: str, knobs: Schedule) -> str:
    return f'{NAME}{{kernel="{kernel}" knobs="{knobs.format()}"}}'


def target_kernels(module: ModuleOp, name: str) -> list[tile.KernelOp]:
    """The kernel named `name` (every tile kernel when `name` is empty)."""
    kernels = tile_kernels(module)
    if not name:
        return kernels
    named = [kernel for kernel in kernels if kernel.sym_name.data == name]
    if named:
        return named
    if not kernels:
        raise PassFailedException(f"{NAME}: no tile.kernel in the module to write knobs on")
    names = ", ".join(f"@{kernel.sym_name.data}" for kernel in kernels)
    raise PassFailedException(f"{NAME}: no tile.kernel @{name} (the module has {names})")


@dataclass(frozen=True)
class TileSchedulePass(TileKernelPass):
    """Writes `knobs` on the `schedule` of tile kernel `kernel` (module doc)."""

    name = NAME

    kernel: str = ""
    knobs: str = ""

    def check_options(self) -> None:
        for name, value in parse_knobs(self.knobs).items():
            if why := knob_error(name, value):
                raise PassFailedException(f"{NAME}: knob {why}")

    def kernels(self, module: ModuleOp) -> list[tile.KernelOp]:
        return target_kernels(module, self.kernel)

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        schedule.write_knobs(kernel, parse_knobs(self.knobs))
