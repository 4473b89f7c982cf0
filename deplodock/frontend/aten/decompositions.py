"""Which aten ops reach the table as they are, and which PyTorch decomposes first.

`torch.export` keeps high-level ops (`linear`, `layer_norm`, `scaled_dot_product_attention`,
the convolutions) that deplodock lowers better than their decompositions would. Every other
op with a decomposition in PyTorch's default table (`torch.export.default_decompositions()`:
the Core ATen decompositions and the CompositeImplicitAutograd ops) is decomposed, so an op
that no handler knows reaches the table as Core ATen ops, which is the opset deplodock aims
to cover (`coverage.py`). The ops the table handles are taken out of the decomposition
table: what deplodock lowers itself stays as it is.

A Core ATen op has no decomposition in that table (it is the target); where PyTorch still
has one (`torch._decomp.decomposition_table`: the backward ops, `native_layer_norm`, the
paddings) and no handler takes the op, that one is used too.

The decomposition runs only when the graph has an op the table does not handle, so a
program deplodock already lowered is imported exactly as before.
"""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.export import ExportedProgram

from deplodock.frontend.aten.core import OutputOf, aten, handler_of

#: Ops the importer takes apart or drops itself (`capture.simplify_graph`), never decomposed.
IMPORTER_OPS: frozenset[Any] = frozenset(
    {
        operator.getitem,
        aten.broadcast_tensors.default,
        aten.max.dim,
        aten.min.dim,
        aten._assert_tensor_metadata.default,
        aten._assert_scalar.default,
        aten._assert_async.msg,
        aten.sym_constrain_range.default,
        aten.sym_constrain_range_for_size.default,
        torch.ops.higher_order.wrap_with_set_grad_enabled,
    }
)


def core_aten_ops() -> list[torch._ops.OpOverload]:
    """Every aten overload tagged `core` in this torch (`native_functions.yaml`), by name:
    the Core ATen opset that export backends target."""
    ops = []
    for qualified in torch._C._dispatch_get_all_op_names():  # every registered op, loaded or not
        namespace, _, name = qualified.partition("::")
        if namespace != "aten":
            continue
        packet, _, overload = name.partition(".")
        op = getattr(getattr(aten, packet), overload or "default")
        if torch.Tag.core in op.tags:
            ops.append(op)
    return sorted(ops, key=str)


def handled(target: Any) -> bool:
    """The table or the importer takes `target` as it is (for a multi-output op: some
    output of it has a handler)."""
    if handler_of(target) is not None or target in IMPORTER_OPS:
        return True
    return isinstance(target, torch._ops.OpOverload) and handler_of(OutputOf(target, 0)) is not None


@functools.cache
def decomposition_table() -> dict[Any, Callable[..., Any]]:
    """PyTorch's default decompositions less the ops deplodock handles, plus PyTorch's own
    decompositions of the Core ATen ops it does not (built once: it has ~900 entries)."""
    table = torch.export.default_decompositions()
    for op in [op for op in table if handled(op)]:
        del table[op]
    extra = torch._decomp.decomposition_table
    for op in core_aten_ops():
        if not handled(op) and op not in table and _into_aten(extra.get(op)):
            table[op] = extra[op]
    for op, decomposition in OWN_DECOMPOSITIONS.items():
        if not handled(op):
            table[op] = decomposition
    return table


def _windows(out: int, size: int, step: int) -> torch.Tensor:
    """`(out, size)` start-plus-offset indices of sliding windows along one dimension."""
    return torch.arange(out)[:, None] * step + torch.arange(size)[None, :]


def _unfold(x: torch.Tensor, dimension: int, size: int, step: int) -> torch.Tensor:
    """`Tensor.unfold` (sliding windows, the patches of a ViT or an STFT) as an
    `index_select` of every window's elements and a view: PyTorch decomposes it only into
    prims, which the table does not take."""
    d = dimension % max(x.dim(), 1)
    out = (x.shape[d] - size) // step + 1
    y = x.index_select(d, _windows(out, size, step).flatten())
    y = y.view(*x.shape[:d], out, size, *x.shape[d + 1 :])
    return y.movedim(d + 1, -1)


def _adaptive_indices(length: int, out: int) -> tuple[torch.Tensor, int]:
    """Adaptive pooling's windows along one dimension, `[floor(i*L/out), ceil((i+1)*L/out))`,
    as `(out, k)` indices with k the widest window; narrower windows repeat their last
    element, which leaves a maximum (and its first index) unchanged."""
    k = max(-((-(i + 1) * length) // out) - (i * length) // out for i in range(out))
    i = torch.arange(out)[:, None]
    starts = torch.div(i * length, out, rounding_mode="floor")
    last = torch.div((i + 1) * length + out - 1, out, rounding_mode="floor") - 1
    return torch.minimum(starts + torch.arange(k)[None, :], last), k


def _adaptive_max_pool2d(
    x: torch.Tensor, output_size: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """`adaptive_max_pool2d` (values and flat `h*W+w` indices, as PyTorch returns them) by
    gathering every window (`_adaptive_indices`) and reducing it with `max`: not a Core
    ATen op and PyTorch has no decomposition of it (`adaptive_max_pool1d` calls it too)."""
    h, w = x.shape[-2], x.shape[-1]
    oh, ow = output_size
    rows, kh = _adaptive_indices(h, oh)
    cols, kw = _adaptive_indices(w, ow)
    y = x.index_select(-2, rows.flatten()).index_select(-1, cols.flatten())
    y = y.view(*x.shape[:-2], oh, kh, ow, kw).transpose(-3, -2)  # (..., oh, ow, kh, kw)
    y = y.reshape(*x.shape[:-2], oh, ow, kh * kw)
    values, where = y.max(-1)
    flat = (rows[:, None, :, None] * w + cols[None, :, None, :]).reshape(oh, ow, kh * kw)
    flat = flat.expand(*x.shape[:-2], oh, ow, kh * kw)
    return values, flat.gather(-1, where.unsqueeze(-1)).squeeze(-1)


#: deplodock's own decompositions (written in torch ops, traced into aten ones) of ops
#: neither the table nor PyTorch's aten-level decompositions take.
OWN_DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.unfold.default: _unfold,
    aten.adaptive_max_pool2d.default: _adaptive_max_pool2d,
}


def _into_aten(decomposition: Callable[..., Any] | None) -> bool:
    """A decomposition written with aten ops (`torch._decomp.decompositions`), not one of
    the reference implementations in `torch._refs`, which end in `prims` ops."""
    module = getattr(decomposition, "__module__", "") or ""
    return decomposition is not None and module.startswith("torch._decomp")


def decomposed(op: Any) -> bool:
    """A torch decomposition replaces `op` before the import."""
    return op in decomposition_table()


def unhandled(nodes: Iterable[torch.fx.Node]) -> list[torch.fx.Node]:
    """The call nodes of ops the table does not take as they are."""
    return [n for n in nodes if n.op == "call_function" and not handled(n.target)]


def decompose(ep: ExportedProgram) -> ExportedProgram:
    """`ep` with every op the table does not handle decomposed (`decomposition_table`), or
    `ep` itself when there is none."""
    if not unhandled(ep.graph_module.graph.nodes):
        return ep
    try:
        with warnings.catch_warnings():  # torch's own deprecation, nothing a user can act on
            warnings.filterwarnings("ignore", "`isinstance.treespec, LeafSpec.`", FutureWarning)
            return ep.run_decompositions(decomposition_table())
    except Exception:  # PyTorch's own failure: the import then names the op it could not take
        return ep
