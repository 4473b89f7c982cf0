"""Warpgroup-level MMA (sm_90a `wgmma.mma_async`): its shared-memory matrix descriptors, the
canonical shared-memory layouts they describe, its accumulator layout, and its ops' bases.

Syntax (`X` is `kernel`; the tile level does not schedule onto it yet):

```
%da = X.wgmma_desc %a_s[%i, %j] swizzle 128 lbo 16 sbo 1024 : memref<64x64xbf16, 3>
X.wgmma_fence
%d0, ..., %d31 = X.wgmma m64n64k16 %a_s(%da), %b_s(%db) c(%c0, ..., %c31)
    : memref<64x64xbf16, 3>, memref<64x64xbf16, 3>
X.wgmma_commit
X.wgmma_wait 0
```

One `X.wgmma` is one PTX `wgmma.mma_async.sync.aligned.m64nNkK.f32.T.T` (sm_90a only, built
with `-gencode=arch=compute_90a,code=sm_90a`): the 128 threads of a *warpgroup* (4 consecutive
warps, the first a multiple of 4) together compute `D = A x B + D` for a 64 x K A, a K x N B
(N a multiple of 8 from 8 to 256) and a 64 x N fp32 accumulator; K is 16 for bf16/f16 and 8
for tf32 (f32 buffers, `m64nNk8`; every operand must be a tf32 value, as for
`mma_sync`). A and B are read from shared memory through 64-bit *matrix descriptors*, never
from registers here; the accumulator is N / 2 fp32 registers per thread (`accumulator_position`).

Asynchrony (the PTX ISA's "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): a
warpgroup runs `wgmma_fence` before its first wgmma and whenever its accumulator registers
were touched by other instructions; `wgmma_commit` closes the wgmmas issued since the last
commit into a *group*; `wgmma_wait N` waits until at most the N newest groups are pending.
Until its group is waited for, a wgmma's results must not be read (except as the
accumulator of a next wgmma, which the hardware chains in order).

Matrix descriptor (the ISA's "Matrix Descriptor Format"), one 64-bit value:

| bits  | field                                        | stored as        |
|-------|----------------------------------------------|------------------|
| 0-13  | start address (shared-window byte address)  | `(addr & 0x3FFFF) >> 4` |
| 16-29 | leading dimension byte offset (LBO)          | `(lbo & 0x3FFFF) >> 4`  |
| 32-45 | stride dimension byte offset (SBO)           | `(sbo & 0x3FFFF) >> 4`  |
| 49-51 | matrix base offset (swizzle phase)           | 3 bits           |
| 62-63 | swizzle mode: 0 none, 1 128B, 2 64B, 3 32B   | 2 bits           |

Canonical K-major layouts (A is M x K, B is N x K, K contiguous: the only layout tf32 allows,
and the one modelled here; the transposed MN-major forms of bf16/f16 are not). A *core
matrix* is 8 rows of 16 bytes. Without swizzle the 16 bytes of a row are contiguous, the 8
rows of a core matrix follow each other (128 bytes), LBO is the distance between core
matrices adjacent along K and SBO between core matrices adjacent along M/N. With a 32, 64
or 128-byte swizzle a row of a core-matrix group is `S` bytes of K (S = the swizzle width,
at least the 32 bytes one wgmma's K spans, so LBO is unused), the 8 rows are `S` bytes apart,
SBO is again the distance between 8-row groups, and the 16-byte chunk `c` of a row lands at
chunk `c XOR f(row)` of the same row: the swizzle XORs address bits 4.. with bits 7.. (three
bits for 128B, two for 64B, one for 32B), so the pattern repeats every 1024, 512 or 256
bytes, the alignment a swizzled operand's pattern must start on (base offset 0).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    f32,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    operand_def,
    prop_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.common.async_memory import (
    _parse_access,
    _print_access,
    _print_tail,
    _resolve_indices,
)
from deplodock.dialects.common.memory import _verify_indices
from deplodock.dialects.common.syntax import parse_memref_type
from deplodock.dialects.hardware import WARP_SIZE, WARPGROUP_SIZE, is_shared

# -- matrix descriptors ------------------------------------------------------------------------

#: A core matrix: 8 rows of 16 bytes.
CORE_ROWS = 8
CORE_ROW_BYTES = 16
#: Swizzle width in bytes (0: none) -> the descriptor's 2-bit mode, and back.
SWIZZLE_MODES: dict[int, int] = {0: 0, 128: 1, 64: 2, 32: 3}
SWIZZLE_WIDTHS: dict[int, int] = {mode: width for width, mode in SWIZZLE_MODES.items()}
#: The 18-bit byte range of the start address and the two offsets (stored >> 4 in 14 bits).
_FIELD_BYTES = 1 << 18
_START, _LBO, _SBO, _BASE, _SWIZZLE = 0, 16, 32, 49, 62


@dataclass(frozen=True)
class MatrixDescriptor:
    """The fields of a wgmma matrix descriptor, in bytes (module docstring's table)."""

    start: int
    lbo: int
    sbo: int
    swizzle: int = 0  # the swizzle width in bytes: 0, 32, 64 or 128
    base_offset: int = 0

    def __post_init__(self) -> None:
        for name in ("start", "lbo", "sbo"):
            value = getattr(self, name)
            if not 0 <= value < _FIELD_BYTES or value % CORE_ROW_BYTES:
                raise ValueError(
                    f"descriptor {name} must be a multiple of 16 below 2^18, got {value}"
                )
        if self.swizzle not in SWIZZLE_MODES:
            raise ValueError(f"swizzle must be 0, 32, 64 or 128 bytes, got {self.swizzle}")
        if not 0 <= self.base_offset < 8:
            raise ValueError(f"base offset is 3 bits, got {self.base_offset}")

    def encode(self) -> int:
        """The 64-bit descriptor (an unsigned Python int)."""
        return (
            (self.start >> 4) << _START
            | (self.lbo >> 4) << _LBO
            | (self.sbo >> 4) << _SBO
            | self.base_offset << _BASE
            | SWIZZLE_MODES[self.swizzle] << _SWIZZLE
        )

    @classmethod
    def decode(cls, bits: int) -> MatrixDescriptor:
        """The fields of a 64-bit descriptor (unused bits ignored, as the hardware does)."""
        bits &= (1 << 64) - 1
        field = (1 << 14) - 1
        return cls(
            start=((bits >> _START) & field) << 4,
            lbo=((bits >> _LBO) & field) << 4,
            sbo=((bits >> _SBO) & field) << 4,
            base_offset=(bits >> _BASE) & 7,
            swizzle=SWIZZLE_WIDTHS[(bits >> _SWIZZLE) & 3],
        )


def swizzle_address(address: np.ndarray, width: int) -> np.ndarray:
    """The byte address a `width`-byte swizzle (0: none) stores logical address `address` at:
    bits 4.. XORed with bits 7.. (`log2(width / 16)` bits of each; module docstring)."""
    address = np.asarray(address, dtype=np.int64)
    if not width:
        return address
    mask = width // CORE_ROW_BYTES - 1
    return address ^ (((address >> 7) & mask) << 4)


def kmajor_addresses(desc: MatrixDescriptor, rows: int, row_bytes: int) -> np.ndarray:
    """The byte address of every byte `(r, b)` of a `rows x row_bytes` K-major operand (row =
    M or N index, `b` the byte along K) that `desc` describes: the canonical layouts of the
    module docstring. A base offset other than 0 is not modelled."""
    if desc.base_offset:
        raise ValueError(f"descriptor base offset {desc.base_offset} is not modelled (use 0)")
    r = np.arange(rows, dtype=np.int64)[:, None]
    b = np.arange(row_bytes, dtype=np.int64)[None, :]
    group = (r // CORE_ROWS) * desc.sbo
    if not desc.swizzle:
        inside = (b // CORE_ROW_BYTES) * desc.lbo + (r % CORE_ROWS) * CORE_ROW_BYTES
        return desc.start + group + inside + b % CORE_ROW_BYTES
    width = desc.swizzle
    inside = (b // width) * desc.lbo + (r % CORE_ROWS) * width + b % width
    return swizzle_address(desc.start + group + inside, width)


#: The alignment of a wgmma operand's shared array: the period of the widest (128-byte)
#: swizzle, so that the address bits a swizzle reads are the same within the array (what the
#: interpreter assumes) as in the shared window (what the hardware swizzles).
OPERAND_ALIGNMENT = 8 * 128


# -- shapes and the accumulator layout ---------------------------------------------------------

#: N of `m64nNkK`: a multiple of 8 from 8 to 256.
N_STEP, N_MAX = 8, 256
WGMMA_M = 64


@dataclass(frozen=True)
class WgmmaShape:
    """An `m64nNkK` wgmma: K = 16 for 16-bit inputs, 8 for tf32 (4-byte) ones; either way a
    row of A or B spans 32 bytes of K."""

    n: int
    element_bytes: int  # 2 (bf16, f16) or 4 (tf32)

    @property
    def m(self) -> int:
        return WGMMA_M

    @property
    def k(self) -> int:
        return 32 // self.element_bytes

    @property
    def name(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"

    @property
    def registers(self) -> int:
        """fp32 accumulator registers per thread."""
        return self.n // 2

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def accumulator_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of D for every `(thread, register)` of the warpgroup, `(128, N/2)`."""
        return _accumulator_positions(self.n)


def accumulator_position(thread: int, register: int) -> tuple[int, int]:
    """(row, column) of D that register `register` of warpgroup thread `thread` holds: warp
    `w = thread / 32` owns rows `16 w ..`; in it lane `l` has group `g = l / 4` and `q = l %
    4`, and register `i` sits at row `16 w + g + 8 ((i / 2) % 2)`, column `8 (i / 4) + 2 q +
    i % 2` (the ISA's m64nNk16 / m64nNk8 accumulator figure: the mma.m16n8 C layout, one
    16-row slab per warp, repeated every 8 columns)."""
    warp, lane = divmod(thread, WARP_SIZE)
    g, q = lane // 4, lane % 4
    return 16 * warp + g + 8 * ((register // 2) % 2), 8 * (register // 4) + 2 * q + register % 2


@functools.cache
def _accumulator_positions(n: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.zeros((WARPGROUP_SIZE, n // 2), dtype=np.int64)
    cols = np.zeros_like(rows)
    for thread in range(WARPGROUP_SIZE):
        for i in range(n // 2):
            rows[thread, i], cols[thread, i] = accumulator_position(thread, i)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def ptx_wgmma(shape: WgmmaShape, element: str, d: Sequence[str], a: str, b: str) -> str:
    """The PTX of one wgmma: `element` is `bf16`, `f16` or `tf32`; `d` the accumulator
    registers, `a` and `b` the descriptors. The scale-d predicate `p` is true (D is added),
    A and B are not negated and (bf16/f16) not transposed: K-major, the layout modelled."""
    mnemonic = f"wgmma.mma_async.sync.aligned.{shape.name}.f32.{element}.{element}"
    immediates = "1, 1" if element == "tf32" else "1, 1, 0, 0"
    return f"{mnemonic} {{{', '.join(d)}}}, {a}, {b}, p, {immediates};"


def warpgroup_mma(shape: WgmmaShape, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """`D = A x B^T + C` for many warpgroups: `a` is `(groups, 64, K)`, `b` `(groups, N, K)`
    (K-major, as read from shared memory), `c` the accumulator registers `(groups, 128,
    N/2)`; returns D's registers. Products summed over k in order in fp32, then C added
    (the ISA leaves the order open; `common/mma.py` does the same)."""
    rows, cols = shape.accumulator_positions()
    total = np.zeros((a.shape[0], shape.m, shape.n), dtype=np.float32)
    a, b = a.astype(np.float32), b.astype(np.float32)
    for kk in range(shape.k):
        total = total + a[:, :, kk, None] * b[:, None, :, kk]
    c_matrix = np.zeros_like(total)
    c_matrix[:, rows, cols] = c
    return (total + c_matrix)[:, rows, cols].astype(np.float32)


# -- ops ---------------------------------------------------------------------------------------


def _int_prop(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


def operand_bytes(memref: MemRefType, what: str = "wgmma") -> int:
    """Bytes of a wgmma operand's element (2 for bf16/f16, 4 for f32 as tf32), or an error."""
    element = memref.element_type
    if isinstance(element, BFloat16Type | Float16Type):
        return 2
    if isinstance(element, Float32Type):
        return 4
    raise VerifyException(f"{what}: takes bf16, f16 or f32 (tf32) operands, got {element}")


class WgmmaDescOpBase(IRDLOperation):
    """`%d = X.wgmma_desc %buf[...] swizzle S lbo L sbo B : memref<..., 3>`: the descriptor of
    the K-major operand starting at `buf[...]` (one 64-bit value per thread)."""

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType())
    res = result_def(i64)
    swizzle = prop_def(IntegerAttr)
    lbo = prop_def(IntegerAttr)
    sbo = prop_def(IntegerAttr)

    def __init__(
        self,
        memref: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
        swizzle: int,
        lbo: int,
        sbo: int,
    ) -> None:
        super().__init__(
            operands=[memref, indices],
            result_types=[i64],
            properties={
                "swizzle": _int_prop(swizzle),
                "lbo": _int_prop(lbo),
                "sbo": _int_prop(sbo),
            },
        )

    def descriptor(self, start: int) -> MatrixDescriptor:
        """This op's descriptor for an operand at byte address `start`."""
        return MatrixDescriptor(
            start=start,
            lbo=self.lbo.value.data,
            sbo=self.sbo.value.data,
            swizzle=self.swizzle.value.data,
        )

    def verify_(self) -> None:
        memref = self.memref.type
        assert isinstance(memref, MemRefType)
        if not is_shared(memref):
            raise VerifyException(f"{self.name}: describes shared memory, got {memref}")
        operand_bytes(memref, self.name)
        _verify_indices(self, self.memref, self.indices)
        try:
            self.descriptor(0)
        except ValueError as error:
            raise VerifyException(f"{self.name}: {error}") from None

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.memref, self.indices)
        printer.print_string(
            f" swizzle {self.swizzle.value.data} lbo {self.lbo.value.data}"
            f" sbo {self.sbo.value.data}"
        )
        _print_tail(printer, self, self.memref.type)

    @classmethod
    def parse(cls, parser: Parser) -> WgmmaDescOpBase:
        buf, indices = _parse_access(parser)
        fields = {}
        for key in ("swizzle", "lbo", "sbo"):
            parser.parse_keyword(key)
            fields[key] = parser.parse_integer(allow_negative=False, allow_boolean=False)
        attrs = parser.parse_optional_attr_dict()
        buf_value = parser.resolve_operand(buf, parse_memref_type(parser))
        op = cls(buf_value, _resolve_indices(parser, indices), **fields)
        op.attributes |= attrs
        return op


class WgmmaOpBase(IRDLOperation):
    """`%d... = X.wgmma m64nNkK %a_s(%da), %b_s(%db) c(%c...) : A type, B type`: one warpgroup's
    `wgmma.mma_async` (module docstring). The buffers are the shared arrays the descriptors
    point into: they make the shared-memory read visible to the IR (and to the interpreter,
    which resolves each descriptor's start address within its buffer)."""

    a_buf = operand_def(MemRefType)
    a_desc = operand_def(i64)
    b_buf = operand_def(MemRefType)
    b_desc = operand_def(i64)
    c = var_operand_def()
    d = var_result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        a_buf: SSAValue,
        a_desc: SSAValue,
        b_buf: SSAValue,
        b_desc: SSAValue,
        c: Sequence[SSAValue],
    ) -> None:
        super().__init__(
            operands=[a_buf, a_desc, b_buf, b_desc, list(c)], result_types=[[f32] * len(c)]
        )

    @property
    def shape(self) -> WgmmaShape:
        memref = self.a_buf.type
        assert isinstance(memref, MemRefType)
        return WgmmaShape(n=2 * len(self.c), element_bytes=operand_bytes(memref, self.name))

    @property
    def is_tf32(self) -> bool:
        return self.shape.element_bytes == 4

    def verify_(self) -> None:
        a, b = self.a_buf.type, self.b_buf.type
        assert isinstance(a, MemRefType) and isinstance(b, MemRefType)
        if not (is_shared(a) and is_shared(b)):
            raise VerifyException(f"{self.name}: reads A and B from shared memory")
        if a.element_type != b.element_type:
            raise VerifyException(
                f"{self.name}: A and B must have one element type, got "
                f"{a.element_type} and {b.element_type}"
            )
        n = 2 * len(self.c)
        if not (N_STEP <= n <= N_MAX and n % N_STEP == 0):
            raise VerifyException(
                f"{self.name}: N must be a multiple of 8 from 8 to 256 (N / 2 accumulator "
                f"values), got {len(self.c)} values"
            )
        if len(self.d) != len(self.c):
            raise VerifyException(f"{self.name}: gives as many values as its accumulator")
        if not all(isinstance(v.type, Float32Type) for v in (*self.c, *self.d)):
            raise VerifyException(f"{self.name}: the accumulator is f32")
        operand_bytes(a, self.name)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.shape.name} ")
        for buf, desc, sep in ((self.a_buf, self.a_desc, ", "), (self.b_buf, self.b_desc, "")):
            printer.print_ssa_value(buf)
            printer.print_string("(")
            printer.print_ssa_value(desc)
            printer.print_string(f"){sep}")
        printer.print_string(" c(")
        printer.print_list(self.c, printer.print_ssa_value)
        printer.print_string(")")
        _print_tail(printer, self, self.a_buf.type, self.b_buf.type)

    @classmethod
    def parse(cls, parser: Parser) -> WgmmaOpBase:
        pos = parser.pos
        name = parser.parse_identifier()
        operands: list[tuple[UnresolvedOperand, UnresolvedOperand]] = []
        for last in (False, True):
            buf = parser.parse_unresolved_operand()
            parser.parse_punctuation("(")
            desc = parser.parse_unresolved_operand()
            parser.parse_punctuation(")")
            if not last:
                parser.parse_punctuation(",")
            operands.append((buf, desc))
        parser.parse_keyword("c")
        c = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        a_type = parser.parse_type()
        parser.parse_punctuation(",")
        b_type = parser.parse_type()
        (a_buf, a_desc), (b_buf, b_desc) = operands
        op = cls(
            parser.resolve_operand(a_buf, a_type),
            parser.resolve_operand(a_desc, i64),
            parser.resolve_operand(b_buf, b_type),
            parser.resolve_operand(b_desc, i64),
            parser.resolve_operands(c, [f32] * len(c), parser.pos),
        )
        op.attributes |= attrs
        if op.shape.name != name:
            parser.raise_error(f"expected {op.shape.name} for these operands, got {name}", pos)
        return op


class WgmmaFenceOpBase(IRDLOperation):
    """`X.wgmma_fence`: `wgmma.fence.sync.aligned`, orders the warpgroup's register accesses
    before the wgmmas that follow (module docstring)."""

    assembly_format = "attr-dict"


class WgmmaCommitOpBase(IRDLOperation):
    """`X.wgmma_commit`: `wgmma.commit_group.sync.aligned`, closes the pending wgmmas into a
    group."""

    assembly_format = "attr-dict"


class WgmmaWaitOpBase(IRDLOperation):
    """`X.wgmma_wait N`: `wgmma.wait_group.sync.aligned N`, waits until at most the `N`
    newest groups are pending; only then may the results of the others be read."""

    pending = prop_def(IntegerAttr)

    def __init__(self, pending: int) -> None:
        super().__init__(properties={"pending": _int_prop(pending)})

    @property
    def groups(self) -> int:
        return self.pending.value.data

    def verify_(self) -> None:
        if not 0 <= self.groups <= 7:  # deplodock's bound: no schedule keeps more in flight
            raise VerifyException(
                f"{self.name}: waits for 0 to 7 pending groups, got {self.groups}"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.groups}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> WgmmaWaitOpBase:
        op = cls(parser.parse_integer(allow_negative=False, allow_boolean=False))
        op.attributes |= parser.parse_optional_attr_dict()
        return op
