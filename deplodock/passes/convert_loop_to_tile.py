"""`convert-loop-to-tile`: every `loop.kernel` becomes an *unscheduled* `tile.kernel`.

The conversion decides nothing: a kernel becomes one block of one warp in which every
thread runs the whole loop nest (each `loop.for` a serial `tile.for` from a constant
start). That program is already correct (every thread computes and stores the same
values), just slow; the scheduling passes that follow (`passes/tile/`) each make one
decision that maps loops onto blocks and threads. `loop.alloc` / `loop.launch` become
`tile.alloc` / `tile.launch`; a `schedule` attribute on a `loop.kernel` (knobs to replay)
carries over to its `tile.kernel`.

    loop.kernel @k(%x: memref<64xf32>, %y: memref<64xf32>) {
      loop.for %i = 0 to 64 { ... }
    }

becomes

    tile.kernel @k(%x: memref<64xf32>, %y: memref<64xf32>) {
      tile.grid %b to 1 {
        tile.threads %t to 32 {
          %c0 = arith.constant 0 : index
          tile.for %i = %c0 to 64 { ... }
        }
      }
    }
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriteWalker
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import loop, tile
from deplodock.dialects.hardware import WARP_SIZE
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.host_ops import LowerHostOps


@dataclass
class SerialCloner:
    """Clones loop-level ops into a threads body as tile ops, each loop serial.

    Loop starts are index constants: the kernel's own when it defines them at its top,
    else new ones shared at the top of the body (`%c0`).
    """

    block: Block
    mapping: dict[SSAValue, SSAValue]
    constants: ConstantPool
    top: bool = True

    def at(self, block: Block) -> SerialCloner:
        """A cloner appending to `block`, sharing the mapping and the constants."""
        return SerialCloner(block, self.mapping, self.constants, top=False)

    def clone_ops(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            self.clone(op)

    def clone(self, op: Operation) -> None:
        m = self.mapping
        match op:
            case loop.ForOp():
                self._serial_for(op)
            case loop.LoadOp():
                new = tile.LoadOp(m.get(op.memref, op.memref), [m.get(i, i) for i in op.indices])
                new.res.name_hint = op.res.name_hint
                self.block.add_op(new)
                m[op.res] = new.res
            case loop.StoreOp():
                value, memref = m.get(op.value, op.value), m.get(op.memref, op.memref)
                self.block.add_op(tile.StoreOp(value, memref, [m.get(i, i) for i in op.indices]))
            case loop.YieldOp():
                self.block.add_op(tile.YieldOp(*[m.get(v, v) for v in op.arguments]))
            case _ if op.dialect_name() == "loop":
                raise PassFailedException(f"convert-loop-to-tile: cannot convert {op.name}")
            case arith.ConstantOp() if self.top:
                new = op.clone(value_mapper=m)
                self.block.add_op(new)
                self.constants.adopt(new)  # the kernel's own %c0 serves loop starts too
            case _:
                self.block.add_op(op.clone(value_mapper=m))

    def _serial_for(self, op: loop.ForOp) -> None:
        inits = [self.mapping.get(v, v) for v in op.inits]
        new = tile.ForOp(self.constants.index(op.lower), op.upper, op.step_value, inits)
        self.block.add_op(new)
        for old, arg in zip(op.body.block.args, new.body.block.args, strict=True):
            arg.name_hint = old.name_hint
            self.mapping[old] = arg
        self.at(new.body.block).clone_ops(op.body.block.ops)
        for old, res in zip(op.res, new.res, strict=True):
            res.name_hint = old.name_hint
            self.mapping[old] = res


def check_not_empty(kernel: loop.KernelOp) -> None:
    """Rejects a kernel over a zero-size buffer: the scheduling passes divide by extents,
    and a kernel with no elements has nothing to schedule."""
    for position, arg_type in enumerate(kernel.arg_types):
        if isinstance(arg_type, MemRefType) and 0 in arg_type.get_shape():
            raise PassFailedException(
                f"convert-loop-to-tile: kernel @{kernel.sym_name.data}: zero-size buffer "
                f"{arg_type} (argument {position}): empty tensors are not supported"
            )


def unscheduled_kernel(kernel: loop.KernelOp) -> tile.KernelOp:
    """`kernel` as one block of one warp, every thread running every loop whole."""
    check_not_empty(kernel)
    new = tile.KernelOp(kernel.sym_name.data, kernel.arg_types)
    new.schedule = kernel.schedule  # a tuned or hand-written one: the tile passes read it
    for old, arg in zip(kernel.body.block.args, new.body.block.args, strict=True):
        arg.name_hint = old.name_hint
    grid, threads = tile.GridOp(1), tile.ThreadsOp(WARP_SIZE)
    grid.iv.name_hint, threads.iv.name_hint = "b", "t"
    grid.body.block.add_op(threads)
    new.body.block.add_ops([grid, tile.ReturnOp()])
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(kernel.body.block.args, new.body.block.args, strict=True)
    )
    cloner = SerialCloner(threads.body.block, mapping, ConstantPool(threads.body.block))
    cloner.clone_ops(op for op in kernel.body.block.ops if not isinstance(op, loop.ReturnOp))
    return new


@dataclass(frozen=True)
class ConvertLoopToTilePass(ModulePass):
    """Converts every `loop` op to `tile`, scheduling nothing (see the module docstring)."""

    name = "convert-loop-to-tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.ops if isinstance(k, loop.KernelOp)]:
            Rewriter.replace_op(kernel, unscheduled_kernel(kernel))
        host_ops = LowerHostOps("loop", tile.AllocOp, tile.LaunchOp)
        PatternRewriteWalker(host_ops, apply_recursively=False).rewrite_module(op)
        if left := next((o for o in op.walk() if o.dialect_name() == "loop"), None):
            raise PassFailedException(f"convert-loop-to-tile: {left.name} left after the pass")
