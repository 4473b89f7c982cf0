"""deplodock fuzz reproducer (fixed): the mean of a layer-normed row (0 up to rounding) was
8x further from 0 than PyTorch's when layer_norm shifted its row by the first element (the
shifted values round at a larger magnitude); the refined two-pass mean keeps it (seed 1 run)."""

import torch
import torch.nn.functional as F


class Program(torch.nn.Module):
    def forward(self, v0):
        v1 = F.layer_norm(v0, (127,))
        v2 = v1.mean(dim=0, keepdim=True)
        return v2


INPUTS = [(127,)]
DTYPE = torch.float32
SEED = 461


if __name__ == "__main__":
    from deplodock.fuzz.check import check_source

    print(check_source(__file__).line())
