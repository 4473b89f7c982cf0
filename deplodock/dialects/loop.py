"""The `loop` dialect: one kernel = one fused loop nest over buffers (docs/ir.md section 3).

A `loop.kernel` is a symbol whose body is a nest of `loop.for` loops, `loop.load` /
`loop.store` on its memref arguments, and scalar `arith`/`math`. A loop without iter_args is
*free* (its iterations are independent); a loop with iter_args is a *reduce* loop. `@forward`
holds the host sequence: `loop.alloc` per intermediate/output buffer and `loop.launch` per
kernel. The syntax and verifiers are shared with `tile` and `kernel` (see `common/`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import DictionaryAttr
from xdsl.ir import Dialect
from xdsl.irdl import irdl_op_definition, lazy_traits_def, opt_attr_def
from xdsl.traits import HasParent, SingleBlockImplicitTerminator

from deplodock.dialects import common
from deplodock.dialects.common.schedule import verify_schedule


@irdl_op_definition
class YieldOp(common.YieldOpBase):
    """`loop.yield %a : f32`: the loop-carried values of the next iteration."""

    name = "loop.yield"
    traits = lazy_traits_def(lambda: (HasParent(ForOp),))


@irdl_op_definition
class ForOp(common.StaticForOpBase):
    """`loop.for %i = 0 to 32 [step S] [iter_args(%a = %init) -> (f32)] { ... }`."""

    name = "loop.for"
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(YieldOp),))


@irdl_op_definition
class LoadOp(common.LoadOpBase):
    """`%v = loop.load %buf[%i, %j] : memref<4x8xf32>`."""

    name = "loop.load"


@irdl_op_definition
class StoreOp(common.StoreOpBase):
    """`loop.store %v, %buf[%i, %j] : memref<4x8xf32>`."""

    name = "loop.store"


@irdl_op_definition
class ReturnOp(common.ReturnOpBase):
    """`loop.return`: end of a kernel body."""

    name = "loop.return"
    traits = lazy_traits_def(lambda: (HasParent(KernelOp),))


@irdl_op_definition
class KernelOp(common.KernelOpBase):
    """`loop.kernel @k(%a: memref<...>, ...) [attributes {schedule = {...}}] { ... }`.

    `schedule`, when present, is the `Schedule` the tile passes are to use for this kernel
    (`dialects/common/schedule.py`): a tuned one replayed from the cache, or one written by
    hand; `convert-loop-to-tile` carries it onto the `tile.kernel`.
    """

    name = "loop.kernel"
    schedule = opt_attr_def(DictionaryAttr)
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(ReturnOp),))

    def verify_(self) -> None:
        super().verify_()
        verify_schedule(self, self.name, self.sym_name.data)


@irdl_op_definition
class AllocOp(common.AllocOpBase):
    """`%b = loop.alloc : memref<4x8xf32>` (host)."""

    name = "loop.alloc"


@irdl_op_definition
class LaunchOp(common.LaunchOpBase):
    """`loop.launch @k(%a, %b) : (memref<...>, memref<...>) -> ()` (host)."""

    name = "loop.launch"


Loop = Dialect(
    "loop",
    [KernelOp, ReturnOp, ForOp, YieldOp, LoadOp, StoreOp, AllocOp, LaunchOp],
    [],
)
