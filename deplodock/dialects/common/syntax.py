"""Parsing and printing pieces that several dialects' hand-written syntaxes share.

Ops whose operands come first in parentheses and whose types come last, as a function type
(`X.launch @k(%a) : (memref<..>) -> ()`, `tensor.elementwise(%a) : (..) -> tensor<..>`),
parse and print that tail here, so it reads and fails the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from xdsl.dialects.builtin import FunctionType, MemRefType
from xdsl.ir import Attribute, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer


def format_types(types: Sequence[Attribute]) -> str:
    """`(f32, memref<4xf32>)`: types as they are written in the IR, for error messages."""
    return "(" + ", ".join(str(t) for t in types) + ")"


def parse_operand_list(parser: Parser) -> list[UnresolvedOperand]:
    """`(%a, %b)`: operands whose types come later, in a trailing function type."""
    return parser.parse_comma_separated_list(
        Parser.Delimiter.PAREN, parser.parse_unresolved_operand
    )


class Signature(NamedTuple):
    """A parsed `{attrs} : (types) -> results` tail; `pos` is where the type starts."""

    inputs: list[SSAValue]
    outputs: tuple[Attribute, ...]
    attrs: dict[str, Attribute]
    pos: int


def parse_signature(
    parser: Parser,
    operands: Sequence[UnresolvedOperand],
    accept: Callable[[FunctionType], bool],
    error: str,
) -> Signature:
    """`{attrs} : (types) -> results` after the operands, resolved against the types.

    Raises `error` at the type unless it is a function type that the op `accept`s (arity,
    result kinds), so each op keeps its own message; then resolves the operands.
    """
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    pos = parser.pos
    ftype = parser.parse_type()
    if not isinstance(ftype, FunctionType) or not accept(ftype):
        parser.raise_error(error, pos)
    inputs = parser.resolve_operands(operands, ftype.inputs.data, pos)
    return Signature(inputs, ftype.outputs.data, attrs, pos)


def print_signature(
    printer: Printer,
    attributes: dict[str, Attribute],
    inputs: Sequence[SSAValue],
    outputs: Sequence[Attribute],
) -> None:
    """` {attrs} : (types) -> results`: the mirror of `parse_signature`."""
    printer.print_op_attributes(attributes)
    printer.print_string(" : ")
    printer.print_function_type([v.type for v in inputs], outputs)


def parse_memref_type(parser: Parser) -> MemRefType:
    """`: memref<...>` after an access: the type, or a parse error naming what came instead."""
    parser.parse_punctuation(":")
    pos = parser.pos
    memref_type = parser.parse_type()
    if not isinstance(memref_type, MemRefType):
        parser.raise_error(f"expected a memref type, got {memref_type}", pos)
    return memref_type
