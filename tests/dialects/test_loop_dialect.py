"""The loop dialect from Python: builders, accessors, syntax round trip, verifier rules."""

from __future__ import annotations

import pytest
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    Float32Type,
    FloatAttr,
    IndexType,
    MemRefType,
    ModuleOp,
    StringAttr,
    f16,
    f32,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects import loop
from tests.helpers import parse

ROW_SUM = """\
builtin.module {
  loop.kernel @row_sum(%x: memref<4x6xf32>, %y: memref<4xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to 4 {
      %s = loop.for %k = 1 to 6 step 2 iter_args(%acc = %zero) -> (f32) {
        %v = loop.load %x[%i, %k] : memref<4x6xf32>
        %n = arith.addf %acc, %v : f32
        loop.yield %n : f32
      }
      loop.store %s, %y[%i] : memref<4xf32>
    }
    loop.return
  }
  func.func @forward(%x: memref<4x6xf32>) -> memref<4xf32> {
    %y = loop.alloc : memref<4xf32>
    loop.launch @row_sum(%x, %y) : (memref<4x6xf32>, memref<4xf32>) -> ()
    func.return %y : memref<4xf32>
  }
}"""


def test_round_trip_is_exact() -> None:
    module = parse(ROW_SUM)
    assert str(module) == ROW_SUM
    assert str(parse(str(module))) == ROW_SUM


def test_accessors() -> None:
    module = parse(ROW_SUM)
    outer, inner = (op for op in module.walk() if isinstance(op, loop.ForOp))
    assert not outer.is_reduce and inner.is_reduce
    assert (outer.lower, outer.upper, outer.step_value, outer.trip_count) == (0, 4, 1, 4)
    assert (inner.lower, inner.upper, inner.step_value, inner.trip_count) == (1, 6, 2, 3)
    assert [a.name_hint for a in inner.iter_args] == ["acc"]
    assert isinstance(outer.body.block.last_op, loop.YieldOp)  # inserted by the parser
    kernel = next(op for op in module.ops if isinstance(op, loop.KernelOp))
    assert kernel.sym_name.data == "row_sum"
    assert kernel.arg_types == (MemRefType(f32, [4, 6]), MemRefType(f32, [4]))


def _kernel_with_builder() -> tuple[loop.KernelOp, Builder]:
    kernel = loop.KernelOp("k", [MemRefType(f32, [8]), MemRefType(f32, [8])])
    kernel.body.block.add_op(loop.ReturnOp())
    last = kernel.body.block.last_op
    assert last is not None
    return kernel, Builder(InsertPoint.before(last))


def test_build_from_python() -> None:
    kernel, b = _kernel_with_builder()
    src, dst = kernel.body.block.args
    zero = b.insert(arith.ConstantOp(FloatAttr(0.0, f32)))
    free = b.insert(loop.ForOp(0, 8))
    inner = Builder(InsertPoint.at_end(free.body.block))
    value = inner.insert(loop.LoadOp(src, [free.induction_var]))
    inner.insert(loop.StoreOp(value, dst, [free.induction_var]))
    inner.insert(loop.YieldOp())
    total = b.insert(loop.ForOp(0, 8, 2, [zero]))
    body = Builder(InsertPoint.at_end(total.body.block))
    body.insert(loop.YieldOp(total.iter_args[0]))
    assert value.res.type == Float32Type()
    assert total.res[0].type == f32
    assert isinstance(total.induction_var.type, IndexType)
    module = ModuleOp([kernel])
    module.verify()
    text = str(module)
    assert "= loop.for %6 = 0 to 8 step 2 iter_args(%7 = %2) -> (f32) {" in text
    assert str(parse(text)) == text


def _verify_kernel(body: str, args: str = "%x: memref<4x8xf32>") -> None:
    parse(f"loop.kernel @k({args}) {{\n{body}\n  loop.return\n}}")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "%c = arith.constant 0 : index\n%v = loop.load %x[%c] : memref<4x8xf32>",
            "loop.load: expected 2 indices for memref<4x8xf32>, got 1",
        ),
        (
            "%c = arith.constant 0 : index\n%v = arith.constant 1.0 : f16\n"
            '"loop.store"(%v, %x, %c, %c) : (f16, memref<4x8xf32>, index, index) -> ()',
            "attribute f16 expected from variable 'T', but got f32",
        ),
        (
            "%z = arith.constant 0.0 : f32\n"
            "%s = loop.for %i = 0 to 4 iter_args(%a = %z) -> (f32) {\n"
            "  %h = arith.constant 0.0 : f16\n  loop.yield %h : f16\n}",
            "loop.for: yield types (f16) differ from iter_args types (f32)",
        ),
        ("loop.for %i = 0 to 4 step 0 {\n}", "loop.for: step must be positive, got 0"),
    ],
)
def test_verifier_rules(body: str, message: str) -> None:
    with pytest.raises(VerifyException, match=message.replace("(", r"\(").replace(")", r"\)")):
        _verify_kernel(body)


def test_kernel_arguments_are_memrefs() -> None:
    with pytest.raises(VerifyException, match="argument #0 must be a memref"):
        _verify_kernel("", "%x: f32")


def _host(kernel_args: list[MemRefType], launch_args: list[MemRefType]) -> ModuleOp:
    kernel = loop.KernelOp("k", kernel_args)
    kernel.body.block.add_op(loop.ReturnOp())
    func = FuncOp("forward", (launch_args, []))
    b = Builder(InsertPoint.at_end(func.body.block))
    b.insert(loop.LaunchOp("k", list(func.body.block.args)))
    b.insert(ReturnOp())
    return ModuleOp([kernel, func])


def test_launch_checks_callee_and_types() -> None:
    good = MemRefType(f32, [4])
    _host([good], [good]).verify()
    with pytest.raises(VerifyException, match="argument types of @k differ"):
        _host([good], [MemRefType(f16, [4])]).verify()
    module = _host([good], [good])
    kernel = next(op for op in module.ops if isinstance(op, loop.KernelOp))
    kernel.sym_name = StringAttr("other")
    with pytest.raises(VerifyException, match="no kernel named @k"):
        module.verify()


def test_alloc_builder() -> None:
    alloc = loop.AllocOp(MemRefType(f16, [2, 3]))
    assert alloc.res.type == MemRefType(f16, [2, 3])
