"""deplodock fuzz reproducer (fixed): bf16 layer_norm rounded its statistics to bf16
and missed PyTorch by 6-19 times its own error."""

import torch
import torch.nn.functional as F


class Program(torch.nn.Module):
    def forward(self, v0, v1):
        v3 = F.layer_norm(v0, (33,))
        v5 = v3.sum(dim=0, keepdim=True)
        return v5


INPUTS = [(33,), (33,)]
DTYPE = torch.bfloat16
SEED = 1686


if __name__ == "__main__":
    from deplodock.fuzz.check import check_source

    print(check_source(__file__).line())
