// RUN: deplodock-opt %s -p tile-unroll | filecheck %s
// RUN: deplodock-opt %s -p 'tile-unroll{max_trips=8}' | filecheck %s --check-prefix=SMALL
// RUN: deplodock-opt %s -p tile-unroll,convert-tile-to-kernel -t cuda | filecheck %s --check-prefix=CUDA

// A loop with a constant trip count (constant start, static bound and step) gets the unit
// attribute `unroll` when its whole nest, unrolled, is at most max_trips (default 64)
// copies of the innermost body. Inner loops are decided first. The kernel's `unroll` knob
// records max_trips (0: off); a schedule that already has it wins over the option.
//
// @nest: 4 x 8 = 32 copies: both loops are marked (with max_trips=8 only the inner one).
// @big: 16 x 8 = 128 copies: the inner loop is marked, the outer one stays a loop.
// @strided: a thread-strided loop (start %t) has no compile-time trip count.
// @off: the schedule says unroll = 0: nothing is marked.

builtin.module {
  tile.kernel @nest(%x: memref<4x8xf32>, %y: memref<4xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        tile.for %i = %c0 to 4 {
          %s = tile.for %j = %c0 to 8 iter_args(%a = %zero) -> (f32) {
            %v = tile.load %x[%i, %j] : memref<4x8xf32>
            %n = arith.addf %a, %v : f32
            tile.yield %n : f32
          }
          tile.store %s, %y[%i] : memref<4xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @big(%x: memref<16x8xf32>, %y: memref<16x8xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 16 {
          tile.for %j = %c0 to 8 {
            %v = tile.load %x[%i, %j] : memref<16x8xf32>
            tile.store %v, %y[%i, %j] : memref<16x8xf32>
          }
        }
      }
    }
    tile.return
  }
  tile.kernel @strided(%x: memref<64xf32>, %y: memref<64xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        tile.for %i = %t to 64 step 32 {
          %v = tile.load %x[%i] : memref<64xf32>
          tile.store %v, %y[%i] : memref<64xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @off(%x: memref<4xf32>, %y: memref<4xf32>) attributes {schedule = {unroll = 0 : i64}} {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 4 {
          %v = tile.load %x[%i] : memref<4xf32>
          tile.store %v, %y[%i] : memref<4xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @nest(
// CHECK-SAME:    attributes {schedule = {unroll = 64 : i64}}
// CHECK:             tile.for %i = %c0 to 4 {
// CHECK:               %s = tile.for %j = %c0 to 8 iter_args(%a = %zero) -> (f32) {
// CHECK:               } {unroll}
// CHECK-NEXT:          tile.store %s, %y[%i] : memref<4xf32>
// CHECK-NEXT:        } {unroll}

// CHECK-LABEL: tile.kernel @big(
// CHECK:             tile.for %i = %c0 to 16 {
// CHECK-NEXT:          tile.for %j = %c0 to 8 {
// CHECK:               } {unroll}
// CHECK-NEXT:        }{{$}}

// CHECK-LABEL: tile.kernel @strided(
// CHECK-NOT:     unroll}
// CHECK:         tile.return

// CHECK-LABEL: tile.kernel @off(
// CHECK-SAME:    attributes {schedule = {unroll = 0 : i64}}
// CHECK-NOT:     {unroll}
// CHECK:         tile.return

// SMALL-LABEL: tile.kernel @nest(
// SMALL-SAME:    attributes {schedule = {unroll = 8 : i64}}
// SMALL:               } {unroll}
// SMALL-NEXT:          tile.store %s, %y[%i] : memref<4xf32>
// SMALL-NEXT:        }{{$}}

// The mark survives convert-tile-to-kernel (on kernel.for) and becomes `#pragma unroll`.
// CUDA-LABEL: void __launch_bounds__(32) nest(
// CUDA:         #pragma unroll
// CUDA-NEXT:    for (int i = 0; i < 4; ++i) {
// CUDA:           #pragma unroll
// CUDA-NEXT:      for (int j = 0; j < 8; ++j) {
// CUDA-LABEL: void __launch_bounds__(32) strided(
// CUDA-NOT:     #pragma unroll
// CUDA:         for (int i = t; i < 64; i += 32) {
