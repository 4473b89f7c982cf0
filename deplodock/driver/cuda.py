"""`deplodock run --device cuda`: build, run on the GPU, check against PyTorch, bench, profile.

The check runs the program once on the example inputs of the `-c` expression (fresh random
values for each `--seed`), with every buffer the program allocates poisoned with NaN first,
so an element no kernel writes fails the comparison. The reference is PyTorch in float64 on
the same device. Tolerances (max relative error): 1e-5 for fp32 programs without matrix
products, 1e-4 for fp32 programs with them (long sums round differently), 1e-2 for bf16/f16.
Bench and profile reuse the same loaded program and inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, ModuleOp

from deplodock.backend.cost import KernelCost
from deplodock.dialects.element_types import torch_dtype
from deplodock.dialects.queries import forward_function
from deplodock.driver import RunReport, check_tolerance, float64_outputs, lower_program
from deplodock.frontend.capture import to_numpy
from deplodock.numerics import (
    FP32_LONG_SUM_TOLERANCE,
    FP32_TOLERANCE,
    NARROW_FLOAT_TOLERANCE,
    max_relative_error,
)

MATMUL_OPS = frozenset({"torch.matmul", "torch.linear", "torch.bmm"})


def program_dtype(module: ModuleOp) -> str:
    """`bf16`, `f16` or `fp32`: the narrowest float type among `@forward`'s buffers."""
    forward = forward_function(module)
    types = [*forward.function_type.inputs.data, *forward.function_type.outputs.data]
    elements = {type(getattr(t, "element_type", None)) for t in types}
    if BFloat16Type in elements:
        return "bf16"
    if Float16Type in elements:
        return "f16"
    return "fp32"


def tolerance_for(module: ModuleOp) -> float:
    """Max relative error allowed, from the torch-level module (`numerics`): the narrow one
    for bf16/f16 programs; in fp32, the long-sum one when it multiplies matrices."""
    if program_dtype(module) != "fp32":
        return NARROW_FLOAT_TOLERANCE
    names = {op.name for op in module.walk()}
    matmul = bool(names & MATMUL_OPS) or any("attention" in n or "sdpa" in n for n in names)
    return FP32_LONG_SUM_TOLERANCE if matmul else FP32_TOLERANCE


def device_arguments(program: Any, device: str = "cuda") -> tuple[list[Any], list[Any]]:
    """(inputs, `@forward` arguments) on `device`: the program's example inputs, then its
    module's parameters by name. Moves the PyTorch module to `device` in place."""
    from deplodock.frontend.weights import param_names

    module = program.torch_module.to(device)
    named = dict(module.named_parameters()) | dict(module.named_buffers())
    inputs = [x.to(device).contiguous() for x in program.example_inputs]
    remaining = iter(inputs)
    arguments = [
        next(remaining) if name is None else named[name].detach().contiguous()
        for name in param_names(program.module)
    ]
    return inputs, arguments


def relative_error(actual: Any, expected: Any) -> float:
    """`max_relative_error` (the one metric every level is judged by) of two tensors."""
    return max_relative_error(to_numpy(actual), to_numpy(expected))


# --- the run ---------------------------------------------------------------------------------


@dataclass
class CheckReport(RunReport):
    """The check of a run on the GPU: its summary names the device, arch and kernel count."""

    device: str
    arch: str
    kernels: int

    @property
    def subject(self) -> str:
        return f"cuda program on {self.device} ({self.arch}), {self.kernels} kernel(s)"


@dataclass
class PreparedProgram:
    """A program built and loaded on the device, with its arguments there too.

    For a `-c` program the reference is its PyTorch module on `inputs`; a model (a `Program`
    with its own `reference`) brings its float64 outputs along in `expected`.
    """

    program: Any  # deplodock.driver.Program, at the cuda stage
    compiled: Any  # runtime.CudaProgram
    inputs: list[Any]
    arguments: list[Any]
    tolerance: float
    dtype: str
    costs: dict[str, KernelCost] = field(default_factory=dict)
    expected: list[Any] | None = None
    #: The performance model's time per kernel (us), when `--profile` asked for it.
    modeled_us: dict[str, float] = field(default_factory=dict)
    #: The program's compulsory bytes and useful flops (`perf.sol.Work`), with `--profile`.
    work: Any = None
    #: The device model `--profile` compares with (`perf.devices` key).
    model: str | None = None


def prepare_on_cuda(
    program: Any,
    device: Any,
    seed: int = 0,
    load: Callable[[ModuleOp, Any], Any] | None = None,
    tensor_device: str = "cuda",
    model: str | None = None,
    replay: Any = None,
) -> PreparedProgram:
    """Lower a torch-level `Program` to cuda (costs taken at the kernel level), build, load.

    `load(module, device)` defaults to `CudaProgram.load`; the tests pass a CPU emulation
    (with `tensor_device="cpu"`) to run this whole path without a GPU. With `model` (a
    device model key), each kernel's modeled time is kept too, so a measured profile can
    print the model's prediction beside each measurement. `replay` (`tune.replay`) gives
    tuned kernels their cached schedules.
    """
    import torch

    from deplodock.backend.cost import program_costs
    from deplodock.backend.runtime import CudaProgram
    from deplodock.frontend.expression import randomize_parameters
    from deplodock.perf.sol import program_work

    model_reference = getattr(program, "reference", None)
    if program.torch_module is None and model_reference is None:
        raise ValueError("run needs a PyTorch source (-c EXPR or a model) to compare against")
    tolerance, dtype = tolerance_for(program.module), program_dtype(program.module)
    tolerance = getattr(program, "tolerance", None) or tolerance
    lower_program(program, "kernel", replay=replay)
    costs = program_costs(program.module)
    kernel_module = program.module.clone() if model else None
    lower_program(program, "cuda")
    compiled = (load or CudaProgram.load)(program.module, device)
    modeled = modeled_times(kernel_module, model, compiled) if kernel_module and model else {}
    work = program_work(kernel_module) if kernel_module and model else None
    if model_reference is None:
        randomize_parameters(program.torch_module, seed)
        inputs, arguments = device_arguments(program, tensor_device)
        return PreparedProgram(
            program,
            compiled,
            inputs,
            arguments,
            tolerance,
            dtype,
            costs,
            None,
            modeled,
            work,
            model,
        )
    values, expected = model_reference(seed)  # a model: checkpoint (or seeded) weights
    arguments = [
        torch.from_numpy(np.ascontiguousarray(v)).to(tensor_device, torch_dtype(t.element_type))
        for v, t in zip(values, compiled.arg_types, strict=True)
    ]
    expected_tensors = [torch.from_numpy(np.asarray(e)) for e in expected]
    return PreparedProgram(
        program,
        compiled,
        [],
        arguments,
        tolerance,
        dtype,
        costs,
        expected_tensors,
        modeled,
        work,
        model,
    )


def modeled_times(kernel_module: ModuleOp, model: str, compiled: Any) -> dict[str, float]:
    """Each kernel's modeled time (us) on device model `model`, with ptxas' registers."""
    from deplodock.perf.devices import device_model
    from deplodock.perf.profile import model_program

    registers = {name: r.registers for name, r in compiled.build.kernels.items()}
    estimate = model_program(kernel_module, device_model(model), registers)
    return {e.name: e.time_us for e, _ in estimate.kernels}


def check_on_cuda(prepared: PreparedProgram, device: Any) -> CheckReport:
    """One poisoned, launch-by-launch checked run against the float64 reference."""
    start = time.perf_counter()
    outputs = prepared.compiled(*prepared.arguments, poison=True, check=True)
    seconds = time.perf_counter() - start
    expected = prepared.expected
    if expected is None:
        expected = float64_outputs(prepared.program.torch_module, prepared.inputs)
    if len(outputs) != len(expected):
        raise ValueError(f"the program returns {len(outputs)} outputs, PyTorch {len(expected)}")
    errors = [relative_error(a, e) for a, e in zip(outputs, expected, strict=True)]
    tolerance, own = check_tolerance(
        prepared.tolerance, prepared.program.torch_module, prepared.inputs, expected
    )
    arch, kernels = prepared.compiled.build.arch, len(prepared.compiled.kernels)
    return CheckReport(
        "cuda", errors, tolerance, seconds, device.name, arch, kernels, pytorch_error=own,
        weights=prepared.program.weights,
    )  # fmt: skip


def bench_on_cuda(
    prepared: PreparedProgram,
    device: Any,
    warmup: int,
    iters: int,
    compile_fn: Callable[..., Any] | None = None,
    timing: str = "latency",
) -> tuple[dict[str, Any], int]:  # pragma: no cover - needs a GPU
    """Eager vs torch.compile vs deplodock (see `backend/benchmark.py`); (results, flush bytes).

    `timing`: `latency` or `device` (`benchmark.TIMINGS`).
    """
    from deplodock.backend import benchmark as B

    if timing not in B.TIMINGS:
        raise ValueError(f"unknown timing {timing!r} (expected {' or '.join(B.TIMINGS)})")
    flush = B.L2Flusher(device.l2_bytes)
    args = prepared.arguments
    kwargs = {"compile_fn": compile_fn} if compile_fn is not None else {}
    if prepared.expected is not None:  # a model: no PyTorch module on the device to race
        contenders = [B.Contender(B.DEPLODOCK, lambda: prepared.compiled(*args))]
    else:
        contenders = B.torch_contenders(
            prepared.program.torch_module,
            prepared.inputs,
            lambda: prepared.compiled(*args),
            **kwargs,
        )
    spin = B.GpuSpin() if timing == "device" else None

    def before_each() -> None:
        flush()
        if spin is not None:
            spin()

    results = B.run_interleaved(contenders, B.CudaEventTimer(), warmup, iters, before_each)
    return results, flush.nbytes


def profile_on_cuda(
    prepared: PreparedProgram, device: Any, warmup: int, iters: int
) -> str:  # pragma: no cover - needs a GPU
    """The `--profile` table (ceilings measured once per device and cached)."""
    from deplodock.backend.benchmark import GpuSpin, L2Flusher
    from deplodock.backend.device import load_ceilings, measure_ceilings
    from deplodock.backend.profile import format_profile_table, kernel_profiles, time_kernels

    ceilings = load_ceilings(device.name, measure_ceilings)
    compiled = prepared.compiled
    flush, spin = L2Flusher(device.l2_bytes), GpuSpin()
    times = time_kernels(compiled, prepared.arguments, warmup, iters, flush, spin)
    launches = [(s.name, s.grid, s.block) for s in compiled.launches]
    dynamic = {s.name: s.smem for s in compiled.launches}
    rows = kernel_profiles(
        launches, times, prepared.costs, compiled.build.kernels, prepared.modeled_us, dynamic
    )
    table = format_profile_table(rows, ceilings, prepared.dtype, device.name)
    if prepared.work is None or prepared.model is None:
        return table
    from deplodock.perf.devices import device_model
    from deplodock.perf.sol import sol_line

    seconds = sum(r.time_ms for r in rows) * 1e-3  # every launch of the program, timed
    how = "measured (every launch's event time, summed)"
    return f"{table}\n  {sol_line(device_model(prepared.model), prepared.work, seconds, how)}"


def run_on_cuda(
    program: Any,
    seed: int = 0,
    bench: bool = False,
    profile: bool = False,
    warmup: int = 10,
    iters: int = 50,
    out: Callable[[str], object] = print,
    timing: str = "latency",
    replay: Any = None,
) -> int:
    """What `deplodock run --device cuda` does; 0 when the outputs match PyTorch."""
    from deplodock.backend.benchmark import format_bench_table
    from deplodock.backend.device import require_cuda
    from deplodock.perf.devices import model_key_for

    device = require_cuda()
    model = model_key_for(device.name) if profile else None
    prepared = prepare_on_cuda(program, device, seed, model=model, replay=replay)
    report = check_on_cuda(prepared, device)
    out(report.summary())
    if bench:  # pragma: no cover - needs a GPU
        results, flushed = bench_on_cuda(prepared, device, warmup, iters, timing=timing)
        out(format_bench_table(results, warmup, iters, flushed, timing))
    if profile:  # pragma: no cover - needs a GPU
        out(profile_on_cuda(prepared, device, warmup, iters))
    return 0 if report.ok else 1
