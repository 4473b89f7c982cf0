"""The common part of the lifting patterns: kernel naming, creation and the host launch.

Every `tensor.*` op of `@forward` becomes a kernel over its (distinct) input buffers then its
result buffer; in `@forward` a `loop.alloc` of the result and a `loop.launch` replace it.
`LiftPattern` does all of that once, so each op's pattern only fills the kernel body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar, cast

from xdsl.builder import Builder
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from deplodock.dialects import loop
from deplodock.dialects.queries import kernel_base_name, kernel_name, memref_of
from deplodock.passes.loop_utils import KernelBuilder, free_nest


def output_nest(
    kb: KernelBuilder, ranges: Sequence[tuple[int, int]]
) -> tuple[Builder, list[SSAValue]]:
    """Free loops `i0, i1, ...` over `ranges` of the output, at the end of the kernel body."""
    return free_nest(kb, kb.body_builder(), ranges, [f"i{d}" for d in range(len(ranges))])


@dataclass
class KernelNamer:
    """Unique kernel names: `<result name>_kernel` if the result has a name hint, else
    `<kind>_kernel` (`reduce_kernel`), numbered apart (`_2`, `_3`...)."""

    taken: set[str]

    def __call__(self, kind: str, hint: str | None) -> str:
        base = kernel_base_name(hint) if hint and hint.isidentifier() else kind
        return kernel_name(base, self.taken)


OpT = TypeVar("OpT", bound=Operation)
Args = Mapping[SSAValue, SSAValue]
"""Each operand of the lifted op -> its kernel argument."""


class LiftPattern(RewritePattern, Generic[OpT]):
    """Lifts one `op_type` op of `@forward` into a kernel named after its result (else after
    the op: `tensor.reduce` -> `reduce_kernel`); subclasses only write the body (`build`)."""

    op_type: ClassVar[type[Operation]]

    def __init__(self, namer: KernelNamer):
        self.namer = namer

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.op_type) or not self.in_forward(op):
            return
        kb, inputs = self.new_kernel(op)
        self.build(cast(OpT, op), kb, dict(zip(inputs, kb.args, strict=False)), kb.args[-1])
        self.finish(op, kb, inputs, rewriter)

    def build(self, op: OpT, kb: KernelBuilder, args: Args, out: SSAValue) -> None:
        """Writes the kernel body; `out` is the result buffer."""
        raise NotImplementedError

    @staticmethod
    def in_forward(op: Operation) -> bool:
        func = op.parent_op()
        return isinstance(func, FuncOp) and func.sym_name.data == "forward"

    def kernel_inputs(self, op: Operation) -> list[SSAValue]:
        """The operands the kernel reads, each once (a pad's constant fills are not)."""
        return list(dict.fromkeys(op.operands))

    def new_kernel(self, op: Operation) -> tuple[KernelBuilder, list[SSAValue]]:
        """A kernel over the op's (distinct) input buffers then its result buffer."""
        inputs = self.kernel_inputs(op)
        result = op.results[0]
        name = self.namer(op.name.removeprefix("tensor."), result.name_hint)
        types = [memref_of(v.type) for v in (*inputs, result)]
        names = [v.name_hint for v in (*inputs, result)]
        kb = KernelBuilder.create(name, types, names)
        return kb, inputs

    def finish(
        self,
        op: Operation,
        kb: KernelBuilder,
        inputs: Sequence[SSAValue],
        rewriter: PatternRewriter,
    ) -> None:
        """Inserts the kernel before `@forward`; replaces `op` by alloc + launch."""
        func = op.parent_op()
        assert isinstance(func, FuncOp)
        rewriter.insert(kb.kernel, InsertPoint.before(func))
        alloc = loop.AllocOp(memref_of(op.results[0].type))  # type: ignore[arg-type]
        alloc.res.name_hint = op.results[0].name_hint
        launch = loop.LaunchOp(kb.kernel.sym_name.data, [*inputs, alloc.res])
        rewriter.replace(op, [alloc, launch], [alloc.res])
