"""The whole program as one CUDA translation unit (`deplodock-opt -t cuda`).

Every `cuda.kernel`'s source, then `extern "C" int deplodock_forward(...)`: the host side of
`@forward`. Its parameters are device pointers to the inputs (in `@forward` argument order),
then to the outputs (in result order, allocated by the caller); it `cudaMalloc`s the other
buffers, launches the kernels in order, checks each launch, frees the intermediates and
returns the first CUDA error (0 on success). A kernel with more than 48 KiB of shared memory
opts in to it (`cudaFuncSetAttribute`) once, before the first launch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr
from xdsl.ir import BlockArgument, SSAValue
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.target import Target

from deplodock.backend.device_header import device_part
from deplodock.dialects import cuda
from deplodock.dialects.element_types import buffer_bytes
from deplodock.dialects.hardware import needs_dynamic_shared
from deplodock.dialects.queries import find_function, unique_name
from deplodock.passes.kernel_to_cuda.exprs import element_c_type
from deplodock.passes.kernel_to_cuda.printer import DEVICE_HEADER, RESERVED_NAMES

CHECK_MACRO = """\
#define DEPLODOCK_CHECK(call)                                \\
  do {                                                       \\
    cudaError_t deplodock_err_ = (call);                     \\
    if (deplodock_err_ != cudaSuccess) {                     \\
      status = (int)deplodock_err_;                          \\
      goto cleanup;                                          \\
    }                                                        \\
  } while (0)"""


class CudaSourceError(DiagnosticException):
    """The module is not a cuda-level program that can be printed as one translation unit."""


class _Names:
    def __init__(self) -> None:
        self.used: set[str] = {"status", "cleanup", *RESERVED_NAMES}

    def take(self, hint: str | None, fallback: str) -> str:
        base = re.sub(r"\W", "_", hint or "") or fallback
        if base[0].isdigit():
            base = f"{fallback}_{base}"
        return unique_name(base, self.used)


def _arg_hint(fn: func.FuncOp, i: int) -> str | None:
    arg = fn.body.block.args[i]
    if fn.arg_attrs is not None:
        attrs = fn.arg_attrs.data[i].data
        for key in ("deplodock.input", "deplodock.param"):
            if isinstance(attrs.get(key), StringAttr):
                return attrs[key].data  # type: ignore[union-attr]
    return arg.name_hint


def host_function(module: ModuleOp, fn: func.FuncOp) -> str:
    """`deplodock_forward`: the host sequence of `@forward` in CUDA C++."""
    names = _Names()
    ptr: dict[SSAValue, str] = {}
    params: list[str] = []
    for i, arg in enumerate(fn.body.block.args):
        if not isinstance(arg.type, MemRefType):
            raise CudaSourceError(f"@forward argument #{i} is not a memref: {arg.type}")
        ptr[arg] = names.take(_arg_hint(fn, i), f"in{i}")
        params.append(f"const {element_c_type(arg.type.element_type)}* {ptr[arg]}")
    ret = fn.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    outputs: list[tuple[str, SSAValue]] = []
    for i, value in enumerate(ret.arguments):
        assert isinstance(value.type, MemRefType)
        out = names.take(f"out{i}", f"out{i}")
        params.append(f"{element_c_type(value.type.element_type)}* {out}")
        outputs.append((out, value))

    decls: list[str] = []
    opt_ins: dict[str, str] = {}  # per kernel past the static shared memory, once
    body: list[str] = []
    frees: list[str] = []
    copies: list[tuple[str, SSAValue]] = []
    for op in fn.body.block.ops:
        match op:
            case cuda.AllocOp():
                bound = [o for o, v in outputs if v is op.result]
                if bound:  # a returned buffer: the caller's output pointer
                    ptr[op.result] = bound[0]
                    continue
                var = names.take(op.result.name_hint, "buf")
                t = op.result.type
                decls.append(f"  {element_c_type(t.element_type)}* {var} = nullptr;")
                body.append(f"  DEPLODOCK_CHECK(cudaMalloc((void**)&{var}, {buffer_bytes(t)}));")
                frees.append(f"  cudaFree({var});")
                ptr[op.result] = var
            case cuda.LaunchOp():
                kernel = _kernel(module, op.callee.string_value())
                if needs_dynamic_shared(smem := kernel.smem.value.data):
                    opt_in = f"{kernel.sym_name.data}, cudaFuncAttributeMaxDynamicSharedMemorySize"
                    opt_ins[kernel.sym_name.data] = (
                        f"  DEPLODOCK_CHECK(cudaFuncSetAttribute({opt_in}, {smem}));"
                    )
                body.append(_launch(kernel, op, ptr))
            case func.ReturnOp():
                pass
            case _:
                raise CudaSourceError(f"@forward: {op.name} has no host translation")
    for out, value in outputs:
        if ptr.get(value) != out:
            copies.append((out, value))
    for out, value in copies:
        assert isinstance(value.type, MemRefType)
        body.append(
            f"  DEPLODOCK_CHECK(cudaMemcpy({out}, {ptr[value]}, {buffer_bytes(value.type)}, "
            "cudaMemcpyDeviceToDevice));"
        )
    lines = [
        CHECK_MACRO,
        "",
        f'extern "C" int deplodock_forward({", ".join(params)}) {{',
        "  int status = 0;",
        *decls,
        *opt_ins.values(),
        *body,
        "cleanup:",
        *frees,
        "  return status;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _launch(kernel: cuda.KernelOp, op: cuda.LaunchOp, ptr: dict[SSAValue, str]) -> str:
    name = kernel.sym_name.data
    args = []
    for value, is_const in zip(op.args, kernel.readonly_args, strict=True):
        text = ptr[value]
        if not is_const and isinstance(value, BlockArgument):  # a `const T*` input
            assert isinstance(value.type, MemRefType)
            text = f"const_cast<{element_c_type(value.type.element_type)}*>({text})"
        args.append(text)
    g, b, s = kernel.grid.value.data, kernel.block.value.data, kernel.smem.value.data
    return (
        f"  {name}<<<{g}, {b}, {s}>>>({', '.join(args)});\n  DEPLODOCK_CHECK(cudaGetLastError());"
    )


def _kernel(module: ModuleOp, name: str) -> cuda.KernelOp:
    for op in module.ops:
        if isinstance(op, cuda.KernelOp) and op.sym_name.data == name:
            return op
    raise CudaSourceError(f"no cuda.kernel @{name} in the module")


def kernels_text(
    kernels: Sequence[cuda.KernelOp], first_headers: Sequence[str] = (), banner: bool = True
) -> str:
    """The kernels as one piece of C that nvcc builds alone: `first_headers` and every
    header the kernels need, each included once, except deplodock's device header, whose
    device part comes inline instead (`device_header`: no include path to set); then each
    kernel's source (after a comment giving its launch shape when `banner`)."""
    headers = dict.fromkeys([*first_headers, *(h for k in kernels for h in k.header_names)])
    lines = [f"#include <{h}>" for h in headers if h != DEVICE_HEADER] + [""]
    if DEVICE_HEADER in headers:
        lines += [f"// deplodock's device primitives (backend/{DEVICE_HEADER}, nvcc's side)"]
        lines += [device_part()]
    for k in kernels:
        if banner:
            lines.append(
                f"// @{k.sym_name.data}: grid {k.grid.value.data}, block {k.block.value.data}, "
                f"dynamic smem {k.smem.value.data} bytes"
            )
        lines += [*k.source.data.rstrip("\n").splitlines(), ""]
    return "\n".join(lines)


def module_to_cuda_source(module: ModuleOp) -> str:
    """The CUDA translation unit of a cuda-level module (kernel-level modules are lowered)."""
    if any(op.dialect_name() == "kernel" for op in module.walk()):
        from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass

        module = module.clone()
        ConvertKernelToCudaPass().apply(Context(), module)
    kernels = [op for op in module.ops if isinstance(op, cuda.KernelOp)]
    forward = find_function(module)
    parts = [
        f"// Generated by deplodock: {len(kernels)} kernel(s)"
        + (" and the host entry point deplodock_forward." if forward else "."),
        kernels_text(kernels, ["cuda_runtime.h"]),
    ]
    if forward is not None:
        parts.append(host_function(module, forward))
    return "\n".join(parts)


@dataclass(frozen=True)
class CudaTarget(Target):
    """`-t cuda`: print the module as one CUDA C++ translation unit."""

    name = "cuda"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(module_to_cuda_source(module))
