"""Effects read from the ops' declarations: an op declared `Pure` is pure at every call site.

`TwiceOp` below is an op no pass has heard of; its IRDL definition declares it `Pure`, and
nothing else is edited for it: the passes hoist it, the cost model counts it, dead-code
removal drops it, because every question of purity goes through `effects.is_pure`.
"""

from __future__ import annotations

from pathlib import Path

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, FloatAttr, IndexType, IntegerAttr, MemRefType
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import NoMemoryEffect, Pure

from deplodock.dialects import tile
from deplodock.dialects.effects import erase_dead, is_dead, is_pure
from deplodock.dialects.scalar_ops import UNDECLARED_PURE
from deplodock.passes.tile.hoist_invariant import hoist_invariant
from deplodock.passes.tile.nests import is_hoistable
from deplodock.perf.instructions import op_cost

PACKAGE = Path(__file__).resolve().parents[2] / "deplodock"
F32 = Float32Type()


@irdl_op_definition
class TwiceOp(IRDLOperation):
    """`%r = test.twice %x : index`: twice `%x`, declared `Pure` and nothing more."""

    name = "test.twice"
    value = operand_def(IndexType)
    result = result_def(IndexType)
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue):
        super().__init__(operands=[value], result_types=[IndexType()])


def index(value: int) -> arith.ConstantOp:
    return arith.ConstantOp(IntegerAttr(value, IndexType()))


def loop_kernel() -> tuple[tile.KernelOp, tile.ForOp, TwiceOp]:
    """`for i: y[twice(3)] = 0`, the `twice` invariant in the loop."""
    kernel = tile.KernelOp("k", [MemRefType(F32, [64])])
    (y,) = kernel.body.block.args
    grid, threads = tile.GridOp(1), tile.ThreadsOp(32)
    grid.body.block.add_op(threads)
    three, zero = index(3), arith.ConstantOp(FloatAttr(0.0, F32))
    loop = tile.ForOp(threads.iv, 64, 32)
    twice = TwiceOp(three.result)
    loop.body.block.add_ops([twice, tile.StoreOp(zero.result, y, [twice.result]), tile.YieldOp()])
    threads.body.block.add_ops([three, zero, loop])
    kernel.body.block.add_ops([grid, tile.ReturnOp()])
    return kernel, loop, twice


def test_a_new_pure_op_is_pure_at_every_call_site() -> None:
    kernel, loop, twice = loop_kernel()
    assert is_pure(twice) and is_hoistable(twice, set())
    assert op_cost(twice, set()) == {"int": 1}  # an integer instruction, like `arith.addi`
    assert hoist_invariant(kernel) == 1 and twice.parent_op() is not loop
    unused = TwiceOp(index(1).result)
    assert is_dead(unused)


#: The modules that ask whether an op is pure (or dead): each asks `effects`.
CALL_SITES = (
    "passes/tile/nests.py",
    "passes/tile/stage.py",
    "passes/tile/split_k.py",
    "passes/tile/block.py",
    "passes/tile/shared_statistics.py",
    "passes/tile/hoist_invariant.py",
    "passes/tile/vectorize.py",
    "tune/footprint.py",
    "passes/kernel_drop_barriers.py",
    "passes/kernel_to_cuda/printer.py",
    "perf/instructions.py",
)


def test_no_call_site_asks_a_dialect_name_whether_an_op_is_pure() -> None:
    """So `TwiceOp` is pure to each of them, as it is to `is_pure`. (A dialect name still
    decides what a flop is, `backend/cost.py`: which computation, not which effects.)"""
    for site in CALL_SITES:
        text = (PACKAGE / site).read_text()
        assert "dialect_name()" not in text and "from deplodock.dialects.effects" in text, site


def test_a_collective_declared_pure_is_not_pure_but_may_go_unused() -> None:
    """`tile.combine` is `Pure` for CSE, but what it computes depends on the other threads:
    no pass may move it as a per-thread op. Unused by every thread, it goes."""
    _, loop, twice = loop_kernel()
    zero = arith.ConstantOp(FloatAttr(0.0, F32))
    combine = tile.CombineOp("add", zero.result)
    loop.body.block.insert_ops_before([zero, combine], twice)
    assert not is_pure(combine) and not is_hoistable(combine, set())
    assert is_dead(combine)


def test_the_arith_ops_xdsl_leaves_undeclared_are_listed() -> None:
    """Every arith and math op is pure: declared so by xDSL, or in `UNDECLARED_PURE` (an
    entry xDSL has since declared fails here, and goes)."""
    for op in (*arith.Arith.operations, *math.Math.operations):
        assert op.has_trait(NoMemoryEffect) != (op in UNDECLARED_PURE), op.name
    one = index(1)
    assert is_pure(arith.RemUIOp(one.result, one.result))


def test_erase_dead_drops_chains_of_unused_ops_and_keeps_loops_and_terminators() -> None:
    """What nothing uses goes, users first (the constant feeding only a dropped `twice`
    too); a loop of loads stays (a region op is never dead here) and so does its yield."""
    kernel, loop, twice = loop_kernel()
    (y,) = kernel.body.block.args
    one = index(1)
    unused = TwiceOp(one.result)
    read = tile.LoadOp(y, [unused.result])
    reads = tile.ForOp(one.result, 4, 1)
    reads.body.block.add_ops([tile.LoadOp(y, [one.result]), tile.YieldOp()])
    block = loop.body.block
    block.insert_ops_before([one, unused, read, reads], twice)
    erase_dead(list(block.ops))
    kept = [op.name for op in block.ops]
    assert kept == ["arith.constant", "tile.for", "test.twice", "tile.store", "tile.yield"]
