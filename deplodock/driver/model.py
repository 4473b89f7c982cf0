"""`deplodock run --profile --model DEVICE`: the program's kernels on the performance model.

No GPU is needed: the program is lowered to the kernel level, each kernel is traced and
modeled (`deplodock.perf`), and the table says plainly that its times are modeled. Registers
come from ptxas when nvcc is installed (the build is cached), else from an IR estimate.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from deplodock.driver import Program, lower_program

if TYPE_CHECKING:
    from deplodock.tune.replay import Replay


def profile_on_model(
    program: Program, device_key: str, why: str = "", replay: Replay | None = None
) -> str:
    """The modeled `--profile` table of `program` on the device called `device_key`."""
    from deplodock.perf.devices import device_model
    from deplodock.perf.profile import format_model_table, model_program, ptxas_registers

    device = device_model(device_key)  # an unknown name fails before the lowering
    lower_program(program, "kernel", replay=replay)
    start = time.perf_counter()
    registers = ptxas_registers(program.module, device.capability)
    table = format_model_table(model_program(program.module, device, registers))
    program.timings["perf"] = time.perf_counter() - start
    return f"{why}\n{table}" if why else table
