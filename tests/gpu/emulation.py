"""A CPU stand-in for pycuda, so the GPU runtime's host side runs without a GPU.

`EmulatedModule` plays `pycuda.driver.module_from_buffer(cubin)`: its functions launch the
kernels of the CPU SIMT emulation (`backend/cpu_runner.py`), whose `launch_<kernel>(void**
args, grid, block)` takes the same pointer array a CUDA launch does. `emulated_load` is a
drop-in for `CudaProgram.load` with tensors on the CPU, and `FAKE_DEVICE` the device it
pretends to be.
"""

from __future__ import annotations

import ctypes

from xdsl.dialects.builtin import ModuleOp

from deplodock.backend import cpu_runner
from deplodock.backend.build import Build, kernel_ops, kernels_source
from deplodock.backend.device import DeviceInfo
from deplodock.backend.runtime import CudaProgram, Driver


class EmulatedError(RuntimeError):
    pass


class EmulatedFunction:
    def __init__(self, lib: ctypes.CDLL, name: str, fail: bool = False):
        self.fn = cpu_runner.launcher(lib, name)
        self.fail = fail
        self.calls: list[tuple[tuple[int, ...], tuple[int, ...], int]] = []

    def prepare(self, fmt: str) -> EmulatedFunction:
        assert set(fmt) == {"P"}
        self.nargs = len(fmt)
        return self

    def prepared_call(self, grid, block, *pointers: int, shared_size: int = 0) -> None:
        assert len(pointers) == self.nargs and all(isinstance(p, int) for p in pointers)
        self.calls.append((grid, block, shared_size))
        if self.fail:
            raise EmulatedError("an illegal memory access was encountered")
        args = (ctypes.c_void_p * len(pointers))(*pointers)
        if self.fn(args, grid[0], block[0], 0) != 0:
            raise EmulatedError("bad launch configuration")


class EmulatedModule:
    """What `pycuda.driver.module_from_buffer(cubin)` returns, for the CPU emulation."""

    def __init__(self, source: str, names: list[str], failing: tuple[str, ...] = ()):
        self.lib = cpu_runner.load(source, names)
        self.names = names
        self.failing = failing
        self.functions: dict[str, EmulatedFunction] = {}

    def get_function(self, name: str) -> EmulatedFunction:
        if name not in self.names:
            raise EmulatedError(f"named symbol not found: {name}")
        self.functions[name] = EmulatedFunction(self.lib, name, name in self.failing)
        return self.functions[name]


DRIVER = Driver(EmulatedError, lambda: None)

FAKE_DEVICE = DeviceInfo(0, "Emulated GPU", (9, 0), 132, 50 * 2**20, 80 * 2**30, "d", "t", "n")


def emulated_load(module: ModuleOp, device: DeviceInfo) -> CudaProgram:
    """`CudaProgram.load` on the emulation: the same source, run on CPU tensors."""
    build = Build(b"", device.arch, (), "none", "key")
    return CudaProgram(module, build, emulated_module(module), DRIVER, "cpu")


def emulated_module(module: ModuleOp, failing: tuple[str, ...] = ()) -> EmulatedModule:
    """The cuda-level `module`'s kernels, built for the emulation as one library."""
    kernels = kernel_ops(module)
    names = [k.sym_name.data for k in kernels]
    return EmulatedModule(kernels_source(module), names, failing)
