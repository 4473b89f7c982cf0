// RUN: deplodock-opt %s -p tile-cooperative-reduce | filecheck %s

// The threads of a block share a plain reduction (acc = acc <op> x): the reduce loop is
// strided over the T threads, each accumulating a partial from the identity, and a
// tile.combine reduces the partials over the block.
// @rms_norm: the sum of squares; T = 256 threads share k = 0..2047.
// @colsum: the loop starts from 1.5, not from the identity 0: each partial starts at 0 and
//   the 1.5 is added once after the combine.
// @total: a 2-D reduce nest (7 x 9) is flattened into one loop of 63 iterations.
// @decay: acc = acc * 0.5 + x is not a plain reduction; it stays serial on every thread.

builtin.module {
  tile.kernel @rms_norm(%x: memref<1x32x2048xf32>, %y: memref<1x32xf32>) {
    tile.grid %b to 32 {
      tile.threads %t to 256 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %sum = tile.for %k = %c0 to 2048 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%c0, %b, %k] : memref<1x32x2048xf32>
          %sq = arith.mulf %v, %v : f32
          %a = arith.addf %acc, %sq : f32
          tile.yield %a : f32
        }
        tile.store %sum, %y[%c0, %b] : memref<1x32xf32>
      }
    }
    tile.return
  }
  tile.kernel @colsum(%x: memref<6x40xf32>, %o: memref<40xf32>) {
    tile.grid %b to 40 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 1.500000e+00 : f32
        %s = tile.for %i = %c0 to 6 iter_args(%a = %init) -> (f32) {
          %v = tile.load %x[%i, %b] : memref<6x40xf32>
          %a2 = arith.addf %v, %a : f32
          tile.yield %a2 : f32
        }
        tile.store %s, %o[%b] : memref<40xf32>
      }
    }
    tile.return
  }
  tile.kernel @total(%x: memref<7x9xf32>, %o: memref<1xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 64 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %s = tile.for %i = %c0 to 7 iter_args(%a = %zero) -> (f32) {
          %s2 = tile.for %j = %c0 to 9 iter_args(%c = %a) -> (f32) {
            %v = tile.load %x[%i, %j] : memref<7x9xf32>
            %c2 = arith.addf %c, %v : f32
            tile.yield %c2 : f32
          }
          tile.yield %s2 : f32
        }
        tile.store %s, %o[%c0] : memref<1xf32>
      }
    }
    tile.return
  }
  tile.kernel @decay(%x: memref<20xf32>, %o: memref<1xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %half = arith.constant 5.000000e-01 : f32
        %s = tile.for %k = %c0 to 20 iter_args(%a = %zero) -> (f32) {
          %v = tile.load %x[%k] : memref<20xf32>
          %h = arith.mulf %a, %half : f32
          %a2 = arith.addf %h, %v : f32
          tile.yield %a2 : f32
        }
        tile.store %s, %o[%c0] : memref<1xf32>
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @rms_norm(
// CHECK:             %sum_p = tile.for %k = %t to 2048 step 256 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:          %v = tile.load %x[%c0, %b, %k] : memref<1x32x2048xf32>
// CHECK-NEXT:          %sq = arith.mulf %v, %v : f32
// CHECK-NEXT:          %a = arith.addf %acc, %sq : f32
// CHECK-NEXT:          tile.yield %a : f32
// CHECK-NEXT:        }
// CHECK-NEXT:        %sum = tile.combine add %sum_p : f32
// CHECK-NEXT:        tile.store %sum, %y[%c0, %b] : memref<1x32xf32>

// CHECK-LABEL: tile.kernel @colsum(
// CHECK:             %identity = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        %s_p = tile.for %i = %t to 6 step 32 iter_args(%a = %identity) -> (f32) {
// CHECK:             %[[TOTAL:.*]] = tile.combine add %s_p : f32
// CHECK-NEXT:        %s = arith.addf %[[TOTAL]], %init : f32
// CHECK-NEXT:        tile.store %s, %o[%b] : memref<40xf32>

// CHECK-LABEL: tile.kernel @total(
// CHECK:             %s_p = tile.for %lin = %t to 63 step 64 iter_args(%c = %zero) -> (f32) {
// CHECK-NEXT:          %i = arith.floordivsi %lin, %[[C9:.*]] : index
// CHECK-NEXT:          %j = arith.remsi %lin, %[[C9]] : index
// CHECK-NEXT:          %v = tile.load %x[%i, %j] : memref<7x9xf32>
// CHECK:             %s = tile.combine add %s_p : f32

// CHECK-LABEL: tile.kernel @decay(
// CHECK-NOT:         tile.combine
// CHECK:             %s = tile.for %k = %c0 to 20 iter_args(%a = %zero) -> (f32) {
