"""Layout ops, gathers, scatters and sorting written with `torch.index`, `torch.window` and
elementwise ops (Core ATen ops with no torch op of their own).

Positions are built, not read: `iota(n, dim, rank)` is an `arange` shaped to run along one
dim, so a gather (`gather`, `index_select`, `diagonal`, `as_strided`, `flip`) is one
`torch.index` with one index tensor per dim. A scatter compares every target position with
every index (a one-hot `(..., P, J)` mask) and reduces over the indices: work in `P * J`,
no data-dependent writes; duplicate indices of `scatter` (which PyTorch leaves undefined)
are summed. `sort` and `topk` rank each element by counting the elements before it (`n^2`
comparisons per row, stable), then pick the element of each rank the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import TensorType, i32, i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.composite.common import reshaped, tensor_shape
from deplodock.frontend.aten.core import (
    AtenImportError,
    Emitter,
    OutputOf,
    aten,
    elt_of,
    handles,
    norm_dim,
    rank_of,
)


def iota(e: Emitter, size: int, dim: int, rank: int, start: int = 0, step: int = 1) -> SSAValue:
    """`start + step * arange(size)` (i64) shaped to run along `dim` of a rank-`rank` tensor."""
    values = e.emit(T.ArangeOp(float(start), float(step), TensorType(i64, [size])))
    return reshaped(e, values, [size if d == dim else 1 for d in range(rank)])


def moved(e: Emitter, x: SSAValue, source: int, target: int) -> SSAValue:
    """`x` with dim `source` moved to position `target` (`torch.movedim`)."""
    order = [d for d in range(rank_of(x)) if d != source]
    order.insert(target, source)
    return x if order == sorted(order) else e.emit(T.PermuteOp(x, order))


_GATHER_OPS = (T.ArangeOp, T.ReshapeOp, T.IndexOp, T.PermuteOp, T.AddOp, T.ExpandOp)


@handles(aten.gather.default, emits=_GATHER_OPS)
def _gather(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`out[i] = x[i with i[dim] replaced by index[i]]`: one index tensor per dim."""
    x, index = e.tensor(a["input"]), e.tensor(a["index"])
    rank, dim = rank_of(x), norm_dim(a["dim"], rank_of(x))
    shape = tensor_shape(index)
    indices = [index if d == dim else iota(e, shape[d], d, rank) for d in range(rank)]
    return e.emit(T.IndexOp(x, indices))


@handles(aten.index_select.default, emits=_GATHER_OPS)
def _index_select(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x, index = e.tensor(a["input"]), e.tensor(a["index"])
    dim = norm_dim(a["dim"], rank_of(x))
    picked = e.emit(T.IndexOp(moved(e, x, dim, 0), [reshaped(e, index, [out.get_shape()[dim]])]))
    return moved(e, picked, 0, dim)


def flipped(e: Emitter, x: SSAValue, dims: Sequence[int]) -> SSAValue:
    """`x` reversed along `dims`: each moved to the front, gathered with a descending
    `arange`, and moved back."""
    for dim in dims:
        size = tensor_shape(x)[dim]
        front = moved(e, x, dim, 0)
        x = moved(e, e.emit(T.IndexOp(front, [iota(e, size, 0, 1, size - 1, -1)])), 0, dim)
    return x


@handles(aten.flip.default, emits=_GATHER_OPS)
def _flip(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return flipped(e, x, sorted({norm_dim(d, rank_of(x)) for d in a["dims"]}))


@handles(aten.as_strided.default, emits=_GATHER_OPS)
def _as_strided(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """The view of the (contiguous) input's elements at `offset + sum(i_d * stride_d)`."""
    x = e.tensor(a["input"])
    flat = reshaped(e, x, [math.prod(tensor_shape(x))])
    size, stride = list(a["size"]), list(a["stride"])
    position: SSAValue | None = None
    for d, (n, s) in enumerate(zip(size, stride, strict=True)):
        along = iota(e, n, d, len(size), 0, s)
        position = along if position is None else e.emit(T.AddOp(position, along))
    if position is None:
        raise AtenImportError("as_strided to a 0-d tensor")
    offset = a.get("storage_offset") or 0
    if offset:
        position = e.binary(T.AddOp, position, offset)
    if tensor_shape(position) != tuple(size):
        position = e.emit(T.ExpandOp(position, size))
    return e.emit(T.IndexOp(flat, [position]))


@handles(aten.diagonal.default, emits=_GATHER_OPS)
def _diagonal(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x[..., i, i + offset]` over `dim1`, `dim2`, the diagonal as the last dim."""
    x = e.tensor(a["input"])
    rank = rank_of(x)
    d1, d2, offset = norm_dim(a["dim1"], rank), norm_dim(a["dim2"], rank), int(a["offset"])
    n = out.get_shape()[-1]
    order = [d1, d2, *(d for d in range(rank) if d not in (d1, d2))]
    front = e.emit(T.PermuteOp(x, order))
    rows, cols = iota(e, n, 0, 1, max(-offset, 0)), iota(e, n, 0, 1, max(offset, 0))
    return moved(e, e.emit(T.IndexOp(front, [rows, cols])), 0, rank - 2)


@handles(aten.index.Tensor, emits=_GATHER_OPS)
def _index(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x[i_0, ..., i_k]` with index tensors (or None, a whole dim) for the leading dims:
    each None before an index tensor becomes an `arange` along its own leading dim, so
    the adjacent index tensors' broadcast dims land where PyTorch puts them."""
    indices = list(a["indices"])
    while indices and indices[-1] is None:
        indices.pop()
    x = e.tensor(a["input"])
    values = [None if i is None else e.tensor(i) for i in indices]
    if any(v is not None and elt_of(v) not in (i64, i32) for v in values):
        raise AtenImportError("indexing with bool masks is not supported")
    used = [k for k, v in enumerate(values) if v is not None]
    if used != list(range(used[0], used[-1] + 1)):
        raise AtenImportError("index tensors separated by a whole dim (None)")
    batch = max(rank_of(v) for v in values if v is not None)
    shape = tensor_shape(x)
    full = [
        v if v is not None else iota(e, shape[k], k, used[0] + batch) for k, v in enumerate(values)
    ]
    return e.emit(T.IndexOp(x, full))


# --- scatters ------------------------------------------------------------------------------------


def _one_hot(e: Emitter, index: SSAValue, size: int) -> SSAValue:
    """`index[..., j] == p` as a `(..., P, J)` bool mask (`P = size`; negative indices count
    from the end)."""
    rank = rank_of(index)
    index = e.emit(T.WhereOp(e.binary(T.LtOp, index, 0), e.binary(T.AddOp, index, size), index))
    rows = iota(e, size, rank - 1, rank + 1)  # (1, ..., P, 1) against (..., 1, J)
    return e.emit(T.EqOp(e.emit(T.UnsqueezeOp(index, rank - 1)), rows))


def _reduced_hits(
    e: Emitter, hit: SSAValue, values: SSAValue, reduce: str
) -> tuple[SSAValue, SSAValue]:
    """The values each target position receives, combined by `reduce` ('sum', 'prod',
    'amax', 'amin', 'mean' sums too), and how many it receives (both `(..., P)`)."""
    elt = elt_of(values)
    identity = {"prod": 1.0, "amax": -math.inf, "amin": math.inf}.get(reduce, 0.0)
    spread = e.emit(T.UnsqueezeOp(values, rank_of(values) - 1))
    picked = e.emit(
        T.WhereOp(hit, e.emit(T.ExpandOp(spread, tensor_shape(hit))), e.scalar(identity, elt))
    )
    last = [rank_of(hit) - 1]
    op = {"prod": T.ProdOp, "amax": T.AmaxOp, "amin": T.AminOp}.get(reduce, T.SumOp)
    count = e.emit(T.SumOp(e.cast(hit, i64), last))
    return e.emit(op(picked, last)), count


def _combined(
    e: Emitter, x: SSAValue, got: SSAValue, count: SSAValue, reduce: str, include_self: bool
) -> SSAValue:
    """`x` where no index hit, else the received values combined with `x` (or instead of
    it, without `include_self`)."""
    elt = elt_of(x)
    if reduce == "mean":
        total = e.emit(T.AddOp(got, x)) if include_self else got
        n = e.cast(count, elt)
        n = e.binary(T.AddOp, n, 1) if include_self else n
        got = e.emit(T.DivOp(total, n))
    elif include_self and reduce != "replace":
        op = {"sum": T.AddOp, "prod": T.MulOp, "amax": T.MaximumOp, "amin": T.MinimumOp}[reduce]
        got = e.emit(op(x, got))
    return e.emit(T.WhereOp(e.binary(T.GtOp, count, 0), got, x))


_SCATTER_OPS = (
    *_GATHER_OPS,
    T.WhereOp,
    T.LtOp,
    T.EqOp,
    T.GtOp,
    T.UnsqueezeOp,
    T.SumOp,
    T.ProdOp,
    T.AmaxOp,
    T.AminOp,
    T.MulOp,
    T.MaximumOp,
    T.MinimumOp,
    T.DivOp,
    T.SliceOp,
    T.WindowOp,
    T.ConstantOp,
)


def _padded_to(e: Emitter, x: SSAValue, shape: Sequence[int], value: float) -> SSAValue:
    """`x` padded at the end of each dim to `shape` with `value`."""
    have = tensor_shape(x)
    if have == tuple(shape):
        return x
    k = len(shape)
    high = [n - h for n, h in zip(shape, have, strict=True)]
    windows = e.emit(T.WindowOp(x, [1] * k, [1] * k, [1] * k, [0] * k, high, value))
    return reshaped(e, windows, shape)


def scatter(
    e: Emitter, x: SSAValue, dim: int, index: SSAValue, src: SSAValue, reduce: str, include: bool
) -> SSAValue:
    """`x` with `src[j]` sent to the position `j` with `j[dim]` replaced by `index[j]`,
    combined by `reduce` ('replace', 'sum', 'prod', 'mean', 'amax', 'amin')."""
    shape, ishape, rank = tensor_shape(x), tensor_shape(index), rank_of(x)
    for d, n in enumerate(ishape):
        if tensor_shape(src)[d] != n:
            src = e.emit(T.SliceOp(src, d, 0, n))
    last = rank - 1
    hit = _one_hot(e, moved(e, index, dim, last), shape[dim])
    got, count = _reduced_hits(e, hit, moved(e, e.cast(src, elt_of(x)), dim, last), reduce)
    target = [*(n for d, n in enumerate(ishape) if d != dim), shape[dim]]
    back = [*(n for d, n in enumerate(shape) if d != dim), shape[dim]]
    assert list(tensor_shape(got)) == target
    got, count = _padded_to(e, got, back, 0.0), _padded_to(e, count, back, 0.0)
    got, count = moved(e, got, last, dim), moved(e, count, last, dim)
    return _combined(e, x, got, count, reduce, include)


@handles(aten.scatter.src, aten.scatter.value, emits=_SCATTER_OPS)
def _scatter(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x, index = e.tensor(a["input"]), e.tensor(a["index"])
    src = a.get("src", a.get("value"))
    src = (
        e.tensor(src)
        if "src" in a
        else e.emit(T.ConstantOp(float(src), TensorType(elt_of(x), tensor_shape(index))))
    )
    return scatter(e, x, norm_dim(a["dim"], rank_of(x)), index, src, "replace", False)


@handles(aten.scatter_add.default, emits=_SCATTER_OPS)
def _scatter_add(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    dim = norm_dim(a["dim"], rank_of(x))
    return scatter(e, x, dim, e.tensor(a["index"]), e.tensor(a["src"]), "sum", True)


@handles(aten.scatter_reduce.two, emits=_SCATTER_OPS)
def _scatter_reduce(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    dim = norm_dim(a["dim"], rank_of(x))
    index, src = e.tensor(a["index"]), e.tensor(a["src"])
    return scatter(e, x, dim, index, src, a["reduce"], bool(a["include_self"]))


@handles(aten.index_put.default, emits=_SCATTER_OPS)
def _index_put(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x[..., i_0, ..., i_k, ...] = values` (`+=` with `accumulate`): the indexed dims
    (adjacent; whole dims before them are moved behind) flattened to one position per
    index tuple, then a scatter along that dim."""
    x = e.tensor(a["input"])
    slots = list(a["indices"])
    while slots and slots[-1] is None:
        slots.pop()
    lead = next(k for k, i in enumerate(slots) if i is not None)
    if any(i is None for i in slots[lead:]):
        raise AtenImportError("index_put with a whole dim (None) between index tensors")
    indices = [e.tensor(i) for i in slots[lead:]]
    k = len(indices)
    batch: list[int] = []
    for i in indices:
        batch = list(T.broadcast_shapes("index_put", tuple(batch), tensor_shape(i)))
    full = list(tensor_shape(x))
    shape = full[lead : lead + k] + full[:lead] + full[lead + k :]
    front = [*range(lead, lead + k), *range(lead), *range(lead + k, len(full))]
    x = e.emit(T.PermuteOp(x, front)) if lead else x
    positions: SSAValue | None = None
    for d, index in enumerate(indices):
        wrapped = e.binary(T.AddOp, index, shape[d])
        index = e.cast(e.emit(T.WhereOp(e.binary(T.LtOp, index, 0), wrapped, index)), i64)
        scaled = None if positions is None else e.binary(T.MulOp, positions, shape[d])
        positions = index if scaled is None else e.emit(T.AddOp(scaled, index))
    assert positions is not None
    rest = shape[k:]
    n = math.prod(batch)
    if tensor_shape(positions) != tuple(batch):
        positions = e.emit(T.ExpandOp(positions, batch))
    values = e.cast(e.value(a["values"], elt_of(x)), elt_of(x))
    result = [*full[:lead], *batch, *full[lead + k :]]  # the shape of x[..., i_0, ..., i_k]
    if tensor_shape(values) != tuple(result):
        lifted = [1] * (len(result) - rank_of(values)) + list(tensor_shape(values))
        values = e.emit(T.ExpandOp(reshaped(e, values, lifted), result))
    nb = len(batch)
    if lead:
        values = e.emit(
            T.PermuteOp(
                values, [*range(lead, lead + nb), *range(lead), *range(lead + nb, len(result))]
            )
        )
    flat_x = reshaped(e, x, [math.prod(shape[:k]), *rest])
    index = e.emit(T.ExpandOp(reshaped(e, positions, [n] + [1] * len(rest)), [n, *rest]))
    reduce = "sum" if a["accumulate"] else "replace"
    y = scatter(e, flat_x, 0, index, reshaped(e, values, [n, *rest]), reduce, bool(a["accumulate"]))
    y = reshaped(e, y, shape)
    if not lead:
        return y
    return e.emit(T.PermuteOp(y, [front.index(d) for d in range(len(full))]))


@handles(
    aten.masked_scatter.default,
    emits=(*_SCATTER_OPS, T.LeOp, T.LogicalAndOp, T.SubOp, T.ClampOp),
)
def _masked_scatter(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """The k-th true element of the mask takes `source`'s k-th element: `k` is the running
    count of true elements (a cumsum) less one."""
    x = e.tensor(a["input"])
    shape, n = tensor_shape(x), math.prod(tensor_shape(x))
    mask = e.boolean(a["mask"])
    if tensor_shape(mask) != shape:
        mask = e.emit(T.ExpandOp(mask, shape))
    flat_mask = reshaped(e, mask, [n])
    source = e.tensor(a["source"])
    flat_source = reshaped(e, source, [math.prod(tensor_shape(source))])
    last = float(math.prod(tensor_shape(source)) - 1)
    # the running count as a masked sum over `j <= i` (a `torch.cumsum` here trips the
    # tile scheduler's grid-stride pass)
    upto = e.emit(T.LogicalAndOp(e.emit(T.LeOp(iota(e, n, 1, 2), iota(e, n, 0, 2))), flat_mask))
    running = e.binary(T.SubOp, e.emit(T.SumOp(e.cast(upto, i64), [1])), 1)
    k = e.emit(T.ClampOp(running, min=0.0, max=last))
    taken = e.emit(T.IndexOp(flat_source, [k]))
    return reshaped(e, e.emit(T.WhereOp(flat_mask, taken, reshaped(e, x, [n]))), shape)


# --- sorting -------------------------------------------------------------------------------------


def _ranks(e: Emitter, x: SSAValue, descending: bool) -> SSAValue:
    """Each element's place in its sorted last dim (i64): the elements that go before it,
    counted, ties broken by position (a stable sort)."""
    rank = rank_of(x)
    n = tensor_shape(x)[-1]
    mine = e.emit(T.UnsqueezeOp(x, rank))  # (..., i, 1) against (..., 1, j)
    theirs = e.emit(T.UnsqueezeOp(x, rank - 1))
    before = e.emit((T.GtOp if descending else T.LtOp)(theirs, mine))
    earlier = e.emit(T.LtOp(iota(e, n, 1, 2), iota(e, n, 0, 2)))  # j < i
    tie = e.emit(T.LogicalAndOp(e.emit(T.EqOp(theirs, mine)), earlier))
    return e.emit(T.SumOp(e.cast(e.emit(T.LogicalOrOp(before, tie)), i64), [rank]))


def sorted_part(e: Emitter, x: SSAValue, dim: int, descending: bool, k: int, part: int) -> SSAValue:
    """The first `k` values (`part` 0) or their indices (`part` 1) of `x` sorted along
    `dim`: the element whose rank is `r` goes to place `r`."""
    last = rank_of(x) - 1
    row = moved(e, x, dim, last)
    hit = e.emit(
        T.EqOp(e.emit(T.UnsqueezeOp(_ranks(e, row, descending), last)), iota(e, k, last, last + 2))
    )
    n = tensor_shape(row)[-1]
    source = row if part == 0 else e.emit(T.ExpandOp(iota(e, n, last, last + 1), tensor_shape(row)))
    spread = e.emit(T.ExpandOp(e.emit(T.UnsqueezeOp(source, last)), tensor_shape(hit)))
    picked = e.emit(T.WhereOp(hit, spread, e.scalar(0.0, elt_of(source))))
    return moved(e, e.emit(T.SumOp(picked, [last + 1])), last, dim)


_SORT_OPS = (*_SCATTER_OPS, T.LogicalAndOp, T.LogicalOrOp)


@handles(OutputOf(aten.sort.default, None), emits=_SORT_OPS)
def _sort(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    dim = norm_dim(a["dim"], rank_of(x))
    n = tensor_shape(x)[dim]
    return sorted_part(e, x, dim, bool(a["descending"]), n, a["output_index"])


@handles(OutputOf(aten.topk.default, None), emits=_SORT_OPS)
def _topk(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    dim = norm_dim(a["dim"], rank_of(x))
    return sorted_part(e, x, dim, bool(a["largest"]), int(a["k"]), a["output_index"])


# --- splits, repeats, padding, copies --------------------------------------------------------


@handles(OutputOf(aten.split_with_sizes.default, None), emits=T.SliceOp)
def _split_with_sizes(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    dim, i = norm_dim(a["dim"], rank_of(x)), a["output_index"]
    start = sum(a["split_sizes"][:i])
    return e.emit(T.SliceOp(x, dim, start, start + a["split_sizes"][i]))


@handles(aten.repeat.default, emits=(T.ReshapeOp, T.ExpandOp))
def _repeat(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x` tiled: each dim `s` viewed as `(1, s)`, expanded to `(r, s)`, merged to `r * s`."""
    x = e.tensor(a["input"])
    repeats = list(a["repeats"])
    shape = [1] * (len(repeats) - rank_of(x)) + list(tensor_shape(x))
    pairs = reshaped(e, x, [n for s in shape for n in (1, s)])
    tiled = e.emit(
        T.ExpandOp(pairs, [n for r, s in zip(repeats, shape, strict=True) for n in (r, s)])
    )
    return reshaped(e, tiled, out.get_shape())


@handles(aten.constant_pad_nd.default, emits=(T.WindowOp, T.ReshapeOp, T.SliceOp))
def _constant_pad_nd(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`pad` lists (low, high) per dim from the last: positive amounts are a window of one
    element with that padding, negative ones a slice."""
    x = e.tensor(a["input"])
    pad, rank = list(a["pad"]), rank_of(x)
    k = len(pad) // 2
    low = [max(pad[2 * (rank - 1 - d)], 0) for d in range(rank - k, rank)]
    high = [max(pad[2 * (rank - 1 - d) + 1], 0) for d in range(rank - k, rank)]
    if any(low) or any(high):
        windows = e.emit(T.WindowOp(x, [1] * k, [1] * k, [1] * k, low, high, float(a["value"])))
        x = reshaped(e, windows, tensor_shape(windows)[:rank])
    for d in range(rank - k, rank):
        cut_low, cut_high = -min(pad[2 * (rank - 1 - d)], 0), -min(pad[2 * (rank - 1 - d) + 1], 0)
        if cut_low or cut_high:
            x = e.emit(T.SliceOp(x, d, cut_low, tensor_shape(x)[d] - cut_high))
    return x


@handles(aten.copy.default, emits=T.ExpandOp)
def _copy(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`self.copy_(src)` as a value: `src` broadcast to `self`'s shape, in its dtype."""
    src = e.cast(e.tensor(a["src"]), out.element_type)
    return (
        src
        if tensor_shape(src) == tuple(out.get_shape())
        else e.emit(T.ExpandOp(src, out.get_shape()))
    )


@handles(
    OutputOf(aten._embedding_bag.default, None),
    emits=(*_SCATTER_OPS, T.EmbeddingOp, T.LeOp, T.SubOp, T.ClampOp),
)
def _embedding_bag(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Output 0 of `F.embedding_bag` on 1-D indices: each bag's rows (bag `b` holds the
    indices from `offsets[b]`) summed, averaged or maxed (mode 0, 1, 2); an empty bag is
    zeros. The bag of each index is the count of offsets at or before it, less one."""
    if a["output_index"] != 0:
        raise AtenImportError("embedding_bag's bookkeeping outputs (offset2bag, ...)")
    weight, indices, offsets = (e.tensor(a[k]) for k in ("weight", "indices", "offsets"))
    if rank_of(indices) != 1:
        raise AtenImportError("embedding_bag with 2-D indices")
    rows = e.emit(T.EmbeddingOp(weight, indices))  # (N, D)
    if a["per_sample_weights"] is not None:
        scale = e.emit(T.UnsqueezeOp(e.tensor(a["per_sample_weights"]), 1))
        rows = e.emit(T.MulOp(rows, scale))
    n, bags = tensor_shape(indices)[0], tensor_shape(offsets)[0]
    if a["include_last_offset"]:
        offsets, bags = e.emit(T.SliceOp(offsets, 0, 0, bags - 1)), bags - 1
    started = e.emit(T.LeOp(e.emit(T.UnsqueezeOp(offsets, 1)), iota(e, n, 1, 2)))  # (B, N)
    bag = e.binary(T.SubOp, e.emit(T.SumOp(e.cast(started, i64), [0])), 1)  # (N,)
    mode = int(a["mode"])
    reduce = {0: "sum", 1: "mean", 2: "amax"}[mode]
    hit = _one_hot(
        e, e.emit(T.ExpandOp(e.emit(T.UnsqueezeOp(bag, 0)), [tensor_shape(rows)[1], n])), bags
    )
    got, count = _reduced_hits(e, hit, e.emit(T.PermuteOp(rows, [1, 0])), reduce)  # (D, B)
    if reduce == "mean":
        got = e.emit(T.DivOp(got, e.emit(T.ClampOp(e.cast(count, elt_of(got)), min=1.0))))
    got = e.emit(T.WhereOp(e.binary(T.GtOp, count, 0), got, e.scalar(0.0, elt_of(got))))
    return e.emit(T.PermuteOp(got, [1, 0]))
