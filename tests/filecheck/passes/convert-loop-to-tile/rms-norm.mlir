// RUN: deplodock-opt %s -p convert-loop-to-tile | filecheck %s

// Fused RMSNorm: one block per row (%i -> %b), a cooperative reduce over k with a
// tile.combine, scalar code on every thread, then a strided free loop over j.
// T = next_pow2(2048) capped at block_size = 256.

builtin.module {
  loop.kernel @rms_norm(%x: memref<1x32x2048xf32>, %w: memref<2048xf32>, %y: memref<1x32x2048xf32>) {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    %n = arith.constant 2.048000e+03 : f32
    %eps = arith.constant 9.99999997e-07 : f32
    loop.for %i = 0 to 32 {
      %sum = loop.for %k = 0 to 2048 iter_args(%acc = %zero) -> (f32) {
        %v = loop.load %x[%c0, %i, %k] : memref<1x32x2048xf32>
        %sq = arith.mulf %v, %v : f32
        %a = arith.addf %acc, %sq : f32
        loop.yield %a : f32
      }
      %mean = arith.divf %sum, %n : f32
      %me = arith.addf %mean, %eps : f32
      %r = math.rsqrt %me : f32
      loop.for %j = 0 to 2048 {
        %xv = loop.load %x[%c0, %i, %j] : memref<1x32x2048xf32>
        %wv = loop.load %w[%j] : memref<2048xf32>
        %s = arith.mulf %xv, %r : f32
        %o = arith.mulf %s, %wv : f32
        loop.store %o, %y[%c0, %i, %j] : memref<1x32x2048xf32>
      }
    }
    loop.return
  }
}

// CHECK-LABEL: tile.kernel @rms_norm(
// CHECK-NEXT:    tile.grid %b to 32 {
// CHECK-NEXT:      tile.threads %t to 256 {
// CHECK-DAG:         %c0 = arith.constant 0 : index
// CHECK-DAG:         %zero = arith.constant 0.000000e+00 : f32
// CHECK:             %sum_p = tile.for %k = %t to 2048 step 256 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:          %v = tile.load %x[%c0, %b, %k] : memref<1x32x2048xf32>
// CHECK-NEXT:          %sq = arith.mulf %v, %v : f32
// CHECK-NEXT:          %a = arith.addf %acc, %sq : f32
// CHECK-NEXT:          tile.yield %a : f32
// CHECK-NEXT:        }
// CHECK-NEXT:        %sum = tile.combine add %sum_p : f32
// CHECK-NEXT:        %mean = arith.divf %sum, %n : f32
// CHECK-NEXT:        %me = arith.addf %mean, %eps : f32
// CHECK-NEXT:        %r = math.rsqrt %me : f32
// CHECK-NEXT:        tile.for %j = %t to 2048 step 256 {
// CHECK-NEXT:          %xv = tile.load %x[%c0, %b, %j] : memref<1x32x2048xf32>
// CHECK-NEXT:          %wv = tile.load %w[%j] : memref<2048xf32>
// CHECK-NEXT:          %s = arith.mulf %xv, %r : f32
// CHECK-NEXT:          %o = arith.mulf %s, %wv : f32
// CHECK-NEXT:          tile.store %o, %y[%c0, %b, %j] : memref<1x32x2048xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    tile.return
