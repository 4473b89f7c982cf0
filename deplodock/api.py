"""`deplodock.compile(module, example_inputs)`: a PyTorch module as a compiled callable.

    f = deplodock.compile(model, (input_ids,))
    logits = f(input_ids)

The module is captured once (shapes and dtypes are those of `example_inputs`), lowered to
the kernel level, and each call runs the lowered program. Parameters are read from the
module by name at every call, so loading new weights into it needs no recompile. A
Hugging Face causal LM is captured as `forward(input_ids) -> logits` (see
`frontend/models.py`). `device="cpu"` interprets the kernel-level program; other devices
register a runner in `RUNNERS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

#: device -> function running a kernel-level module on `@forward` argument arrays.
Runner = Callable[[ModuleOp, list[np.ndarray]], list[np.ndarray]]


def _run_on_cpu(module: ModuleOp, arguments: list[np.ndarray]) -> list[np.ndarray]:
    from deplodock.interpreters import run_module

    return run_module(module, arguments)


RUNNERS: dict[str, Runner] = {"cpu": _run_on_cpu}


class CompiledModule:
    """A captured and lowered module; calling it runs the program on `device`."""

    def __init__(
        self,
        program: Any,
        module: nn.Module,
        constants: dict[str, torch.Tensor],
        device: str,
        output_dtypes: Sequence[torch.dtype],
    ):
        self.program = program
        self.module = module
        self.device = device
        self._constants = constants
        self._output_dtypes = list(output_dtypes)

    @property
    def ir(self) -> str:
        """The lowered program as text (MLIR at the kernel level)."""
        from deplodock.driver import render

        return render(self.program.module, self.program.stage)

    def arguments(self, *inputs: torch.Tensor) -> list[np.ndarray]:
        """`@forward`'s argument values: `inputs`, then the module's current parameters."""
        from deplodock.frontend.weights import bind_arguments

        state = dict(self.module.named_parameters(remove_duplicate=False))
        state |= dict(self.module.named_buffers(remove_duplicate=False))
        return bind_arguments(self.program.module, inputs, state, self._constants)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        outputs = RUNNERS[self.device](self.program.module, self.arguments(*inputs))
        tensors = tuple(
            torch.from_numpy(np.ascontiguousarray(out)).to(dtype)
            for out, dtype in zip(outputs, self._output_dtypes, strict=True)
        )
        return tensors[0] if len(tensors) == 1 else tensors


def compile(
    module: nn.Module,
    example_inputs: Sequence[torch.Tensor],
    device: str = "cpu",
    stage: str = "kernel",
) -> CompiledModule:
    """Capture `module` on `example_inputs`, lower it to `stage`, return a callable."""
    from deplodock.driver import Program, lower_program
    from deplodock.frontend import capture as cap
    from deplodock.frontend import models

    if device not in RUNNERS:
        raise ValueError(f"unknown device '{device}' (available: {', '.join(RUNNERS)})")
    target: nn.Module = module
    op_paths: dict[Operation, str] = {}
    if models.is_causal_lm(module):  # its decoder layers are lowered once (deplodock.stamp)
        target = models.CausalLMLogits(module)
        with models.capture_ready(module):
            ep = cap.export(target, example_inputs)
            ir = cap.import_exported_program(ep, op_paths=op_paths)
    else:
        ep = cap.export(target, example_inputs)
        ir = cap.import_exported_program(ep)
    outputs = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    dtypes = [node.meta["val"].dtype for node in cap.flatten_outputs(outputs)]
    program = Program(ir, "torch", target, tuple(example_inputs))
    if op_paths:
        program.layer_prefix, program.op_paths = models.LAYER_PREFIX, op_paths
    lower_program(program, stage)
    return CompiledModule(program, target, dict(ep.constants), device, dtypes)
