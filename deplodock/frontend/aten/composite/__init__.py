"""Composite aten ops: the norms, the losses, pooling and convolution, and einsum, written with
existing torch ops.

These have no torch op of their own: each is a few reductions, elementwise ops, windows or
matmuls that the `tensor` level fuses anyway, so one handler here is the whole of the op (as
`addmm` and `diff` are in `structured`). The package has one module per family: `norms`,
`losses`, `windows` (pooling, convolution), `einsum` and `recurrent` (RNN, LSTM, GRU), with
the shape helpers they share in `common`; importing it registers their handlers.
"""

from __future__ import annotations

from deplodock.frontend.aten.composite import (
    einsum,
    gathers,
    losses,
    norms,
    recurrent,
    statistics,
    windows,
)

__all__ = ["einsum", "gathers", "losses", "norms", "recurrent", "statistics", "windows"]
