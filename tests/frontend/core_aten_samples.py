"""One small program per Core ATen op: the op called as its overload on small random inputs.

`SAMPLES` maps an overload's name (`aten.acos.default`) to a `Sample`: a function of the
inputs and the inputs, drawn by `numerics.random_array` from a seeded generator (floats are
standard normal, never zero; `pos` and `unit` narrow them to an op's domain; integers are
drawn from [1, bound), so none is zero either). Ops that build tensors from nothing (`full`,
`arange`) are added to an input, so every program has one. `tests/frontend/
test_core_aten_ops.py` runs each through `deplodock.compile` against eager in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from deplodock.numerics import random_array

aten = torch.ops.aten
Input = Callable[[np.random.Generator], torch.Tensor]


@dataclass(frozen=True)
class Sample:
    """`fn(*inputs)` is the program; `long_sums` for ops that sum many terms (matmul-like:
    the long-sum tolerance applies)."""

    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
    inputs: Sequence[Input]
    long_sums: bool = False


def f(*shape: int) -> Input:
    """Standard normal float32."""
    return lambda rng: torch.from_numpy(random_array(rng, shape, np.float32))


def pos(*shape: int, low: float = 0.5, high: float = 2.0) -> Input:
    """Uniform float32 in [low, high)."""
    return lambda rng: torch.from_numpy(rng.uniform(low, high, shape).astype(np.float32))


def unit(*shape: int) -> Input:
    """Uniform float32 in (-0.9, 0.9): the domain of asin, acos, atanh."""
    return pos(*shape, low=-0.9, high=0.9)


def ints(*shape: int, high: int = 8, low: int = 1) -> Input:
    """int64 in [low, high)."""
    return lambda rng: torch.from_numpy(rng.integers(low, high, shape).astype(np.int64))


def bools(*shape: int) -> Input:
    return lambda rng: torch.from_numpy(random_array(rng, shape, np.bool_))


def perm(n: int, *lead: int) -> Input:
    """int64 permutations of range(n) along the last dim (distinct scatter targets)."""

    def draw(rng: np.random.Generator) -> torch.Tensor:
        rows = [rng.permutation(n) for _ in range(int(np.prod(lead, dtype=int)))]
        return torch.from_numpy(np.array(rows, dtype=np.int64).reshape(*lead, n))

    return draw


def distinct(*shape: int) -> Input:
    """float32 with distinct values (sort and topk have one answer)."""

    def draw(rng: np.random.Generator) -> torch.Tensor:
        n = int(np.prod(shape))
        return torch.from_numpy((rng.permutation(n).astype(np.float32) - n / 2).reshape(shape))

    return draw


X = f(4, 8)
Y = f(4, 8)
IMG = f(2, 3, 6, 6)
VOL = f(1, 2, 4, 4, 4)


def unary(op: Callable[..., torch.Tensor], x: Input = X) -> Sample:
    return Sample(op, [x])


def binary(op: Callable[..., torch.Tensor], x: Input = X, y: Input = Y) -> Sample:
    return Sample(op, [x, y])


def made(build: Callable[[torch.Tensor], torch.Tensor], x: Input = X) -> Sample:
    """A tensor made from nothing, added to the input (a program needs one)."""
    return Sample(lambda x: x + build(x), [x])


SAMPLES: dict[str, Sample] = {
    # --- pooling, norms, distances ---------------------------------------------------------
    "aten._adaptive_avg_pool2d.default": unary(lambda x: aten._adaptive_avg_pool2d(x, [4, 3]), IMG),
    "aten._adaptive_avg_pool2d_backward.default": binary(
        lambda g, x: aten._adaptive_avg_pool2d_backward(g, x), f(2, 3, 4, 3), IMG
    ),
    "aten._adaptive_avg_pool3d.default": unary(
        lambda x: aten._adaptive_avg_pool3d(x, [3, 2, 4]), VOL
    ),
    "aten.adaptive_avg_pool1d.default": unary(
        lambda x: aten.adaptive_avg_pool1d(x, [3]), f(2, 3, 7)
    ),
    "aten._cdist_forward.default": Sample(
        lambda a, b: aten._cdist_forward(a, b, 2.0, None), [f(2, 5, 3), f(2, 4, 3)]
    ),
    "aten._pdist_forward.default": unary(lambda x: aten._pdist_forward(x, 2.0), f(5, 3)),
    "aten._embedding_bag.default": Sample(
        lambda w, i: aten._embedding_bag(w, i, torch.tensor([0, 2, 5]), False, 0)[0],
        [f(10, 4), ints(7, high=10, low=0)],
    ),
    "aten._native_batch_norm_legit.default": Sample(
        lambda x, w, b: aten._native_batch_norm_legit(
            x, w, b, torch.zeros(3, dtype=x.dtype), torch.ones(3, dtype=x.dtype), False, 0.1, 1e-5
        )[0],
        [IMG, f(3), f(3)],
    ),
    "aten._native_batch_norm_legit.no_stats": Sample(
        lambda x, w, b: aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
        [IMG, f(3), f(3)],
    ),
    "aten._native_batch_norm_legit_no_training.default": Sample(
        lambda x, w, b, m, v: aten._native_batch_norm_legit_no_training(x, w, b, m, v, 0.1, 1e-5)[
            0
        ],
        [IMG, f(3), f(3), f(3), pos(3)],
    ),
    "aten.native_group_norm.default": Sample(
        lambda x, w, b: aten.native_group_norm(x, w, b, 2, 4, 9, 2, 1e-5),
        [f(2, 4, 3, 3), f(4), f(4)],
    ),
    "aten.native_group_norm_backward.default": Sample(
        lambda g, x, w: _group_norm_backward(g, x, w), [f(2, 4, 3, 3), f(2, 4, 3, 3), f(4)]
    ),
    "aten.native_layer_norm.default": Sample(
        lambda x, w, b: aten.native_layer_norm(x, [8], w, b, 1e-5), [X, f(8), f(8)]
    ),
    "aten.native_layer_norm_backward.default": Sample(
        lambda g, x, w, b: _layer_norm_backward(g, x, w, b), [X, Y, f(8), f(8)]
    ),
    "aten.avg_pool1d.default": unary(lambda x: aten.avg_pool1d(x, [3], [2], [1]), f(2, 3, 7)),
    "aten.avg_pool2d.default": unary(lambda x: aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1]), IMG),
    "aten.avg_pool2d_backward.default": binary(
        lambda g, x: aten.avg_pool2d_backward(g, x, [3, 3], [2, 2], [1, 1], False, True, None),
        f(2, 3, 3, 3),
        IMG,
    ),
    "aten.avg_pool3d.default": unary(lambda x: aten.avg_pool3d(x, [2, 2, 2], [2, 2, 2]), VOL),
    "aten.max_pool2d_with_indices.default": unary(
        lambda x: aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1]), IMG
    ),
    "aten.max_pool2d_with_indices_backward.default": Sample(
        lambda g, x: aten.max_pool2d_with_indices_backward(
            g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, aten.max_pool2d_with_indices(x, [2, 2])[1]
        ),
        [f(2, 3, 3, 3), IMG],
    ),
    "aten.max_pool3d_with_indices.default": unary(
        lambda x: aten.max_pool3d_with_indices(x, [2, 2, 2], [2, 2, 2]), VOL
    ),
    "aten.col2im.default": unary(
        lambda x: aten.col2im(x, [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]), f(2, 12, 12)
    ),
    "aten.grid_sampler_2d.default": binary(
        lambda x, g: aten.grid_sampler_2d(x, g, 0, 0, False), IMG, unit(2, 4, 5, 2)
    ),
    "aten.upsample_bilinear2d.vec": unary(
        lambda x: aten.upsample_bilinear2d.vec(x, [9, 8], False, None), IMG
    ),
    "aten.upsample_nearest2d.vec": unary(
        lambda x: aten.upsample_nearest2d.vec(x, [12, 9], None), IMG
    ),
    # --- convolution -------------------------------------------------------------------------
    "aten.convolution.default": Sample(
        lambda x, w, b: aten.convolution(x, w, b, [2, 1], [1, 1], [1, 1], False, [0, 0], 1),
        [IMG, f(4, 3, 3, 3), f(4)],
        long_sums=True,
    ),
    "aten.convolution_backward.default": Sample(
        lambda g, x, w: aten.convolution_backward(
            g, x, w, [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]
        ),
        [f(2, 4, 6, 6), IMG, f(4, 3, 3, 3)],
        long_sums=True,
    ),
    # --- elementwise ---------------------------------------------------------------------------
    "aten.abs.default": unary(aten.abs),
    "aten.acos.default": unary(aten.acos, unit(4, 8)),
    "aten.acosh.default": unary(aten.acosh, pos(4, 8, low=1.1, high=3.0)),
    "aten.asin.default": unary(aten.asin, unit(4, 8)),
    "aten.asinh.default": unary(aten.asinh),
    "aten.atan.default": unary(aten.atan),
    "aten.atanh.default": unary(aten.atanh, unit(4, 8)),
    "aten.atan2.default": binary(aten.atan2),
    "aten.atan2.out": binary(lambda x, y: aten.atan2.out(x, y, out=torch.empty_like(x))),
    "aten.ceil.default": unary(lambda x: aten.ceil(x * 3)),
    "aten.floor.default": unary(lambda x: aten.floor(x * 3)),
    "aten.round.default": unary(lambda x: aten.round(x * 3)),
    "aten.trunc.default": unary(lambda x: aten.trunc(x * 3)),
    "aten.cos.default": unary(aten.cos),
    "aten.cosh.default": unary(aten.cosh),
    "aten.sin.default": unary(aten.sin),
    "aten.sinh.default": unary(aten.sinh),
    "aten.tan.default": unary(aten.tan, unit(4, 8)),
    "aten.tanh.default": unary(aten.tanh),
    "aten.erf.default": unary(aten.erf),
    "aten.exp.default": unary(aten.exp),
    "aten.expm1.default": unary(aten.expm1),
    "aten.log.default": unary(aten.log, pos(4, 8)),
    "aten.log10.default": unary(aten.log10, pos(4, 8)),
    "aten.log1p.default": unary(aten.log1p, pos(4, 8)),
    "aten.log2.default": unary(aten.log2, pos(4, 8)),
    "aten.sqrt.default": unary(aten.sqrt, pos(4, 8)),
    "aten.rsqrt.default": unary(aten.rsqrt, pos(4, 8)),
    "aten.reciprocal.default": unary(aten.reciprocal),
    "aten.neg.default": unary(aten.neg),
    "aten.sign.default": unary(aten.sign),
    "aten.sigmoid.default": unary(aten.sigmoid),
    "aten.relu.default": unary(aten.relu),
    "aten.gelu.default": unary(aten.gelu),
    "aten.elu.default": unary(lambda x: aten.elu(x, 0.5, 1.5, 2.0)),
    "aten.leaky_relu.default": unary(lambda x: aten.leaky_relu(x, 0.2)),
    "aten.hardtanh.default": unary(lambda x: aten.hardtanh(x, -0.5, 0.5)),
    "aten.isinf.default": unary(lambda x: aten.isinf(1 / (x - x.round()).abs().floor())),
    "aten.isnan.default": unary(lambda x: aten.isnan(x.log())),
    "aten.add.Tensor": binary(lambda x, y: aten.add.Tensor(x, y, alpha=2)),
    "aten.add.Scalar": unary(lambda x: aten.add.Scalar(x, 1.5)),
    "aten.sub.Tensor": binary(aten.sub.Tensor),
    "aten.sub.Scalar": unary(lambda x: aten.sub.Scalar(x, 1.5)),
    "aten.mul.Tensor": binary(aten.mul.Tensor),
    "aten.mul.Scalar": unary(lambda x: aten.mul.Scalar(x, 1.5)),
    "aten.div.Tensor": binary(aten.div.Tensor),
    "aten.div.Scalar": unary(lambda x: aten.div.Scalar(x, 1.5)),
    "aten.div.Tensor_mode": binary(lambda x, y: aten.div.Tensor_mode(x, y, rounding_mode="floor")),
    "aten.div.Scalar_mode": unary(lambda x: aten.div.Scalar_mode(x, 0.3, rounding_mode="trunc")),
    "aten.fmod.Tensor": binary(aten.fmod.Tensor, ints(4, 8, high=20, low=-20), ints(4, 8)),
    "aten.fmod.Scalar": unary(lambda x: aten.fmod.Scalar(x * 3, 0.7)),
    "aten.remainder.Tensor": binary(aten.remainder.Tensor),
    "aten.remainder.Scalar": unary(lambda x: aten.remainder.Scalar(x * 3, 0.7)),
    "aten.pow.Tensor_Tensor": binary(aten.pow.Tensor_Tensor, pos(4, 8), Y),
    "aten.pow.Tensor_Scalar": unary(lambda x: aten.pow.Tensor_Scalar(x, 3)),
    "aten.pow.Scalar": unary(lambda x: aten.pow.Scalar(1.5, x)),
    "aten.maximum.default": binary(aten.maximum),
    "aten.minimum.default": binary(aten.minimum),
    "aten.clamp.default": unary(lambda x: aten.clamp(x, -0.5, 0.7)),
    "aten.clamp.Tensor": Sample(lambda x, lo, hi: aten.clamp.Tensor(x, lo, hi), [X, f(8), f(4, 1)]),
    "aten.where.self": Sample(aten.where.self, [bools(4, 8), X, Y]),
    "aten.eq.Tensor": binary(aten.eq.Tensor, ints(4, 8, high=3), ints(4, 8, high=3)),
    "aten.eq.Scalar": unary(lambda x: aten.eq.Scalar(x, 2), ints(4, 8, high=3)),
    "aten.ne.Tensor": binary(aten.ne.Tensor, ints(4, 8, high=3), ints(4, 8, high=3)),
    "aten.ne.Scalar": unary(lambda x: aten.ne.Scalar(x, 2), ints(4, 8, high=3)),
    "aten.lt.Tensor": binary(aten.lt.Tensor),
    "aten.lt.Scalar": unary(lambda x: aten.lt.Scalar(x, 0.3)),
    "aten.le.Tensor": binary(aten.le.Tensor),
    "aten.le.Scalar": unary(lambda x: aten.le.Scalar(x, 0.3)),
    "aten.gt.Tensor": binary(aten.gt.Tensor),
    "aten.gt.Scalar": unary(lambda x: aten.gt.Scalar(x, 0.3)),
    "aten.ge.Tensor": binary(aten.ge.Tensor),
    "aten.ge.Scalar": unary(lambda x: aten.ge.Scalar(x, 0.3)),
    "aten.logical_and.default": binary(aten.logical_and, bools(4, 8), bools(4, 8)),
    "aten.logical_or.default": binary(aten.logical_or, bools(4, 8), bools(4, 8)),
    "aten.logical_xor.default": binary(aten.logical_xor, X, bools(4, 8)),
    "aten.logical_not.default": unary(aten.logical_not, bools(4, 8)),
    "aten.bitwise_and.Tensor": binary(aten.bitwise_and.Tensor, ints(4, 8, high=64), ints(4, 8)),
    "aten.bitwise_and.Scalar": unary(lambda x: aten.bitwise_and.Scalar(x, 6), ints(4, 8, high=64)),
    "aten.bitwise_or.Tensor": binary(aten.bitwise_or.Tensor, ints(4, 8, high=64), ints(4, 8)),
    "aten.bitwise_or.Scalar": unary(lambda x: aten.bitwise_or.Scalar(x, 6), ints(4, 8, high=64)),
    "aten.bitwise_xor.Tensor": binary(aten.bitwise_xor.Tensor, ints(4, 8, high=64), ints(4, 8)),
    "aten.bitwise_xor.Scalar": unary(lambda x: aten.bitwise_xor.Scalar(x, 6), ints(4, 8, high=64)),
    "aten.bitwise_not.default": unary(aten.bitwise_not, ints(4, 8, high=64, low=-64)),
    # --- conversions, copies, factories ------------------------------------------------------
    "aten._to_copy.default": unary(lambda x: aten._to_copy(x * 4, dtype=torch.int64)),
    "aten.clone.default": unary(aten.clone),
    "aten.alias.default": unary(lambda x: aten.alias(x) + 1),
    "aten.copy.default": binary(aten.copy, X, f(8)),
    "aten.fill.Scalar": unary(lambda x: aten.fill.Scalar(x, 2.5)),
    "aten.full.default": made(lambda x: aten.full([4, 8], 2.5)),
    "aten.full_like.default": made(lambda x: aten.full_like(x, 2.5)),
    "aten.empty.memory_format": made(lambda x: aten.fill.Scalar(aten.empty.memory_format([8]), 2)),
    "aten.empty_strided.default": made(
        lambda x: aten.fill.Scalar(aten.empty_strided([4, 8], [8, 1]), 2)
    ),
    "aten.arange.start_step": made(lambda x: aten.arange.start_step(1, 17, 2)),
    "aten.scalar_tensor.default": made(lambda x: aten.scalar_tensor(2.5)),
    "aten.native_dropout.default": unary(lambda x: aten.native_dropout(x, 0.5, False)),
    # --- reductions, scans, sorting ------------------------------------------------------------
    "aten.amax.default": unary(lambda x: aten.amax(x, [1])),
    "aten.amin.default": unary(lambda x: aten.amin(x, [0], True)),
    "aten.any.default": unary(lambda x: aten.any(x > 2.0)),
    "aten.any.dim": unary(lambda x: aten.any.dim(x > 1.0, 1)),
    "aten.any.dims": unary(lambda x: aten.any.dims(x > 1.0, [0], True)),
    "aten.argmax.default": unary(lambda x: aten.argmax(x, 1)),
    "aten.argmin.default": unary(lambda x: aten.argmin(x)),
    "aten.max.dim": unary(lambda x: aten.max.dim(x, 1)),
    "aten.min.dim": unary(lambda x: aten.min.dim(x, 0, True)),
    "aten.mean.default": unary(aten.mean.default),
    "aten.mean.dim": unary(lambda x: aten.mean.dim(x, [1])),
    "aten.sum.dim_IntList": unary(lambda x: aten.sum.dim_IntList(x, [0])),
    "aten.prod.default": unary(aten.prod.default, pos(3, 4)),
    "aten.prod.dim_int": unary(lambda x: aten.prod.dim_int(x, 1)),
    "aten.var.dim": unary(lambda x: aten.var.dim(x, [1])),
    "aten.var.correction": unary(lambda x: aten.var.correction(x, [0], correction=0)),
    "aten.cumsum.default": unary(lambda x: aten.cumsum(x, 1)),
    "aten._softmax.default": unary(lambda x: aten._softmax(x, 1, False)),
    "aten._log_softmax.default": unary(lambda x: aten._log_softmax(x, 1, False)),
    "aten.sort.default": unary(lambda x: aten.sort(x, 1), distinct(4, 8)),
    "aten.topk.default": unary(lambda x: aten.topk(x, 3, 1), distinct(4, 8)),
    # --- contractions --------------------------------------------------------------------------
    "aten.mm.default": binary(aten.mm, X, f(8, 5)),
    "aten.bmm.default": binary(aten.bmm, f(2, 4, 8), f(2, 8, 3)),
    "aten.addmm.default": Sample(lambda b, x, y: aten.addmm(b, x, y), [f(5), X, f(8, 5)]),
    # --- layout --------------------------------------------------------------------------------
    "aten.as_strided.default": unary(lambda x: aten.as_strided(x, [3, 4], [5, 2], 1)),
    "aten.cat.default": binary(lambda x, y: aten.cat([x, y], 1)),
    "aten.constant_pad_nd.default": unary(lambda x: aten.constant_pad_nd(x, [1, 2, 0, 1], 0.5)),
    "aten.diagonal.default": unary(lambda x: aten.diagonal(x, 1)),
    "aten.expand.default": unary(lambda x: aten.expand(x, [3, 4, 8])),
    "aten.flip.default": unary(lambda x: aten.flip(x, [0, 1])),
    "aten.permute.default": unary(lambda x: aten.permute(x, [1, 0])),
    "aten.reflection_pad1d.default": unary(lambda x: aten.reflection_pad1d(x, [2, 1]), f(2, 5)),
    "aten.reflection_pad2d.default": unary(lambda x: aten.reflection_pad2d(x, [2, 1, 1, 2]), IMG),
    "aten.reflection_pad3d.default": unary(
        lambda x: aten.reflection_pad3d(x, [1, 1, 2, 1, 0, 1]), VOL
    ),
    "aten.replication_pad2d.default": unary(lambda x: aten.replication_pad2d(x, [2, 1, 1, 2]), IMG),
    "aten.replication_pad3d.default": unary(
        lambda x: aten.replication_pad3d(x, [1, 1, 2, 1, 0, 1]), VOL
    ),
    "aten.repeat.default": unary(lambda x: aten.repeat(x, [2, 1, 3])),
    "aten.select.int": unary(lambda x: aten.select.int(x, 1, 3)),
    "aten.slice.Tensor": unary(lambda x: aten.slice.Tensor(x, 1, 1, 7, 2)),
    "aten.split_with_sizes.default": unary(lambda x: tuple(aten.split_with_sizes(x, [3, 5], 1))),
    "aten.squeeze.dim": unary(lambda x: aten.squeeze.dim(x, 1), f(4, 1, 8)),
    "aten.squeeze.dims": unary(lambda x: aten.squeeze.dims(x, [0, 2]), f(1, 8, 1)),
    "aten.unsqueeze.default": unary(lambda x: aten.unsqueeze(x, 1)),
    "aten.view.default": unary(lambda x: aten.view(x, [2, 16])),
    # --- gathers and scatters -------------------------------------------------------------------
    "aten.embedding.default": binary(aten.embedding, f(10, 4), ints(3, 5, high=10, low=0)),
    "aten.embedding_dense_backward.default": binary(
        lambda g, i: aten.embedding_dense_backward(g, i, 10, -1, False),
        f(3, 5, 4),
        ints(3, 5, high=10, low=0),
    ),
    "aten.gather.default": binary(lambda x, i: aten.gather(x, 1, i), X, ints(4, 5, low=0)),
    "aten.index.Tensor": binary(lambda x, i: aten.index.Tensor(x, [i]), X, ints(3, 2, high=4)),
    "aten.index_select.default": binary(lambda x, i: aten.index_select(x, 1, i), X, ints(5, low=0)),
    "aten.index_put.default": Sample(
        lambda x, i, v: aten.index_put(x, [i], v, True), [X, ints(6, high=4, low=0), f(6, 8)]
    ),
    "aten.masked_scatter.default": Sample(aten.masked_scatter, [X, bools(4, 8), f(40)]),
    "aten.scatter.src": Sample(lambda x, i, s: aten.scatter.src(x, 1, i, s), [X, perm(8, 4), Y]),
    "aten.scatter.value": binary(lambda x, i: aten.scatter.value(x, 1, i, 2.5), X, perm(8, 4)),
    "aten.scatter_add.default": Sample(
        lambda x, i, s: aten.scatter_add(x, 1, i, s), [X, ints(4, 6, low=0), f(4, 6)]
    ),
    "aten.scatter_reduce.two": Sample(
        lambda x, i, s: aten.scatter_reduce.two(x, 0, i, s, "amax"),
        [X, ints(6, 8, high=4, low=0), f(6, 8)],
    ),
    "aten.select_scatter.default": binary(lambda x, s: aten.select_scatter(x, s, 0, 2), X, f(8)),
    "aten.slice_scatter.default": binary(
        lambda x, s: aten.slice_scatter(x, s, 1, 1, 7, 2), X, f(4, 3)
    ),
    # --- shapes, resolved at capture ---------------------------------------------------------
    "aten.sym_size.int": unary(lambda x: x * aten.sym_size.int(x, 1)),
    "aten.sym_numel.default": unary(lambda x: x * aten.sym_numel(x)),
    "aten.sym_stride.int": unary(lambda x: x * aten.sym_stride.int(x, 0)),
    "aten.sym_storage_offset.default": unary(lambda x: x + aten.sym_storage_offset(x)),
    "aten.sym_is_contiguous.default": unary(lambda x: x * aten.sym_is_contiguous(x)),
    # --- refused (the test checks each is refused, naming the op) -------------------------------
    "aten.nonzero.default": unary(lambda x: aten.nonzero(x > 0)),
    "aten.rand.default": made(lambda x: aten.rand([4, 8])),
    "aten.randn.default": made(lambda x: aten.randn([4, 8])),
    "aten.randperm.default": made(lambda x: aten.randperm(8)),
    "aten._local_scalar_dense.default": unary(lambda x: x * aten._local_scalar_dense(x.sum())),
    "aten._fft_r2c.default": unary(lambda x: aten._fft_r2c(x, [1], 0, True).abs()),
    "aten._fft_c2r.default": unary(
        lambda x: aten._fft_c2r(aten._fft_r2c(x, [1], 0, True), [1], 0, 8)
    ),
    "aten.resize_.default": unary(lambda x: aten.resize_(x.clone(), [2, 16])),
}


def _group_norm_backward(g: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> tuple:
    _, mean, rstd = aten.native_group_norm(x, w, None, 2, 4, 9, 2, 1e-5)
    return aten.native_group_norm_backward(g, x, mean, rstd, w, 2, 4, 9, 2, [True, True, True])


def _layer_norm_backward(
    g: torch.Tensor, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor
) -> tuple:
    _, mean, rstd = aten.native_layer_norm(x, [8], w, b, 1e-5)
    return aten.native_layer_norm_backward(g, x, [8], mean, rstd, w, b, [True, True, True])
