"""`torch.einsum` (`deplodock/frontend/aten/composite/einsum.py`): rewritten to sums, permutes,
reshapes and batched matmuls, captured and run with the torch interpreter against PyTorch in
float64 (explicit and implicit outputs, `...`, broadcast batch dims, three operands, and
repeated subscripts: diagonals and traces, gathered with `arange` indices)."""

from __future__ import annotations

import pytest
import torch

from deplodock.frontend.capture import capture
from tests.frontend.capturing import Fn, capture_and_compare

_G = torch.Generator().manual_seed(0)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_G)


CASES = {
    "batched_matmul": ("bij,bjk->bik", [_randn(2, 3, 4), _randn(2, 4, 5)]),
    "matmul_implicit": ("ij,jk", [_randn(3, 4), _randn(4, 5)]),
    "outer": ("i,j->ij", [_randn(3), _randn(4)]),
    "dot": ("i,i->", [_randn(5), _randn(5)]),
    "sum_all": ("ij->", [_randn(3, 4)]),
    "transpose": ("ij->ji", [_randn(3, 4)]),
    "implicit_sorted": ("ji", [_randn(3, 4)]),
    "attention_scores": ("bhqd,bhkd->bhqk", [_randn(2, 3, 4, 5), _randn(2, 3, 6, 5)]),
    "ellipsis_broadcast": ("...ij,...jk->...ik", [_randn(2, 3, 4, 5), _randn(3, 5, 2)]),
    "ellipsis_implicit": ("...ij", [_randn(2, 3, 4)]),
    "chain_of_three": ("ij,jk,kl->il", [_randn(2, 3), _randn(3, 4), _randn(4, 5)]),
    "sum_out_first": ("ijk,jl->il", [_randn(2, 3, 4), _randn(3, 5)]),
    "size_one_batch": ("bij,bjk->bik", [_randn(1, 3, 4), _randn(2, 4, 5)]),
    "hadamard": ("ij,ij->ij", [_randn(3, 4), _randn(3, 4)]),
    "bilinear": ("bn,anm,bm->ba", [_randn(2, 3), _randn(4, 3, 5), _randn(2, 5)]),
    "diagonal": ("ii->i", [_randn(5, 5)]),
    "trace_implicit": ("ii", [_randn(5, 5)]),
    "trace_explicit": ("ii->", [_randn(3, 3)]),
    "diagonal_leading": ("iij->ij", [_randn(3, 3, 4)]),
    "diagonal_batched": ("bii->bi", [_randn(2, 5, 5)]),
    "diagonal_apart": ("ijki->kji", [_randn(3, 2, 4, 3)]),
    "diagonal_thrice": ("iji,ki->jik", [_randn(3, 2, 3), _randn(4, 3)]),
    "triple_diagonal": ("iii->i", [_randn(3, 3, 3)]),
    "two_diagonals": ("iijj->ij", [_randn(3, 3, 2, 2)]),
    "diagonal_then_matmul": ("ij,jj->i", [_randn(4, 3), _randn(3, 3)]),
    "diagonal_implicit_pair": ("ij,jj", [_randn(4, 3), _randn(3, 3)]),
    "diagonal_ellipsis": ("...ii->...i", [_randn(2, 3, 5, 5)]),
    "diagonal_inside_ellipsis": ("i...i", [_randn(3, 2, 4, 3)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_einsum_matches_pytorch(name, run_torch, rel_err):
    equation, inputs = CASES[name]
    fn = lambda *xs: torch.einsum(equation, *xs)  # noqa: E731
    capture_and_compare(fn, inputs, run_torch, rel_err, tolerance=1e-5)


def test_a_pair_is_one_batched_matmul():
    ir = capture(Fn(lambda a, b: torch.einsum("bij,bjk->bik", a, b)), CASES["batched_matmul"][1])
    assert [op.name for op in ir.walk() if op.name.startswith("torch.")] == ["torch.matmul"]


def test_a_trace_is_a_0d_result(run_torch, rel_err):
    ir = capture_and_compare(lambda a: torch.einsum("ii", a), [_randn(7, 7)], run_torch, rel_err)
    assert [op.name for op in ir.walk() if op.name == "torch.index"] == ["torch.index"]


def test_bf16_diagonal(run_torch, rel_err):
    x = _randn(3, 5, 5).to(torch.bfloat16)
    fn = lambda x: torch.einsum("bii->bi", x)  # noqa: E731
    capture_and_compare(fn, [x], run_torch, rel_err, tolerance=0.0)  # a gather is exact
