"""`convert-tensor-to-loop`: lift every `tensor.*` op of `@forward` into its own `loop.kernel`.

Each tensor op becomes a kernel symbol (inserted before `@forward`), and in `@forward` a
`loop.alloc` of its result buffer and a `loop.launch` of the kernel. The function signature
and `func.return` switch from tensors to memrefs of the same shapes. Lifted bodies:

- elementwise: free loops over the output, a load of each input at the same indices, the
  cloned scalar body (`tensor.index d` becomes the loop index of dim `d`), a store;
- reduce: free loops over the kept dims, nested reduce loops (iter_args, init = the kind's
  identity) over the reduced dims, a store at index 0 of the reduced dims; f16/bf16 inputs
  accumulate in f32 (`arith.extf` of each load, one `arith.truncf` before the store);
- index_map: free loops over the output, the affine map as `arith` index ops, load, store;
  a concat gets one loop nest per source over its own segment of the output, so every load
  stays in bounds, except a pad (one source, constant fills), which is one nest that loads
  the source at a clamped index and selects the fills outside it, so it can fuse;
- gather: free loops over the output, a load of the index, `arith.index_cast` to `index`,
  the load of the source at that index, a store.

Size-1 dimensions get no loop (index `arith.constant 0 : index`). Fusion is a later pass
(`loop-fusion`); this one keeps a 1:1 correspondence that is easy to check. The lifting
patterns live in `deplodock/passes/tensor_to_loop/`; this module converts `@forward`'s
signature and runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FunctionType, ModuleOp, ShapedType, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects.queries import find_function, kernel_symbols, memref_of, symbol_name
from deplodock.passes.tensor_to_loop import KernelNamer, find_pads, lift_patterns


class ForwardToMemrefs(RewritePattern):
    """`@forward`'s arguments and results become memrefs of the same shapes."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: FuncOp, rewriter: PatternRewriter) -> None:
        if op.sym_name.data != "forward":
            return
        inputs = [memref_of(t) for t in op.function_type.inputs]
        outputs = [memref_of(t) for t in op.function_type.outputs]
        new_type = FunctionType.from_lists(inputs, outputs)
        if new_type == op.function_type:
            return
        for arg in op.body.block.args:
            if isinstance(arg.type, TensorType):
                rewriter.replace_value_with_new_type(arg, memref_of(arg.type))
        op.function_type = new_type
        rewriter.notify_op_modified(op)


def _check_lifted(module: ModuleOp) -> None:
    for op in module.walk():
        if op.dialect_name() == "tensor":
            raise PassFailedException(f"convert-tensor-to-loop: {op.name} left after lifting")
        if isinstance(op, ReturnOp):
            for v in op.arguments:
                if isinstance(v.type, TensorType):
                    raise PassFailedException("convert-tensor-to-loop: a tensor is returned")


def _check_not_empty(module: ModuleOp) -> None:
    """Rejects a zero-size tensor that is computed with, which no kernel can be built for (the
    loop builders index every dimension of a reduction and the schedulers divide by extents).
    An unused one (a KV cache's `torch.tensor([])` that `cat` skipped) is harmless."""
    for op in module.walk():
        values = [*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)]
        for value in values:
            if not value.uses:
                continue
            if isinstance(value.type, ShapedType) and 0 in value.type.get_shape():
                where = f"%{value.name_hint}" if value.name_hint else op.name
                raise PassFailedException(
                    f"convert-tensor-to-loop: zero-size tensor {value.type} ({where}): "
                    "empty tensors are not supported"
                )


@dataclass(frozen=True)
class ConvertTensorToLoopPass(ModulePass):
    """Lift each `tensor.*` op of `@forward` into a `loop.kernel` + alloc + launch."""

    name = "convert-tensor-to-loop"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if find_function(op) is None:
            raise PassFailedException("convert-tensor-to-loop: the module has no @forward")
        _check_not_empty(op)
        namer = KernelNamer({symbol_name(kernel) for kernel in kernel_symbols(op)} | {"forward"})
        pads = find_pads(op)
        PatternRewriteWalker(ForwardToMemrefs(), apply_recursively=False).rewrite_module(op)
        patterns: list[RewritePattern] = list(lift_patterns(namer, pads))
        PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns, dce_enabled=False), apply_recursively=False
        ).rewrite_module(op)
        _check_lifted(op)
