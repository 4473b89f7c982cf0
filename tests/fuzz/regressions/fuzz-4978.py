"""deplodock fuzz reproducer (judge fixed): the sum of a layer-normed row cancels to ~0; PyTorch's
f32 result was exact by luck (error ~1e-16), so deplodock's 3-6e-8 (one f32 rounding) counted as a
mismatch. The judge now also allows the spread of PyTorch's output under one-ulp input changes
(10,000-program run, seed 1)."""

import torch
import torch.nn.functional as F


class Program(torch.nn.Module):
    def forward(self, v0):
        v2 = F.layer_norm(v0, (5,))
        v3 = v2.sum(dim=0, keepdim=True)
        return v3


INPUTS = [(5,)]
DTYPE = torch.float32
SEED = 4978


if __name__ == "__main__":
    from deplodock.fuzz.check import check_source

    print(check_source(__file__).line())
