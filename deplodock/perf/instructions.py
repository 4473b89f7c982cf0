"""What one kernel-level op costs in SASS instructions, by the pipe that executes them.

The kernel dialect is close to the instructions nvcc emits, but not one-to-one: a `mulf`
whose only use is an `addf` becomes one FFMA; `math.exp` is a MUFU.EX2 plus a scaling FFMA;
an IEEE `divf` is a reciprocal and a few FFMAs of refinement; an index division by a constant
is a multiply-high and a shift. `op_cost` says, per op, how many warp-instructions of each
class it becomes. The counts are those of typical `nvcc -O3` output for sm_80/sm_90 (read from
SASS of kernels like ours); where the SASS is available, a report may count from it instead.

Classes and their pipes: `fma` and `fp32` (the FP32 pipe), `mma` (the tensor cores: one
`kernel.mma_sync`, an HMMA.16816, per warp; its 16-bit operands go in as 32-bit registers of
two values each, the form a vector load of bf16 leaves them in, so packing costs nothing; a
tf32 one, an HMMA.1688, does half the products at half the rate, `hardware.TF32_MMA_RATE`,
and so takes the tensor cores as long: one `mma` each), `kernel.split_tf32` an integer add,
two masks and a float subtract,
`int` (the integer pipe), `sfu` (MUFU: transcendental approximations), `convert` (F2F/I2F),
`shuffle`, `barrier`, `branch`, and the memory instructions `ld_global`, `st_global`,
`ld_shared`, `st_shared` and `ldgsts` (counted by the tracer, which sees which buffer an
access goes to). A vector load or store is one instruction of its class per warp (one 8- or
16-byte request per thread); a `kernel.ldmatrix` is one `ld_shared` (LDSM) per warp, its
wavefronts those of a 16-byte request of the lanes giving row addresses; a `cp.async` is one
LDGSTS per warp (global to shared, no register round trip); `cp.async` commit and wait are
one instruction each (LDGDEPBAR, DEPBAR).
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import AnyFloat
from xdsl.ir import Operation

from deplodock.dialects import kernel
from deplodock.dialects.common.mma import MMA_M16N8K8_TF32, MMA_M16N8K16
from deplodock.dialects.effects import is_pure
from deplodock.dialects.hardware import TF32_MMA_RATE
from deplodock.dialects.queries import constant_index
from deplodock.dialects.scalar_ops import CAST_OPS

#: Instruction classes executed by the FP32 pipe.
FP32_CLASSES = ("fma", "fp32")
#: Flops of one `mma` warp-instruction at the 16-bit rate (an m16n8k16: 4096), what a
#: tensor-core rate divides: a tf32 m16n8k8 is half the flops at half the rate, the same time.
MMA_FLOPS = MMA_M16N8K16.flops
assert MMA_M16N8K8_TF32.flops / TF32_MMA_RATE == MMA_FLOPS
MEMORY_CLASSES = ("ld_global", "st_global", "ld_shared", "st_shared", "ldgsts")
CLASSES = (
    "fma",
    "fp32",
    "mma",
    "int",
    "sfu",
    "convert",
    "shuffle",
    "barrier",
    "branch",
    *MEMORY_CLASSES,
)

Cost = dict[str, int]

#: Float ops that are one FP32-pipe instruction.
_SIMPLE_FLOAT = (
    arith.AddfOp,
    arith.SubfOp,
    arith.MulfOp,
    arith.NegfOp,
    arith.MaximumfOp,
    arith.MinimumfOp,
    arith.MaxnumfOp,
    arith.MinnumfOp,
    arith.CmpfOp,
    math.AbsFOp,
    math.FloorOp,
    math.CeilOp,
)

#: Library functions: their usual SASS expansion (MUFU approximation + FP32 refinement).
_MATH_FUNCTIONS: dict[type[Operation], Cost] = {
    math.ExpOp: {"sfu": 1, "fma": 2},
    math.Exp2Op: {"sfu": 1, "fp32": 1},
    math.LogOp: {"sfu": 1, "fma": 3},
    math.Log2Op: {"sfu": 1, "fp32": 1},
    math.RsqrtOp: {"sfu": 1, "fp32": 2},
    math.SqrtOp: {"sfu": 1, "fma": 3},
    math.TanhOp: {"sfu": 2, "fma": 8},
    math.ErfOp: {"fma": 14, "fp32": 2},
    math.SinOp: {"sfu": 1, "fma": 8},
    math.CosOp: {"sfu": 1, "fma": 8},
    math.PowFOp: {"sfu": 2, "fma": 10},
    arith.DivfOp: {"sfu": 1, "fma": 4, "branch": 1},
}

_INDEX_DIVISIONS = (arith.DivSIOp, arith.DivUIOp, arith.RemSIOp, arith.RemUIOp, arith.FloorDivSIOp)


def fused_multiplies(ops: Iterable[Operation]) -> set[Operation]:
    """The float `mulf`s that nvcc contracts with their only user, an `addf`/`subf`."""
    fused: set[Operation] = set()
    for op in ops:
        if not isinstance(op, arith.MulfOp) or not isinstance(op.result.type, AnyFloat):
            continue
        uses = list(op.result.uses)
        if len(uses) == 1 and isinstance(uses[0].operation, arith.AddfOp | arith.SubfOp):
            fused.add(op)
    return fused


def _division_cost(op: Operation) -> Cost:
    divisor = constant_index(op.operands[1])
    if divisor is None:
        return {"int": 20, "sfu": 1}  # a runtime integer division: a reciprocal and fix-ups
    if divisor > 0 and divisor & (divisor - 1) == 0:
        return {"int": 1}  # a shift or a mask
    return {"int": 3}  # multiply-high, shift, and a multiply-subtract for the remainder


def op_cost(op: Operation, fused: set[Operation]) -> Cost:
    """Warp-instructions per class one execution of `op` issues (memory ops: see module)."""
    if isinstance(op, arith.ConstantOp | arith.BitcastOp):
        return {}  # an immediate operand; a reinterpretation of the same register
    if op in fused:
        return {"fma": 1}  # the mulf becomes the FFMA ...
    if isinstance(op, arith.AddfOp | arith.SubfOp) and any(
        operand.owner in fused for operand in op.operands
    ):
        return {}  # ... and its addf disappears into it
    if isinstance(op, math.FmaOp):
        return {"fma": 1}
    if isinstance(op, _SIMPLE_FLOAT):
        return {"fp32": 1}
    if type(op) in _MATH_FUNCTIONS:
        return dict(_MATH_FUNCTIONS[type(op)])
    if isinstance(op, _INDEX_DIVISIONS):
        return _division_cost(op)
    if isinstance(op, CAST_OPS):
        return {} if isinstance(op, arith.IndexCastOp) else {"convert": 1}
    if isinstance(op, kernel.ThreadIdOp | kernel.BlockIdOp):
        return {"int": 1}  # S2R
    if isinstance(op, kernel.ShflXorOp):
        return {"shuffle": 1}
    if isinstance(op, kernel.MmaSyncOp):
        return {"mma": 1}
    if isinstance(op, kernel.SplitTf32Op):
        return {"int": 3, "fp32": 1}  # IADD, 2 x LOP3, FADD
    if isinstance(op, kernel.BarrierOp):
        return {"barrier": 1}
    if isinstance(op, kernel.CpAsyncCommitOp | kernel.CpAsyncWaitOp):
        return {"barrier": 1}  # LDGDEPBAR / DEPBAR: scoreboard bookkeeping, no data
    if isinstance(op, kernel.IfOp):
        return {"branch": 1}
    if isinstance(op, kernel.YieldOp) and isinstance(op.parent_op(), kernel.ForOp):
        return {"int": 1, "branch": 1}  # the back edge: increment, compare-and-branch
    if is_pure(op):
        return {"int": 1}  # index arithmetic, comparisons, selects, logic
    return {}
