// RUN: deplodock-opt %s -p tile-unroll | filecheck %s
// RUN: deplodock-opt %s -p 'tile-unroll{max_trips=8}' | filecheck %s --check-prefix=SMALL
// RUN: deplodock-opt %s -p 'tile-unroll{strided=false}' | filecheck %s --check-prefix=ROLLED
// RUN: deplodock-opt %s -p tile-unroll,convert-tile-to-kernel -t cuda | filecheck %s --check-prefix=CUDA

// A loop with a constant trip count (constant start, static bound and step) gets the unit
// attribute `unroll` when its whole nest, unrolled, is at most max_trips (default 64)
// copies of the innermost body. Inner loops are decided first. The kernel's `unroll` knob
// records max_trips (0: off); a schedule that already has it wins over the option.
//
// @nest: 4 x 8 = 32 copies: both loops are marked (with max_trips=8 only the inner one).
// @big: 16 x 8 = 128 copies: the inner loop is marked, the outer one stays a loop.
// @strided: a loop strided over the block's 32 threads with a bound of 64 (a multiple of
// 32) makes 2 trips in every thread, but it loads into registers: unrolled, all of its
// values would be live at once. It stays a loop, left to nvcc.
// @copy: a cooperative asynchronous copy (1024 elements of 4 floats, 8 to a row, 128
// threads): 8 trips in every thread. It is rewritten to count them, %l = %t + %j * 128,
// its row %l / 8 becomes %t / 8 + %j * 16 and its column %l % 8 becomes %t % 8, so only
// the +%j*16 changes from one unrolled copy to the next.
// @uneven: the same copy over 96 threads: threads 0-63 make 11 trips, the others 10. It
// stays a loop.
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
  tile.kernel @copy(%x: memref<128x32xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 128 {
        %c8 = arith.constant 8 : index
        %c4 = arith.constant 4 : index
        %x_s = tile.shared_alloc {stage = "a", pad = 0 : i64} : memref<128x32xf32, 3 : i64>
        tile.for %l = %t to 1024 step 128 {
          %row = arith.divsi %l, %c8 : index
          %col = arith.remsi %l, %c8 : index
          %col4 = arith.muli %col, %c4 : index
          tile.copy_async %x_s[%row, %col4], %x[%row, %col4], 16 : memref<128x32xf32, 3 : i64>, memref<128x32xf32>
        }
        tile.async_commit
        tile.async_wait 0
      }
    }
    tile.return
  }
  tile.kernel @uneven(%x: memref<128x32xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 96 {
        %c8 = arith.constant 8 : index
        %c4 = arith.constant 4 : index
        %x_s = tile.shared_alloc {stage = "a", pad = 0 : i64} : memref<128x32xf32, 3 : i64>
        tile.for %l = %t to 1024 step 96 {
          %row = arith.divsi %l, %c8 : index
          %col = arith.remsi %l, %c8 : index
          %col4 = arith.muli %col, %c4 : index
          tile.copy_async %x_s[%row, %col4], %x[%row, %col4], 16 : memref<128x32xf32, 3 : i64>, memref<128x32xf32>
        }
        tile.async_commit
        tile.async_wait 0
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
// CHECK:             tile.for %i = %t to 64 step 32 {
// CHECK-NOT:     unroll}
// CHECK-LABEL: tile.kernel @copy(
// CHECK:             tile.for %j = %c0 to 8 {
// CHECK-NEXT:          %row_base = arith.divsi %t, %c8 : index
// CHECK-NEXT:          %0 = arith.muli %j, %c16 : index
// CHECK-NEXT:          %row = arith.addi %row_base, %0 : index
// CHECK-NEXT:          %col = arith.remsi %t, %c8 : index
// CHECK-NEXT:          %col4 = arith.muli %col, %c4 : index
// CHECK-NEXT:          tile.copy_async %x_s[%row, %col4], %x[%row, %col4], 16
// CHECK-NEXT:        } {unroll}

// CHECK-LABEL: tile.kernel @uneven(
// CHECK:             tile.for %l = %t to 1024 step 96 {
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

// strided=false leaves the thread-strided loops to nvcc.
// ROLLED-LABEL: tile.kernel @copy(
// ROLLED:             tile.for %l = %t to 1024 step 128 {
// ROLLED-NOT:     unroll}
// ROLLED-LABEL: tile.kernel @uneven(

// The mark survives convert-tile-to-kernel (on kernel.for) and becomes `#pragma unroll`.
// CUDA-LABEL: void __launch_bounds__(32) nest(
// CUDA:         #pragma unroll
// CUDA-NEXT:    for (int i = 0; i < 4; ++i) {
// CUDA:           #pragma unroll
// CUDA-NEXT:      for (int j = 0; j < 8; ++j) {
// CUDA-LABEL: void __launch_bounds__(32) strided(
// CUDA-NOT:     #pragma unroll
// CUDA:         for (int i = t; i < 64; i += 32) {
// CUDA-LABEL: void __launch_bounds__(128) copy(
// CUDA:         #pragma unroll
// CUDA-NEXT:    for (int j = 0; j < 8; ++j) {
// CUDA-NEXT:      const int row = t / 8 + j * 16;
// CUDA-NEXT:      const int col4 = t % 8 * 4;
// CUDA-NEXT:      dd_cp_async_16(&x_s[row * 32 + col4], &x[row * 32 + col4], true);
