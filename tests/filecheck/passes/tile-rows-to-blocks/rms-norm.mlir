// RUN: deplodock-opt %s -p tile-rows-to-blocks | filecheck %s

// A reducing kernel whose threads body is one free loop nest: each row of the nest gets
// its own block. The 32 rows of the fused RMSNorm (%i) become the grid (%b to 32), uses of
// %i become %b, and the row body (a reduce loop, scalar code, a free loop) moves up into
// the threads body, still serial: mapping it onto threads is the next pass's decision.
// @two_rows has a 2-D row nest (4 x 3), so %p and %q are delinearized from %b.
// @not_rows has two loops at the top, so it is left alone (one block runs it).

builtin.module {
  tile.kernel @rms_norm(%x: memref<1x32x2048xf32>, %w: memref<2048xf32>, %y: memref<1x32x2048xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %n = arith.constant 2.048000e+03 : f32
        %eps = arith.constant 1.000000e-06 : f32
        tile.for %i = %c0 to 32 {
          %sum = tile.for %k = %c0 to 2048 iter_args(%acc = %zero) -> (f32) {
            %v = tile.load %x[%c0, %i, %k] : memref<1x32x2048xf32>
            %sq = arith.mulf %v, %v : f32
            %a = arith.addf %acc, %sq : f32
            tile.yield %a : f32
          }
          %mean = arith.divf %sum, %n : f32
          %me = arith.addf %mean, %eps : f32
          %r = math.rsqrt %me : f32
          tile.for %j = %c0 to 2048 {
            %xv = tile.load %x[%c0, %i, %j] : memref<1x32x2048xf32>
            %wv = tile.load %w[%j] : memref<2048xf32>
            %s = arith.mulf %xv, %r : f32
            %o = arith.mulf %s, %wv : f32
            tile.store %o, %y[%c0, %i, %j] : memref<1x32x2048xf32>
          }
        }
      }
    }
    tile.return
  }
  tile.kernel @two_rows(%x: memref<4x3x8xf32>, %y: memref<4x3xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        tile.for %p = %c0 to 4 {
          tile.for %q = %c0 to 3 {
            %sum = tile.for %k = %c0 to 8 iter_args(%acc = %zero) -> (f32) {
              %v = tile.load %x[%p, %q, %k] : memref<4x3x8xf32>
              %a = arith.addf %acc, %v : f32
              tile.yield %a : f32
            }
            tile.store %sum, %y[%p, %q] : memref<4x3xf32>
          }
        }
      }
    }
    tile.return
  }
  tile.kernel @not_rows(%x: memref<8xf32>, %y: memref<8xf32>, %s: memref<1xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        tile.for %i = %c0 to 8 {
          %v = tile.load %x[%i] : memref<8xf32>
          tile.store %v, %y[%i] : memref<8xf32>
        }
        %sum = tile.for %k = %c0 to 8 iter_args(%acc = %zero) -> (f32) {
          %v_1 = tile.load %x[%k] : memref<8xf32>
          %a = arith.addf %acc, %v_1 : f32
          tile.yield %a : f32
        }
        tile.store %sum, %s[%c0] : memref<1xf32>
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @rms_norm(
// CHECK-NEXT:    tile.grid %b to 32 {
// CHECK-NEXT:      tile.threads %t to 32 {
// CHECK-NEXT:        %c0 = arith.constant 0 : index
// CHECK-NEXT:        %zero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        %n = arith.constant 2.048000e+03 : f32
// CHECK-NEXT:        %eps = arith.constant 1.000000e-06 : f32
// CHECK-NEXT:        %sum = tile.for %k = %c0 to 2048 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:          %v = tile.load %x[%c0, %b, %k] : memref<1x32x2048xf32>
// CHECK:             }
// CHECK-NEXT:        %mean = arith.divf %sum, %n : f32
// CHECK-NEXT:        %me = arith.addf %mean, %eps : f32
// CHECK-NEXT:        %r = math.rsqrt %me : f32
// CHECK-NEXT:        tile.for %j = %c0 to 2048 {
// CHECK-NEXT:          %xv = tile.load %x[%c0, %b, %j] : memref<1x32x2048xf32>
// CHECK:               tile.store %o, %y[%c0, %b, %j] : memref<1x32x2048xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }

// CHECK-LABEL: tile.kernel @two_rows(
// CHECK-NEXT:    tile.grid %b to 12 {
// CHECK-NEXT:      tile.threads %t to 32 {
// CHECK:             %p = arith.floordivsi %b, %[[C3:.*]] : index
// CHECK-NEXT:        %q = arith.remsi %b, %[[C3]] : index
// CHECK-NEXT:        %sum = tile.for %k = %c0 to 8 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:          %v = tile.load %x[%p, %q, %k] : memref<4x3x8xf32>

// CHECK-LABEL: tile.kernel @not_rows(
// CHECK-NEXT:    tile.grid %b to 1 {
// CHECK-NEXT:      tile.threads %t to 32 {
// CHECK-NEXT:        %c0 = arith.constant 0 : index
// CHECK-NEXT:        %zero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        tile.for %i = %c0 to 8 {
