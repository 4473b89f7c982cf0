"""The tile interpreter runs blocks in batches (`tile.grid`): results must not depend on the
batch size, per-block code outside `tile.threads` (a loop whose bounds differ per block, a
store, a branch) runs per block, and reports still name the block at fault."""

from __future__ import annotations

import numpy as np
import pytest

from deplodock.driver import lower_program, program_from_expression, run_and_compare
from deplodock.interpreters import run_module
from deplodock.interpreters.shared_memory import RaceError
from tests.helpers import parse, random_inputs, rel_err

PROGRAMS = {
    "gemm-cp-async": "torch.randn(64, 96) @ torch.randn(96, 80)",
    "linear-odd": "nn.Linear(40, 18)(torch.randn(20, 40))",
    "rmsnorm": "nn.RMSNorm(64)(torch.randn(1, 6, 64))",
    "softmax": "torch.softmax(torch.randn(2, 3, 40), dim=-1)",
    "causal-sdpa": (
        "F.scaled_dot_product_attention(torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8), "
        "torch.randn(1, 2, 16, 8), is_causal=True)"
    ),
    "split-k": "nn.Linear(2048, 8, bias=False)(torch.randn(4, 2048))",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_results_do_not_depend_on_the_batch_size(name: str) -> None:
    program = program_from_expression(PROGRAMS[name])
    lower_program(program, "tile")
    inputs = random_inputs(program.module, seed=5)
    one = run_module(program.module, inputs, blocks_per_batch=1)
    for batch in (3, None):
        got_all = run_module(program.module, inputs, blocks_per_batch=batch)
        for got, want in zip(got_all, one, strict=True):
            assert np.array_equal(got, want, equal_nan=True), (name, batch)
    report = run_and_compare(program, seed=5)  # and the default batch matches PyTorch
    assert report.ok, report.summary()


PER_BLOCK = """
tile.kernel @k(%x: memref<6x64xf32>, %s: memref<6xf32>, %y: memref<6x64xf32>) {
  tile.grid %b to 6 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c63 = arith.constant 63 : index
    %zero = arith.constant 0.000000e+00 : f32
    %acc = tile.for %i = %b to 6 iter_args(%a = %zero) -> (f32) {
      %v = tile.load %x[%i, %c0] : memref<6x64xf32>
      %n = arith.addf %a, %v : f32
      tile.yield %n : f32
    }
    tile.store %acc, %s[%b] : memref<6xf32>
    %r = arith.remsi %b, %c2 : index
    %odd = arith.cmpi eq, %r, %c1 : index
    tile.if %odd {
      %neg = arith.negf %acc : f32
      tile.store %neg, %s[%b] : memref<6xf32>
    }
    tile.threads %t to 64 {
      %sh = tile.shared_alloc : memref<64xf32, 3 : i64>
      %v = tile.load %x[%b, %t] : memref<6x64xf32>
      tile.store %v, %sh[%t] : memref<64xf32, 3 : i64>
      tile.barrier
      %m = arith.subi %c63, %t : index
      %w = tile.load %sh[%m] : memref<64xf32, 3 : i64>
      %o = arith.addf %w, %acc : f32
      tile.store %o, %y[%b, %t] : memref<6x64xf32>
    }
  }
  tile.return
}
func.func @forward(%x: memref<6x64xf32>) -> (memref<6xf32>, memref<6x64xf32>) {
  %s = tile.alloc : memref<6xf32>
  %y = tile.alloc : memref<6x64xf32>
  tile.launch @k(%x, %s, %y) : (memref<6x64xf32>, memref<6xf32>, memref<6x64xf32>) -> ()
  func.return %s, %y : memref<6xf32>, memref<6x64xf32>
}
"""


@pytest.mark.parametrize("batch", [1, 4, None])
def test_per_block_loops_branches_and_stores_outside_the_threads(batch: int | None) -> None:
    x = np.random.default_rng(2).standard_normal((6, 64)).astype(np.float32)
    s, y = run_module(parse(PER_BLOCK), [x], blocks_per_batch=batch)
    x64 = x.astype(np.float64)
    suffix = np.array([x64[b:, 0].sum() for b in range(6)])
    assert rel_err(s, np.where(np.arange(6) % 2 == 1, -suffix, suffix)) <= 1e-6
    assert rel_err(y, x64[:, ::-1] + suffix[:, None]) <= 1e-6


RACE_IN_BLOCK_3 = """
tile.kernel @k(%x: memref<6x64xf32>, %y: memref<6x64xf32>) {
  tile.grid %b to 6 {
    tile.threads %t to 64 {
      %c3 = arith.constant 3 : index
      %c63 = arith.constant 63 : index
      %sh = tile.shared_alloc : memref<64xf32, 3 : i64>
      %v = tile.load %x[%b, %t] : memref<6x64xf32>
      tile.store %v, %sh[%t] : memref<64xf32, 3 : i64>
      %m = arith.subi %c63, %t : index
      %is3 = arith.cmpi eq, %b, %c3 : index
      tile.if %is3 {
        %early = tile.load %sh[%m] : memref<64xf32, 3 : i64>
        tile.store %early, %y[%b, %t] : memref<6x64xf32>
      }
      tile.barrier
      %w = tile.load %sh[%m] : memref<64xf32, 3 : i64>
      tile.store %w, %y[%b, %t] : memref<6x64xf32>
    }
  }
  tile.return
}
func.func @forward(%x: memref<6x64xf32>) -> memref<6x64xf32> {
  %y = tile.alloc : memref<6x64xf32>
  tile.launch @k(%x, %y) : (memref<6x64xf32>, memref<6x64xf32>) -> ()
  func.return %y : memref<6x64xf32>
}
"""


@pytest.mark.parametrize("batch", [1, 4, None])
def test_a_race_in_block_3_is_reported_as_block_3(batch: int | None) -> None:
    x = np.random.default_rng(3).standard_normal((6, 64)).astype(np.float32)
    with pytest.raises(RaceError, match=r"\(@k, block 3\)"):
        run_module(parse(RACE_IN_BLOCK_3), [x], blocks_per_batch=batch)
