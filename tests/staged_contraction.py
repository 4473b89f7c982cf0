"""A small staged contraction shared by the tests of the shared-memory passes: a 20 x 40 @
40 x 18 linear-like loop program with a bias (odd M and N), its float64 reference, and the
module a `deplodock-opt` tile pipeline string makes of it."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from deplodock.dialects import make_context
from tests.helpers import parse

#: A 20 x 40 @ 40 x 18 linear-like contraction with a bias: odd M and N.
LOOP = """
builtin.module {
  loop.kernel @mm(%x: memref<20x40xf32>, %w: memref<18x40xf32>, %bias: memref<18xf32>,
                  %y: memref<20x18xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to 20 {
      loop.for %j = 0 to 18 {
        %s = loop.for %k = 0 to 40 iter_args(%acc = %zero) -> (f32) {
          %a = loop.load %x[%i, %k] : memref<20x40xf32>
          %b = loop.load %w[%j, %k] : memref<18x40xf32>
          %p = arith.mulf %a, %b : f32
          %n = arith.addf %acc, %p : f32
          loop.yield %n : f32
        }
        %c = loop.load %bias[%j] : memref<18xf32>
        %o = arith.addf %s, %c : f32
        loop.store %o, %y[%i, %j] : memref<20x18xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x: memref<20x40xf32>, %w: memref<18x40xf32>, %bias: memref<18xf32>)
      -> memref<20x18xf32> {
    %y = loop.alloc : memref<20x18xf32>
    loop.launch @mm(%x, %w, %bias, %y)
        : (memref<20x40xf32>, memref<18x40xf32>, memref<18xf32>, memref<20x18xf32>) -> ()
    func.return %y : memref<20x18xf32>
  }
}
"""


def reference(inputs: list[np.ndarray]) -> np.ndarray:
    x, w, bias = (a.astype(np.float64) for a in inputs)
    return x @ w.T + bias


def scheduled(pipeline: str) -> ModuleOp:
    """The loop program through `convert-loop-to-tile,<pipeline>`, verified."""
    from deplodock.cli.opt import DeplodockOptMain

    module = parse(LOOP)
    opt = DeplodockOptMain(args=["-p", f"convert-loop-to-tile,{pipeline}"])
    opt.setup_pipeline()
    opt.pipeline.apply(make_context(), module)
    module.verify()
    return module
