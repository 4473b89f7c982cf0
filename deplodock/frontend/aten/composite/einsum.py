"""`torch.einsum`: each operand reduced to its diagonals and summed over the labels no one
else needs, then the operands contracted pairwise by permutes, reshapes and batched matmuls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.composite.common import reshaped, tensor_shape
from deplodock.frontend.aten.core import AtenImportError, Emitter, aten, handles, rank_of


def _einsum_terms(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, one character per dim: `...` becomes
    fresh labels aligned to the right (broadcast like numpy), and an implicit output is the
    labels seen once, sorted, after the broadcast ones (PyTorch's rule)."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise AtenImportError(f"einsum '{equation}' has {len(terms)} terms for {len(ranks)}")
    fresh = [chr(0x100 + i) for i in range(max(ranks, default=0))]
    widest = 0
    for i, (term, rank) in enumerate(zip(terms, ranks, strict=True)):
        if "..." in term:
            width = rank - (len(term) - 3)
            widest = max(widest, width)
            terms[i] = term.replace("...", "".join(fresh[len(fresh) - width :]))
    broadcast = "".join(fresh[len(fresh) - widest :]) if widest else ""
    if arrow:
        out = rhs.replace("...", broadcast)
    else:
        counts = {c: sum(t.count(c) for t in terms) for c in set("".join(terms))}
        once = sorted(c for c, n in counts.items() if n == 1 and c not in fresh)
        out = broadcast + "".join(once)
    return terms, out


def _einsum_diagonal(e: Emitter, x: SSAValue, term: str) -> tuple[SSAValue, str]:
    """`x` reduced to its diagonal over each label its term repeats (`x[i, i]` for every
    `i`, the label kept once): the repeated dims permuted to the front and gathered with
    one `arange` per dim. The new dim comes first; the contraction permutes at the end."""
    for label in dict.fromkeys(c for c in term if term.count(c) > 1):
        same = [i for i, c in enumerate(term) if c == label]
        if len({tensor_shape(x)[i] for i in same}) != 1:
            raise AtenImportError(
                f"einsum repeats a subscript over dims of sizes {tensor_shape(x)}"
            )
        order = same + [i for i, c in enumerate(term) if c != label]
        front = e.emit(T.PermuteOp(x, order)) if order != sorted(order) else x
        size = tensor_shape(x)[same[0]]
        steps = e.emit(T.ArangeOp(0.0, 1.0, TensorType(i64, [size])))
        x = e.emit(T.IndexOp(front, [steps] * len(same)))
        term = label + "".join(c for c in term if c != label)
    return x, term


def _einsum_sum_out(e: Emitter, x: SSAValue, term: str, keep: str) -> tuple[SSAValue, str]:
    """Sums the dims of `x` whose labels are not in `keep`."""
    gone = [i for i, c in enumerate(term) if c not in keep]
    if not gone:
        return x, term
    return e.emit(T.SumOp(x, gone)), "".join(c for c in term if c in keep)


def _einsum_pair(
    e: Emitter, a: SSAValue, ta: str, b: SSAValue, tb: str, keep: str
) -> tuple[SSAValue, str]:
    """`a` and `b` contracted over their common labels not in `keep`, as one batched
    matmul: `a` as (batch, a-only, contracted), `b` as (batch, contracted, b-only)."""
    sizes = {
        c: n
        for t, v in ((ta, a), (tb, b))
        for c, n in zip(t, tensor_shape(v), strict=True)
        if n != 1
    }
    sizes |= {c: 1 for c in ta + tb if c not in sizes}
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    only_a, only_b = [c for c in ta if c not in tb], [c for c in tb if c not in ta]

    def arrange(x: SSAValue, term: str, groups: list[list[str]]) -> SSAValue:
        labels = [c for group in groups for c in group]
        x = e.emit(T.PermuteOp(x, [term.index(c) for c in labels])) if list(term) != labels else x
        full = [sizes[c] for c in labels]
        if list(tensor_shape(x)) != full:  # a size-1 (broadcast) batch dim
            x = e.emit(T.ExpandOp(x, full))
        return reshaped(e, x, [math.prod(sizes[c] for c in group) for group in groups])

    lhs = arrange(a, ta, [batch, only_a, summed])
    rhs = arrange(b, tb, [batch, summed, only_b])
    product = e.emit(T.MatmulOp(lhs, rhs))
    term = "".join(batch + only_a + only_b)
    return reshaped(e, product, [sizes[c] for c in term]), term


@handles(
    aten.einsum.default,
    emits=(T.SumOp, T.PermuteOp, T.ExpandOp, T.ReshapeOp, T.MatmulOp, T.ArangeOp, T.IndexOp),
)
def _einsum(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Any einsum: each operand is first reduced to its diagonals (repeated subscripts),
    then labels no later term needs are summed out, then the operands are contracted left
    to right, two at a time, each pair one batched matmul; the result is permuted to the
    output's order."""
    xs = [e.tensor(x) for x in a["tensors"]]
    terms, target = _einsum_terms(a["equation"], [rank_of(x) for x in xs])
    pairs = [_einsum_diagonal(e, x, term) for x, term in zip(xs, terms, strict=True)]
    xs, terms = [x for x, _ in pairs], [term for _, term in pairs]
    value, term = xs[0], terms[0]
    for i in range(1, len(xs) + 1):
        value, term = _einsum_sum_out(e, value, term, target + "".join(terms[i:]))
        if i == len(xs):
            break
        later = target + "".join(terms[i + 1 :])  # what the pair's result must keep
        other, other_term = _einsum_sum_out(e, xs[i], terms[i], later + term)
        value, term = _einsum_pair(e, value, term, other, other_term, later)
    if term != target:
        value = e.emit(T.PermuteOp(value, [term.index(c) for c in target]))
    return value
