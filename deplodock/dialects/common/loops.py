"""Loop base classes: `X.for` (static or dynamic start) and its terminator `X.yield`.

Syntax: `X.for %iv = LB to UB [step S] [iter_args(%a = %init, ...) -> (types)] { ... }`,
`LB` an integer (`StaticForOpBase`) or an `index` SSA value (`DynamicForOpBase`); the yield
is printed only when it has operands, and the parser inserts the empty one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from xdsl.dialects.builtin import I64, IndexType, IntegerAttr, i1
from xdsl.dialects.utils import AbstractYieldOperation, parse_assignment, print_assignment
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    operand_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    IsTerminator,
    Pure,
    RecursiveMemoryEffect,
    SingleBlockImplicitTerminator,
    ensure_terminator,
)
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.common.syntax import format_types

LoopBody = Region | Block | Sequence[Operation] | None


def _int_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, 64)


def _require_same_types(
    op: Operation, what: str, types: Sequence[Attribute], ref: str, ref_types: Sequence[Attribute]
) -> None:
    """The loop-carried types must agree everywhere they are spelled (inits, args, yield)."""
    if list(types) != list(ref_types):
        raise VerifyException(
            f"{op.name}: {what} types {format_types(types)} differ from {ref} "
            f"types {format_types(ref_types)}"
        )


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

    def __init__(
        self,
        lb: int | SSAValue | Operation,
        ub: int,
        step: int = 1,
        inits: Sequence[SSAValue | Operation] = (),
        body: LoopBody = None,
    ):
        init_values = [SSAValue.get(v) for v in inits]
        lb_operands, lb_properties = self._lower_bound_fields(lb)
        super().__init__(
            operands=[*lb_operands, init_values],
            result_types=[[v.type for v in init_values]],
            properties={**lb_properties, "ub": _int_attr(ub), "step": _int_attr(step)},
            regions=[_loop_body(body, init_values)],
        )

    @classmethod
    def _lower_bound_fields(
        cls, lb: int | SSAValue | Operation
    ) -> tuple[list[SSAValue | Operation], dict[str, Attribute]]:
        """Where a subclass keeps its start: `(leading operands, properties)`."""
        raise NotImplementedError

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
        inits = [v.type for v in self.inits]
        _require_same_types(self, "iter_args", [a.type for a in args[1:]], "init", inits)
        _require_same_types(self, "result", [r.type for r in self.res], "iter_args", inits)
        last = self.body.block.last_op
        if isinstance(last, YieldOpBase):
            _require_same_types(self, "yield", last.arguments.types, "iter_args", inits)

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
        op = cls(lb, ub, step, inits, body)
        op.attributes |= attrs
        if not inits:
            for trait in op.get_traits_of_type(SingleBlockImplicitTerminator):
                ensure_terminator(op, trait)
        return op


def _loop_body(body: LoopBody, inits: Sequence[SSAValue]) -> Region:
    """The body region a loop constructor was given, or an empty one with the iv and iter_args."""
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

    @classmethod
    def _lower_bound_fields(
        cls, lb: int | SSAValue | Operation
    ) -> tuple[list[SSAValue | Operation], dict[str, Attribute]]:
        assert isinstance(lb, int), f"{cls.name}: the start must be an integer, got {lb}"
        return [], {"lb": _int_attr(lb)}

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


class DynamicForOpBase(ForOpBase):
    """A loop with an `index` SSA start: `X.for %k = %t to 2048 step 256 { ... }`."""

    lb = operand_def(IndexType())

    @classmethod
    def _lower_bound_fields(
        cls, lb: int | SSAValue | Operation
    ) -> tuple[list[SSAValue | Operation], dict[str, Attribute]]:
        assert not isinstance(lb, int), f"{cls.name}: the start must be an index value"
        return [lb], {}

    def lower_bound(self) -> int | SSAValue:
        return self.lb

    @classmethod
    def _parse_lower_bound(cls, parser: Parser) -> int | SSAValue:
        return parser.resolve_operand(parser.parse_unresolved_operand(), IndexType())


class IfOpBase(IRDLOperation):
    """`X.if %cond { ... }`: the body runs on the threads where `%cond` holds.

    No results and no else region: a guarded computation ends in stores (the scheduling
    passes guard the cells of a partial tile, `m < M`). Subclasses set `name` and the
    terminator trait (`SingleBlockImplicitTerminator(YieldOp)`).
    """

    cond = operand_def(i1)
    body = region_def("single_block")

    def __init__(self, cond: SSAValue | Operation, body: Region | None = None):
        super().__init__(operands=[cond], regions=[Region(Block()) if body is None else body])
        for trait in self.get_traits_of_type(SingleBlockImplicitTerminator):
            ensure_terminator(self, trait)

    def verify_(self) -> None:
        last = self.body.block.last_op
        if isinstance(last, YieldOpBase) and last.arguments:
            raise VerifyException(f"{self.name}: has no results, so its {last.name} takes none")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.cond)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_block_terminators=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        cond = parser.parse_operand(i1)
        body = parser.parse_region()
        op = cls(cond, body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op
