"""Warp-level matrix multiply-accumulate on tensor cores, shared by `tile` and `kernel`.

Syntax (`X` is `tile` or `kernel`):

```
%d0, %d1, %d2, %d3 = X.mma_sync a(%a0, ..., %a7) b(%b0, %b1, %b2, %b3) c(%c0, ..., %c3) : bf16
```

One op is one PTX `mma.sync.aligned.m16n8k16.row.col.f32.<t>.<t>.f32` (`t` = bf16 or f16):
the 32 threads of a warp together compute `D = A x B + C` for a 16x16 A, a 16x8 B and a
16x8 fp32 C and D. No thread holds a matrix: each holds a *fragment*, 8 elements of A, 4 of
B, 4 of C and D, at the positions `MMA_M16N8K16` gives (the PTX ISA's "Matrix Fragments for
mma.m16n8k16 with floating point type"). Every lane of the warp must execute it, with the
same shape: the verifier cannot see lanes, so the interpreters reject a partly active warp.
It is not `Pure`, like a shuffle: a warp-collective op must not be merged, moved or
dropped by the generic rewrites.

With f32 A and B (printed `: tf32`) the op is `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32
.f32`: a 16x8 A and an 8x8 B of tf32 values (fp32 with the low 13 mantissa bits zero, what
`X.split_tf32` gives), 4 A and 2 B elements per lane (`MMA_M16N8K8_TF32`). The interpreters
and the CPU emulation reject an operand that is not a tf32 value rather than guess what the
tensor cores make of its low bits. `tile-mma` builds fp32-accurate products from three of
them (`split_tf32`); the two that add rounding corrections carry the `correction` unit
attribute, so that cost counts do not take them for more math.

The products of two 16-bit floats (or of two tf32 values) are exact in fp32; the PTX ISA
leaves the order and the intermediate precision of the sums open, so the interpreters and
the CPU emulation add the products of a dot product in order, in fp32, and then add C (any
order is a legal result, and the checks against PyTorch use the dtype's tolerance).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatTF32Type,
    UnitAttr,
    f32,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    operand_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.hardware import WARP_SIZE


@dataclass(frozen=True)
class MmaShape:
    """An `mma.sync` shape and where each lane's fragment registers sit in the matrices.

    Lane `l` of the warp has group `g = l // 4` and index in its group `q = l % 4`. The
    `*_position` methods give the (row, column) of register `i` of lane `l`: A is M x K,
    B is K x N, C and D are M x N.
    """

    m: int
    n: int
    k: int
    a_registers: int
    b_registers: int
    c_registers: int

    @property
    def name(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"

    @property
    def flops(self) -> int:
        """Flops of one instruction (a multiply and an add per product): what a warp's MMA
        counts toward a kernel's work, and what a tensor-core rate is quoted in."""
        return 2 * self.m * self.n * self.k

    @property
    def packed(self) -> bool:
        """Whether a 32-bit register holds two 16-bit elements (k16) or one tf32 (k8)."""
        return self.k == 16

    def a_position(self, lane: int, i: int) -> tuple[int, int]:
        g, q = lane // 4, lane % 4
        if not self.packed:  # a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4)
            return g + 8 * (i % 2), q + 4 * (i // 2)
        return g + 8 * ((i // 2) % 2), 2 * q + i % 2 + 8 * (i // 4)

    def b_position(self, lane: int, i: int) -> tuple[int, int]:
        g, q = lane // 4, lane % 4
        if not self.packed:  # b0 (q, g), b1 (q + 4, g)
            return q + 4 * i, g
        return 2 * q + i % 2 + 8 * (i // 2), g

    def c_position(self, lane: int, i: int) -> tuple[int, int]:
        g, q = lane // 4, lane % 4
        return g + 8 * (i // 2), 2 * q + i % 2

    def positions(self, operand: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of every `(lane, register)` of `operand` ("a", "b" or "c"), each a
        `(32, registers)` array: what the interpreters gather and scatter by (built once per
        shape and operand: every interpreted MMA asks for all three)."""
        return _positions(self, operand)


@functools.cache
def _positions(shape: MmaShape, operand: str) -> tuple[np.ndarray, np.ndarray]:
    registers = {"a": shape.a_registers, "b": shape.b_registers, "c": shape.c_registers}[operand]
    where = {"a": shape.a_position, "b": shape.b_position, "c": shape.c_position}[operand]
    rows = np.zeros((WARP_SIZE, registers), dtype=np.int64)
    cols = np.zeros((WARP_SIZE, registers), dtype=np.int64)
    for lane in range(WARP_SIZE):
        for i in range(registers):
            rows[lane, i], cols[lane, i] = where(lane, i)
    rows.flags.writeable = cols.flags.writeable = False  # shared by every caller
    return rows, cols


#: `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32` (compute capability 8.0+).
MMA_M16N8K16 = MmaShape(m=16, n=8, k=16, a_registers=8, b_registers=4, c_registers=4)
#: `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` (compute capability 8.0+): half the
#: products of an m16n8k16, at half its rate on the same tensor cores (`hardware.py`).
MMA_M16N8K8_TF32 = MmaShape(m=16, n=8, k=8, a_registers=4, b_registers=2, c_registers=4)

#: Mantissa bits fp32 has and tf32 drops: a tf32 value is an fp32 one with these zero.
TF32_DROPPED_BITS = 13


#: The low bits a tf32 value has zero, and half a tf32 unit: `split_tf32`'s masks.
TF32_LOW_MASK = (1 << TF32_DROPPED_BITS) - 1
TF32_HALF_UNIT = 1 << (TF32_DROPPED_BITS - 1)


def is_tf32(values: np.ndarray) -> np.ndarray:
    """Whether each float32 value is a tf32 value (its low 13 mantissa bits zero)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(TF32_LOW_MASK)) == 0


def split_tf32(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`x = hi + lo`, both tf32 values: `hi` is `x` rounded to its 10 leading mantissa bits
    (half a unit added to the bits, the low 13 cleared: to nearest, ties away from zero),
    `lo` is the rest `x - hi` (exact in fp32) with its low 13 bits cleared. Three tf32 MMAs,
    `lo_a hi_b + hi_a lo_b + hi_a hi_b`, then give products within about 2^-21 of fp32's:
    `lo` keeps 11 bits of what `hi` left, and the dropped `lo_a lo_b` is about 2^-22 of the
    product. Integer steps, not PTX `cvt.rna.tf32.f32` (a compare, a select and two integer
    ops in sm_90 SASS, for NaN care): an add and two masks. A NaN stays NaN through `lo`; an
    infinite `x` makes `lo` NaN (inf - inf), so an infinite operand gives NaN, not inf."""
    x = np.asarray(values, dtype=np.float32)
    low = np.uint32(TF32_LOW_MASK)
    hi = ((x.view(np.uint32) + np.uint32(TF32_HALF_UNIT)) & ~low).astype(np.uint32)
    hi_f = hi.view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        rest = (x - hi_f).astype(np.float32)
    lo = (rest.view(np.uint32) & ~low).astype(np.uint32)
    return hi_f, lo.view(np.float32)


def warp_mma(shape: MmaShape, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """`D = A x B + C` for many warps at once, from and to fragments.

    `a`, `b`, `c` are `(warps, 32, registers)` arrays of per-lane values (16-bit or tf32
    inputs carried in float32, as the interpreters do); the result is D's fragments, `(warps,
    32, c_registers)` float32. Products are summed over k in order in fp32, then C is added.
    """
    warps = a.shape[0]
    a_rows, a_cols = shape.positions("a")
    b_rows, b_cols = shape.positions("b")
    c_rows, c_cols = shape.positions("c")
    a_matrix = np.zeros((warps, shape.m, shape.k), dtype=np.float32)
    b_matrix = np.zeros((warps, shape.k, shape.n), dtype=np.float32)
    c_matrix = np.zeros((warps, shape.m, shape.n), dtype=np.float32)
    a_matrix[:, a_rows, a_cols] = a
    b_matrix[:, b_rows, b_cols] = b
    c_matrix[:, c_rows, c_cols] = c
    total = np.zeros((warps, shape.m, shape.n), dtype=np.float32)
    for kk in range(shape.k):  # in order, rounding to fp32 after each add
        total = total + a_matrix[:, :, kk, None] * b_matrix[:, None, kk, :]
    d_matrix = (total + c_matrix).astype(np.float32)
    return d_matrix[:, c_rows, c_cols]


class MmaSyncOpBase(IRDLOperation):
    """`X.mma_sync a(...) b(...) c(...) : T`: one warp-wide m16n8k16 MMA (module docstring)."""

    a = var_operand_def()
    b = var_operand_def()
    c = var_operand_def()
    d = var_result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    #: The unit attribute of an MMA that adds a rounding correction (module docstring).
    CORRECTION: ClassVar[str] = "correction"

    def __init__(
        self,
        a: Sequence[SSAValue],
        b: Sequence[SSAValue],
        c: Sequence[SSAValue],
        correction: bool = False,
    ) -> None:
        super().__init__(operands=[list(a), list(b), list(c)], result_types=[[f32] * len(c)])
        if correction:
            self.attributes[self.CORRECTION] = UnitAttr()

    @property
    def shape(self) -> MmaShape:
        """m16n8k8 for tf32 (f32) inputs, m16n8k16 for bf16 and f16: the type decides."""
        if self.a and isinstance(self.a[0].type, Float32Type):
            return MMA_M16N8K8_TF32
        return MMA_M16N8K16

    @property
    def is_tf32(self) -> bool:
        return self.shape is MMA_M16N8K8_TF32

    @property
    def is_correction(self) -> bool:
        return self.CORRECTION in self.attributes

    def print(self, printer: Printer) -> None:
        for key, values in (("a", self.a), ("b", self.b), ("c", self.c)):
            printer.print_string(f" {key}(")
            printer.print_list(values, printer.print_ssa_value)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        if self.is_tf32:
            printer.print_string("tf32")
        else:
            printer.print_attribute(self.a[0].type if self.a else f32)

    @classmethod
    def parse(cls, parser: Parser) -> MmaSyncOpBase:
        groups: list[list[UnresolvedOperand]] = []
        for key in ("a", "b", "c"):
            parser.parse_keyword(key)
            groups.append(
                parser.parse_comma_separated_list(
                    parser.Delimiter.PAREN, parser.parse_unresolved_operand
                )
            )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        element = parser.parse_type()
        if isinstance(element, FloatTF32Type):  # tf32 operands travel as f32 values
            element = f32
        a = parser.resolve_operands(groups[0], [element] * len(groups[0]), parser.pos)
        b = parser.resolve_operands(groups[1], [element] * len(groups[1]), parser.pos)
        c = parser.resolve_operands(groups[2], [f32] * len(groups[2]), parser.pos)
        op = cls(a, b, c)
        op.attributes |= attributes
        return op

    def verify_(self) -> None:
        shape = self.shape
        counts = (len(self.a), len(self.b), len(self.c), len(self.d))
        expected = (shape.a_registers, shape.b_registers, shape.c_registers, shape.c_registers)
        if counts != expected:
            raise VerifyException(
                f"{self.name}: {shape.name} takes {expected[0]} A, {expected[1]} B and "
                f"{expected[2]} C values per lane and gives {expected[3]}, got "
                f"{counts[0]}, {counts[1]}, {counts[2]} and {counts[3]}"
            )
        inputs = {value.type for value in (*self.a, *self.b)}
        kinds = BFloat16Type | Float16Type | Float32Type
        if len(inputs) != 1 or not isinstance(next(iter(inputs)), kinds):
            found = ", ".join(sorted(str(t) for t in inputs))
            raise VerifyException(
                f"{self.name}: A and B must both be bf16, both f16 or both f32 (tf32), got {found}"
            )
        if self.is_correction and not self.is_tf32:
            raise VerifyException(f"{self.name}: only a tf32 MMA adds a correction")
        if not all(isinstance(v.type, Float32Type) for v in (*self.c, *self.d)):
            raise VerifyException(f"{self.name}: C and D must be f32 (fp32 accumulation)")


class SplitTf32OpBase(IRDLOperation):
    """`%hi, %lo = X.split_tf32 %x`: `x = hi + lo` in two tf32 values (`split_tf32`), what a
    tf32 MMA's operands must be. Pure: per-thread integer and float steps that CSE may share
    between the MMAs reading one fragment element."""

    input = operand_def(Float32Type)
    hi = result_def(Float32Type)
    lo = result_def(Float32Type)

    traits = traits_def(Pure())

    def __init__(self, value: SSAValue) -> None:
        super().__init__(operands=[value], result_types=[f32, f32])

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.input)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> SplitTf32OpBase:
        value = parser.resolve_operand(parser.parse_unresolved_operand(), f32)
        attributes = parser.parse_optional_attr_dict()
        op = cls(value)
        op.attributes |= attributes
        return op
