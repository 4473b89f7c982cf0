"""Op base classes shared by the buffer-level dialects (`loop`, `tile`, `kernel`).

The loop, tile and kernel dialects have near-identical kernels, loops, loads, stores, allocs
and launches. Their syntax and verifiers live here once; a dialect mirrors them with a
one-line subclass that sets `name` (and, for loops and kernels, the terminator trait):

```python
@irdl_op_definition
class YieldOp(YieldOpBase):
    name = "tile.yield"

@irdl_op_definition
class ForOp(DynamicForOpBase):          # `tile.for %i = %t to 2048 step 256 ...`
    name = "tile.for"
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(YieldOp),))

@irdl_op_definition
class KernelOp(KernelOpBase):           # `tile.kernel @k(%a: memref<..>) { ... }`
    name = "tile.kernel"
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(ReturnOp),))
```

Syntax (docs/ir.md sections 3-5):

- loops: `X.for %iv = LB to UB [step S] [iter_args(%a = %init, ...) -> (types)] { ... }`,
  `LB` an integer (`StaticForOpBase`) or an `index` SSA value (`DynamicForOpBase`); the
  yield is printed only when it has operands, and the parser inserts the empty one.
- kernels: `X.kernel @name(%a: memref<...>, ...) [attributes {...}] { ... X.return }`; a
  subclass may add words between the signature and the attributes by overriding
  `print_header_extra` / `parse_header_extra` (e.g. `grid G block T`).
- `%v = X.load %buf[%i, ...] : memref<...>`, `X.store %v, %buf[%i, ...] : memref<...>`,
  `%b = X.alloc : memref<...>`, `X.launch @k(%a, ...) : (types) -> ()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Self

from xdsl.dialects.builtin import (
    I64,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
)
from xdsl.dialects.utils import AbstractYieldOperation, parse_assignment, print_assignment
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    IsolatedFromAbove,
    IsTerminator,
    MemoryAllocEffect,
    MemoryReadEffect,
    MemoryWriteEffect,
    Pure,
    RecursiveMemoryEffect,
    SingleBlockImplicitTerminator,
    SymbolOpInterface,
    SymbolTable,
    ensure_terminator,
)
from xdsl.utils.exceptions import VerifyException

# ---------------------------------------------------------------------------------------------
# Loops
# ---------------------------------------------------------------------------------------------


def _int_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, 64)


def format_types(types: Sequence[Attribute]) -> str:
    """`(f32, memref<4xf32>)`: types as they are written in the IR, for error messages."""
    return "(" + ", ".join(str(t) for t in types) + ")"


class YieldOpBase(AbstractYieldOperation[Attribute]):
    """Loop terminator: `X.yield %a, %b : f32, f32` (the empty one is elided in loops)."""

    traits = traits_def(IsTerminator(), Pure())


class ForOpBase(IRDLOperation):
    """Common part of static- and dynamic-start loops: static `ub`/`step`, optional iter_args.

    A loop without iter_args is *free* (iterations independent); with iter_args it is a
    *reduce* loop (sequential, loop-carried values, one result per iter_arg).
    """

    ub = prop_def(IntegerAttr[I64])
    step = prop_def(IntegerAttr[I64])
    inits = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect())

    # -- helpers ---------------------------------------------------------------------------

    @property
    def upper(self) -> int:
        return self.ub.value.data

    @property
    def step_value(self) -> int:
        return self.step.value.data

    @property
    def induction_var(self) -> SSAValue:
        return self.body.block.args[0]

    @property
    def iter_args(self) -> Sequence[SSAValue]:
        """The loop-carried block arguments (after the induction variable)."""
        return self.body.block.args[1:]

    @property
    def is_reduce(self) -> bool:
        return len(self.inits) > 0

    def lower_bound(self) -> int | SSAValue:
        raise NotImplementedError

    # -- verifier --------------------------------------------------------------------------

    def verify_(self) -> None:
        if self.step_value <= 0:
            raise VerifyException(f"{self.name}: step must be positive, got {self.step_value}")
        args = self.body.block.args
        if not args or not isinstance(args[0].type, IndexType):
            raise VerifyException(f"{self.name}: the body's first argument must be an index iv")
        carried = [a.type for a in args[1:]]
        inits = [v.type for v in self.inits]
        results = [r.type for r in self.res]
        if carried != inits:
            raise VerifyException(
                f"{self.name}: iter_args types {format_types(carried)} differ from init "
                f"types {format_types(inits)}"
            )
        if results != inits:
            raise VerifyException(
                f"{self.name}: result types {format_types(results)} differ from iter_args "
                f"types {format_types(inits)}"
            )
        last = self.body.block.last_op
        if isinstance(last, YieldOpBase):
            yielded = [v.type for v in last.arguments]
            if yielded != inits:
                raise VerifyException(
                    f"{self.name}: yield types {format_types(yielded)} differ from iter_args "
                    f"types {format_types(inits)}"
                )

    # -- syntax ----------------------------------------------------------------------------

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.induction_var)
        printer.print_string(" = ")
        lb = self.lower_bound()
        if isinstance(lb, SSAValue):
            printer.print_ssa_value(lb)
        else:
            printer.print_string(str(lb))
        printer.print_string(f" to {self.upper}")
        if self.step_value != 1:
            printer.print_string(f" step {self.step_value}")
        if self.inits:
            printer.print_string(" iter_args(")
            printer.print_list(
                zip(self.iter_args, self.inits, strict=True),
                lambda pair: print_assignment(printer, pair[0], pair[1]),  # type: ignore[arg-type]
            )
            printer.print_string(") -> (")
            printer.print_list([v.type for v in self.inits], printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(
            self.body,
            print_entry_block_args=False,
            print_empty_block=False,
            print_block_terminators=bool(self.inits),
        )
        printer.print_op_attributes(self.attributes)

    @classmethod
    def _parse_lower_bound(cls, parser: Parser) -> int | SSAValue:
        raise NotImplementedError

    @classmethod
    def _create(
        cls, lb: int | SSAValue, ub: int, step: int, inits: Sequence[SSAValue], body: Region
    ) -> Self:
        raise NotImplementedError

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        iv = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lb = cls._parse_lower_bound(parser)
        parser.parse_keyword("to")
        ub = parser.parse_integer(allow_boolean=False, allow_negative=False)
        step = 1
        if parser.parse_optional_keyword("step"):
            step = parser.parse_integer(allow_boolean=False, allow_negative=False)
        pos = parser.pos
        carried: list[Parser.UnresolvedArgument] = []
        init_operands: list[UnresolvedOperand] = []
        types: list[Attribute] = []
        if parser.parse_optional_keyword("iter_args"):
            for arg, operand in parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, lambda: parse_assignment(parser)
            ):
                carried.append(arg)
                init_operands.append(operand)
            parser.parse_punctuation("->")
            types = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, parser.parse_attribute
            )
            if len(types) != len(carried):
                parser.raise_error(f"{cls.name}: {len(carried)} iter_args but {len(types)} types")
        inits = parser.resolve_operands(init_operands, types, pos)
        block_args = [iv.resolve(IndexType())]
        block_args += [a.resolve(t) for a, t in zip(carried, types, strict=True)]
        body = parser.parse_region(block_args)
        attrs = parser.parse_optional_attr_dict()
        op = cls._create(lb, ub, step, inits, body)
        op.attributes |= attrs
        if not inits:
            for trait in op.get_traits_of_type(SingleBlockImplicitTerminator):
                ensure_terminator(op, trait)
        return op


def _loop_body(body: Region | Block | Sequence[Operation] | None, inits: Sequence[SSAValue]):
    if body is None:
        body = Block(arg_types=[IndexType(), *(v.type for v in inits)])
    if isinstance(body, Block):
        return Region(body)
    if isinstance(body, Region):
        return body
    return Region(Block(body, arg_types=[IndexType(), *(v.type for v in inits)]))


class StaticForOpBase(ForOpBase):
    """A loop with a static integer start: `X.for %i = 0 to 32 step 2 { ... }`."""

    lb = prop_def(IntegerAttr[I64])

    def __init__(
        self,
        lb: int,
        ub: int,
        step: int = 1,
        inits: Sequence[SSAValue | Operation] = (),
        body: Region | Block | Sequence[Operation] | None = None,
    ):
        init_values = [SSAValue.get(v) for v in inits]
        super().__init__(
            operands=[init_values],
            result_types=[[v.type for v in init_values]],
            properties={"lb": _int_attr(lb), "ub": _int_attr(ub), "step": _int_attr(step)},
            regions=[_loop_body(body, init_values)],
        )

    @property
    def lower(self) -> int:
        return self.lb.value.data

    @property
    def trip_count(self) -> int:
        return max(0, -(-(self.upper - self.lower) // self.step_value))

    def lower_bound(self) -> int | SSAValue:
        return self.lower

    @classmethod
    def _parse_lower_bound(cls, parser: Parser) -> int | SSAValue:
        return parser.parse_integer(allow_boolean=False, allow_negative=False)

    @classmethod
    def _create(
        cls, lb: int | SSAValue, ub: int, step: int, inits: Sequence[SSAValue], body: Region
    ) -> Self:
        assert isinstance(lb, int)
        return cls(lb, ub, step, inits, body)


class DynamicForOpBase(ForOpBase):
    """A loop with an `index` SSA start: `X.for %k = %t to 2048 step 256 { ... }`."""

    lb = operand_def(IndexType())

    def __init__(
        self,
        lb: SSAValue | Operation,
        ub: int,
        step: int = 1,
        inits: Sequence[SSAValue | Operation] = (),
        body: Region | Block | Sequence[Operation] | None = None,
    ):
        init_values = [SSAValue.get(v) for v in inits]
        super().__init__(
            operands=[lb, init_values],
            result_types=[[v.type for v in init_values]],
            properties={"ub": _int_attr(ub), "step": _int_attr(step)},
            regions=[_loop_body(body, init_values)],
        )

    def lower_bound(self) -> int | SSAValue:
        return self.lb

    @classmethod
    def _parse_lower_bound(cls, parser: Parser) -> int | SSAValue:
        return parser.resolve_operand(parser.parse_unresolved_operand(), IndexType())

    @classmethod
    def _create(
        cls, lb: int | SSAValue, ub: int, step: int, inits: Sequence[SSAValue], body: Region
    ) -> Self:
        assert isinstance(lb, SSAValue)
        return cls(lb, ub, step, inits, body)


# ---------------------------------------------------------------------------------------------
# Memory access
# ---------------------------------------------------------------------------------------------


def _verify_indices(op: Operation, memref: SSAValue, indices: Sequence[SSAValue]) -> None:
    assert isinstance(memref.type, MemRefType)
    rank = memref.type.get_num_dims()
    if len(indices) != rank:
        raise VerifyException(
            f"{op.name}: expected {rank} indices for {memref.type}, got {len(indices)}"
        )


class LoadOpBase(IRDLOperation):
    """`%v = X.load %buf[%i, ...] : memref<...>`: one element; the result is the element type."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType())
    res = result_def(T)

    traits = traits_def(MemoryReadEffect())
    assembly_format = "$memref `[` $indices `]` attr-dict `:` type($memref)"

    def __init__(self, memref: SSAValue | Operation, indices: Sequence[SSAValue | Operation]):
        buf = SSAValue.get(memref)
        assert isinstance(buf.type, MemRefType)
        super().__init__(operands=[buf, indices], result_types=[buf.type.element_type])

    def verify_(self) -> None:
        _verify_indices(self, self.memref, self.indices)


class StoreOpBase(IRDLOperation):
    """`X.store %v, %buf[%i, ...] : memref<...>`: the value has the element type."""

    value = operand_def()
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType())

    traits = traits_def(MemoryWriteEffect())

    def __init__(
        self,
        value: SSAValue | Operation,
        memref: SSAValue | Operation,
        indices: Sequence[SSAValue | Operation],
    ):
        super().__init__(operands=[value, memref, indices])

    def verify_(self) -> None:
        _verify_indices(self, self.memref, self.indices)
        assert isinstance(self.memref.type, MemRefType)
        if self.value.type != self.memref.type.element_type:
            raise VerifyException(
                f"{self.name}: value type {self.value.type} differs from the element type of "
                f"{self.memref.type}"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        printer.print_ssa_value(self.memref)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_ssa_value)
        printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.memref.type)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        memref_type = parser.parse_type()
        if not isinstance(memref_type, MemRefType):
            parser.raise_error(f"{cls.name}: expected a memref type, got {memref_type}", pos)
        op = cls(
            parser.resolve_operand(value, memref_type.element_type),
            parser.resolve_operand(memref, memref_type),
            [parser.resolve_operand(i, IndexType()) for i in indices],
        )
        op.attributes |= attrs
        return op


class AllocOpBase(IRDLOperation):
    """`%b = X.alloc : memref<...>`: a fresh static-shape buffer (host op)."""

    res = result_def(MemRefType)
    traits = traits_def(MemoryAllocEffect())
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self, memref_type: MemRefType):
        super().__init__(result_types=[memref_type])


# ---------------------------------------------------------------------------------------------
# Kernels and launches
# ---------------------------------------------------------------------------------------------


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
    """The outermost `builtin.module` above `op` (None while the op is detached)."""
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

    def __init__(self, callee: str | SymbolRefAttr, args: Sequence[SSAValue | Operation]):
        ref = SymbolRefAttr(callee) if isinstance(callee, str) else callee
        super().__init__(operands=[args], properties={"callee": ref})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.callee)
        printer.print_string("(")
        printer.print_list(self.args, printer.print_ssa_value)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(FunctionType.from_lists([a.type for a in self.args], []))

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        callee = parser.parse_attribute()
        if not isinstance(callee, SymbolRefAttr):
            parser.raise_error(f"{cls.name}: expected a kernel symbol like @k")
        operands = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_type()
        if not isinstance(ftype, FunctionType) or ftype.outputs.data:
            parser.raise_error(f"{cls.name}: expected a type like (memref<...>, ...) -> ()", pos)
        args = parser.resolve_operands(operands, ftype.inputs.data, pos)
        op = cls(callee, args)
        op.attributes |= attrs
        return op

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
                f"({', '.join(map(str, kernel.arg_types))}), launch passes "
                f"({', '.join(map(str, given))})"
            )
