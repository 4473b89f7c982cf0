"""Kernel symbols and their launches: `X.kernel`, its terminator `X.return`, `X.launch`.

Syntax: `X.kernel @name(%a: memref<...>, ...) [attributes {...}] { ... X.return }`, where a
subclass may add words between the signature and the attributes by overriding
`print_header_extra` / `parse_header_extra` (e.g. `grid G block T`); and
`X.launch @k(%a, ...) : (types) -> ()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from xdsl.dialects.builtin import FunctionType, MemRefType, ModuleOp, StringAttr, SymbolRefAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import IRDLOperation, prop_def, region_def, traits_def, var_operand_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, IsTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.common.syntax import (
    format_types,
)


class ReturnOpBase(IRDLOperation):
    """Kernel terminator `X.return` (no operands: kernels write their output buffers)."""

    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


class KernelOpBase(IRDLOperation):
    """A kernel symbol `X.kernel @name(%a: memref<...>, ...) { ... }` over buffer arguments.

    `IsolatedFromAbove`: the body sees only its buffer arguments, so each kernel can be
    scheduled, printed and run on its own. Subclasses add the terminator trait, and may add
    header words with `print_header_extra` / `parse_header_extra` (returning properties).
    """

    sym_name = prop_def(StringAttr)
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove())

    def __init__(
        self,
        name: str,
        arg_types: Sequence[Attribute] = (),
        body: Region | None = None,
        properties: dict[str, Attribute] | None = None,
    ):
        if body is None:
            body = Region(Block(arg_types=arg_types))
        super().__init__(
            properties={"sym_name": StringAttr(name), **(properties or {})}, regions=[body]
        )

    @property
    def arg_types(self) -> tuple[Attribute, ...]:
        return tuple(a.type for a in self.body.block.args)

    @property
    def function_type(self) -> FunctionType:
        return FunctionType.from_lists(self.arg_types, [])

    def verify_(self) -> None:
        for i, arg in enumerate(self.body.block.args):
            if not isinstance(arg.type, MemRefType):
                raise VerifyException(
                    f"{self.name} @{self.sym_name.data}: argument #{i} must be a memref, "
                    f"got {arg.type}"
                )

    # hooks for subclasses ---------------------------------------------------------------

    def print_header_extra(self, printer: Printer) -> None:
        """Print words between the signature and the attributes (none by default)."""

    @classmethod
    def parse_header_extra(cls, parser: Parser) -> dict[str, Attribute]:
        """Parse what `print_header_extra` prints; return it as properties."""
        return {}

    # syntax -----------------------------------------------------------------------------

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(")
        printer.print_list(self.body.block.args, printer.print_block_argument)
        printer.print_string(")")
        self.print_header_extra(printer)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        name = parser.parse_symbol_name().data
        args = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_argument)
        props = cls.parse_header_extra(parser)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region(args)
        op = cls(name, body=body, properties=props)
        if attrs is not None:
            op.attributes |= attrs.data
        return op


def enclosing_module(op: Operation) -> ModuleOp | None:
    """The outermost `builtin.module` above `op` (None while the op is detached).

    A question of `queries` (which re-exports it), answered here because the launch
    verifier asks it and `queries` imports this module."""
    found: ModuleOp | None = None
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, ModuleOp):
            found = parent
        parent = parent.parent_op()
    return found


class LaunchOpBase(IRDLOperation):
    """`X.launch @k(%a, ...) : (types) -> ()`: run kernel `@k` on buffers (host op).

    When the launch sits in a module, the verifier checks that `@k` exists, is a kernel of
    the same dialect, and takes exactly the argument types passed.
    """

    callee = prop_def(SymbolRefAttr)
    args = var_operand_def(MemRefType)

    assembly_format = "$callee `(` $args `)` attr-dict `:` `(` type($args) `)` `->` `(` `)`"

    def __init__(self, callee: str | SymbolRefAttr, args: Sequence[SSAValue | Operation]):
        ref = SymbolRefAttr(callee) if isinstance(callee, str) else callee
        super().__init__(operands=[args], properties={"callee": ref})

    def verify_(self) -> None:
        if enclosing_module(self) is None:
            return
        kernel = SymbolTable.lookup_symbol(self, self.callee)
        if kernel is None:
            raise VerifyException(f"{self.name}: no kernel named {self.callee}")
        if not isinstance(kernel, KernelOpBase) or kernel.dialect_name() != self.dialect_name():
            raise VerifyException(f"{self.name}: {self.callee} is a {kernel.name}, not a kernel")
        given = tuple(a.type for a in self.args)
        if given != kernel.arg_types:
            raise VerifyException(
                f"{self.name}: argument types of {self.callee} differ: kernel takes "
                f"{format_types(kernel.arg_types)}, launch passes {format_types(given)}"
            )
