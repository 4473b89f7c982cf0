"""`tensor.recurrence` -> free loops over the batch around one carried loop over the steps.

The step loop carries the row of `out` that holds the previous state (the sentinel `T` before
the first step, when the state is `h0`/`c0`), so it is a recurrence to the scheduling
passes (it carries a value and stores inside: `tile/nests.is_recurrence`) and stays serial in
one thread per batch row; inside it, each hidden unit `j` takes its dot products with the
previous state over `k` and applies the cell (`CellKind.build_step`):

```mlir
%last = loop.for %s = 0 to 6 iter_args(%prev = %c6) -> (index) {
  %first = arith.cmpi eq, %prev, %c6 : index
  %row = arith.select %first, %c0, %prev : index
  loop.for %j = 0 to 8 {
    %dot = loop.for %k = 0 to 8 iter_args(%a0 = %zero) -> (f32) { ... w[j, k] * h[row, k] }
    ...                                    // the cell on gates[s, b, j] and %dot + bias[j]
    loop.store %h, %out[%s, %i1, %j] : memref<6x2x8xf32>
  }
  loop.yield %s : index
}
```

Why this shape rather than one kernel per step launched from `@forward`: the recurrence
stays one kernel and one launch whatever the sequence length, and each level (loop, tile,
kernel, the emitted CUDA) already runs a carried loop with stores inside (`tensor.scan`).
The price is parallelism: one thread per batch row and direction walks the whole sequence,
which suits the short, narrow recurrences of the nets deplodock checks; the input
projection is a kernel of its own here (`loop-fusion` may inline it into the loads of
`gates`, each read once).
f16/bf16 compute in f32 and round each stored state.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.rewriter import InsertPoint

from deplodock.dialects import loop, tensor
from deplodock.dialects.element_types import accumulator_type
from deplodock.dialects.queries import element_type_of, shape_of
from deplodock.passes.loop_utils import KernelBuilder, free_loop, free_nest
from deplodock.passes.tensor_to_loop.lift import Args, LiftPattern


class _Reader:
    """Loads of the kernel's buffers as values of the compute type (extended from f16/bf16)."""

    def __init__(self, b: Builder, compute: Attribute):
        self.b = b
        self.compute = compute

    def load(self, buffer: SSAValue, coords: Sequence[SSAValue]) -> SSAValue:
        value: SSAValue = self.b.insert(loop.LoadOp(buffer, coords)).res
        if value.type != self.compute:
            value = self.b.insert(arith.ExtFOp(value, self.compute)).result  # type: ignore[arg-type]
        return value

    def state(
        self,
        first: SSAValue,
        start: SSAValue,
        out: SSAValue,
        start_at: list[SSAValue],
        out_at: list[SSAValue],
    ) -> SSAValue:
        """The previous state: `start` (h0 or c0) at the first step, else the row of `out`."""
        initial, previous = self.load(start, start_at), self.load(out, out_at)
        return self.b.insert(arith.SelectOp(first, initial, previous)).result


class LiftRecurrence(LiftPattern[tensor.RecurrenceOp]):
    op_type = tensor.RecurrenceOp

    def build(self, op: tensor.RecurrenceOp, kb: KernelBuilder, args: Args, out: SSAValue) -> None:
        steps, batch, _ = shape_of(op.gates.type)
        hidden = shape_of(op.weight.type)[1]
        outer, (b,) = free_nest(kb, kb.body_builder(), [(0, batch)], ["i1"])
        none = kb.index(steps)
        carried = outer.insert(loop.ForOp(0, steps, 1, [none]))
        s, prev = carried.body.block.args
        s.name_hint, prev.name_hint = "s", "prev"
        carried.res[0].name_hint = "last"
        body = Builder(InsertPoint.at_end(carried.body.block))
        t = s
        if op.is_reverse:
            t = body.insert(arith.SubiOp(kb.index(steps - 1), s)).result
            t.name_hint = "t"
        first = body.insert(arith.CmpiOp(prev, none, "eq")).result
        first.name_hint = "first"
        row = body.insert(arith.SelectOp(first, kb.index(0), prev)).result
        row.name_hint = "row"
        unit = free_loop(body, 0, hidden, "j") if hidden > 1 else body
        j = unit.insertion_point.block.args[0] if hidden > 1 else kb.index(0)
        self._unit(op, kb, args, out, unit, (t, b, j, row, first))
        body.insert(loop.YieldOp(t))

    def _unit(
        self,
        op: tensor.RecurrenceOp,
        kb: KernelBuilder,
        args: Args,
        out: SSAValue,
        b: Builder,
        at: tuple[SSAValue, ...],
    ) -> None:
        """One hidden unit `j` of one step: dot products, the cell, the stores."""
        t, batch, j, row, first = at
        cell, hidden = op.cell_kind, shape_of(op.weight.type)[1]
        element = element_type_of(op.gates.type)
        compute = accumulator_type(element)
        read = _Reader(b, compute)
        gate_rows = [j] + [
            b.insert(arith.AddiOp(j, kb.index(g * hidden))).result for g in range(1, cell.gates)
        ]
        dots = self._dots(op, kb, args, out, read, gate_rows, (batch, row, first))
        hg = [
            b.insert(arith.AddfOp(dot, read.load(args[op.bias], [r]))).result
            for dot, r in zip(dots, gate_rows, strict=True)
        ]
        x = [read.load(args[op.gates], [t, batch, r]) for r in gate_rows]
        h = read.state(first, args[op.h0], out, [batch, j], [row, batch, j])
        c, stores = None, [j]
        if op.c0 is not None:
            stores.append(b.insert(arith.AddiOp(j, kb.index(hidden))).result)
            c = read.state(first, args[op.c0], out, [batch, j], [row, batch, stores[1]])
        states = [v for v in cell.build_step(b, x, hg, h, c) if v is not None]
        for value, column in zip(states, stores, strict=True):
            if compute != element:
                value = b.insert(arith.TruncFOp(value, element)).result
            b.insert(loop.StoreOp(value, out, [t, batch, column]))

    @staticmethod
    def _dots(
        op: tensor.RecurrenceOp,
        kb: KernelBuilder,
        args: Args,
        out: SSAValue,
        read: _Reader,
        gate_rows: Sequence[SSAValue],
        at: tuple[SSAValue, SSAValue, SSAValue],
    ) -> list[SSAValue]:
        """`weight[r, :] @ h_prev` for each gate row `r`, in one reduce loop over `k`."""
        batch, row, first = at
        hidden = shape_of(op.weight.type)[1]
        zero = kb.constant(FloatAttr(0.0, read.compute), "zero")  # type: ignore[arg-type]
        dot = read.b.insert(loop.ForOp(0, hidden, 1, [zero] * len(gate_rows)))
        k, *accs = dot.body.block.args
        k.name_hint = "k"
        inner = _Reader(Builder(InsertPoint.at_end(dot.body.block)), read.compute)
        h = inner.state(first, args[op.h0], out, [batch, k], [row, batch, k])
        sums = []
        for acc, r in zip(accs, gate_rows, strict=True):
            product = inner.b.insert(arith.MulfOp(inner.load(args[op.weight], [r, k]), h)).result
            sums.append(inner.b.insert(arith.AddfOp(acc, product)).result)
        inner.b.insert(loop.YieldOp(*sums))
        for i, result in enumerate(dot.res):
            result.name_hint = f"dot{i}"
        return list(dot.res)
