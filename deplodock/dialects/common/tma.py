"""TMA tensor copies and the mbarriers they complete on (sm_90), shared by `tile` and `kernel`.

Syntax (`X` is the dialect):

```
X.mbarrier_init %bar[%i], 1 : memref<2xi64, 3>
X.fence_proxy_async
X.mbarrier_arrive %bar[%i] expect_tx 2048 : memref<2xi64, 3>
X.mbarrier_arrive %bar[%i] : memref<2xi64, 3>
X.mbarrier_wait %bar[%i], %parity : memref<2xi64, 3>
X.tma_load %s[%k, %c0, %c0], %a[%row, %col], %bar[%i] swizzle 128
    : memref<2x16x64xbf16, 3>, memref<256x64xbf16>, memref<2xi64, 3>
```

An mbarrier is one `i64` element of a shared array (PTX ISA, "mbarrier"). `mbarrier_init`
starts phase 0 expecting `COUNT` arrivals with tx-count 0; `mbarrier_arrive` counts one
arrival, after raising the tx-count by `BYTES` with `expect_tx`; a phase completes when
every arrival is in and the tx-count is back at zero, and the barrier moves to the next
phase. `mbarrier_wait %bar, %parity` (a `try_wait.parity` loop) returns once the phase of
that parity has completed.

`tma_load` is one `cp.async.bulk.tensor.2d` (PTX ISA, "cp.async.bulk.tensor"): the box whose
top-left element is `%a[%row, %col]` of the global 2-D source lands in the last two
dimensions of the shared destination (the box's shape; the leading indices pick the stage,
the last two are 0), rows one after another, with its 16-byte chunks permuted by the
`swizzle` span (`swizzle_offset`). Elements outside the source read as zeros. The copy's
bytes (`box_bytes`) lower the tx-count of the barrier's current phase when they land; until
then the destination is undefined. A barrier a copy completes on must be made visible to the
async proxy with `fence_proxy_async` after its init (the CUDA programming guide's TMA
example). On the GPU the source is a tensor map built by the host (`cuTensorMapEncodeTiled`)
and passed as a `__grid_constant__` parameter; the device header's `dd_tma_load_2d` and its
CPU emulation are the executable form of these ops.

The verifiers reject what the hardware cannot do (facts in `hardware.py`): a swizzle span
other than 0/32/64/128 bytes, a box side over 256 elements, a box row that is not a
multiple of 16 bytes or, swizzled, not exactly the span (deplodock's layout rule), a
destination outside shared memory or a source inside it, an mbarrier that is not a shared
`i64`, and an arrival count outside 1 .. 2^20 - 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from xdsl.dialects.builtin import I64, IndexType, IntegerAttr, IntegerType, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    operand_def,
    opt_prop_def,
    prop_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.common.async_memory import (
    _parse_accesses,
    _parse_tail,
    _print_accesses,
    _print_tail,
    _resolve_access,
)
from deplodock.dialects.common.memory import _verify_indices, index_range
from deplodock.dialects.element_types import UnsupportedElementType, byte_size
from deplodock.dialects.hardware import (
    MBARRIER_MAX_COUNT,
    TMA_MAX_BOX,
    TMA_ROW_BYTES,
    TMA_SWIZZLE_SPANS,
    is_shared,
)

Op = TypeVar("Op", bound=IRDLOperation)


def swizzle_offset(offset: np.ndarray | int, span: int) -> np.ndarray | int:
    """Where byte `offset` of a box lands in shared memory under a `span`-byte swizzle: its
    16-byte chunk index (offset bits 4 ..) XORed with the row within the pattern's repeat
    (offset bits 7 ..), as many bits as a span row has chunks (CUDA programming guide, "TMA
    Swizzle"); 0: no swizzle."""
    chunks = span // TMA_ROW_BYTES
    if chunks <= 1:
        return offset
    return offset ^ (((offset >> 7) & (chunks - 1)) << 4)


def tma_box(src: np.ndarray, row: int, col: int, box: tuple[int, int]) -> np.ndarray:
    """The `box` of `src` whose top-left element is `(row, col)`, zeros outside `src`."""
    out = np.zeros(box, dtype=src.dtype)
    r0, c0 = max(row, 0), max(col, 0)
    r1, c1 = min(row + box[0], src.shape[0]), min(col + box[1], src.shape[1])
    if r0 < r1 and c0 < c1:
        out[r0 - row : r1 - row, c0 - col : c1 - col] = src[r0:r1, c0:c1]
    return out


def swizzled(box: np.ndarray, span: int) -> np.ndarray:
    """`box` as it lies in shared memory under a `span`-byte swizzle (same shape)."""
    flat = np.ascontiguousarray(box).reshape(-1).view(np.uint8)
    offsets = np.arange(flat.size)
    out = np.empty_like(flat)
    out[swizzle_offset(offsets, span)] = flat
    return out.view(box.dtype).reshape(box.shape)


def _verify_barrier(op: Operation, bar: SSAValue, indices: Sequence[SSAValue]) -> None:
    memref = bar.type
    assert isinstance(memref, MemRefType)
    element = memref.element_type
    if not is_shared(memref) or not (isinstance(element, IntegerType) and element.width.data == 64):
        raise VerifyException(f"{op.name}: an mbarrier is an i64 in shared memory, got {memref}")
    _verify_indices(op, bar, indices)


def _print_on_barrier(
    printer: Printer, op: IRDLOperation, bar: SSAValue, indices: Sequence[SSAValue], extra: Any
) -> None:
    """` %bar[...]`, then `extra` (text, or a callable that prints), attributes, `: type`."""
    _print_accesses(printer, (bar, indices))
    if callable(extra):
        extra()
    else:
        printer.print_string(extra)
    _print_tail(printer, op, bar.type)


def _parse_on_barrier(cls: type[Op], parser: Parser, extra: Callable[[], Any]) -> Op:
    """`cls` from the barrier, its indices and what `extra` parses after them (the syntax
    `_print_on_barrier` prints), with the attributes."""
    (access,) = _parse_accesses(parser, 1)
    parsed = extra()
    attrs, (bar_type,) = _parse_tail(parser, 1)
    op = cls(*_resolve_access(parser, access, bar_type), parsed)
    op.attributes |= attrs
    return op


class _BarrierOpBase(IRDLOperation):
    """An op on one mbarrier `%bar[%i]`: shared syntax pieces."""

    bar = operand_def(MemRefType)
    bar_indices = var_operand_def(IndexType())

    def verify_(self) -> None:
        _verify_barrier(self, self.bar, self.bar_indices)


class MbarrierInitOpBase(_BarrierOpBase):
    """`X.mbarrier_init %bar[%i], COUNT : memref<...xi64, 3>`: phase 0, COUNT arrivals."""

    count = prop_def(IntegerAttr[I64])
    traits = traits_def(MemoryWriteEffect())

    def __init__(
        self, bar: SSAValue | Operation, indices: Sequence[SSAValue | Operation], count: int
    ):
        super().__init__(operands=[bar, indices], properties={"count": IntegerAttr(count, 64)})

    @property
    def arrivals(self) -> int:
        return self.count.value.data

    def verify_(self) -> None:
        super().verify_()
        if not 1 <= self.arrivals <= MBARRIER_MAX_COUNT:
            raise VerifyException(
                f"{self.name}: expects 1 to {MBARRIER_MAX_COUNT} arrivals, got {self.arrivals}"
            )

    def print(self, printer: Printer) -> None:
        _print_on_barrier(printer, self, self.bar, self.bar_indices, f", {self.arrivals}")

    @classmethod
    def parse(cls, parser: Parser):
        def count() -> int:
            parser.parse_punctuation(",")
            return parser.parse_integer(allow_boolean=False)

        return _parse_on_barrier(cls, parser, count)


class MbarrierArriveOpBase(_BarrierOpBase):
    """`X.mbarrier_arrive %bar[%i] [expect_tx BYTES] : memref<...xi64, 3>`: one arrival,
    after raising the tx-count by BYTES."""

    tx = opt_prop_def(IntegerAttr[I64])
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(
        self,
        bar: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
        expect_tx: int | None = None,
    ):
        properties = {} if expect_tx is None else {"tx": IntegerAttr(expect_tx, 64)}
        super().__init__(operands=[bar, indices], properties=properties)

    @property
    def expect_tx(self) -> int | None:
        return None if self.tx is None else self.tx.value.data

    def verify_(self) -> None:
        super().verify_()
        if self.expect_tx is not None and not 0 <= self.expect_tx <= MBARRIER_MAX_COUNT:
            raise VerifyException(
                f"{self.name}: expect_tx of {self.expect_tx} bytes, expected 0 to "
                f"{MBARRIER_MAX_COUNT}"
            )

    def print(self, printer: Printer) -> None:
        extra = "" if self.expect_tx is None else f" expect_tx {self.expect_tx}"
        _print_on_barrier(printer, self, self.bar, self.bar_indices, extra)

    @classmethod
    def parse(cls, parser: Parser):
        def tx() -> int | None:
            if parser.parse_optional_keyword("expect_tx") is None:
                return None
            return parser.parse_integer(allow_boolean=False)

        return _parse_on_barrier(cls, parser, tx)


class MbarrierWaitOpBase(IRDLOperation):
    """`X.mbarrier_wait %bar[%i], %parity : memref<...xi64, 3>`: returns once the phase of
    parity `%parity` (0 or 1) has completed."""

    bar = operand_def(MemRefType)
    bar_indices = var_operand_def(IndexType())
    parity = operand_def(IndexType())
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(
        self,
        bar: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
        parity: SSAValue | Operation,
    ):
        super().__init__(operands=[bar, indices, parity])

    def verify_(self) -> None:
        _verify_barrier(self, self.bar, self.bar_indices)
        bounds = index_range(self, self.parity)
        if bounds is not None and (bounds[0] < 0 or bounds[1] > 1):
            raise VerifyException(f"{self.name}: a phase parity is 0 or 1, got {bounds}")

    def print(self, printer: Printer) -> None:
        def parity() -> None:
            printer.print_string(", ")
            printer.print_ssa_value(self.parity)

        _print_on_barrier(printer, self, self.bar, self.bar_indices, parity)

    @classmethod
    def parse(cls, parser: Parser):
        def parity() -> SSAValue:
            parser.parse_punctuation(",")
            return parser.resolve_operand(parser.parse_unresolved_operand(), IndexType())

        return _parse_on_barrier(cls, parser, parity)


class FenceProxyAsyncOpBase(IRDLOperation):
    """`X.fence_proxy_async`: PTX `fence.proxy.async.shared::cta`, orders this thread's
    earlier ordinary (generic-proxy) shared accesses before its later async-proxy ones."""

    assembly_format = "attr-dict"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(self):
        super().__init__()


class TmaLoadOpBase(IRDLOperation):
    """`X.tma_load %dst[...], %src[%row, %col], %bar[%i] swizzle S : dst, src, bar types`:
    one 2-D TMA copy of the box `dst`'s last two dimensions span (module docstring)."""

    dst = operand_def(MemRefType)
    dst_indices = var_operand_def(IndexType())
    src = operand_def(MemRefType)
    src_indices = var_operand_def(IndexType())
    bar = operand_def(MemRefType)
    bar_indices = var_operand_def(IndexType())
    swizzle = prop_def(IntegerAttr[I64])

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(
        self,
        dst: SSAValue | Operation,
        dst_indices: Sequence[SSAValue | Operation],
        src: SSAValue | Operation,
        src_indices: Sequence[SSAValue | Operation],
        bar: SSAValue | Operation,
        bar_indices: Sequence[SSAValue | Operation],
        swizzle: int = 0,
    ):
        super().__init__(
            operands=[dst, dst_indices, src, src_indices, bar, bar_indices],
            properties={"swizzle": IntegerAttr(swizzle, 64)},
        )

    @property
    def span(self) -> int:
        """The swizzle span in bytes (0: none)."""
        return self.swizzle.value.data

    @property
    def box(self) -> tuple[int, int]:
        """(rows, cols) of the box: the destination's last two dimensions."""
        assert isinstance(self.dst.type, MemRefType)
        rows, cols = self.dst.type.get_shape()[-2:]
        return rows, cols

    @property
    def box_bytes(self) -> int:
        """The bytes one copy delivers (what the barrier's `expect_tx` must announce)."""
        assert isinstance(self.dst.type, MemRefType)
        rows, cols = self.box
        return rows * cols * byte_size(self.dst.type.element_type)

    def verify_(self) -> None:
        dst, src = self.dst.type, self.src.type
        assert isinstance(dst, MemRefType) and isinstance(src, MemRefType)
        if not is_shared(dst) or dst.get_num_dims() < 2:
            raise VerifyException(f"{self.name}: the destination is a shared box, got {dst}")
        if is_shared(src) or src.get_num_dims() != 2:
            raise VerifyException(f"{self.name}: the source is a 2-D global tensor, got {src}")
        if dst.element_type != src.element_type:
            raise VerifyException(
                f"{self.name}: element types differ: {dst.element_type} and {src.element_type}"
            )
        if self.span not in TMA_SWIZZLE_SPANS:
            raise VerifyException(
                f"{self.name}: swizzle of {self.span} bytes, expected one of "
                f"{', '.join(map(str, TMA_SWIZZLE_SPANS))}"
            )
        self._verify_box()
        _verify_indices(self, self.dst, self.dst_indices)
        _verify_indices(self, self.src, self.src_indices)
        for index in self.dst_indices[-2:]:
            bounds = index_range(self, index)
            if bounds != (0, 0):
                raise VerifyException(
                    f"{self.name}: the box fills the destination's last two dimensions: their "
                    "indices must be the constant 0"
                )
        _verify_barrier(self, self.bar, self.bar_indices)

    def _verify_box(self) -> None:
        rows, cols = self.box
        if rows > TMA_MAX_BOX or cols > TMA_MAX_BOX:
            raise VerifyException(
                f"{self.name}: box {rows}x{cols}: each side must be at most {TMA_MAX_BOX}"
            )
        try:
            row_bytes = self.box_bytes // rows
        except UnsupportedElementType as error:
            raise VerifyException(f"{self.name}: unsupported element type ({error})") from None
        if row_bytes % TMA_ROW_BYTES or (self.span and row_bytes != self.span):
            raise VerifyException(
                f"{self.name}: a box row of {row_bytes} bytes must be a multiple of "
                f"{TMA_ROW_BYTES} bytes, and exactly the span under a {self.span}-byte swizzle"
            )

    def print(self, printer: Printer) -> None:
        _print_accesses(
            printer,
            (self.dst, self.dst_indices),
            (self.src, self.src_indices),
            (self.bar, self.bar_indices),
        )
        printer.print_string(f" swizzle {self.span}")
        _print_tail(printer, self, self.dst.type, self.src.type, self.bar.type)

    @classmethod
    def parse(cls, parser: Parser):
        dst, src, bar = _parse_accesses(parser, 3)
        parser.parse_keyword("swizzle")
        span = parser.parse_integer(allow_boolean=False)
        attrs, (dst_type, src_type, bar_type) = _parse_tail(parser, 3)
        op = cls(
            *_resolve_access(parser, dst, dst_type),
            *_resolve_access(parser, src, src_type),
            *_resolve_access(parser, bar, bar_type),
            span,
        )
        op.attributes |= attrs
        return op
