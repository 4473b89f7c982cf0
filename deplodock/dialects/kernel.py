"""The `kernel` dialect: hardware primitives of one CUDA kernel (docs/ir.md section 5).

It is the materialized form of a `tile` schedule: thread and block ids, shared arrays
(`memref<..., 3>`), barriers, warp shuffles, per-thread loops and predicated regions. Each op
maps to one CUDA construct, so the `cuda` printer is a straight walk. The verifiers reject what
the hardware cannot run: more than 1024 threads, more shared memory than a block may opt in
to (`MAX_SHARED_BYTES`), and a `__syncthreads()` under thread-divergent control flow. Loops,
loads, stores, the kernel header and the host ops share their syntax with `loop` and `tile`
(`common/`); the hardware limits live in `hardware.py`.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasAncestor,
    HasParent,
    MemoryAllocEffect,
    MemoryReadEffect,
    MemoryWriteEffect,
    Pure,
    RecursiveMemoryEffect,
    SingleBlockImplicitTerminator,
)
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import common
from deplodock.dialects.common import async_memory, ldmatrix, mma, tma, wgmma
from deplodock.dialects.effects import Collective
from deplodock.dialects.element_types import UnsupportedElementType, buffer_bytes
from deplodock.dialects.hardware import (
    MAX_SHARED_BYTES,
    MAX_THREADS_PER_BLOCK,
    SHARED_MEMORY_SPACE,
    WARP_SIZE,
    WARPGROUP_SIZE,
    is_shared,
    is_valid_block_size,
)
from deplodock.dialects.queries import def_chain_reaches

# --------------------------------------------------------------------------------------------
# The kernel function


@irdl_op_definition
class ReturnOp(common.ReturnOpBase):
    """`kernel.return`: end of a kernel body (kernels write their output buffers)."""

    name = "kernel.return"
    traits = lazy_traits_def(lambda: (HasParent(FuncOp),))


@irdl_op_definition
class FuncOp(common.KernelOpBase):
    """`kernel.func @k(%a: memref<...>, ...) grid G block T { ... }`: one `__global__`.

    The launch configuration is part of the kernel (1-D grid of `G` blocks of `T` threads), so
    the verifier can check the hardware limits and the interpreter knows how many lanes to run.
    """

    name = "kernel.func"

    grid = prop_def(IntegerAttr[I64])
    block = prop_def(IntegerAttr[I64])

    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(ReturnOp),))

    @staticmethod
    def launch_config(grid: int, block: int) -> dict[str, Attribute]:
        """The properties to pass as `FuncOp(name, arg_types, body, properties=...)`."""
        return {"grid": IntegerAttr(grid, 64), "block": IntegerAttr(block, 64)}

    @property
    def grid_size(self) -> int:
        return self.grid.value.data

    @property
    def block_size(self) -> int:
        return self.block.value.data

    def shared_allocs(self) -> list[SharedAllocOp]:
        return [op for op in self.walk() if isinstance(op, SharedAllocOp)]

    def shared_bytes(self) -> int:
        """Shared memory of one block: the sum of its `kernel.shared_alloc`s (static arrays
        up to `MAX_STATIC_SHARED_BYTES`, dynamic shared memory past it)."""
        return sum(buffer_bytes(op.result.type) for op in self.shared_allocs())

    def verify_(self) -> None:
        super().verify_()
        where = f"kernel.func @{self.sym_name.data}"
        threads = self.block_size
        if not is_valid_block_size(threads):
            raise VerifyException(
                f"{where}: block of {threads} threads must be a positive multiple of "
                f"{WARP_SIZE} and at most {MAX_THREADS_PER_BLOCK}"
            )
        if self.grid_size <= 0:
            raise VerifyException(f"{where}: grid must be positive, got {self.grid_size}")
        try:
            total = self.shared_bytes()
        except UnsupportedElementType as error:
            raise VerifyException(f"{where}: shared array of {error}") from None
        if total > MAX_SHARED_BYTES:
            raise VerifyException(
                f"{where}: {total} bytes of shared memory exceed the "
                f"{MAX_SHARED_BYTES} bytes a block may have"
            )
        for arg in self.body.block.args:
            if is_shared(arg.type):
                raise VerifyException(f"{where}: arguments must be global memrefs, got {arg.type}")

    def print_header_extra(self, printer: Printer) -> None:
        printer.print_string(f" grid {self.grid_size} block {self.block_size}")

    @classmethod
    def parse_header_extra(cls, parser: Parser) -> dict[str, Attribute]:
        parser.parse_keyword("grid")
        grid = parser.parse_integer(allow_boolean=False, allow_negative=False)
        parser.parse_keyword("block")
        block = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return cls.launch_config(grid, block)


# --------------------------------------------------------------------------------------------
# Thread geometry, shared memory, synchronization


class _GeometryOpBase(IRDLOperation):
    """Shared shape of `kernel.thread_id` and `kernel.block_id`: `%t = X : index`, pure."""

    result = result_def(IndexType)
    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(Pure(), HasAncestor(FuncOp))

    def __init__(self):
        super().__init__(result_types=[IndexType()])


@irdl_op_definition
class ThreadIdOp(_GeometryOpBase):
    """`threadIdx.x`: differs per lane, so anything computed from it is thread-dependent."""

    name = "kernel.thread_id"


@irdl_op_definition
class BlockIdOp(_GeometryOpBase):
    """`blockIdx.x`: uniform across the threads of a block."""

    name = "kernel.block_id"


@irdl_op_definition
class SharedAllocOp(IRDLOperation):
    """A static `__shared__` array of the block; its name is the SSA name hint."""

    name = "kernel.shared_alloc"
    result = result_def(MemRefType)
    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(MemoryAllocEffect(), HasAncestor(FuncOp))

    def __init__(self, memref_type: MemRefType, name_hint: str | None = None):
        super().__init__(result_types=[memref_type])
        if name_hint is not None:
            self.result.name_hint = name_hint

    def verify_(self) -> None:
        if not is_shared(self.result.type):
            raise VerifyException(
                f"kernel.shared_alloc: result must be in memory space {SHARED_MEMORY_SPACE} "
                f"(shared), got {self.result.type}"
            )


def depends_on_thread_id(value: SSAValue) -> bool:
    """Whether `value` may differ between the threads of a block: its def chain
    (`queries.def_chain`, through loop starts and inits) reaches a `kernel.thread_id`.
    Kernel arguments, block ids and constants are uniform."""
    return def_chain_reaches(value, lambda v: isinstance(v.owner, ThreadIdOp))


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`__syncthreads()`. Every thread of the block must reach it, hence the verifier."""

    name = "kernel.barrier"
    assembly_format = "attr-dict"
    traits = traits_def(HasAncestor(FuncOp))

    def verify_(self) -> None:
        parent = self.parent_op()
        while parent is not None and not isinstance(parent, FuncOp):
            if isinstance(parent, IfOp):
                raise VerifyException(
                    "kernel.barrier: must not be nested in a kernel.if (divergent control flow)"
                )
            if isinstance(parent, ForOp) and depends_on_thread_id(parent.lb):
                raise VerifyException(
                    "kernel.barrier: must not be nested in a kernel.for whose bounds depend on "
                    "kernel.thread_id (divergent control flow)"
                )
            parent = parent.parent_op()


@irdl_op_definition
class ShflXorOp(IRDLOperation):
    """`__shfl_xor_sync(0xffffffff, v, MASK)`: lane `l` gets the value of lane `l ^ MASK`."""

    name = "kernel.shfl_xor"
    T: ClassVar = VarConstraint("T", base(AnyFloat) | base(IntegerType) | base(IndexType))
    value = operand_def(T)
    mask = prop_def(IntegerAttr[I64])
    result = result_def(T)
    assembly_format = "$value `,` $mask attr-dict `:` type($result)"
    traits = traits_def(HasAncestor(FuncOp), Collective())

    def __init__(self, value: SSAValue, mask: int):
        super().__init__(
            operands=[value], properties={"mask": IntegerAttr(mask, 64)}, result_types=[value.type]
        )

    def verify_(self) -> None:
        mask = self.mask.value.data
        if not 0 <= mask < WARP_SIZE:
            raise VerifyException(
                f"kernel.shfl_xor: mask {mask} must be in [0, {WARP_SIZE}) (within a warp)"
            )


@irdl_op_definition
class MmaSyncOp(mma.MmaSyncOpBase):
    """`%d:4 = kernel.mma_sync a(...) b(...) c(...) : bf16`: PTX `mma.sync.aligned.m16n8k16
    .row.col.f32.bf16.bf16.f32` (or `.f16`; `m16n8k8 ... .tf32` for `: tf32`), one warp-wide
    tensor-core MMA (`common/mma.py`)."""

    name = "kernel.mma_sync"
    traits = traits_def(HasAncestor(FuncOp), Collective())


@irdl_op_definition
class LdmatrixOp(ldmatrix.LdmatrixOpBase):
    """`%r:8 = kernel.ldmatrix %buf[...] x4 [trans] : memref<..., 3>`: PTX `ldmatrix.sync
    .aligned.m8n8.x4[.trans].shared.b16`, one warp's load of MMA fragments from shared memory
    (`common/ldmatrix.py`)."""

    name = "kernel.ldmatrix"
    traits = traits_def(HasAncestor(FuncOp), Collective(), MemoryReadEffect())


@irdl_op_definition
class SplitTf32Op(mma.SplitTf32OpBase):
    """`%hi, %lo = kernel.split_tf32 %x`: `x` as two tf32 values (`common/mma.py`)."""

    name = "kernel.split_tf32"


# --------------------------------------------------------------------------------------------
# Warpgroup MMA (sm_90a wgmma, `common/wgmma.py`)


@irdl_op_definition
class WgmmaDescOp(wgmma.WgmmaDescOpBase):
    """`%d = kernel.wgmma_desc %buf[...] swizzle S lbo L sbo B : memref<..., 3>`: the 64-bit
    shared-memory matrix descriptor of a wgmma operand starting at `buf[...]`."""

    name = "kernel.wgmma_desc"
    traits = traits_def(Pure(), HasAncestor(FuncOp))


@irdl_op_definition
class WgmmaFenceOp(wgmma.WgmmaFenceOpBase):
    """`kernel.wgmma_fence`: PTX `wgmma.fence.sync.aligned`."""

    name = "kernel.wgmma_fence"
    traits = traits_def(HasAncestor(FuncOp), Collective())


@irdl_op_definition
class WgmmaOp(wgmma.WgmmaOpBase):
    """`%d... = kernel.wgmma m64nNkK %a_s(%da), %b_s(%db) c(...) : ...`: PTX
    `wgmma.mma_async.sync.aligned.m64nNkK.f32.T.T`, one warpgroup's asynchronous MMA."""

    name = "kernel.wgmma"
    traits = traits_def(HasAncestor(FuncOp), Collective(), MemoryReadEffect())

    def verify_(self) -> None:
        super().verify_()
        func = self.parent_op()
        while func is not None and not isinstance(func, FuncOp):
            func = func.parent_op()
        if func is not None and func.block_size % WARPGROUP_SIZE:
            raise VerifyException(
                f"{self.name}: runs on warpgroups of {WARPGROUP_SIZE} threads, but the block "
                f"has {func.block_size}"
            )


@irdl_op_definition
class WgmmaCommitOp(wgmma.WgmmaCommitOpBase):
    """`kernel.wgmma_commit`: PTX `wgmma.commit_group.sync.aligned`."""

    name = "kernel.wgmma_commit"
    traits = traits_def(HasAncestor(FuncOp), Collective())


@irdl_op_definition
class WgmmaWaitOp(wgmma.WgmmaWaitOpBase):
    """`kernel.wgmma_wait N`: PTX `wgmma.wait_group.sync.aligned N`."""

    name = "kernel.wgmma_wait"
    traits = traits_def(HasAncestor(FuncOp), Collective())


# --------------------------------------------------------------------------------------------
# Per-thread control flow


@irdl_op_definition
class YieldOp(common.YieldOpBase):
    """`kernel.yield %a : f32`: next iter_args of a `kernel.for`; empty (elided) in `kernel.if`."""

    name = "kernel.yield"
    traits = lazy_traits_def(lambda: (HasParent(ForOp, IfOp),))


@irdl_op_definition
class ForOp(common.DynamicForOpBase):
    """`kernel.for %iv = %lb to UB [step S] [iter_args(...)] { ... }`: a per-thread loop.

    The start is dynamic (the thread id for a cooperative strided loop, `b * T + t` for a
    grid-stride loop, a constant for a serial loop); the bound and the step are static.
    """

    name = "kernel.for"
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(YieldOp),))


@irdl_op_definition
class IfOp(common.IfOpBase):
    """`kernel.if %cond { ... }`: the body runs on the threads where `%cond` holds."""

    name = "kernel.if"
    traits = traits_def(SingleBlockImplicitTerminator(YieldOp), RecursiveMemoryEffect())


@irdl_op_definition
class LoadOp(common.LoadOpBase):
    """`%v = kernel.load %buf[%i, ...] : memref<...>` (global, or shared: `memref<..., 3>`)."""

    name = "kernel.load"


@irdl_op_definition
class StoreOp(common.StoreOpBase):
    """`kernel.store %v, %buf[%i, ...] : memref<...>` (global, or shared: `memref<..., 3>`)."""

    name = "kernel.store"


@irdl_op_definition
class AtomicAddOp(common.AtomicAddOpBase):
    """`kernel.atomic_add %v, %buf[%i, ...] : memref<...>`: each active thread adds
    (`atomicAdd`)."""

    name = "kernel.atomic_add"


@irdl_op_definition
class AllocOp(common.AllocOpBase):
    """`%b = kernel.alloc : memref<...>`: a global buffer allocated by the host."""

    name = "kernel.alloc"

    def verify_(self) -> None:
        if is_shared(self.res.type):
            raise VerifyException("kernel.alloc: allocates global memory, not shared")


@irdl_op_definition
class LaunchOp(common.LaunchOpBase):
    """`kernel.launch @k(%a, ...) : (types) -> ()`: runs `kernel.func @k` on the buffers."""

    name = "kernel.launch"


# --------------------------------------------------------------------------------------------
# Asynchronous copies (cp.async) and vector accesses (syntax and rules: common/async_memory.py)


@irdl_op_definition
class CpAsyncOp(async_memory.CpAsyncOpBase):
    """`kernel.cp_async %dst[...], %src[...], 16 [if %p] : memref<..., 3>, memref<...>`:
    PTX `cp.async.{ca,cg}.shared.global` (`if %p` false: zero-fill, src-size 0)."""

    name = "kernel.cp_async"
    traits = traits_def(HasAncestor(FuncOp))


@irdl_op_definition
class CpAsyncCommitOp(async_memory.CpAsyncCommitOpBase):
    """`kernel.cp_async_commit`: PTX `cp.async.commit_group`."""

    name = "kernel.cp_async_commit"
    traits = traits_def(HasAncestor(FuncOp))


@irdl_op_definition
class CpAsyncWaitOp(async_memory.CpAsyncWaitOpBase):
    """`kernel.cp_async_wait N`: PTX `cp.async.wait_group N`."""

    name = "kernel.cp_async_wait"
    traits = traits_def(HasAncestor(FuncOp))


@irdl_op_definition
class LoadVectorOp(async_memory.LoadVectorOpBase):
    """`%a, %b, %c, %d = kernel.load_vector %buf[...] width 4 : memref<...>` (`float4`)."""

    name = "kernel.load_vector"
    traits = traits_def(HasAncestor(FuncOp))


@irdl_op_definition
class StoreVectorOp(async_memory.StoreVectorOpBase):
    """`kernel.store_vector %a, %b, %c, %d, %buf[...] : memref<...>` (`float4`)."""

    name = "kernel.store_vector"
    traits = traits_def(HasAncestor(FuncOp))


# --------------------------------------------------------------------------------------------
# TMA tensor copies and mbarriers (sm_90; syntax and rules: common/tma.py)


@irdl_op_definition
class MbarrierInitOp(tma.MbarrierInitOpBase):
    """`kernel.mbarrier_init %bar[%i], N : memref<...xi64, 3>`: PTX `mbarrier.init
    .shared::cta.b64`."""

    name = "kernel.mbarrier_init"
    traits = traits_def(HasAncestor(FuncOp), MemoryWriteEffect())


@irdl_op_definition
class MbarrierArriveOp(tma.MbarrierArriveOpBase):
    """`kernel.mbarrier_arrive %bar[%i] [expect_tx B] : memref<...xi64, 3>`: PTX
    `mbarrier.arrive[.expect_tx].shared::cta.b64`."""

    name = "kernel.mbarrier_arrive"
    traits = traits_def(HasAncestor(FuncOp), MemoryReadEffect(), MemoryWriteEffect())


@irdl_op_definition
class MbarrierWaitOp(tma.MbarrierWaitOpBase):
    """`kernel.mbarrier_wait %bar[%i], %parity : memref<...xi64, 3>`: a PTX
    `mbarrier.try_wait.parity.shared::cta.b64` loop."""

    name = "kernel.mbarrier_wait"
    traits = traits_def(HasAncestor(FuncOp), MemoryReadEffect(), MemoryWriteEffect())


@irdl_op_definition
class FenceProxyAsyncOp(tma.FenceProxyAsyncOpBase):
    """`kernel.fence_proxy_async`: PTX `fence.proxy.async.shared::cta`."""

    name = "kernel.fence_proxy_async"
    traits = traits_def(HasAncestor(FuncOp), MemoryReadEffect(), MemoryWriteEffect())


@irdl_op_definition
class TmaLoadOp(tma.TmaLoadOpBase):
    """`kernel.tma_load %dst[...], %src[%r, %c], %bar[%i] swizzle S : ...`: PTX
    `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`."""

    name = "kernel.tma_load"
    traits = traits_def(HasAncestor(FuncOp), MemoryReadEffect(), MemoryWriteEffect())


Kernel = Dialect(
    "kernel",
    [
        FuncOp,
        ReturnOp,
        ThreadIdOp,
        BlockIdOp,
        SharedAllocOp,
        BarrierOp,
        ShflXorOp,
        MmaSyncOp,
        LdmatrixOp,
        SplitTf32Op,
        WgmmaDescOp,
        WgmmaFenceOp,
        WgmmaOp,
        WgmmaCommitOp,
        WgmmaWaitOp,
        ForOp,
        YieldOp,
        IfOp,
        LoadOp,
        StoreOp,
        AtomicAddOp,
        AllocOp,
        LaunchOp,
        CpAsyncOp,
        CpAsyncCommitOp,
        CpAsyncWaitOp,
        LoadVectorOp,
        StoreVectorOp,
        MbarrierInitOp,
        MbarrierArriveOp,
        MbarrierWaitOp,
        FenceProxyAsyncOp,
        TmaLoadOp,
    ],
    [],
)
