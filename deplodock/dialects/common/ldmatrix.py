"""A warp's load of 8x8 matrices of 16-bit elements from shared memory into MMA fragments,
shared by `tile` and `kernel`.

Syntax (`X` is `tile` or `kernel`):

```
%r0, ..., %r7 = X.ldmatrix %buf[%i, %j] x4 : memref<64x24xbf16, 3>
%r0, %r1, %r2, %r3 = X.ldmatrix %buf[%i, %j] x2 trans : memref<32x72xbf16, 3>
```

One op is one PTX `ldmatrix.sync.aligned.m8n8.x<N>[.trans].shared.b16` (sm_80+; `N` = 1, 2,
4): the 32 lanes of a warp together load `N` matrices of 8 x 8 16-bit elements. Each lane
gives the address of one matrix *row*, 8 consecutive elements (16 bytes, 16-byte aligned):
lane `t` gives row `t % 8` of matrix `t / 8` (only lanes below `8 N` count; the addresses of
the others are ignored). Each lane then receives two elements of every matrix `j`, as
results `2j` and `2j + 1`: row `l / 4`, columns `2 (l % 4)` and `+ 1` of matrix `j` (lane
`l`), or with `.trans` those of its transpose, row `2 (l % 4)` and `+ 1`, column `l / 4`
(the PTX ISA's "Warp-level matrix load instruction: ldmatrix" and its fragment figures).
That is exactly where `mma.sync.m16n8k16` wants its A and B fragments (`common/mma.py`):
an x4 of the four 8x8 quarters of a 16x16 A tile stored row-major along K gives `a0..a7`,
an x2 of the two 8x8 halves of a 16x8 B tile stored along K gives `b0..b3`; stored along M
or N, `.trans` gives the same registers.

tf32 stays on scalar loads: a 32-bit element is two b16 halves, so the untransposed form
would deliver a tf32 m16n8k8 fragment too, but `.trans` would split each element across
lanes, and deplodock keeps one fragment loader per element width (`tile-ldmatrix`).

Like `mma_sync`, every lane of the warp must run it (`.sync.aligned`), so it is a
`Collective`; it reads shared memory and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    IndexType,
    MemRefType,
    UnitAttr,
)
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    operand_def,
    opt_prop_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.common.async_memory import (
    _parse_access,
    _print_access,
    _print_tail,
    _resolve_indices,
    verify_contiguous,
)
from deplodock.dialects.common.memory import _verify_indices
from deplodock.dialects.common.syntax import parse_memref_type
from deplodock.dialects.hardware import WARP_SIZE, is_shared

#: Rows and columns of one matrix, and elements of one row (16 bytes of b16).
MATRIX_ROWS = 8
ROW_ELEMENTS = 8
#: The matrix counts of `.x1`, `.x2`, `.x4`.
COUNTS: tuple[int, ...] = (1, 2, 4)


def fragment_position(lane: int, register: int, trans: bool) -> tuple[int, int, int]:
    """(matrix, row, column) of the element lane `lane` receives as result `register`: row
    `lane / 4`, columns `2 (lane % 4) + register % 2` of matrix `register / 2`, swapped
    with `trans` (module docstring)."""
    matrix, g, column = register // 2, lane // 4, 2 * (lane % 4) + register % 2
    return (matrix, column, g) if trans else (matrix, g, column)


def warp_ldmatrix(rows: np.ndarray, count: int, trans: bool) -> np.ndarray:
    """The fragments of many warps at once: `rows` is `(warps, 32, 8)`, the 8 elements each
    lane's address points to (lanes from `8 count` on are ignored); the result is
    `(warps, 32, 2 count)`, each lane's registers."""
    warps = rows.shape[0]
    matrices = rows[:, : MATRIX_ROWS * count].reshape(warps, count, MATRIX_ROWS, ROW_ELEMENTS)
    out = np.empty((warps, WARP_SIZE, 2 * count), dtype=rows.dtype)
    for lane in range(WARP_SIZE):
        for register in range(2 * count):
            matrix, row, column = fragment_position(lane, register, trans)
            out[:, lane, register] = matrices[:, matrix, row, column]
    return out


class LdmatrixOpBase(IRDLOperation):
    """`X.ldmatrix %buf[...] xN [trans]`: one warp's `ldmatrix` (module docstring); the
    indices are this lane's row address, the results its `2 N` fragment elements."""

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType())
    res = var_result_def()
    trans = opt_prop_def(UnitAttr)

    #: The keyword of the transposed form.
    TRANS: ClassVar[str] = "trans"

    def __init__(
        self,
        memref: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
        count: int,
        trans: bool = False,
    ):
        buf = SSAValue.get(memref)
        assert isinstance(buf.type, MemRefType)
        super().__init__(
            operands=[buf, indices],
            result_types=[[buf.type.element_type] * (2 * count)],
            properties={"trans": UnitAttr()} if trans else {},
        )

    @property
    def count(self) -> int:
        """How many 8x8 matrices the warp loads (`.x1`, `.x2`, `.x4`)."""
        return len(self.res) // 2

    @property
    def is_trans(self) -> bool:
        return self.trans is not None

    def verify_(self) -> None:
        memref = self.memref.type
        assert isinstance(memref, MemRefType)
        if not is_shared(memref):
            raise VerifyException(f"{self.name}: loads from shared memory, got {memref}")
        element = memref.element_type
        if not isinstance(element, BFloat16Type | Float16Type):
            raise VerifyException(f"{self.name}: loads 16-bit elements (bf16, f16), got {element}")
        if len(self.res) % 2 or self.count not in COUNTS:
            raise VerifyException(
                f"{self.name}: gives 2, 4 or 8 values (x1, x2, x4), got {len(self.res)}"
            )
        if any(r.type != element for r in self.res):
            raise VerifyException(f"{self.name}: every result must have type {element}")
        _verify_indices(self, self.memref, self.indices)
        verify_contiguous(self, self.memref, self.indices, ROW_ELEMENTS, "matrix row")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.memref, self.indices)
        printer.print_string(f" x{self.count}")
        if self.is_trans:
            printer.print_string(f" {self.TRANS}")
        _print_tail(printer, self, self.memref.type)

    @classmethod
    def parse(cls, parser: Parser):
        buf, indices = _parse_access(parser)
        pos = parser.pos
        keyword = parser.parse_identifier()
        if keyword not in {f"x{n}" for n in COUNTS}:
            parser.raise_error(f"expected x1, x2 or x4, got {keyword}", pos)
        trans = parser.parse_optional_keyword(cls.TRANS) is not None
        attrs = parser.parse_optional_attr_dict()
        buf_value = parser.resolve_operand(buf, parse_memref_type(parser))
        op = cls(buf_value, _resolve_indices(parser, indices), int(keyword[1:]), trans)
        op.attributes |= attrs
        return op
