"""The aten handlers LLMs need: promotion casts, bool logic, masks, gathers, attention.

Each case is captured, checked for the torch ops it maps to, and run with the torch
interpreter against PyTorch in float64 (integers and bools must match exactly).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from deplodock.frontend.capture import UnsupportedOpError, capture
from tests.frontend.capturing import Fn, capture_and_compare


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(sum(shape)))


def _ints(high: int, *shape: int, low: int = 0) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=_gen(high + sum(shape)))


def _ops(ir) -> set[str]:
    return {op.name for op in ir.walk() if op.name.startswith("torch.")}


def _check(fn, inputs, run_torch, rel_err) -> set[str]:
    """Capture `fn`, compare its torch-level run with PyTorch; returns the torch ops used."""
    return _ops(capture_and_compare(fn, inputs, run_torch, rel_err))


CASES = {
    "int_plus_float_scalar": (lambda i: i * 0.5, [_ints(9, 4)], {"torch.cast", "torch.mul"}),
    "int_true_division": (
        lambda i, j: i / (j + 1),
        [_ints(9, 4), _ints(5, 4)],
        {"torch.cast", "torch.div"},
    ),
    "bool_and_float_compare": (
        lambda x, y: (x > 0) & (y <= x),
        [_randn(3, 4), _randn(4)],
        {"torch.gt", "torch.le", "torch.logical_and"},
    ),
    "bool_times_bool_is_and": (
        lambda x, y: (x > 0) * (y > 0),
        [_randn(3, 4), _randn(4)],
        {"torch.logical_and"},
    ),
    "bool_plus_bool_is_or": (lambda x: (x > 0) + (x < -1), [_randn(3, 4)], {"torch.logical_or"}),
    "bool_minimum_is_and": (
        lambda x: torch.minimum(x > 0, x < 1),
        [_randn(3, 4)],
        {"torch.logical_and"},
    ),
    "logaddexp_decomposition_multiplies_masks": (
        lambda x, y: torch.logaddexp(x, y),
        [_randn(3, 4), _randn(4)],
        {"torch.logical_and"},
    ),
    "int_compare_scalar": (lambda i: i != 3, [_ints(5, 2, 6)], {"torch.ne"}),
    "logical_not_of_int": (lambda i: torch.logical_not(i), [_ints(3, 5)], {"torch.ne"}),
    "masked_fill": (
        lambda x, m: x.masked_fill(m > 0, float("-inf")).softmax(-1),
        [_randn(3, 5), _randn(5)],
        {"torch.where", "torch.softmax"},
    ),
    "where_scalar_other": (
        lambda x: torch.where(x > 0, x, 0.25),
        [_randn(3, 5)],
        {"torch.where", "torch.constant"},
    ),
    "arange_causal_mask": (
        lambda x: x.masked_fill(
            torch.arange(x.shape[-1])[None, :] > torch.arange(x.shape[-1])[:, None], 0.0
        ),
        [_randn(2, 6, 6)],
        {"torch.arange", "torch.gt", "torch.where"},
    ),
    "new_ones_bool": (
        lambda x: x.new_ones((), dtype=torch.bool) & (x > 0),
        [_randn(3, 4)],
        {"torch.constant", "torch.logical_and"},
    ),
    "full_like": (lambda x: torch.full_like(x, 3.0) - x, [_randn(3, 4)], {"torch.constant"}),
    "to_bf16_and_back": (
        lambda x: x.to(torch.bfloat16).to(torch.float32),
        [_randn(3, 4)],
        {"torch.cast"},
    ),
    "cumsum_bool": (lambda i: (i != 1).cumsum(-1), [_ints(3, 2, 8)], {"torch.cumsum"}),
    "diff_prepend": (
        lambda i, p: torch.diff(i, dim=-1, prepend=p),
        [_ints(9, 1, 8), _ints(9, 1, 1)],
        {"torch.cat", "torch.slice", "torch.sub"},
    ),
    "embedding": (lambda w, i: F.embedding(i, w), [_randn(10, 4), _ints(10, 2, 3)], set()),
    "index_two_tensors": (
        lambda x, i, j: x[i, j],
        [_randn(4, 6, 3), _ints(4, 2, 1), _ints(6, 5)],
        {"torch.index"},
    ),
    "index_after_a_whole_dim": (
        lambda x, i: x[:, i],
        [_randn(4, 6), _ints(6, 2, 3)],
        {"torch.index", "torch.arange"},
    ),
    "cos_sin": (lambda x: torch.cos(x) * torch.sin(x), [_randn(3, 4)], {"torch.cos", "torch.sin"}),
    "sdpa_default_scale": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [_randn(1, 2, 5, 8), _randn(1, 2, 5, 8), _randn(1, 2, 5, 3)],
        {"torch.scaled_dot_product_attention"},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_llm_aten_op(name, run_torch, rel_err):
    fn, inputs, expected = CASES[name]
    assert expected <= _check(fn, inputs, run_torch, rel_err)


def test_embedding_is_one_op():
    ir = capture(Fn(lambda w, i: F.embedding(i, w)), (_randn(10, 4), _ints(10, 2, 3)))
    assert _ops(ir) == {"torch.embedding"}


def test_same_dtype_conversion_is_no_op():
    ir = capture(Fn(lambda x: x.float().contiguous() * 2), (_randn(3, 4),))
    assert "torch.cast" not in str(ir)


def test_sdpa_scale_default_is_made_explicit():
    q = _randn(1, 2, 5, 16)
    ir = capture(Fn(lambda q: F.scaled_dot_product_attention(q, q, q)), (q,))
    assert "scale = 2.500000e-01 : f64" in str(ir)


@pytest.mark.parametrize(
    ("fn", "inputs", "message"),
    [
        (lambda x: torch.nonzero(x), [_randn(4, 6)], r"nonzero\.default \(1x; data-dependent"),
        (lambda x, i: x[i, :, i], [_randn(4, 5, 6), _ints(4, 3)], "separated by a whole dim"),
        (lambda x: torch.diff(x, n=2), [_randn(3, 8)], "n != 1"),
    ],
)
def test_unsupported_variants_name_the_reason(fn, inputs, message):
    with pytest.raises(UnsupportedOpError, match=message):
        capture(Fn(fn), tuple(inputs))
