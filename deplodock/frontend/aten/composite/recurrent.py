"""`aten.lstm` / `aten.gru` / `aten.rnn_tanh` / `aten.rnn_relu`: whole recurrent modules.

`torch.export` keeps `nn.LSTM`, `nn.GRU` and `nn.RNN` as one aten op over every layer and
direction (weights as a flat list: `w_ih, w_hh[, b_ih, b_hh]` per layer and direction). Here
each layer and direction becomes the input projection of the whole sequence (`torch.linear`,
independent of the state) and one `torch.recurrence` that carries the
state across the steps; a bidirectional layer concatenates the two directions' hidden states
as the next layer's input, and the outputs (the last layer's states, the final `h` and `c` of
every layer and direction, stacked as PyTorch stacks them) are slices of those states.

The ops are multi-output, so each output is its own handler call (`OutputOf`); the layers
are built once, on the first, and shared (`Emitter.shared`), so `out, (h, c) = lstm(x)` runs
each recurrence once. Refused with a one-line reason: `proj_size` (a projected LSTM) and
dropout between layers in training mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.dialects.cell_kind import CellKind
from deplodock.frontend.aten.composite.common import reshaped, tensor_shape
from deplodock.frontend.aten.core import (
    AtenImportError,
    Emitter,
    Handler,
    OutputOf,
    aten,
    elt_of,
    handles,
)

_RNN_OPS = (T.PermuteOp, T.LinearOp, T.RecurrenceOp, T.SliceOp, T.CatOp, T.ReshapeOp)

#: The aten op of each cell (its schema: input, hx, params, has_biases, num_layers, dropout,
#: train, bidirectional, batch_first).
CELL_OPS = {
    aten.rnn_tanh.input: CellKind.RNN_TANH,
    aten.rnn_relu.input: CellKind.RNN_RELU,
    aten.lstm.input: CellKind.LSTM,
    aten.gru.input: CellKind.GRU,
}


def _part(e: Emitter, x: SSAValue, dim: int, start: int, end: int) -> SSAValue:
    """`x` sliced along `dim` (itself when the slice is all of it)."""
    if (start, end) == (0, tensor_shape(x)[dim]):
        return x
    return e.emit(T.SliceOp(x, dim, start, end))


def _initial(e: Emitter, hx: SSAValue, index: int) -> SSAValue:
    """Layer-direction `index`'s initial state `(B, H)` from PyTorch's `(L * D, B, H)`."""
    return reshaped(e, _part(e, hx, 0, index, index + 1), tensor_shape(hx)[1:])


def _one_layer(
    e: Emitter,
    cell: CellKind,
    x: SSAValue,
    weights: Sequence[SSAValue],
    initial: Sequence[SSAValue],
    reverse: bool,
    name: str,
) -> SSAValue:
    """One direction of one layer over the time-major `x`: `(T, B, states * H)`, its values
    named `name` (`lstm_l0_reverse`)."""
    w_ih, w_hh, *biases = weights
    b_ih, b_hh = biases if biases else (None, None)
    if b_hh is None:
        rows = tensor_shape(w_hh)[0]
        b_hh = e.emit(T.ConstantOp(0.0, TensorType(elt_of(w_hh), [rows])))
    gates = e.emit(T.LinearOp(x, w_ih, b_ih))
    c0 = initial[1] if cell is CellKind.LSTM else None
    states = e.emit(T.RecurrenceOp(cell, gates, w_hh, b_hh, initial[0], c0, reverse))
    gates.name_hint = f"{name}_gates"  # the kernels are named after them
    states.name_hint = name
    return states


def _hidden_states(e: Emitter, states: Sequence[SSAValue], hidden: int) -> SSAValue:
    """A layer's output `(T, B, directions * H)`: each direction's h, side by side."""
    hs = [_part(e, s, 2, 0, hidden) for s in states]
    return hs[0] if len(hs) == 1 else e.emit(T.CatOp(hs, 2))


def _layers(e: Emitter, a: dict[str, Any], cell: CellKind) -> list[list[SSAValue]]:
    """Every layer's states, per direction (built once per node: `Emitter.shared`)."""
    key = (id(a["input"]), tuple(id(p) for p in a["params"]))
    if key in e.shared:
        return e.shared[key]
    x = e.tensor(a["input"])
    if len(tensor_shape(x)) != 3:
        raise AtenImportError(f"a recurrent input of rank 3 is expected, got {tensor_shape(x)}")
    if a["batch_first"]:
        x = e.emit(T.PermuteOp(x, [1, 0, 2]))
    hx = [e.tensor(h) for h in (a["hx"] if isinstance(a["hx"], list | tuple) else [a["hx"]])]
    params = [e.tensor(p) for p in a["params"]]
    directions = 2 if a["bidirectional"] else 1
    per = 4 if a["has_biases"] else 2
    if len(params) != per * a["num_layers"] * directions:
        raise AtenImportError("a projected LSTM (proj_size > 0) is not supported")
    if a["train"] and a["dropout"] > 0 and a["num_layers"] > 1:
        raise AtenImportError("dropout between recurrent layers in training mode")
    hidden = tensor_shape(params[1])[1]
    layers: list[list[SSAValue]] = []
    for layer in range(a["num_layers"]):
        states = []
        for d in range(directions):
            i = layer * directions + d
            initial = [_initial(e, h, i) for h in hx]
            weights = params[per * i : per * (i + 1)]
            name = f"{cell.value}_l{layer}{'_reverse' if d == 1 else ''}"
            states.append(_one_layer(e, cell, x, weights, initial, d == 1, name))
        layers.append(states)
        if layer + 1 < a["num_layers"]:
            x = _hidden_states(e, states, hidden)
    e.shared[key] = layers
    return layers


def _output(e: Emitter, a: dict[str, Any], cell: CellKind) -> SSAValue:
    """Output `a["output_index"]`: 0 the last layer's hidden states (batch first if the
    input was), 1 the final h of every layer and direction, 2 (LSTM) the final c."""
    layers = _layers(e, a, cell)
    hidden = tensor_shape(layers[0][0])[2] // cell.states
    index = a["output_index"]
    if index == 0:
        y = _hidden_states(e, layers[-1], hidden)
        return e.emit(T.PermuteOp(y, [1, 0, 2])) if a["batch_first"] else y
    steps = tensor_shape(layers[0][0])[0]
    finals = []
    for states in layers:
        for d, s in enumerate(states):
            last = 0 if d == 1 else steps - 1  # the backward direction ends at step 0
            final = _part(e, s, 0, last, last + 1)
            finals.append(_part(e, final, 2, (index - 1) * hidden, index * hidden))
    return finals[0] if len(finals) == 1 else e.emit(T.CatOp(finals, 0))


def _handler(cell: CellKind) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        return _output(e, a, cell)

    handler.__doc__ = f"`aten.{cell.value}`: outputs and final states through `_output`."
    return handler


for _op, _cell in CELL_OPS.items():
    handles(OutputOf(_op, None), emits=_RNN_OPS)(_handler(_cell))
