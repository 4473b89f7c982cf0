"""`torch.scaled_dot_product_attention` -> two contractions around a masked, safe softmax.

Over the query's leading dims `lead = (..., Hq)`:

    scores[lead, l, s] = sum_e q[lead, l, e] * k[kv(lead), s, e]
    logits = keep ? scores * scale (+ additive mask) : -inf
    probs  = softmax over s (rows with every key masked give 0, as PyTorch's safe softmax)
    out[lead, l, ev]   = sum_s probs[lead, l, s] * v[kv(lead), s, ev]

`kv(lead)` reads key/value head `h floordiv (Hq / Hk)` for grouped-query attention, inside
the index maps, so the repeated heads are never materialized. `keep` is `s <= l` for
`is_causal` (with `tensor.index`, no mask tensor), and-ed with a bool `attn_mask`. f16/bf16
inputs are computed in f32 (their casts fuse into the loads) and rounded once at the end,
except the probabilities, which are rounded to the inputs' type before `@ v`, as PyTorch's
fused kernels round them (its CPU flash kernel and FlashAttention both multiply P in the
16-bit type): both products are then 16-bit, so both run on tensor cores.

**Keys padded to whole chunks.** Attention runs as one kernel (`loop_fusion`'s score
matrix, FlashAttention's streaming softmax) only over whole chunks of `SCORE_CHUNK` keys:
its tile passes have no tail chunk. With enough queries to block (`MIN_TILED_EXTENT`; a
decoding step keeps its kernels), k and v are padded with zeros to whole chunks of the
largest K chunk that costs at most `MAX_PADDING` more keys (`keys_computed`: 1000 -> 1024,
so `tile-chunk-k` takes 64-key chunks; 40 -> 48), the mask with anything, and a padded key
is masked out by its index (`s < S`), as the causal mask masks by index (which already
hides them when there are no more queries than keys): 2.4 % more work at 1000 keys instead
of the S x S scores in DRAM. The padding is in the inputs' type, before the widening to
f32, so a 16-bit k or v is staged as 16-bit and both products stay on tensor cores. Loop
fusion folds the pad into the kernel's loads (a clamped load and a select), which
`tile-async-copy` turns into predicated `cp.async` copies: no padded copy is written.
`convert-torch-to-tensor{pad-keys=false}` keeps the keys as they are.

The scores (with the scale and mask) are named `attention_scores` and the softmax
`attention_softmax`, so the kernels lifted from them say which part of attention they
compute; the product with `v` keeps the torch op's name.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import AnyFloat, IntegerType
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from deplodock.dialects import torch as t
from deplodock.dialects.element_types import accumulator_type
from deplodock.dialects.tensor import ReduceKind
from deplodock.passes.loop_fusion import SCORE_CHUNK
from deplodock.passes.tile.contraction import MIN_TILED_EXTENT
from deplodock.passes.torch_to_tensor.builders import (
    ScalarBuilder,
    TensorBuilder,
    TorchLowering,
    element_type_of,
    shape_of,
)
from deplodock.passes.torch_to_tensor.layout import pad
from deplodock.passes.torch_to_tensor.matmul import contract


def safe_softmax(b: TensorBuilder, x: SSAValue, dim: int) -> SSAValue:
    """softmax along `dim`; a row that is entirely -inf gives zeros instead of NaN."""
    shape, elt = shape_of(x), element_type_of(x)
    peak = b.broadcast_to(b.reduce(x, ReduceKind.MAX, [dim]), shape)

    def exp_shifted(s: ScalarBuilder, v: SSAValue, m: SSAValue) -> SSAValue:
        return s.select(s.cmp("eq", m, -math.inf), 0.0, s.exp(s.sub(v, m)))

    exps = b.elementwise([x, peak], shape, elt, exp_shifted)
    total = b.broadcast_to(b.reduce(exps, ReduceKind.ADD, [dim]), shape)

    def normalize(s: ScalarBuilder, e: SSAValue, z: SSAValue) -> SSAValue:
        return s.select(s.cmp("eq", z, 0.0), 0.0, s.div(e, z))

    return b.elementwise([exps, total], shape, elt, normalize)


class ScaledDotProductAttentionLowering(TorchLowering):
    """SDPA as the module doc says; `pad_keys=False` keeps the keys as they are
    (`convert-torch-to-tensor{pad-keys=false}`)."""

    op_type = t.ScaledDotProductAttentionOp

    def __init__(self, pad_keys: bool = True):
        self.pad_keys = pad_keys

    def lower(self, op: t.ScaledDotProductAttentionOp, b: TensorBuilder) -> SSAValue:
        elt = element_type_of(op.query)
        assert isinstance(elt, AnyFloat)
        compute = accumulator_type(elt)
        length, valid = shape_of(op.query)[-2], shape_of(op.key)[-2]
        source = keys_computed(length, valid) if self.pad_keys else valid
        padded: dict[SSAValue, SSAValue] = {}
        if source != valid:  # whole chunks of keys, padded in the inputs' type (module doc)
            for x in (op.key, op.value):
                if x not in padded:
                    padded[x] = pad(b, x, len(shape_of(x)) - 2, 0, source - valid, 0.0)
        inputs = (op.query, padded.get(op.key, op.key), padded.get(op.value, op.value))
        casts: dict[SSAValue, SSAValue] = {}
        for x in inputs:
            if x not in casts:
                casts[x] = b.cast(x, compute)
        q, k, v = (casts[x] for x in inputs)
        scores_start = len(b.ops)
        qs, ks, vs = shape_of(q), shape_of(k), shape_of(v)
        lead, width = qs[:-2], vs[-1]
        n = len(lead)
        group = t.query_group(op.name, qs, ks, bool(op.enable_gqa.value.data))
        d = [AffineExpr.dimension(i) for i in range(n + 3)]
        kv_lead = list(d[:n])
        if group > 1:
            kv_lead[n - 1] = d[n - 1] // group

        # scores over (lead, l, e, s), summed over e
        space = (*lead, length, qs[-1], source)
        q_map = AffineMap(n + 3, 0, (*d[:n], d[n], d[n + 1]))
        k_map = AffineMap(n + 3, 0, (*kv_lead, d[n + 2], d[n + 1]))
        scores = contract(b, q, k, q_map, k_map, space, n + 1, [n + 1])

        mask = op.attn_mask
        is_causal, scale = bool(op.is_causal.value.data), op.scale.value.data
        bool_mask = mask is not None and isinstance(element_type_of(mask), IntegerType)

        if mask is not None and source != valid and shape_of(mask)[-1] == valid:
            mask = pad(b, mask, len(shape_of(mask)) - 1, 0, source - valid, 0)

        def logits_body(s: ScalarBuilder, x: SSAValue, *m: SSAValue) -> SSAValue:
            y = s.mul(x, scale)
            keep = s.cmp("le", s.index(n + 1), s.index(n)) if is_causal else None
            if source != valid and not (is_causal and length <= valid):
                real = real_key(s, n + 1, valid)
                keep = real if keep is None else s.and_(keep, real)
            if m and bool_mask:
                keep = m[0] if keep is None else s.and_(keep, m[0])
            elif m:
                y = s.add(y, s.cast(m[0], compute))
            return y if keep is None else s.select(keep, y, -math.inf)

        inputs = [scores] if mask is None else [scores, mask]
        logits = b.elementwise(inputs, (*lead, length, source), compute, logits_body)
        b.name_results(scores_start, "attention_scores")
        softmax_start = len(b.ops)
        probs = safe_softmax(b, logits, n + 1)
        if compute != elt:  # rounded once to the inputs' type for P.V (module doc)
            probs = b.cast(b.cast(probs, elt), compute)
        b.name_results(softmax_start, "attention_softmax")

        # out over (lead, l, s, ev), summed over s
        space = (*lead, length, source, width)
        p_map = AffineMap(n + 3, 0, (*d[:n], d[n], d[n + 1]))
        v_map = AffineMap(n + 3, 0, (*kv_lead, d[n + 1], d[n + 2]))
        out = contract(b, probs, v, p_map, v_map, space, n + 1, [n + 1])
        return b.cast(out, elt)


def real_key(s: ScalarBuilder, dim: int, valid: int) -> SSAValue:
    """Whether the key at coordinate `dim` is one of the `valid` real keys, not padding."""
    return s.cmp("lt", s.index(dim), valid)


#: Key chunks worth padding to, largest first: `tile-chunk-k` takes the largest chunk (up to
#: 64 keys) that divides the keys, so 1008 keys (16 x 63) would run 16 at a time.
KEY_CHUNKS = (4 * SCORE_CHUNK, 2 * SCORE_CHUNK, SCORE_CHUNK)
#: The most padding a larger chunk is worth, as a fraction of the keys (1000 keys: 24).
MAX_PADDING = 1 / 16


def keys_computed(queries: int, keys: int) -> int:
    """How many keys attention computes over (module doc): with at least
    `MIN_TILED_EXTENT` queries, `keys` padded to whole chunks of the largest of
    `KEY_CHUNKS` whose padding is at most `MAX_PADDING` of the keys, else of `SCORE_CHUNK`
    (1000 -> 1024, 40 -> 48); `keys` itself where it is already whole chunks of that size."""
    if queries < MIN_TILED_EXTENT:
        return keys
    for chunk in KEY_CHUNKS[:-1]:
        padded = -(-keys // chunk) * chunk
        if padded - keys <= keys * MAX_PADDING:
            return padded
    return -(-keys // SCORE_CHUNK) * SCORE_CHUNK


PATTERNS: tuple[TorchLowering, ...] = (ScaledDotProductAttentionLowering(),)
