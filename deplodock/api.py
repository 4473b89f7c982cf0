"""`deplodock.compile(module, example_inputs)`: a PyTorch module as a compiled callable.

    f = deplodock.compile(model, (input_ids,))                 # interpreted on the CPU
    g = deplodock.compile(model.cuda(), (input_ids,), device="cuda")
    logits = g(input_ids.cuda())                               # a CUDA tensor

The module is captured once (shapes and dtypes are those of `example_inputs`) and lowered
to the stage its device runs: `device="cpu"` interprets the kernel-level program (any stage
may be asked for); `device="cuda"` lowers to the cuda level, builds it with nvcc and loads it
once (`backend/runtime.py`), and each call exchanges CUDA tensors with no host copies.
Parameters are read from the module by name at every call, so loading new weights into it
needs no recompile. A Hugging Face causal LM is captured as `forward(input_ids) -> logits`
(see `frontend/models.py`).

`device` is where the program runs, in PyTorch's sense (`cpu`, `cuda`); each names a
`Target` in `TARGETS`: the stage to lower to and how to load the result. (A `Device` is
something else: a GPU the performance model describes, `perf/devices.py`.)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from xdsl.dialects.builtin import ModuleOp

if TYPE_CHECKING:
    from deplodock.backend.device import DeviceInfo
    from deplodock.backend.runtime import CudaProgram
    from deplodock.driver import Program

#: Runs the lowered program: (call inputs, the module's tensors by name) -> outputs.
Executor = Callable[[Sequence[torch.Tensor], Mapping[str, torch.Tensor]], list[torch.Tensor]]
#: Turns the lowered program and the capture's lifted constants into an executor.
Loader = Callable[["Program", dict[str, torch.Tensor]], Executor]


@dataclass(frozen=True)
class Target:
    """How `compile` runs a program on one device (`TARGETS`).

    `open()` runs before the capture, so a missing device fails at once with its own message,
    and returns the loader used after lowering to `stage` (the default stage; `stages`, when
    set, are the only ones the device can run).
    """

    stage: str
    open: Callable[[], Loader]
    stages: tuple[str, ...] | None = None


class CpuExecutor:
    """Interprets the program on numpy arrays at any stage (`cpu_runner.run_on_cpu`)."""

    def __init__(self, program: Program, constants: dict[str, torch.Tensor]):
        self.module = program.module
        self.constants = constants

    def __call__(
        self, inputs: Sequence[torch.Tensor], state: Mapping[str, torch.Tensor]
    ) -> list[torch.Tensor]:
        from deplodock.backend.cpu_runner import run_on_cpu
        from deplodock.frontend.weights import bind_arguments

        arguments = bind_arguments(self.module, inputs, state, self.constants)
        outputs = run_on_cpu(self.module, arguments)
        # `np.ascontiguousarray` returns at least 1-D: a 0-d result (a loss) keeps its shape
        # only through the reshape.
        return [torch.from_numpy(np.ascontiguousarray(out).reshape(out.shape)) for out in outputs]


class CudaExecutor:
    """Calls a loaded `CudaProgram` with tensors on `device`; outputs stay there.

    Inputs are moved to `device` (a no-op for contiguous inputs already there). Parameters
    already on `device` in the program's dtype are passed as they are, by pointer, so any
    update to them is seen by the next call. A parameter elsewhere (a module left on the CPU)
    is copied to `device` when first used and copied again only when it changes: its copy is
    keyed by the tensor's storage, dtype and version counter (in-place updates through the
    parameter, `load_state_dict`, optimizer steps; writes through `.data` do not count), so
    calls do not pay a host-to-device copy of the weights. Move the module to the GPU first
    to avoid keeping a second copy of it there.
    """

    def __init__(
        self,
        compiled: CudaProgram,
        module: ModuleOp,
        constants: dict[str, torch.Tensor],
        device: torch.device,
    ):
        from deplodock.dialects.element_types import torch_dtype
        from deplodock.frontend.weights import param_names

        self.compiled = compiled
        self.device = device
        self.constants = constants
        #: per `@forward` argument: the parameter's name, or None for a call input
        self.params = param_names(module)
        self.dtypes = [torch_dtype(t.element_type) for t in compiled.arg_types]
        self._staged: dict[str, tuple[tuple[Any, ...], torch.Tensor]] = {}

    def arguments(
        self, inputs: Sequence[torch.Tensor], state: Mapping[str, torch.Tensor]
    ) -> list[torch.Tensor]:
        """`@forward`'s arguments on the device: `inputs` in order, then parameters by name."""
        expected = self.params.count(None)
        if len(inputs) != expected:
            raise ValueError(f"the program takes {expected} input(s), got {len(inputs)}")
        remaining = iter(inputs)
        arguments = []
        for name, dtype in zip(self.params, self.dtypes, strict=True):
            if name is None:
                arguments.append(next(remaining).to(self.device, dtype).contiguous())
            else:
                arguments.append(self._parameter(name, state, dtype))
        return arguments

    def _parameter(
        self, name: str, state: Mapping[str, torch.Tensor], dtype: torch.dtype
    ) -> torch.Tensor:
        from deplodock.frontend.weights import WeightError

        tensor = state.get(name)
        if tensor is None:
            tensor = self.constants.get(name)
        if tensor is None:
            raise WeightError(f"no parameter or buffer named '{name}' in the module")
        if tensor.is_meta:
            raise WeightError(f"weight '{name}' is on the meta device: load weights first")
        tensor = tensor.detach()
        if tensor.device == self.device and tensor.dtype == dtype and tensor.is_contiguous():
            return tensor
        key = (tensor.device, tensor.data_ptr(), tensor.dtype, tensor._version)
        staged = self._staged.get(name)
        if staged is None or staged[0] != key:
            staged = (key, tensor.to(self.device, dtype).contiguous())
            self._staged[name] = staged
        return staged[1]

    def __call__(
        self, inputs: Sequence[torch.Tensor], state: Mapping[str, torch.Tensor]
    ) -> list[torch.Tensor]:
        return list(self.compiled(*self.arguments(inputs, state)))


def _open_cpu() -> Loader:
    return CpuExecutor


@dataclass(frozen=True)
class CudaTarget:
    """How `device="cuda"` finds its GPU and loads a program (the `Target.open` of cuda).

    Defaults: `backend.device.require_cuda` (raises `NoCudaDevice`, "no CUDA device: <why>"),
    `CudaProgram.load` (nvcc build, cached, loaded with pycuda) and the tensors on
    `cuda:<index>` of that device. The tests replace `require` and `load` with a CPU
    emulation of the runtime (and `tensor_device="cpu"`) to run this path without a GPU.
    """

    require: Callable[[], DeviceInfo] | None = None
    load: Callable[[ModuleOp, DeviceInfo], CudaProgram] | None = None
    tensor_device: str | None = None

    def __call__(self) -> Loader:
        from deplodock.backend.device import require_cuda
        from deplodock.backend.runtime import CudaProgram

        info = (self.require or require_cuda)()
        load = self.load or CudaProgram.load
        device = torch.device(self.tensor_device or f"cuda:{info.index}")

        def loader(program: Program, constants: dict[str, torch.Tensor]) -> Executor:
            return CudaExecutor(load(program.module, info), program.module, constants, device)

        return loader


TARGETS: dict[str, Target] = {
    "cpu": Target("kernel", _open_cpu),
    "cuda": Target("cuda", CudaTarget(), stages=("cuda",)),
}

#: Old names of this module -> their new ones (the old ones warn, then work).
_RENAMED = {"Device": "Target", "DEVICES": "TARGETS"}


def __getattr__(name: str) -> Any:
    """`api.Device` and `api.DEVICES`, deprecated: they were renamed so that "device" means
    hardware only (`Target`, `TARGETS`)."""
    if name in _RENAMED:
        new = _RENAMED[name]
        warnings.warn(
            f"deplodock.api.{name} is deprecated: use deplodock.api.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CompiledModule:
    """A captured and lowered module; calling it runs the program on `device`."""

    def __init__(
        self,
        program: Program,
        module: nn.Module,
        executor: Executor,
        device: str,
        output_dtypes: Sequence[torch.dtype],
    ):
        self.program = program
        self.module = module
        self.device = device
        self.executor = executor
        self._output_dtypes = list(output_dtypes)

    @property
    def ir(self) -> str:
        """The lowered program as text (MLIR, or CUDA C at the cuda level)."""
        from deplodock.driver import render

        return render(self.program.module, self.program.stage)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        state = dict(self.module.named_parameters(remove_duplicate=False))
        state |= dict(self.module.named_buffers(remove_duplicate=False))
        outputs = self.executor(inputs, state)
        tensors = tuple(  # `to` returns the tensor itself when the dtype already matches
            out.to(dtype) for out, dtype in zip(outputs, self._output_dtypes, strict=True)
        )
        return tensors[0] if len(tensors) == 1 else tensors


def compile(
    module: nn.Module,
    example_inputs: Sequence[torch.Tensor],
    device: str = "cpu",
    stage: str | None = None,
) -> CompiledModule:
    """Capture `module` on `example_inputs`, lower it to `stage` (by default the stage
    `device` runs: kernel on the CPU, cuda on the GPU) and return a callable.

    The device is checked first: without a GPU, `device="cuda"` raises `NoCudaDevice`
    ("no CUDA device: <why>") before anything is captured.
    """
    from deplodock.driver import Program, capture_causal_lm, lower_program
    from deplodock.frontend import capture as cap
    from deplodock.frontend import models

    if device not in TARGETS:
        raise ValueError(f"unknown device '{device}' (available: {', '.join(TARGETS)})")
    target = TARGETS[device]
    stage = stage or target.stage
    if target.stages is not None and stage not in target.stages:
        runs = ", ".join(target.stages)
        raise ValueError(f"device '{device}' runs the {runs} stage, not '{stage}'")
    loader = target.open()
    if models.is_causal_lm(module):  # its decoder layers are lowered once (deplodock.stamp)
        program, ep = capture_causal_lm(module, example_inputs)
    else:
        ep = cap.export(module, example_inputs)
        program = Program(cap.import_exported_program(ep), "torch", module, tuple(example_inputs))
    torch_module = program.torch_module
    assert torch_module is not None
    lower_program(program, stage)
    executor = loader(program, dict(ep.constants))
    return CompiledModule(program, torch_module, executor, device, output_dtypes(ep))


def output_dtypes(ep: Any) -> list[torch.dtype]:
    """The dtype of each output of an exported program, in order (what a call returns)."""
    from deplodock.frontend import capture as cap

    outputs = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    return [node.meta["val"].dtype for node in cap.flatten_outputs(outputs)]
