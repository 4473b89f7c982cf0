"""deplodock fuzz reproducer (fixed): `-(-x)` printed as `--v0` in the emitted CUDA C, a
decrement that g++ (and nvcc) reject: "decrement of read-only variable" (seed 5001 run)."""

import torch


class Program(torch.nn.Module):
    def forward(self, v0, v1):
        v4 = -v0
        v5 = -v4
        return v5


INPUTS = [(8, 8, 5, 2), (8, 1, 5, 2)]
DTYPE = torch.float32
SEED = 5351


if __name__ == "__main__":
    from deplodock.fuzz.check import check_source

    print(check_source(__file__).line())
