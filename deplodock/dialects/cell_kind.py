"""The recurrent cells (Elman RNN with tanh or relu, LSTM, GRU) and everything each one means.

A recurrence appears at three levels: `torch.recurrence` and `tensor.recurrence` (one layer,
one direction, over the whole sequence), the loop nest that `convert-tensor-to-loop` lifts it
into, and the numpy step of the interpreters. All of them ask the same questions of a cell
(how many gate blocks its weights stack, how many state vectors it carries, how one step
turns the gate pre-activations and the previous state into the next state), so the answers
live here, on `CellKind`, once as numpy (`step`) and once as scalar `arith`/`math` ops
(`build_step`), both written from PyTorch's documented equations:

- rnn_tanh / rnn_relu: `h' = act(x_g + h_g)`;
- lstm (gates i, f, g, o): `c' = sigmoid(f) c + sigmoid(i) tanh(g)`, `h' = sigmoid(o) tanh(c')`;
- gru (gates r, z, n): `n = tanh(x_n + sigmoid(r) h_n)`, `h' = (1 - sigmoid(z)) n + sigmoid(z) h`.

`x_g` is the input's projection `W_ih x + b_ih` and `h_g` the hidden state's `W_hh h + b_hh`,
both per gate block; the GRU is why they stay apart (its reset gate scales `h_n` alone).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, TensorType, UnitAttr
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
)
from xdsl.utils.str_enum import StrEnum


class CellKind(StrEnum):
    """One recurrent cell: PyTorch's `nn.RNN` (tanh, relu), `nn.LSTM` and `nn.GRU`."""

    RNN_TANH = "rnn_tanh"
    RNN_RELU = "rnn_relu"
    LSTM = "lstm"
    GRU = "gru"

    @property
    def gates(self) -> int:
        """Gate blocks stacked in `W_ih`, `W_hh` and the biases (PyTorch's order)."""
        return _GATES[self]

    @property
    def states(self) -> int:
        """State vectors carried from step to step: h, and c for the LSTM."""
        return 2 if self is CellKind.LSTM else 1

    def result_shape(self, shapes: Sequence[Sequence[int] | None]) -> tuple[int, ...]:
        """The states `(T, B, states * H)` of one layer over a sequence, from the operand
        shapes (gates `(T, B, gates * H)`, weight `(gates * H, H)`, bias `(gates * H)`, h0
        `(B, H)`, c0 `(B, H)` for the LSTM alone, else None). A rule broken is a ValueError
        naming it (each dialect's verifier words it as its own)."""
        gates, weight, bias, h0, c0 = (tuple(s) if s is not None else None for s in shapes)
        if gates is None or weight is None or bias is None or h0 is None:
            raise ValueError("gates, weight, bias and h0 are required")
        if len(gates) != 3 or len(weight) != 2 or len(h0) != 2:
            raise ValueError(f"gates {gates}, weight {weight}, h0 {h0} need ranks 3, 2, 2")
        t, b, h = gates[0], gates[1], weight[1]
        rows = self.gates * h
        if weight[0] != rows or bias != (rows,) or gates[2] != rows:
            raise ValueError(
                f"the {self.value} cell of hidden size {h} needs gates (T, B, {rows}), weight "
                f"({rows}, {h}), bias ({rows}); got {gates}, {weight}, {bias}"
            )
        if h0 != (b, h):
            raise ValueError(f"h0 {h0} is not (batch {b}, hidden {h})")
        if (c0 is not None) != (self is CellKind.LSTM):
            raise ValueError("c0 is given exactly when the cell is an LSTM")
        if c0 is not None and c0 != (b, h):
            raise ValueError(f"c0 {c0} is not (batch {b}, hidden {h})")
        return (t, b, self.states * h)

    def result_type(self, types: Sequence[Attribute | None]) -> TensorType:
        """The states' tensor type: `result_shape` of the operand types (None for an absent
        c0), in the gates' element type."""
        gates = types[0]
        assert isinstance(gates, TensorType)
        shapes = [t.get_shape() if isinstance(t, TensorType) else None for t in types]
        return TensorType(gates.element_type, self.result_shape(shapes))

    def step(
        self, x: np.ndarray, hg: np.ndarray, h: np.ndarray, c: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """One step on arrays: `x`, `hg` are `(..., gates * H)`, `h`, `c` are `(..., H)`."""
        xs, hs = np.split(x, self.gates, -1), np.split(hg, self.gates, -1)
        if self is CellKind.RNN_TANH:
            return np.tanh(xs[0] + hs[0]), None
        if self is CellKind.RNN_RELU:
            return np.maximum(xs[0] + hs[0], 0), None
        if self is CellKind.LSTM:
            i, f, g, o = (a + b for a, b in zip(xs, hs, strict=True))
            assert c is not None
            c_next = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            return _sigmoid(o) * np.tanh(c_next), c_next
        r, z = _sigmoid(xs[0] + hs[0]), _sigmoid(xs[1] + hs[1])
        n = np.tanh(xs[2] + r * hs[2])
        return (1 - z) * n + z * h, None

    def run(
        self,
        gates: np.ndarray,
        weight: np.ndarray,
        bias: np.ndarray,
        h0: np.ndarray,
        c0: np.ndarray | None,
        reverse: bool = False,
    ) -> np.ndarray:
        """Every step's state `(T, B, states * H)` of one layer (the interpreters' form of
        `tensor.recurrence`; shapes as in `result_shape`)."""
        steps = range(gates.shape[0] - 1, -1, -1) if reverse else range(gates.shape[0])
        h, c = h0, c0
        out = []
        for t in steps:
            h, c = self.step(gates[t], h @ weight.T + bias, h, c)
            out.append(h if c is None else np.concatenate([h, c], -1))
        return np.stack(out[::-1] if reverse else out)

    def build_step(
        self,
        b: Builder,
        x: Sequence[SSAValue],
        hg: Sequence[SSAValue],
        h: SSAValue,
        c: SSAValue | None,
    ) -> tuple[SSAValue, SSAValue | None]:
        """`step` for one hidden unit as scalar ops inserted by `b`: `x`, `hg` hold one
        value per gate; returns the next h (and c for the LSTM)."""
        ops = _Scalar(b, h.type)
        if self is CellKind.RNN_TANH:
            return ops.tanh(ops.add(x[0], hg[0])), None
        if self is CellKind.RNN_RELU:
            return ops.relu(ops.add(x[0], hg[0])), None
        if self is CellKind.LSTM:
            i, f, g, o = (ops.add(a, v) for a, v in zip(x, hg, strict=True))
            assert c is not None
            c_next = ops.add(ops.mul(ops.sigmoid(f), c), ops.mul(ops.sigmoid(i), ops.tanh(g)))
            return ops.mul(ops.sigmoid(o), ops.tanh(c_next)), c_next
        r, z = ops.sigmoid(ops.add(x[0], hg[0])), ops.sigmoid(ops.add(x[1], hg[1]))
        n = ops.tanh(ops.add(x[2], ops.mul(r, hg[2])))
        return ops.add(n, ops.mul(z, ops.sub(h, n))), None  # (1 - z) n + z h


_GATES: dict[CellKind, int] = {
    CellKind.RNN_TANH: 1,
    CellKind.RNN_RELU: 1,
    CellKind.LSTM: 4,
    CellKind.GRU: 3,
}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


class _Scalar:
    """Scalar float ops of one type, inserted by a builder (what `build_step` composes)."""

    def __init__(self, b: Builder, type_: Attribute):
        self.b = b
        self.type = type_

    def _insert(self, op: Operation) -> SSAValue:
        return self.b.insert(op).results[0]

    def const(self, value: float) -> SSAValue:
        return self._insert(arith.ConstantOp(FloatAttr(value, self.type)))

    def add(self, a: SSAValue, v: SSAValue) -> SSAValue:
        return self._insert(arith.AddfOp(a, v))

    def sub(self, a: SSAValue, v: SSAValue) -> SSAValue:
        return self._insert(arith.SubfOp(a, v))

    def mul(self, a: SSAValue, v: SSAValue) -> SSAValue:
        return self._insert(arith.MulfOp(a, v))

    def tanh(self, a: SSAValue) -> SSAValue:
        return self._insert(math.TanhOp(a))

    def relu(self, a: SSAValue) -> SSAValue:
        return self._insert(arith.MaximumfOp(a, self.const(0.0)))

    def sigmoid(self, a: SSAValue) -> SSAValue:
        """`1 / (1 + exp(-a))`."""
        e = self._insert(math.ExpOp(self._insert(arith.NegfOp(a))))
        one = self.const(1.0)
        return self._insert(arith.DivfOp(one, self.add(one, e)))


@irdl_attr_definition
class CellKindAttr(EnumAttribute[CellKind], SpacedOpaqueSyntaxAttribute):
    """`#tensor<cell lstm>` in generic form; printed as a bare keyword by the ops."""

    name = "tensor.cell"


class RecurrenceOpBase(IRDLOperation):
    """The operands and properties `torch.recurrence` and `tensor.recurrence` share: one
    layer and direction over the sequence (`gates`, `weight`, `bias`, `h0`, and `c0` for the
    LSTM alone), its `cell` and whether it walks the steps in `reverse`."""

    gates = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = operand_def(TensorType)
    h0 = operand_def(TensorType)
    c0 = opt_operand_def(TensorType)
    cell = prop_def(CellKindAttr)
    reverse = opt_prop_def(UnitAttr)

    def __init__(
        self,
        cell: CellKind | str,
        gates: SSAValue,
        weight: SSAValue,
        bias: SSAValue,
        h0: SSAValue,
        c0: SSAValue | None = None,
        reverse: bool = False,
    ):
        self._init([gates, weight, bias, h0, c0], self.properties_of(cell, reverse))

    def _init(self, operands: Sequence[SSAValue | None], props: dict[str, Attribute]) -> None:
        """Initialise with the states' type, `CellKind.result_type` of the operands' (the
        torch op has `TorchOp._init` first in its bases, whose `infer` asks the same)."""
        cell = props["cell"]
        assert isinstance(cell, CellKindAttr)
        IRDLOperation.__init__(
            self,
            operands=[[] if o is None else o for o in operands],
            result_types=[cell.data.result_type([None if o is None else o.type for o in operands])],
            properties=props,
        )

    @staticmethod
    def properties_of(cell: CellKind | str, reverse: bool) -> dict[str, Attribute]:
        return {"cell": CellKindAttr(CellKind(cell))} | ({"reverse": UnitAttr()} if reverse else {})

    @property
    def cell_kind(self) -> CellKind:
        return self.cell.data

    @property
    def is_reverse(self) -> bool:
        return self.reverse is not None

    def operand_shapes(self) -> list[tuple[int, ...] | None]:
        """The shapes `CellKind.result_shape` takes (None for an absent c0)."""
        values = (self.gates, self.weight, self.bias, self.h0, self.c0)
        return [tuple(v.type.get_shape()) if v is not None else None for v in values]  # type: ignore[attr-defined]
