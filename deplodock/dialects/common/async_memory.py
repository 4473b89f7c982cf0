"""Asynchronous copies and vector accesses, shared by `tile` and `kernel` (docs/ir.md §4-5).

Syntax (`X` is the dialect; the tile dialect spells the copy ops `copy_async`,
`async_commit`, `async_wait`, the kernel dialect `cp_async`, `cp_async_commit`,
`cp_async_wait`):

```
X.cp_async %dst[%i, %j], %src[%k, %l], 16 [if %p] : memref<8x64xf32, 3>, memref<64x64xf32>
X.cp_async_commit
X.cp_async_wait 1
%a, %b, %c, %d = X.load_vector %buf[%i, %j] width 4 : memref<64x64xf32>
X.store_vector %a, %b, %c, %d, %buf[%i, %j] : memref<64x64xf32>
```

- `cp_async` copies `BYTES` (4, 8 or 16) from global `src` to shared `dst` without going
  through registers (PTX `cp.async.ca/cg.shared.global`); the `BYTES / element size`
  elements are consecutive in the innermost dimension of both buffers. With `if %p` and `%p`
  false, nothing is read and the destination is zero-filled (the PTX `src-size` 0 form).
  The copy lands at some point before the `cp_async_wait` that retires its group.
- `cp_async_commit` closes the thread's current group of copies; `cp_async_wait N` waits
  until at most `N` of the thread's most recently committed groups are still pending.
  Other threads see the landed data only after a barrier.
- `load_vector` / `store_vector` move `width` (2 or 4) consecutive elements of the innermost
  dimension in one 4-, 8- or 16-byte access; the innermost index must be a multiple of `width`.

The verifiers reject what the hardware cannot do (sizes in `hardware.py`): a copy size other
than 4/8/16 bytes or not a whole number of elements, a copy into global memory or from shared
memory, an innermost extent that is not a multiple of the elements per access (so an access
would straddle rows), and a provably misaligned constant innermost index.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, IndexType, IntegerAttr, MemRefType, i1
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    operand_def,
    opt_operand_def,
    prop_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.common.memory import _verify_indices, index_range
from deplodock.dialects.element_types import UnsupportedElementType, byte_size
from deplodock.dialects.hardware import (
    CP_ASYNC_BYTES,
    VECTOR_BYTES,
    VECTOR_WIDTHS,
    is_shared,
)


def _element_bytes(op: Operation, memref: SSAValue) -> int:
    assert isinstance(memref.type, MemRefType)
    try:
        return byte_size(memref.type.element_type)
    except UnsupportedElementType as error:
        raise VerifyException(f"{op.name}: unsupported element type ({error})") from None


def verify_contiguous(
    op: Operation, memref: SSAValue, indices: Sequence[SSAValue], count: int, what: str
) -> None:
    """`count` consecutive elements from `indices` along the innermost dimension: that
    extent must be a multiple of `count` (no access straddles a row) and a constant innermost
    index a multiple of `count` (the access is aligned to its size)."""
    assert isinstance(memref.type, MemRefType)
    shape = memref.type.get_shape()
    if count == 1:
        return
    if not shape:
        raise VerifyException(f"{op.name}: {what} of {count} elements needs a ranked buffer")
    inner = shape[-1]
    if inner % count:
        raise VerifyException(
            f"{op.name}: {what} of {count} consecutive elements, but the innermost extent "
            f"{inner} of {memref.type} is not a multiple of {count}"
        )
    bounds = index_range(op, indices[-1])
    if bounds is not None and bounds[0] == bounds[1] and bounds[0] % count:
        raise VerifyException(
            f"{op.name}: innermost index {bounds[0]} is misaligned: a {what} of {count} "
            f"elements must start at a multiple of {count}"
        )


def _print_access(printer: Printer, buf: SSAValue, indices: Sequence[SSAValue]) -> None:
    printer.print_ssa_value(buf)
    printer.print_string("[")
    printer.print_list(indices, printer.print_ssa_value)
    printer.print_string("]")


def _parse_access(parser: Parser) -> tuple[UnresolvedOperand, list[UnresolvedOperand]]:
    buf = parser.parse_unresolved_operand()
    indices = parser.parse_comma_separated_list(
        Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
    )
    return buf, indices


def _resolve_indices(parser: Parser, indices: Sequence[UnresolvedOperand]) -> list[SSAValue]:
    return [parser.resolve_operand(i, IndexType()) for i in indices]


def _print_accesses(printer: Printer, *accesses: tuple[SSAValue, Sequence[SSAValue]]) -> None:
    """` %a[...], %b[...]`: each buffer with its indices, after a space."""
    printer.print_string(" ")
    printer.print_list(accesses, lambda access: _print_access(printer, *access))


def _parse_accesses(
    parser: Parser, count: int
) -> list[tuple[UnresolvedOperand, list[UnresolvedOperand]]]:
    """`count` comma-separated `%buf[...]` (what `_print_accesses` prints)."""
    accesses = [_parse_access(parser)]
    for _ in range(count - 1):
        parser.parse_punctuation(",")
        accesses.append(_parse_access(parser))
    return accesses


def _resolve_access(
    parser: Parser,
    access: tuple[UnresolvedOperand, Sequence[UnresolvedOperand]],
    buf_type: Attribute,
) -> tuple[SSAValue, list[SSAValue]]:
    """A parsed `%buf[...]` resolved: the buffer, of `buf_type`, and its index operands."""
    buf, indices = access
    return parser.resolve_operand(buf, buf_type), _resolve_indices(parser, indices)


def _print_tail(printer: Printer, op: Operation, *types: Attribute) -> None:
    """An op's attributes, then ` : ` and `types`, comma-separated."""
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_list(types, printer.print_attribute)


def _parse_tail(parser: Parser, count: int) -> tuple[dict[str, Attribute], list[Attribute]]:
    """The attributes and the `count` types that `_print_tail` prints."""
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    types = [parser.parse_type()]
    for _ in range(count - 1):
        parser.parse_punctuation(",")
        types.append(parser.parse_type())
    return attrs, types


class CpAsyncOpBase(IRDLOperation):
    """`X.cp_async %dst[...], %src[...], BYTES [if %p] : memref<..., 3>, memref<...>`."""

    dst = operand_def(MemRefType)
    dst_indices = var_operand_def(IndexType())
    src = operand_def(MemRefType)
    src_indices = var_operand_def(IndexType())
    pred = opt_operand_def(i1)
    nbytes = prop_def(IntegerAttr[I64])

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(
        self,
        dst: SSAValue | Operation,
        dst_indices: Sequence[SSAValue | Operation],
        src: SSAValue | Operation,
        src_indices: Sequence[SSAValue | Operation],
        nbytes: int,
        pred: SSAValue | Operation | None = None,
    ):
        super().__init__(
            operands=[dst, dst_indices, src, src_indices, [] if pred is None else [pred]],
            properties={"nbytes": IntegerAttr(nbytes, 64)},
        )

    @property
    def num_bytes(self) -> int:
        return self.nbytes.value.data

    @property
    def elements(self) -> int:
        """Elements per copy (`BYTES / element size`)."""
        return self.num_bytes // _element_bytes(self, self.src)

    def verify_(self) -> None:
        dst_type, src_type = self.dst.type, self.src.type
        assert isinstance(dst_type, MemRefType) and isinstance(src_type, MemRefType)
        if self.num_bytes not in CP_ASYNC_BYTES:
            raise VerifyException(
                f"{self.name}: copies {self.num_bytes} bytes, expected one of "
                f"{', '.join(map(str, CP_ASYNC_BYTES))}"
            )
        if not is_shared(dst_type):
            raise VerifyException(
                f"{self.name}: destination must be shared memory (memref<..., 3>), got {dst_type}"
            )
        if is_shared(src_type):
            raise VerifyException(f"{self.name}: source must be global memory, got {src_type}")
        if dst_type.element_type != src_type.element_type:
            raise VerifyException(
                f"{self.name}: element types differ: {dst_type.element_type} and "
                f"{src_type.element_type}"
            )
        size = _element_bytes(self, self.src)
        if self.num_bytes % size:
            raise VerifyException(
                f"{self.name}: {self.num_bytes} bytes is not a whole number of {size}-byte elements"
            )
        _verify_indices(self, self.dst, self.dst_indices)
        _verify_indices(self, self.src, self.src_indices)
        count = self.num_bytes // size
        verify_contiguous(self, self.dst, self.dst_indices, count, "copy")
        verify_contiguous(self, self.src, self.src_indices, count, "copy")

    def print(self, printer: Printer) -> None:
        _print_accesses(printer, (self.dst, self.dst_indices), (self.src, self.src_indices))
        printer.print_string(f", {self.num_bytes}")
        if self.pred is not None:
            printer.print_string(" if ")
            printer.print_ssa_value(self.pred)
        _print_tail(printer, self, self.dst.type, self.src.type)

    @classmethod
    def parse(cls, parser: Parser):
        dst, src = _parse_accesses(parser, 2)
        parser.parse_punctuation(",")
        nbytes = parser.parse_integer(allow_boolean=False)
        pred = parser.parse_unresolved_operand() if parser.parse_optional_keyword("if") else None
        attrs, (dst_type, src_type) = _parse_tail(parser, 2)
        op = cls(
            *_resolve_access(parser, dst, dst_type),
            *_resolve_access(parser, src, src_type),
            nbytes,
            None if pred is None else parser.resolve_operand(pred, i1),
        )
        op.attributes |= attrs
        return op


class CpAsyncCommitOpBase(IRDLOperation):
    """`X.cp_async_commit`: the thread's copies issued since the last commit form a group."""

    assembly_format = "attr-dict"
    traits = traits_def(MemoryWriteEffect())

    def __init__(self):
        super().__init__()


class CpAsyncWaitOpBase(IRDLOperation):
    """`X.cp_async_wait N`: the thread waits until at most `N` of its most recent committed
    groups are pending (all older groups have landed in shared memory)."""

    pending = prop_def(IntegerAttr[I64])
    assembly_format = "$pending attr-dict"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(self, pending: int = 0):
        super().__init__(properties={"pending": IntegerAttr(pending, 64)})

    @property
    def groups(self) -> int:
        return self.pending.value.data

    def verify_(self) -> None:
        if self.groups < 0:
            raise VerifyException(
                f"{self.name}: the number of groups left pending must be >= 0, got {self.groups}"
            )


def _verify_vector(op: Operation, memref: SSAValue, indices: Sequence[SSAValue], width: int):
    assert isinstance(memref.type, MemRefType)
    if width not in VECTOR_WIDTHS:
        raise VerifyException(
            f"{op.name}: width {width}, expected one of {', '.join(map(str, VECTOR_WIDTHS))}"
        )
    nbytes = width * _element_bytes(op, memref)
    if nbytes not in VECTOR_BYTES:
        raise VerifyException(
            f"{op.name}: {width} x {memref.type.element_type} is {nbytes} bytes, expected a "
            f"vector of {', '.join(map(str, VECTOR_BYTES[:-1]))} or {VECTOR_BYTES[-1]} bytes"
        )
    _verify_indices(op, memref, indices)
    verify_contiguous(op, memref, indices, width, "vector access")


class LoadVectorOpBase(IRDLOperation):
    """`%a, %b, %c, %d = X.load_vector %buf[%i, ...] width 4 : memref<...>`: elements
    `[..., i + k]` for `k < width`, one result each, in one 4-, 8- or 16-byte access."""

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType())
    res = var_result_def()
    traits = traits_def(MemoryReadEffect())

    def __init__(
        self, memref: SSAValue | Operation, indices: Sequence[SSAValue | Operation], width: int
    ):
        buf = SSAValue.get(memref)
        assert isinstance(buf.type, MemRefType)
        super().__init__(operands=[buf, indices], result_types=[[buf.type.element_type] * width])

    @property
    def width(self) -> int:
        return len(self.res)

    def verify_(self) -> None:
        assert isinstance(self.memref.type, MemRefType)
        element = self.memref.type.element_type
        if any(r.type != element for r in self.res):
            raise VerifyException(f"{self.name}: every result must have type {element}")
        _verify_vector(self, self.memref, self.indices, self.width)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.memref, self.indices)
        printer.print_string(f" width {self.width}")
        _print_tail(printer, self, self.memref.type)

    @classmethod
    def parse(cls, parser: Parser):
        buf, indices = _parse_access(parser)
        parser.parse_keyword("width")
        width = parser.parse_integer(allow_boolean=False, allow_negative=False)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        memref_type = parser.parse_type()
        if not isinstance(memref_type, MemRefType):
            parser.raise_error(f"expected a memref type, got {memref_type}", pos)
        op = cls(parser.resolve_operand(buf, memref_type), _resolve_indices(parser, indices), width)
        op.attributes |= attrs
        return op


class StoreVectorOpBase(IRDLOperation):
    """`X.store_vector %a, %b, %c, %d, %buf[%i, ...] : memref<...>`: the values go to
    `[..., i + k]`, in one 4-, 8- or 16-byte access."""

    values = var_operand_def()
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType())

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryWriteEffect())

    def __init__(
        self,
        values: Sequence[SSAValue | Operation],
        memref: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
    ):
        super().__init__(operands=[values, memref, indices])

    @property
    def width(self) -> int:
        return len(self.values)

    def verify_(self) -> None:
        assert isinstance(self.memref.type, MemRefType)
        element = self.memref.type.element_type
        if any(v.type != element for v in self.values):
            raise VerifyException(f"{self.name}: every value must have type {element}")
        _verify_vector(self, self.memref, self.indices, self.width)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        for value in self.values:
            printer.print_ssa_value(value)
            printer.print_string(", ")
        _print_access(printer, self.memref, self.indices)
        _print_tail(printer, self, self.memref.type)

    @classmethod
    def parse(cls, parser: Parser):
        operands: list[UnresolvedOperand] = []
        while True:
            operands.append(parser.parse_unresolved_operand())
            if parser.parse_optional_punctuation("[") is not None:
                break
            parser.parse_punctuation(",")
        indices: list[UnresolvedOperand] = []
        if parser.parse_optional_punctuation("]") is None:
            indices.append(parser.parse_unresolved_operand())
            while parser.parse_optional_punctuation(",") is not None:
                indices.append(parser.parse_unresolved_operand())
            parser.parse_punctuation("]")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        memref_type = parser.parse_type()
        if not isinstance(memref_type, MemRefType):
            parser.raise_error(f"expected a memref type, got {memref_type}", pos)
        *values, buf = operands
        element: Attribute = memref_type.element_type
        op = cls(
            [parser.resolve_operand(v, element) for v in values],
            parser.resolve_operand(buf, memref_type),
            _resolve_indices(parser, indices),
        )
        op.attributes |= attrs
        return op
