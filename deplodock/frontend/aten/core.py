"""The core of the aten table: dtypes, the `Emitter` that handlers build torch ops with,
and the `HANDLERS` registry (`@handles(aten.x.overload, emits=T.XOp)`).

A registration names the torch ops its handler builds (`emits`), so the table can say which
torch ops it produces (`handled_op_types`) without running anything; the claim is checked
each time the handler runs, so it cannot drift from the code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from xdsl.builder import Builder
from xdsl.dialects.builtin import TensorType, i1, i32, i64
from xdsl.ir import Attribute, SSAValue

from deplodock.dialects import torch as T
from deplodock.dialects.element_types import ELEMENT_TYPES, torch_dtype

aten = torch.ops.aten

#: PyTorch dtype -> element type of the torch dialect: the rows of the element-type table
#: that the dialect admits.
DTYPES: dict[torch.dtype, Attribute] = {
    torch_dtype(t): t for t in ELEMENT_TYPES if T.is_supported_element_type(t)
}


class AtenImportError(Exception):
    """A node the table knows but cannot express (dtype promotion, training-mode dropout...)."""


def tensor_type(val: Any, what: str) -> TensorType:
    """The builtin tensor type of a (fake) tensor from `node.meta["val"]`."""
    if not isinstance(val, torch.Tensor):
        raise AtenImportError(f"{what} is not a tensor ({type(val).__name__})")
    if val.dtype not in DTYPES:
        raise AtenImportError(f"{what} has unsupported dtype {val.dtype}")
    return TensorType(DTYPES[val.dtype], [int(s) for s in val.shape])


class Emitter:
    """Inserts torch ops for FX nodes; `env` maps already imported nodes to SSA values."""

    def __init__(self, builder: Builder, env: dict[torch.fx.Node, SSAValue]):
        self.builder = builder
        self.env = env
        #: every op emitted so far, in order (what a registration checks its `emits` with)
        self.emitted: list[T.TorchOp] = []
        #: what a multi-output op builds once for all its outputs (each output is its own
        #: handler call), keyed by the handler: an RNN's layers
        self.shared: dict[Any, Any] = {}

    def emit(self, op: T.TorchOp) -> SSAValue:
        self.builder.insert(op)
        self.emitted.append(op)
        return op.result

    def tensor(self, x: Any) -> SSAValue:
        if not isinstance(x, torch.fx.Node) or x not in self.env:
            raise AtenImportError(f"expected a tensor argument, got {x!r}")
        return self.env[x]

    def scalar(self, value: float | bool, like: SSAValue | Attribute) -> SSAValue:
        """A rank-0 constant with the element type of `like` (how aten scalars enter)."""
        elt = like if isinstance(like, Attribute) else elt_of(like)
        if not isinstance(value, int | float):
            raise AtenImportError(f"unsupported scalar argument {value!r}")
        if isinstance(value, float) and elt in (i64, i32) and not value.is_integer():
            raise AtenImportError("float scalar with an integer tensor needs dtype promotion")
        if elt == i1 and value not in (0, 1):
            raise AtenImportError(f"bool scalar {value!r} is not 0 or 1")
        return self.emit(T.ConstantOp(float(value), TensorType(elt, [])))

    def value(self, x: Any, like: SSAValue | Attribute | None = None) -> SSAValue:
        """An SSA value for a node, an already built value, or a scalar (typed like `like`)."""
        if isinstance(x, SSAValue):
            return x
        if isinstance(x, torch.fx.Node) or like is None:
            return self.tensor(x)
        return self.scalar(x, like)

    def cast(self, x: SSAValue, elt: Attribute) -> SSAValue:
        """`x` converted to element type `elt` (itself when it already has it)."""
        return x if elt_of(x) == elt else self.emit(T.CastOp(x, elt))

    def operand(self, x: Any, elt: Attribute) -> SSAValue:
        """A tensor or scalar argument as a value of element type `elt`."""
        if isinstance(x, SSAValue | torch.fx.Node):
            return self.cast(self.value(x), elt)
        return self.scalar(x, elt)

    def promoted(self, lhs: Any, rhs: Any) -> Attribute:
        """The element type PyTorch computes `lhs op rhs` in (`torch.result_type`)."""
        a, b = (
            _meta(self.value(x)) if isinstance(x, SSAValue | torch.fx.Node) else x
            for x in (lhs, rhs)
        )
        return _element_type(torch.result_type(a, b))

    def binary(
        self, op: type[T.BinaryOp], lhs: Any, rhs: Any, elt: Attribute | None = None
    ) -> SSAValue:
        """`op(lhs, rhs)` computed in `elt` (default: PyTorch's promoted type)."""
        elt = elt if elt is not None else self.promoted(lhs, rhs)
        return self.emit(op(self.operand(lhs, elt), self.operand(rhs, elt)))

    def scaled(self, x: Any, alpha: Any, like: SSAValue) -> SSAValue:
        """`alpha * x` folded into a mul, skipped for the common alpha == 1."""
        value = self.value(x, like)
        return value if alpha == 1 else self.binary(T.MulOp, value, alpha)

    def boolean(self, x: Any) -> SSAValue:
        """`x != 0` unless `x` is already a bool tensor (logical ops take truth values)."""
        value = self.value(x, i1)
        return value if elt_of(value) == i1 else self.binary(T.NeOp, value, 0)


def _meta(v: SSAValue) -> torch.Tensor:
    """A meta tensor with the shape and dtype of `v` (for `torch.result_type`)."""
    assert isinstance(v.type, TensorType)
    return torch.empty(v.type.get_shape(), dtype=torch_dtype(elt_of(v)), device="meta")


def _element_type(dtype: Any) -> Attribute:
    if isinstance(dtype, torch.Tensor):
        dtype = dtype.dtype
    if dtype not in DTYPES:
        raise AtenImportError(f"unsupported dtype {dtype}")
    return DTYPES[dtype]


Handler = Callable[[Emitter, dict[str, Any], TensorType], SSAValue]
OpTypes = type[T.TorchOp] | Sequence[type[T.TorchOp]]

#: Ops any handler may build on the side: how Python scalars (`torch.constant`) and dtype
#: promotion (`torch.cast`) enter the graph.
GLUE_OPS: frozenset[type[T.TorchOp]] = frozenset({T.ConstantOp, T.CastOp})


@dataclass(frozen=True)
class Registration:
    """One entry of `HANDLERS`: a handler and the torch ops it builds (besides `GLUE_OPS`).

    Calling it runs the handler and checks that claim, so `handled_op_types` stays true.
    """

    target: Any
    handler: Handler
    emits: frozenset[type[T.TorchOp]]

    def __call__(self, e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        start = len(e.emitted)
        value = self.handler(e, a, out)
        built = {type(op) for op in e.emitted[start:]}
        if stray := built - self.emits - GLUE_OPS:
            names = ", ".join(sorted(op.name for op in stray))
            raise AssertionError(
                f"the handler of {target_name(self.target)} built {names}: add it to `emits`"
            )
        return value


HANDLERS: dict[Any, Registration] = {}


def handler_of(target: Any) -> Registration | None:
    """The registration that imports `target`: its own, or for one output of a multi-output
    op the one registered for all of its outputs (`OutputOf(op, None)`)."""
    if target in HANDLERS:
        return HANDLERS[target]
    if isinstance(target, OutputOf):
        return HANDLERS.get(OutputOf(target.op, None))
    return None


def handled_op_types() -> frozenset[type[T.TorchOp]]:
    """The torch ops some aten handler builds (the union of the registrations' `emits`)."""
    return frozenset(op for registration in HANDLERS.values() for op in registration.emits)


def elt_of(v: SSAValue) -> Attribute:
    assert isinstance(v.type, TensorType)
    return v.type.element_type


def rank_of(v: SSAValue) -> int:
    assert isinstance(v.type, TensorType)
    return v.type.get_num_dims()


def norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def norm_dims(ds: Sequence[int] | int | None, rank: int) -> list[int]:
    if ds is None or (not isinstance(ds, int) and not ds):
        return list(range(rank))
    return sorted({norm_dim(d, rank) for d in ([ds] if isinstance(ds, int) else ds)})


def handles(*targets: Any, emits: OpTypes) -> Callable[[Handler], Handler]:
    """Registers a handler for aten `targets`; `emits` names the torch op(s) it builds."""
    ops = frozenset([emits] if isinstance(emits, type) else emits)

    def register(fn: Handler) -> Handler:
        for t in targets:
            HANDLERS[t] = Registration(t, fn, ops)
        return fn

    return register


@dataclass(frozen=True)
class OutputOf:
    """Output `index` of a multi-output aten op (`sort` gives values and indices), as a
    single-output FX target: the importer replaces each `getitem(node, index)` by a call of
    it with the op's arguments, so handlers only ever build one value, and an output nobody
    reads is never built. Calling it runs the op and picks the output (what FX would do)."""

    op: torch._ops.OpOverload
    #: None in a registration: one handler for every output (it reads `a["output_index"]`)
    index: int | None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.op(*args, **kwargs)[self.index]

    def __str__(self) -> str:
        return f"{self.op}[{self.index}]"

    @property
    def __name__(self) -> str:  # FX names the node after its target
        return f"{self.op.__name__}_{self.index}"


def target_name(target: Any) -> str:
    """`aten.cumsum.default` for an OpOverload, `aten.sort.default[1]` for one output of a
    multi-output op, `_operator.getitem` for a Python callable."""
    if isinstance(target, torch._ops.OpOverload | torch._ops.HigherOrderOperator | OutputOf):
        return str(target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', target)}".lstrip(".")
