"""The composite aten ops (`deplodock/frontend/aten/composite/norms.py`, `losses.py`):
batch, instance and group norm, vector norms and `F.normalize`, and the common losses,
captured and run with the torch interpreter against PyTorch in float64 on random inputs (odd
sizes, negative values, inputs on both sides of the Huber / smooth-L1 kink)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from deplodock.frontend.capture import UnsupportedOpError, capture, capture_program, to_numpy
from tests.frontend.capturing import Fn, capture_and_compare

#: one stream for the whole module, so that two inputs of one shape differ
_G = torch.Generator().manual_seed(0)


def _randn(*shape: int, scale: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.randn(*shape, generator=_G) * scale).to(dtype)


def _positive(*shape: int) -> torch.Tensor:
    return _randn(*shape).abs() + 0.5


def _signs(*shape: int) -> torch.Tensor:
    """Random -1 / +1 targets (as float, like the margin losses take them)."""
    return torch.randint(0, 2, shape, generator=_G).float() * 2 - 1


def _labels(*shape: int, classes: int = 5) -> torch.Tensor:
    return torch.randint(0, classes, shape, generator=_G)


X4 = _randn(2, 6, 3, 5, scale=2.0)
C6 = [_randn(6), _randn(6)]  # weight, bias
STATS = [_randn(6), _positive(6)]  # running mean, running var


def _batch_norm_eval(x, w, b, mean, var):
    return F.batch_norm(x, mean, var, w, b, training=False, eps=1e-3)


def _ce_ignore(x, t):
    t = torch.where(t == 1, torch.full_like(t, -100), t)
    return F.cross_entropy(x, t)


NORMS = {
    "batch_norm_eval": (_batch_norm_eval, [X4, *C6, *STATS]),
    "batch_norm_eval_2d": (
        lambda x, m, v: F.batch_norm(x, m, v, training=False),
        [_randn(7, 6), *STATS],
    ),
    "batch_norm_batch_stats": (
        lambda x, w: F.batch_norm(x, None, None, w, training=True),
        [X4, C6[0]],
    ),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), [X4, *C6]),
    "instance_norm_1d": (F.instance_norm, [_randn(3, 6, 7)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 3, w, b, eps=1e-4), [X4, *C6]),
    "group_norm_plain": (lambda x: F.group_norm(x, 2), [_randn(3, 6, 5)]),
    "vector_norm_2": (lambda x: torch.linalg.vector_norm(x, dim=-1), [X4]),
    "vector_norm_1": (lambda x: torch.linalg.vector_norm(x, 1, dim=(0, 2)), [X4]),
    "vector_norm_inf": (lambda x: torch.linalg.vector_norm(x, float("inf"), dim=1), [X4]),
    "vector_norm_neg_inf": (lambda x: torch.linalg.vector_norm(x, -float("inf"), 1), [X4]),
    "vector_norm_0": (lambda x: torch.linalg.vector_norm(torch.relu(x), 0, -1, True), [X4]),
    "vector_norm_3": (lambda x: torch.linalg.vector_norm(x, 3, dim=-1, keepdim=True), [X4]),
    # torch.linalg.norm / matrix_norm: vector norms, and the matrix norms without an SVD
    "linalg_norm_all": (lambda x: torch.linalg.norm(x), [X4]),
    "linalg_norm_dim": (lambda x: torch.linalg.norm(x, dim=2, keepdim=True), [X4]),
    "linalg_norm_vector_ord": (lambda x: torch.linalg.norm(x, 3), [_randn(7)]),
    "linalg_norm_fro": (lambda x: torch.linalg.norm(x, "fro", dim=(0, 2)), [X4]),
    "linalg_norm_matrix_inf": (lambda x: torch.linalg.norm(x, float("inf")), [_randn(5, 7)]),
    "linalg_norm_matrix_neg_1": (lambda x: torch.linalg.norm(x, -1), [_randn(5, 7)]),
    "matrix_norm_1": (lambda x: torch.linalg.matrix_norm(x, 1), [X4]),
    "matrix_norm_fro_keepdim": (lambda x: torch.linalg.matrix_norm(x, keepdim=True), [X4]),
    "matrix_norm_neg_inf_swapped": (
        lambda x: torch.linalg.matrix_norm(x, -float("inf"), dim=(3, 1)),
        [X4],
    ),
    "frobenius": (lambda x: torch.norm(x), [X4]),
    "normalize": (lambda x: F.normalize(x, dim=1), [X4]),
    "normalize_p1": (lambda x: F.normalize(x, p=1.0, dim=-1), [_randn(4, 7)]),
}

LOSSES = {
    "mse": (F.mse_loss, [_randn(4, 7), _randn(4, 7)]),
    "mse_sum_broadcast": (
        lambda x, y: F.mse_loss(x, y.expand(4, 7), reduction="sum"),
        [_randn(4, 7), _randn(7)],
    ),
    "mse_none": (lambda x, y: F.mse_loss(x, y, reduction="none"), [_randn(4, 7), _randn(4, 7)]),
    "l1": (F.l1_loss, [_randn(4, 7), _randn(4, 7)]),
    "smooth_l1": (
        lambda x, y: F.smooth_l1_loss(x, y, beta=0.5),
        [_randn(5, 7, scale=2.0), _randn(5, 7)],
    ),
    "smooth_l1_beta0": (
        lambda x, y: F.smooth_l1_loss(x, y, beta=0.0),
        [_randn(5, 7), _randn(5, 7)],
    ),
    "huber": (lambda x, y: F.huber_loss(x, y, delta=0.7), [_randn(5, 7, scale=2.0), _randn(5, 7)]),
    "kl_div_batchmean": (
        lambda x, t: F.kl_div(x.log_softmax(-1), t.softmax(-1), reduction="batchmean"),
        [_randn(4, 7), _randn(4, 7)],
    ),
    "kl_div_zero_target": (
        lambda x, t: F.kl_div(x, torch.relu(t), reduction="sum"),
        [_randn(4, 7), _randn(4, 7)],
    ),
    "kl_div_log_target": (
        lambda x, t: F.kl_div(x, t, reduction="mean", log_target=True),
        [_randn(4, 7), _randn(4, 7)],
    ),
    "cosine_similarity": (F.cosine_similarity, [_randn(4, 7), _randn(4, 7)]),
    "cosine_similarity_broadcast": (
        lambda a, b: F.cosine_similarity(a, b, dim=-1),
        [_randn(3, 4, 7), _randn(4, 7)],
    ),
    "cross_entropy": (F.cross_entropy, [_randn(6, 5), _labels(6)]),
    "cross_entropy_sum": (
        lambda x, t: F.cross_entropy(x, t, reduction="sum"),
        [_randn(6, 5), _labels(6)],
    ),
    "cross_entropy_none_nd": (
        lambda x, t: F.cross_entropy(x, t, reduction="none"),
        [_randn(2, 5, 3, 4), _labels(2, 3, 4)],
    ),
    "cross_entropy_weight": (
        lambda x, t, w: F.cross_entropy(x, t, weight=w),
        [_randn(6, 5), _labels(6), _positive(5)],
    ),
    "cross_entropy_ignore_index": (_ce_ignore, [_randn(8, 5), _labels(8)]),
    "cross_entropy_label_smoothing": (
        lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2),
        [_randn(6, 5), _labels(6)],
    ),
    "cross_entropy_smoothing_weight": (
        lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
        [_randn(6, 5), _labels(6), _positive(5)],
    ),
    "cross_entropy_unbatched": (F.cross_entropy, [_randn(5), _labels()]),
    "bce": (
        lambda x, t, w: F.binary_cross_entropy(torch.sigmoid(x), t, weight=w),
        [_randn(4, 7, scale=3.0), _randn(4, 7).sigmoid(), _positive(7)],
    ),
    "bce_saturated": (
        lambda p, t: F.binary_cross_entropy(p, t, reduction="sum"),
        [torch.tensor([0.0, 1.0, 0.3, 1.0]), torch.tensor([1.0, 0.0, 0.5, 1.0])],
    ),
    "bce_with_logits": (
        F.binary_cross_entropy_with_logits,
        [_randn(4, 7, scale=6.0), _randn(4, 7).sigmoid()],
    ),
    "bce_with_logits_pos_weight": (
        lambda x, t, pw, w: F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw),
        [_randn(4, 7, scale=6.0), _randn(4, 7).sigmoid(), _positive(7), _positive(4, 1)],
    ),
    "hinge_embedding": (
        lambda x, y: F.hinge_embedding_loss(x, y, margin=0.5),
        [_randn(4, 7), _signs(4, 7)],
    ),
    "margin_ranking": (
        lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.2),
        [_randn(9), _randn(9), _signs(9)],
    ),
    "soft_margin": (F.soft_margin_loss, [_randn(4, 7, scale=3.0), _signs(4, 7)]),
    "triplet_margin": (F.triplet_margin_loss, [_randn(6, 8), _randn(6, 8), _randn(6, 8)]),
    "triplet_margin_swap_p1": (
        lambda a, p, n: F.triplet_margin_loss(
            a, p, n, margin=0.5, p=1.0, swap=True, reduction="sum"
        ),
        [_randn(6, 8), _randn(6, 8), _randn(6, 8)],
    ),
    "pairwise_distance": (F.pairwise_distance, [_randn(6, 8), _randn(6, 8)]),
    "nll_loss": (lambda x, t: F.nll_loss(x.log_softmax(1), t), [_randn(6, 5), _labels(6)]),
}


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")  # kl_div's
@pytest.mark.parametrize("name", list(NORMS) + list(LOSSES))
def test_op_imports_and_matches_pytorch(name, run_torch, rel_err):
    fn, inputs = {**NORMS, **LOSSES}[name]
    capture_and_compare(fn, inputs, run_torch, rel_err, tolerance=1e-5)


def test_a_loss_is_zero_dimensional(run_torch):
    ir = capture(Fn(F.mse_loss), (_randn(3, 4), _randn(3, 4)))
    assert "-> tensor<f32>" in str(ir)


def test_modules_in_eval_mode(run_torch, rel_err):
    """The nn modules as a model has them: BatchNorm2d in eval() with trained statistics."""
    bn = nn.BatchNorm2d(6).eval()
    with torch.no_grad():
        bn.running_mean.copy_(STATS[0])
        bn.running_var.copy_(STATS[1])
        bn.weight.copy_(C6[0])
        bn.bias.copy_(C6[1])
    net = nn.Sequential(bn, nn.GroupNorm(3, 6), nn.InstanceNorm2d(6, affine=True)).eval()
    ir, params = capture_program(net, [X4])
    (out,) = run_torch(ir, [to_numpy(X4), *params])
    with torch.no_grad():
        ref = net.double()(X4.double())
    assert rel_err(out, to_numpy(ref)) <= 1e-5


def test_bf16_batch_norm_and_loss(run_torch, rel_err):
    x = _randn(2, 6, 3, 5, dtype=torch.bfloat16)
    capture_and_compare(F.instance_norm, [x], run_torch, rel_err, tolerance=2e-2)
    capture_and_compare(F.mse_loss, [x, x.flip(0)], run_torch, rel_err, tolerance=2e-2)


def test_probability_targets_are_refused_in_one_line():
    with pytest.raises(UnsupportedOpError, match="probability \\(float\\) targets") as info:
        capture(Fn(F.cross_entropy), (_randn(4, 5), _randn(4, 5).softmax(-1)))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("order", [2, -2, "nuc"])
def test_matrix_norms_that_need_singular_values_are_refused_in_one_line(order):
    with pytest.raises(UnsupportedOpError, match=f"ord={order!r}.* needs singular values") as info:
        capture(Fn(lambda x: torch.linalg.matrix_norm(x, order)), (_randn(4, 5),))
    assert "\n" not in str(info.value)
