"""`convert-kernel-to-cuda`: print every `kernel.func` to CUDA C and keep it as `cuda.kernel`.

The kernel body becomes its CUDA C source (the printer, `passes/kernel_to_cuda/`), and
what the host side needs to know about it becomes properties of the `cuda.kernel`: the
launch shape, which arguments the kernel only reads (`const T*`), the headers it needs.
The host ops `kernel.alloc` and `kernel.launch` become their `cuda` twins. After this pass
the module is the executable program: nothing of the `kernel` dialect is left.

    kernel.func @scale(%x: memref<128xf32>, %y: memref<128xf32>) grid 1 block 128 { ... }

becomes

    cuda.kernel @scale grid 1 block 128 smem 0 args [memref<128xf32>, memref<128xf32>]
        readonly [true, false] includes [] source "extern \\22C\\22 __global__ void ..."
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import cuda, kernel
from deplodock.passes.host_ops import LowerHostOps
from deplodock.passes.kernel_to_cuda.exprs import PrinterError
from deplodock.passes.kernel_to_cuda.printer import print_kernel

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class KernelFuncToCuda(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.FuncOp, rewriter: PatternRewriter) -> None:
        name = op.sym_name.data
        if not _C_IDENTIFIER.fullmatch(name):
            raise PassFailedException(
                f"convert-kernel-to-cuda: kernel name '{name}' is not a C identifier"
            )
        try:
            printed = print_kernel(op)
        except PrinterError as error:
            raise PassFailedException(f"convert-kernel-to-cuda: @{name}: {error}") from error
        arg_types = [t for t in op.arg_types if isinstance(t, MemRefType)]
        new = cuda.KernelOp(
            name,
            op.grid_size,
            op.block_size,
            printed.dynamic_shared_bytes,
            arg_types,
            printed.source,
            printed.readonly,
            printed.includes,
        )
        rewriter.replace(op, new, [])


@dataclass(frozen=True)
class ConvertKernelToCudaPass(ModulePass):
    """Lowers the `kernel` dialect to `cuda`: kernels become CUDA C source strings."""

    name = "convert-kernel-to-cuda"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = [KernelFuncToCuda(), LowerHostOps("kernel", cuda.AllocOp, cuda.LaunchOp)]
        PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns, dce_enabled=False), apply_recursively=False
        ).rewrite_module(op)
        left = sorted({o.name for o in op.walk() if o.dialect_name() == "kernel"})
        if left:
            raise PassFailedException(
                f"convert-kernel-to-cuda: ops left outside a kernel.func: {', '.join(left)}"
            )
