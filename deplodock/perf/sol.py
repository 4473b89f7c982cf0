"""% of speed-of-light: the one definition every report, the CLI, the explorer and the suites use.

A program's *ideal time* is what no implementation on the device can beat:

    ideal = max(compulsory bytes / datasheet DRAM bandwidth,
                useful flops / datasheet peak of the fastest dense path for the dtype)

- compulsory bytes: the *program's* inputs (activations and parameters) read once and its
  outputs written once, whatever its kernels pass between them (`program_work`);
- useful flops: the float operations its kernels' IR does (`backend.cost`), where the two
  refinement products of tf32x3 count none: they buy fp32 accuracy, not arithmetic;
- the peak: fp32 programs the FP32 FMA peak (tf32x3 runs on tensor cores and may beat it: a
  % SOL over 100 says so, it is not capped), bf16 and fp16 programs the dense tensor-core
  peak, both from the device's datasheet (`devices.py`), never an achievable fraction.

    % SOL = ideal / the whole time of the program, launches included

measured (a GPU run) or modeled (`perf.model`, always labelled so). A kernel's own % SOL is
the same rule applied to the kernel as a program: its buffers read and written once, its
flops, its time with its launch. The model's busy-time ratio (ideal over the time the SMs
are busy, no launch) is a different figure and is only ever shown labelled "busy".

`family_of_work` names which measured error band (`calibration.json`'s `error_bands`,
`model.error_band`) a program's modeled figures carry: GEMM fp32, GEMM bf16, attention or
memory-bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import BFloat16Type, Float16Type, MemRefType, ModuleOp
from xdsl.ir import Attribute

from deplodock.backend.cost import kernel_cost, launch_counts
from deplodock.dialects import kernel
from deplodock.dialects.element_types import buffer_bytes
from deplodock.perf.devices import Device

#: The dtypes whose fastest dense path is the tensor cores' (the rest: the FP32 FMA pipe).
TENSOR_DTYPES = frozenset({"bf16", "fp16"})


@dataclass(frozen=True)
class Work:
    """What a program (or one kernel) must do at the least."""

    #: Inputs read once plus outputs written once, bytes.
    compulsory_bytes: float
    #: Float operations, tf32x3's refinement products excluded.
    flops: float
    #: "fp32", "bf16" or "fp16": which datasheet peak bounds the flops.
    dtype: str = "fp32"
    #: Whether the work holds an exponential next to its products (softmax inside a
    #: contraction program: attention's error band, not a GEMM's).
    exponentials: bool = False


def peak_flops_per_s(device: Device, dtype: str) -> float:
    """The datasheet peak of the fastest dense path for `dtype` (module docstring)."""
    return device.tensor_flops_per_s if dtype in TENSOR_DTYPES else device.fp32_flops_per_s


def ideal_seconds(device: Device, work: Work) -> float:
    """The larger of the bytes at the datasheet DRAM bandwidth and the flops at the peak."""
    return max(
        work.compulsory_bytes / device.dram_bytes_per_s,
        work.flops / peak_flops_per_s(device, work.dtype),
    )


def sol_fraction(device: Device, work: Work, seconds: float) -> float:
    """Ideal time over the whole time `seconds` (launches included); 0 when none."""
    return ideal_seconds(device, work) / seconds if seconds > 0 else 0.0


def bound_of(device: Device, work: Work) -> str:
    """Which roof sets the ideal: "memory" or "compute"."""
    memory = work.compulsory_bytes / device.dram_bytes_per_s
    return "memory" if memory >= work.flops / peak_flops_per_s(device, work.dtype) else "compute"


def dtype_of_types(types: list[Attribute]) -> str:
    """`bf16` or `fp16` when a buffer holds 16-bit floats, else `fp32`."""
    elements = [t.element_type for t in types if isinstance(t, MemRefType)]
    if any(isinstance(e, BFloat16Type) for e in elements):
        return "bf16"
    if any(isinstance(e, Float16Type) for e in elements):
        return "fp16"
    return "fp32"


def _forward(module: ModuleOp) -> func.FuncOp | None:
    return next(
        (op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "forward"),
        None,
    )


def _has_exponential(fn: kernel.FuncOp) -> bool:
    return any(op.name in ("math.exp", "math.exp2") for op in fn.walk())


def program_work(module: ModuleOp, flops: dict[str, float] | None = None) -> Work:
    """The work of a kernel-level program: `@forward`'s arguments and results once each,
    and every launch's flops (`flops`: per kernel, when the caller has counted them)."""
    forward = _forward(module)
    if forward is None:
        raise ValueError("the module has no @forward: not a program")
    types = [*forward.function_type.inputs.data, *forward.function_type.outputs.data]
    launches = launch_counts(module)
    total, exponentials = 0.0, False
    for fn in module.ops:
        if isinstance(fn, kernel.FuncOp) and fn.sym_name.data in launches:
            name = fn.sym_name.data
            count = flops[name] if flops and name in flops else kernel_cost(fn).flops
            total += count * launches[name]
            exponentials |= _has_exponential(fn)
    compulsory = sum(buffer_bytes(t) for t in types if isinstance(t, MemRefType))
    return Work(compulsory, total, dtype_of_types(types), exponentials)


def kernel_work(fn: kernel.FuncOp, compulsory_bytes: float, flops: float) -> Work:
    """One kernel's work as if it were a program (its buffers' compulsory bytes as traced)."""
    types = [arg.type for arg in fn.body.block.args]
    return Work(compulsory_bytes, flops, dtype_of_types(types), _has_exponential(fn))


#: Flops per compulsory byte from which a program counts as a contraction (a GEMM or
#: attention) for its error band: elementwise ops and norms do a few flops per 4-byte
#: element, a GEMM of 32 rows already about 16; a matrix-vector product (0.5) stays
#: memory-bound, which it is.
CONTRACTION_INTENSITY = 4.0


def family_of_work(work: Work) -> str:
    """The error-band family (`calibration.json`): "memory-bound" under
    `CONTRACTION_INTENSITY`, else "attention" when the program exponentiates (a softmax
    beside its products), else "GEMM fp32" or "GEMM bf16" (fp16 goes with bf16: the same
    tensor-core path)."""
    if work.compulsory_bytes and work.flops / work.compulsory_bytes < CONTRACTION_INTENSITY:
        return "memory-bound"
    if work.exponentials:
        return "attention"
    return "GEMM fp32" if work.dtype == "fp32" else "GEMM bf16"


def sol_line(device: Device, work: Work, seconds: float, how: str) -> str:
    """One line for a report: `program: 42.0% of speed-of-light, measured (120.0 us against
    an ideal 50.4 us: 2.10 MB, 0.500 GFLOP fp32 on the NVIDIA H100 datasheet)`; `how` is
    "measured" or a band label ("modeled; GEMM fp32 +-12 % on ...")."""
    ideal = ideal_seconds(device, work)
    return (
        f"program: {100 * sol_fraction(device, work, seconds):.1f}% of speed-of-light, {how} "
        f"({1e6 * seconds:.1f} us against an ideal {1e6 * ideal:.1f} us: "
        f"{work.compulsory_bytes / 1e6:.2f} MB, {work.flops / 1e9:.3f} GFLOP {work.dtype} on the "
        f"{device.name.removesuffix(' (modeled)')} datasheet)"
    )
