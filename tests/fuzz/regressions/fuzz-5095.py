"""deplodock fuzz reproducer (fixed): a bf16 GELU rounded each step of its decomposition to
bf16 (6 times PyTorch's error); bf16/f16 ops now compute in f32 and round once."""

import torch
import torch.nn.functional as F


class Program(torch.nn.Module):
    def forward(self, v0):
        v1 = torch.cat([v0, v0], dim=2)
        v2 = F.gelu(v1)
        v3 = -v2
        v4 = torch.relu(v3)
        return v4


INPUTS = [(33, 1, 32, 8)]
DTYPE = torch.bfloat16
SEED = 5095


if __name__ == "__main__":
    from deplodock.fuzz.check import check_source

    print(check_source(__file__).line())
