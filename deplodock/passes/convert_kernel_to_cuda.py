"""`convert-kernel-to-cuda`: print every `kernel.func` to CUDA C and keep it as `cuda.kernel`.

The kernel body becomes its CUDA C source (the printer in `deplodock/backend/cuda_printer.py`)
and the launch metadata moves into properties; the host ops `kernel.alloc` and
`kernel.launch` become their `cuda` twins. After this pass the module is the executable
program: nothing of the `kernel` dialect is left.
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

from deplodock.backend.cuda_exprs import PrinterError
from deplodock.backend.cuda_printer import print_kernel
from deplodock.dialects import cuda, kernel

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
            source = print_kernel(op)
        except PrinterError as error:
            raise PassFailedException(f"convert-kernel-to-cuda: @{name}: {error}") from error
        arg_types = [t for t in op.arg_types if isinstance(t, MemRefType)]
        rewriter.replace(
            op, cuda.KernelOp(name, op.grid_size, op.block_size, 0, arg_types, source), []
        )


class KernelAllocToCuda(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.AllocOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, cuda.AllocOp(op.res.type))  # the replace keeps the name hint


class KernelLaunchToCuda(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.LaunchOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, cuda.LaunchOp(op.callee, op.args))


@dataclass(frozen=True)
class ConvertKernelToCudaPass(ModulePass):
    """Lowers the `kernel` dialect to `cuda`: kernels become CUDA C source strings."""

    name = "convert-kernel-to-cuda"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [KernelFuncToCuda(), KernelAllocToCuda(), KernelLaunchToCuda()],
                dce_enabled=False,
            ),
            apply_recursively=False,
        ).rewrite_module(op)
        left = sorted({o.name for o in op.walk() if o.dialect_name() == "kernel"})
        if left:
            raise PassFailedException(
                f"convert-kernel-to-cuda: ops left outside a kernel.func: {', '.join(left)}"
            )
