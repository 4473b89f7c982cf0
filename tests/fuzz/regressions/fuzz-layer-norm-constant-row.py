"""deplodock fuzz reproducer (fixed): layer_norm of a row of equal values (an expanded
input) gave ~2e-5 instead of PyTorch's exact 0: the mean, sum(x) / N in f32, was off by an
ulp that rsqrt(0 + eps) magnified. The mean is now refined once, m1 + sum(x - m1) / N
(seed 10000 run)."""

import torch
import torch.nn.functional as F


class Program(torch.nn.Module):
    def forward(self, v0, v1):
        v2 = F.layer_norm(v0.expand(5, 17, 3) + v1, (17, 3))
        return v2


INPUTS = [(5, 1, 1), (5, 1, 1)]
DTYPE = torch.float32
SEED = 10000


if __name__ == "__main__":
    from deplodock.fuzz.check import check_source

    print(check_source(__file__).line())
