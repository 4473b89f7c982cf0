"""The float64 reference that every stage is checked against (`driver.checking`).

A tensor the computation makes itself (a mask from `torch.where` on Python scalars, a
`torch.full`) is float32 by PyTorch's default dtype; beside float64 operands PyTorch does
not always promote it (SDPA reads a float32 mask of a float64 query as something else), so
the reference is computed with float64 as the default dtype too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from deplodock.driver.checking import float64_outputs
from deplodock.frontend.expression import parse_expression

MASKED_SDPA = (
    "F.scaled_dot_product_attention(torch.randn(1, 2, 64, 16), torch.randn(1, 2, 64, 16), "
    "torch.randn(1, 2, 64, 16), "
    "attn_mask=torch.where(torch.arange(64) < 40, 0.0, -1.0).expand(64, 64))"
)


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b).abs().max() / b.abs().max())


def test_a_mask_made_inside_the_computation_is_float64_in_the_reference() -> None:
    module, inputs, _ = parse_expression(MASKED_SDPA)
    (reference,) = float64_outputs(module, inputs)
    assert reference.dtype == torch.float64
    q, k, v, positions = inputs
    mask = torch.where(positions < 40, 0.0, -1.0).double().expand(64, 64)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    assert _relative_error(reference, expected) <= 1e-12
    assert torch.get_default_dtype() == torch.float32  # restored


def test_the_default_dtype_is_restored_when_the_module_raises() -> None:
    class Fails(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("boom")

    try:
        float64_outputs(Fails(), [torch.randn(2)])
    except RuntimeError:
        pass
    assert torch.get_default_dtype() == torch.float32
