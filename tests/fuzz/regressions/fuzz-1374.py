"""deplodock fuzz reproducer (fixed): bf16 layer_norm rounded its statistics to bf16
and missed PyTorch by 6-19 times its own error."""

import torch
import torch.nn.functional as F


class Program(torch.nn.Module):
    def forward(self, v0):
        v6 = F.layer_norm(v0, (5,))
        return v6


INPUTS = [(127, 1, 8, 5)]
DTYPE = torch.bfloat16
SEED = 1374


if __name__ == "__main__":
    from deplodock.fuzz.check import check_source

    print(check_source(__file__).line())
