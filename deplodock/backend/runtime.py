"""Run a cuda-level program on the GPU with pycuda, exchanging torch tensors in place.

The program's kernels are built into one cubin (`backend/build.py`) and loaded with pycuda
into the *primary* context of the device, the one PyTorch's runtime uses, so pointers from
`tensor.data_ptr()` are valid kernel arguments and nothing is copied through the host:
inputs and parameters are the caller's CUDA tensors, intermediates and outputs are
`torch.empty` tensors, and `@forward`'s host sequence (`cuda.alloc`, `cuda.launch`) is
replayed in order on the default stream, which is PyTorch's too. Every driver call is
checked; with `check=True` the runtime synchronizes after each launch, so an asynchronous
fault (an illegal address) is reported with the name of the kernel that caused it.

pycuda is the `gpu` extra and is imported only here, when a program is loaded.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    MemRefType,
    ModuleOp,
)
from xdsl.ir import Attribute, SSAValue

from deplodock.backend.build import Build, build_module, kernel_ops
from deplodock.backend.device import DeviceInfo
from deplodock.dialects import cuda
from deplodock.dialects.element_types import torch_dtype
from deplodock.dialects.hardware import needs_dynamic_shared
from deplodock.dialects.queries import forward_function


class KernelLaunchError(RuntimeError):
    """A kernel failed to launch or faulted; the message names it."""


def poison_(tensor: Any) -> Any:
    """NaN for floats, the minimum for integers: an element a kernel forgot shows up."""
    import torch

    if tensor.is_floating_point():
        return tensor.fill_(float("nan"))
    if tensor.dtype == torch.bool:
        return tensor.fill_(True)
    return tensor.fill_(torch.iinfo(tensor.dtype).min)


_CONTEXTS: dict[int, Any] = {}


def primary_context(device_index: int) -> Any:  # pragma: no cover - needs a GPU
    """Make PyTorch's (primary) context of the device current for pycuda, once per process."""
    if device_index in _CONTEXTS:
        return _CONTEXTS[device_index]
    import pycuda.driver as drv
    import torch

    torch.cuda.init()
    torch.empty(1, device=f"cuda:{device_index}")  # the runtime creates the primary context
    drv.init()
    context = drv.Device(device_index).retain_primary_context()
    context.push()
    _CONTEXTS[device_index] = context

    def release() -> None:
        try:
            context.pop()
        except Exception:
            pass

    atexit.register(release)
    return context


@dataclass(frozen=True)
class Driver:
    """The few driver entry points the runtime uses (pycuda's, or a CPU stand-in in tests)."""

    error: type[BaseException]
    synchronize: Callable[[], object]
    smem_attribute: Any = None  # the function attribute that raises the dynamic smem limit


def pycuda_driver() -> Driver:  # pragma: no cover - needs pycuda
    import pycuda.driver as drv

    return Driver(
        drv.Error,
        drv.Context.synchronize,
        drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES,
    )


@dataclass
class _Alloc:
    slot: int
    shape: tuple[int, ...]
    dtype: Any


@dataclass
class _Launch:
    name: str
    function: Any
    slots: list[int]
    grid: int
    block: int
    smem: int


class CudaProgram:
    """A cuda-level module loaded on the device; call it with CUDA tensors (inputs, params)."""

    def __init__(
        self,
        module: ModuleOp,
        build: Build,
        cuda_module: Any,
        driver: Driver | None = None,
        device: str = "cuda",
    ):
        self.build = build
        self.cuda_module = cuda_module  # keeps the loaded cubin alive
        self.driver = driver or pycuda_driver()
        self.device = device
        forward = forward_function(module)
        self.kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, cuda.KernelOp)}
        slots: dict[SSAValue, int] = {a: i for i, a in enumerate(forward.body.block.args)}
        self.arg_types = [_memref(a.type, f"@forward argument #{a.index}") for a in forward.args]
        self.steps: list[_Alloc | _Launch] = []
        functions: dict[str, Any] = {}
        for op in forward.body.block.ops:
            if isinstance(op, cuda.AllocOp):
                t = _memref(op.result.type, "cuda.alloc")
                slots[op.result] = len(slots)
                dtype = torch_dtype(t.element_type)
                self.steps.append(_Alloc(slots[op.result], tuple(t.get_shape()), dtype))
            elif isinstance(op, cuda.LaunchOp):
                name = op.callee.string_value()
                kernel = self.kernels[name]
                if name not in functions:
                    functions[name] = self._load_function(kernel)
                launch = _Launch(
                    name,
                    functions[name],
                    [slots[v] for v in op.args],
                    kernel.grid.value.data,
                    kernel.block.value.data,
                    kernel.smem.value.data,
                )
                self.steps.append(launch)
            elif not isinstance(op, func.ReturnOp):
                raise ValueError(f"@forward: {op.name} is not a cuda host op")
        ret = forward.body.block.last_op
        assert isinstance(ret, func.ReturnOp)
        self.outputs = [slots[v] for v in ret.arguments]

    @classmethod
    def load(cls, module: ModuleOp, device: DeviceInfo) -> CudaProgram:  # pragma: no cover
        """Build (or find in the cache) the module's cubin and load it on `device`."""
        import pycuda.driver as drv

        primary_context(device.index)
        if not kernel_ops(module):  # nothing to build: @forward only passes buffers through
            return cls(module, Build(b"", device.arch, (), "", ""), None)
        build = build_module(module, device.capability)
        try:
            cuda_module = drv.module_from_buffer(build.cubin)
        except drv.Error as error:
            raise KernelLaunchError(f"cannot load the cubin ({build.arch}): {error}") from None
        return cls(module, build, cuda_module)

    def _load_function(self, kernel: cuda.KernelOp) -> Any:
        name = kernel.sym_name.data
        try:
            function = self.cuda_module.get_function(name)
            smem = kernel.smem.value.data
            if needs_dynamic_shared(smem):  # past the static limit a kernel must opt in
                function.set_attribute(self.driver.smem_attribute, smem)
            return function.prepare("P" * len(kernel.arg_types))
        except self.driver.error as error:
            raise KernelLaunchError(
                f"kernel @{name}: cannot load it from the cubin: {error}"
            ) from None

    @property
    def launches(self) -> list[_Launch]:
        return [s for s in self.steps if isinstance(s, _Launch)]

    def _check_arguments(self, arguments: Sequence[Any]) -> None:
        if len(arguments) != len(self.arg_types):
            raise ValueError(f"@forward takes {len(self.arg_types)} tensors, got {len(arguments)}")
        for i, (a, t) in enumerate(zip(arguments, self.arg_types, strict=True)):
            shape, dtype = tuple(t.get_shape()), torch_dtype(t.element_type)
            if a.device.type != self.device or not a.is_contiguous():
                raise ValueError(
                    f"@forward argument #{i} must be a contiguous {self.device} tensor"
                )
            if tuple(a.shape) != shape or a.dtype != dtype:
                raise ValueError(
                    f"@forward argument #{i}: expected {dtype} {shape}, got {a.dtype} "
                    f"{tuple(a.shape)}"
                )

    def __call__(
        self,
        *arguments: Any,
        poison: bool = False,
        check: bool = False,
        before_launch: Callable[[int], object] | None = None,
        after_launch: Callable[[int], object] | None = None,
    ) -> list[Any]:
        """Run `@forward` on CUDA tensors; returns its outputs as CUDA tensors.

        `poison` fills fresh buffers with NaN, `check` synchronizes after every launch (to
        name a faulting kernel); `before_launch(i)`/`after_launch(i)` run around launch `i`
        (the profiler records CUDA events there).
        """
        import torch

        self._check_arguments(arguments)
        values: list[Any] = [*arguments, *([None] * sum(isinstance(s, _Alloc) for s in self.steps))]
        index = 0
        for step in self.steps:
            if isinstance(step, _Alloc):
                values[step.slot] = torch.empty(step.shape, dtype=step.dtype, device=self.device)
                if poison:
                    poison_(values[step.slot])
                continue
            if before_launch is not None:
                before_launch(index)
            pointers = [values[s].data_ptr() for s in step.slots]
            try:
                step.function.prepared_call(
                    (step.grid, 1, 1), (step.block, 1, 1), *pointers, shared_size=step.smem
                )
                if check:
                    self.driver.synchronize()
            except self.driver.error as error:
                raise KernelLaunchError(
                    f"kernel @{step.name} (grid {step.grid}, block {step.block}) failed: {error}"
                ) from None
            if after_launch is not None:
                after_launch(index)
            index += 1
        return [values[s] for s in self.outputs]


def _memref(t: Attribute, what: str) -> MemRefType:
    if not isinstance(t, MemRefType):
        raise TypeError(f"{what} is not a memref: {t}")
    return t
