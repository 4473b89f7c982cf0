"""The `kernel` dialect: building ops from Python, round-tripping text, and the verifiers."""

from __future__ import annotations

import pytest
from xdsl.builder import Builder, ImplicitBuilder
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    Float16Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    f32,
)
from xdsl.ir import Block
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import kernel
from tests.helpers import parse

GLOBAL = MemRefType(f32, [256])


def shared(count: int, element=f32) -> MemRefType:
    return MemRefType(element, [count], memory_space=IntegerAttr(3, 64))


def roundtrip(module: ModuleOp) -> str:
    text = str(module)
    again = parse(text)
    assert str(again) == text
    return text


def before_terminator(block: Block):
    """Builds ops into `block` ahead of its terminator (the implicit `kernel.yield`)."""
    assert block.last_op is not None
    return ImplicitBuilder(Builder(InsertPoint.before(block.last_op)))


def build_func(threads: int = 64, body=None) -> kernel.FuncOp:
    """A `kernel.func @k(%x) grid 2 block threads` whose body is filled by `body(x)`."""
    func = kernel.FuncOp("k", [GLOBAL], properties=kernel.FuncOp.launch_config(2, threads))
    with ImplicitBuilder(func.body.block) as (x,):
        if body is not None:
            body(x)
        kernel.ReturnOp()
    return func


def test_build_a_strided_copy_with_shuffle_and_shared_memory() -> None:
    def body(x):
        t = kernel.ThreadIdOp().result
        t.name_hint = "t"
        b = kernel.BlockIdOp().result
        red = kernel.SharedAllocOp(shared(2), "red").result
        c0 = arith.ConstantOp(IntegerAttr(0, IndexType())).result
        loop = kernel.ForOp(t, 256, 64)
        with ImplicitBuilder(loop.body.block) as (i, *_):
            i.name_hint = "i"
            v = kernel.LoadOp(x, [i]).res
            s = kernel.ShflXorOp(v, 16).result
            kernel.StoreOp(s, x, [i])
            kernel.YieldOp()
        is0 = arith.CmpiOp(t, c0, "eq").result
        guard = kernel.IfOp(is0)
        with before_terminator(guard.body.block):
            kernel.StoreOp(kernel.LoadOp(x, [b]).res, red, [c0])
        kernel.BarrierOp()

    module = ModuleOp([build_func(body=body)])
    module.verify()
    text = roundtrip(module)
    assert "kernel.func @k(%0: memref<256xf32>) grid 2 block 64 {" in text
    assert "%red = kernel.shared_alloc : memref<2xf32, 3 : i64>" in text
    assert "kernel.for %i = %t to 256 step 64 {" in text
    assert "kernel.yield" not in text  # empty yields of for and if are elided


def test_launch_and_alloc_round_trip() -> None:
    text = """
kernel.func @k(%x: memref<256xf32>) grid 1 block 32 {
  kernel.return
}
func.func @forward(%x: memref<256xf32>) -> memref<256xf32> {
  %y = kernel.alloc : memref<256xf32>
  kernel.launch @k(%y) : (memref<256xf32>) -> ()
  func.return %y : memref<256xf32>
}
"""
    module = parse(text)
    printed = roundtrip(module)
    assert "kernel.launch @k(%y) : (memref<256xf32>) -> ()" in printed


@pytest.mark.parametrize("threads", [0, 48, 1056, 2048])
def test_block_size_must_be_a_warp_multiple_up_to_1024(threads: int) -> None:
    with pytest.raises(VerifyException, match=f"block of {threads} threads must be"):
        build_func(threads).verify()


def test_shared_memory_budget_is_99_kib_and_counts_element_sizes() -> None:
    # 99 KiB: the most every GPU of compute capability 8.0 or newer lets a block opt in to
    build_func(body=lambda x: kernel.SharedAllocOp(shared(99 * 256))).verify()  # exactly
    build_func(body=lambda x: kernel.SharedAllocOp(shared(99 * 512, Float16Type()))).verify()

    def too_much(x):
        kernel.SharedAllocOp(shared(16 * 1024))
        kernel.SharedAllocOp(shared(8 * 1024 + 1 + 768))

    with pytest.raises(VerifyException, match=r"101380 bytes of shared memory exceed the 101376"):
        build_func(body=too_much).verify()


def test_shared_alloc_must_be_in_memory_space_3() -> None:
    with pytest.raises(VerifyException, match=r"kernel.shared_alloc: result must be in memory"):
        build_func(body=lambda x: kernel.SharedAllocOp(GLOBAL)).verify()


def test_alloc_is_global() -> None:
    with pytest.raises(VerifyException, match=r"kernel.alloc: allocates global memory"):
        kernel.AllocOp(shared(4)).verify()


def test_shfl_mask_stays_within_a_warp() -> None:
    def body(x):
        c0 = arith.ConstantOp(IntegerAttr(0, IndexType())).result
        v = kernel.LoadOp(x, [c0]).res
        kernel.ShflXorOp(v, 31)
        kernel.ShflXorOp(v, 32)

    with pytest.raises(VerifyException, match=r"kernel.shfl_xor: mask 32 must be in"):
        build_func(body=body).verify()


def barrier_under(make_lb):
    """A kernel whose barrier sits in a `kernel.for` starting at `make_lb(t, b, c1)`."""

    def body(x):
        t = kernel.ThreadIdOp().result
        b = kernel.BlockIdOp().result
        c1 = arith.ConstantOp(IntegerAttr(1, IndexType())).result
        loop = kernel.ForOp(make_lb(t, b, c1), 256, 64)
        with ImplicitBuilder(loop.body.block):
            kernel.BarrierOp()
            kernel.YieldOp()

    return build_func(body=body)


def test_barrier_in_a_loop_with_uniform_start_is_fine() -> None:
    barrier_under(lambda t, b, c1: c1).verify()
    barrier_under(lambda t, b, c1: arith.MuliOp(b, c1).result).verify()


def test_barrier_in_a_loop_whose_start_depends_on_the_thread_id_is_rejected() -> None:
    with pytest.raises(VerifyException, match=r"must not be nested in a kernel.for"):
        barrier_under(lambda t, b, c1: arith.AddiOp(arith.MuliOp(b, c1), t).result).verify()


def test_barrier_in_an_if_is_rejected() -> None:
    def body(x):
        t = kernel.ThreadIdOp().result
        guard = kernel.IfOp(arith.CmpiOp(t, t, "eq").result)
        with before_terminator(guard.body.block):
            kernel.BarrierOp()

    with pytest.raises(VerifyException, match=r"kernel.barrier: must not be nested in a kernel.if"):
        build_func(body=body).verify()


def test_thread_dependence_follows_loop_carried_values() -> None:
    func = build_func()
    with before_terminator(func.body.block):
        t = kernel.ThreadIdOp().result
        c0 = arith.ConstantOp(IntegerAttr(0, IndexType())).result
        carried = kernel.ForOp(c0, 4, 1, [t])
        uniform = kernel.ForOp(c0, 4, 1, [c0])
    for loop in (carried, uniform):
        iv, acc = loop.body.block.args
        with ImplicitBuilder(loop.body.block):
            kernel.YieldOp(arith.AddiOp(acc, iv).result)
    assert kernel.depends_on_thread_id(carried.res[0])
    assert kernel.depends_on_thread_id(carried.body.block.args[1])
    assert not kernel.depends_on_thread_id(carried.body.block.args[0])
    assert not kernel.depends_on_thread_id(uniform.res[0])
    func.verify()


def test_launch_must_match_the_kernel_signature() -> None:
    text = """
kernel.func @k(%x: memref<256xf32>) grid 1 block 32 {
  kernel.return
}
func.func @forward(%x: memref<128xf32>) {
  kernel.launch @k(%x) : (memref<128xf32>) -> ()
  func.return
}
"""
    with pytest.raises(VerifyException, match=r"kernel.launch: argument types of @k differ"):
        parse(text)


def test_if_takes_an_i1_and_yields_nothing() -> None:
    func = build_func()
    with before_terminator(func.body.block):
        c = arith.ConstantOp(IntegerAttr(1, 1)).result
        guard = kernel.IfOp(c)
    assert isinstance(guard.body.block.last_op, kernel.YieldOp)  # implicit terminator
    guard.body.block.last_op.detach()
    with ImplicitBuilder(guard.body.block):
        kernel.YieldOp(c)
    with pytest.raises(VerifyException, match=r"kernel.if: has no results"):
        guard.verify()
