// RUN: deplodock-opt %s -p tile-block-rows | filecheck %s

// A block does the work of `block_rows` blocks in one pass over K, so the operand every row
// reads (the GEMV's vector %x) is loaded once per trip for all of them.
// @gemv asks for 4 rows a block: the grid of 8 rows becomes 2 blocks, block %b plays rows
// %b0 = %b * 4 to %b3. The K loop carries 4 sums: it loads %x once, then each row's weights
// and multiply-add (copy r reads row %b<r>); each sum is combined and stored on its own.
// @default_tile has no schedule: its 1056 rows take the largest tile of 8, 4, 2 that leaves
// at least 264 blocks (two per SM of an H100): 4.
// @no_shared_operand (a sum of squares: every load reads the block's own row) is left
// alone: tiling it would save no read. @ragged_grid asks for 4 rows of a grid of 6: not a
// divisor, so it is untouched and records block_rows = 1.

// CHECK-LABEL: tile.kernel @gemv
// CHECK-SAME:    schedule = {block_rows = 4 : i64}
// CHECK:         tile.grid %b to 2 {
// CHECK:           %b0 = arith.muli %b, %c4 : index
// CHECK-NEXT:      %b1 = arith.addi %b0, %c1 : index
// CHECK-NEXT:      %b2 = arith.addi %b0, %c2 : index
// CHECK-NEXT:      %b3 = arith.addi %b0, %c3 : index
// CHECK:           %p, %p_1, %p_2, %p_3 = tile.for %k = %t to 512 step 64 iter_args(%acc = %zero, %acc_1 = %zero, %acc_2 = %zero, %acc_3 = %zero) -> (f32, f32, f32, f32) {
// CHECK-NEXT:        %xv = tile.load %x[%c0, %k] : memref<1x512xf32>
// CHECK-NEXT:        %wv = tile.load %w[%b0, %k] : memref<8x512xf32>
// CHECK-NEXT:        %wv_1 = tile.load %w[%b1, %k] : memref<8x512xf32>
// CHECK-NEXT:        %wv_2 = tile.load %w[%b2, %k] : memref<8x512xf32>
// CHECK-NEXT:        %wv_3 = tile.load %w[%b3, %k] : memref<8x512xf32>
// CHECK-NEXT:        %m = arith.mulf %xv, %wv : f32
// CHECK:             %a_3 = arith.addf %acc_3, %m_3 : f32
// CHECK-NEXT:        tile.yield %a, %a_1, %a_2, %a_3 : f32, f32, f32, f32
// CHECK-NEXT:      }
// CHECK-NEXT:      %s = tile.combine add %p : f32
// CHECK:           %s_3 = tile.combine add %p_3 : f32
// CHECK:           tile.store %s, %y[%c0, %b0] : memref<1x8xf32>
// CHECK:           tile.store %s_3, %y[%c0, %b3] : memref<1x8xf32>

// CHECK-LABEL: tile.kernel @default_tile
// CHECK-SAME:    schedule = {block_rows = 4 : i64}
// CHECK:         tile.grid %b to 264 {

// CHECK-LABEL: tile.kernel @no_shared_operand
// CHECK-NOT:     block_rows
// CHECK:         tile.grid %b to 8 {

// CHECK-LABEL: tile.kernel @ragged_grid
// CHECK-SAME:    schedule = {block_rows = 1 : i64}
// CHECK:         tile.grid %b to 6 {
// CHECK:           tile.load %w[%b, %k]

builtin.module {
  tile.kernel @gemv(%x: memref<1x512xf32>, %w: memref<8x512xf32>, %y: memref<1x8xf32>) attributes {schedule = {block_rows = 4 : i64}} {
    tile.grid %b to 8 {
      tile.threads %t to 64 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %p = tile.for %k = %t to 512 step 64 iter_args(%acc = %zero) -> (f32) {
          %xv = tile.load %x[%c0, %k] : memref<1x512xf32>
          %wv = tile.load %w[%b, %k] : memref<8x512xf32>
          %m = arith.mulf %xv, %wv : f32
          %a = arith.addf %acc, %m : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p : f32
        tile.store %s, %y[%c0, %b] : memref<1x8xf32>
      }
    }
    tile.return
  }
  tile.kernel @default_tile(%x: memref<1x64xf32>, %w: memref<1056x64xf32>, %y: memref<1x1056xf32>) {
    tile.grid %b to 1056 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %p = tile.for %k = %t to 64 step 32 iter_args(%acc = %zero) -> (f32) {
          %xv = tile.load %x[%c0, %k] : memref<1x64xf32>
          %wv = tile.load %w[%b, %k] : memref<1056x64xf32>
          %m = arith.mulf %xv, %wv : f32
          %a = arith.addf %acc, %m : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p : f32
        tile.store %s, %y[%c0, %b] : memref<1x1056xf32>
      }
    }
    tile.return
  }
  tile.kernel @no_shared_operand(%x: memref<8x128xf32>, %y: memref<8xf32>) {
    tile.grid %b to 8 {
      tile.threads %t to 32 {
        %zero = arith.constant 0.000000e+00 : f32
        %p = tile.for %k = %t to 128 step 32 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%b, %k] : memref<8x128xf32>
          %sq = arith.mulf %v, %v : f32
          %a = arith.addf %acc, %sq : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p : f32
        tile.store %s, %y[%b] : memref<8xf32>
      }
    }
    tile.return
  }
  tile.kernel @ragged_grid(%x: memref<1x512xf32>, %w: memref<6x512xf32>, %y: memref<1x6xf32>) attributes {schedule = {block_rows = 4 : i64}} {
    tile.grid %b to 6 {
      tile.threads %t to 64 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %p = tile.for %k = %t to 512 step 64 iter_args(%acc = %zero) -> (f32) {
          %xv = tile.load %x[%c0, %k] : memref<1x512xf32>
          %wv = tile.load %w[%b, %k] : memref<6x512xf32>
          %m = arith.mulf %xv, %wv : f32
          %a = arith.addf %acc, %m : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p : f32
        tile.store %s, %y[%c0, %b] : memref<1x6xf32>
      }
    }
    tile.return
  }
}
