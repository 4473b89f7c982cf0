"""The tile dialect from Python: builders, accessors, verifiers and the text round trip."""

from __future__ import annotations

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    DictionaryAttr,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
)
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import make_context, tile
from deplodock.dialects.tensor import ReduceKind

F32 = Float32Type()
BUF = MemRefType(F32, [4, 64])


def build_row_sum(threads: int = 64) -> ModuleOp:
    """`y[b, 0] = sum_k x[b, k]` with a cooperative loop and a combine, built op by op."""
    kernel = tile.KernelOp("row_sum", [BUF, BUF])
    x, y = kernel.body.block.args
    grid = tile.GridOp(4)
    block_threads = tile.ThreadsOp(threads)
    grid.body.block.add_op(block_threads)
    body = block_threads.body.block
    zero = arith.ConstantOp(FloatAttr(0.0, F32))
    c0 = arith.ConstantOp(IntegerAttr(0, IndexType()))
    loop = tile.ForOp(block_threads.iv, 64, threads, [zero.result])
    k, acc = loop.body.block.args
    load = tile.LoadOp(x, [grid.iv, k])
    add = arith.AddfOp(acc, load.res)
    loop.body.block.add_ops([load, add, tile.YieldOp(add.result)])
    combine = tile.CombineOp(ReduceKind.ADD, loop.res[0])
    store = tile.StoreOp(combine.result, y, [grid.iv, c0.result])
    body.add_ops([zero, c0, loop, combine, store])
    kernel.body.block.add_ops([grid, tile.ReturnOp()])
    return ModuleOp([kernel])


def test_built_kernel_verifies_and_round_trips():
    module = build_row_sum()
    module.verify()
    text = str(module)
    assert "to 64 step 64 iter_args(" in text
    assert "tile.combine add" in text
    reparsed = Parser(make_context(), text).parse_module()
    reparsed.verify()
    assert str(reparsed) == text


def test_accessors():
    module = build_row_sum()
    kernel = next(iter(module.ops))
    assert isinstance(kernel, tile.KernelOp)
    assert kernel.grid.count == 4
    threads = next(op for op in kernel.walk() if isinstance(op, tile.ThreadsOp))
    loop = next(op for op in kernel.walk() if isinstance(op, tile.ForOp))
    assert threads.count == 64
    assert (loop.upper, loop.step_value, loop.is_reduce) == (64, 64, True)
    assert loop.lb is threads.iv
    combine = next(op for op in kernel.walk() if isinstance(op, tile.CombineOp))
    assert combine.kind.data == ReduceKind.ADD and combine.result.type == F32


@pytest.mark.parametrize("threads", [48, 2048])
def test_threads_count_rule(threads: int):
    with pytest.raises(VerifyException, match=f"thread count {threads} must be a multiple"):
        build_row_sum(threads).verify()


def test_schedule_attribute_prints_in_attributes_clause():
    module = build_row_sum()
    kernel = next(iter(module.ops))
    assert isinstance(kernel, tile.KernelOp)
    kernel.attributes["schedule"] = DictionaryAttr({"block_size": IntegerAttr(64, 64)})
    module.verify()
    text = str(module)
    assert "attributes {schedule = {block_size = 64 : i64}}" in text
    reparsed = Parser(make_context(), text).parse_module()
    kernel2 = next(iter(reparsed.ops))
    assert isinstance(kernel2, tile.KernelOp) and kernel2.schedule is not None


def test_combine_outside_threads_is_rejected():
    kernel = tile.KernelOp("k", [BUF])
    grid = tile.GridOp(1)
    value = arith.ConstantOp(FloatAttr(1.0, F32))
    grid.body.block.add_ops([value, tile.CombineOp("max", value.result)])
    kernel.body.block.add_ops([grid, tile.ReturnOp()])
    with pytest.raises(VerifyException, match=r"expects ancestor op 'tile\.threads'"):
        ModuleOp([kernel]).verify()


ATOMIC = """
builtin.module {{
  tile.kernel @k(%y: {memref}) {{
    tile.grid %b to 1 {{
      tile.threads %t to 32 {{
        %v = arith.constant 1.0 : {element}
        %c0 = arith.constant 0 : index
        tile.atomic_add %v, %y[%c0] : {memref}
      }}
    }}
    tile.return
  }}
}}
"""


def test_atomic_add_round_trips_and_adds_f32_to_global_memory_only():
    text = ATOMIC.format(memref="memref<4xf32>", element="f32")
    module = Parser(make_context(), text).parse_module()
    module.verify()
    assert "tile.atomic_add %v, %y[%c0] : memref<4xf32>" in str(module)
    with pytest.raises(VerifyException, match="adds f32 elements, got bf16"):
        Parser(
            make_context(), ATOMIC.format(memref="memref<4xbf16>", element="bf16")
        ).parse_module().verify()
    shared = ATOMIC.format(memref="memref<4xf32, 3 : i64>", element="f32")
    with pytest.raises(VerifyException, match="global buffer, not shared memory"):
        Parser(make_context(), shared).parse_module().verify()
