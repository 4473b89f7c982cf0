"""deplodock fuzz reproducer (judge fixed): the sum of a layer-normed row cancels to ~0; PyTorch's
f32 result was exact by luck (error ~1e-16), so deplodock's 3-6e-8 (one f32 rounding) counted as a
mismatch. The judge now also allows the spread of PyTorch's output under one-ulp input changes
(10,000-program run, seed 1)."""

import torch
import torch.nn.functional as F


class Program(torch.nn.Module):
    def forward(self, v0, v1):
        v2 = torch.sigmoid(v1)
        v4 = F.layer_norm(v2, (3,))
        v5 = v4.sum(dim=1, keepdim=True)
        return v5


INPUTS = [(3, 3), (3, 3)]
DTYPE = torch.float32
SEED = 8815


if __name__ == "__main__":
    from deplodock.fuzz.check import check_source

    print(check_source(__file__).line())
