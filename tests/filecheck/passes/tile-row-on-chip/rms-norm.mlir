// RUN: deplodock-opt %s -p tile-row-on-chip | filecheck %s

// RMSNorm sweeps its row twice: the sum of squares (%ss_p), then the normalization. Both
// sweeps run %k = %t to 200 step 128 (the same elements per thread), and both load %x at
// [%b, k]: the row is reread from global memory.
//
// @in_registers: 200 / 128 -> 2 cells a thread (<= 16), so `row_on_chip = 1`: both sweeps
// are unrolled into cells %k0 = %t and %k1 = %t + 128; cell 1 exists only for threads
// < 72, so its index is clamped (%in1) and it is masked (select in the reduction, tile.if
// around the store). The second sweep reuses %v and %v_1 from the first: two loads of %x
// per thread in all, instead of four.
//
// @in_shared: the schedule asks for `row_on_chip = 2`: a shared row buffer %row (one row
// per block, 1 x 200); the first sweep stores what it loads, the second loads from %row.
// Each thread reads back only what it wrote (same start and step), so no tile.barrier.

builtin.module {
  tile.kernel @in_registers(%x: memref<3x200xf32>, %y: memref<3x200xf32>) {
    tile.grid %b to 3 {
      tile.threads %t to 128 {
        %zero = arith.constant 0.000000e+00 : f32
        %ss_p = tile.for %k = %t to 200 step 128 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%b, %k] : memref<3x200xf32>
          %sq = arith.mulf %v, %v : f32
          %a = arith.addf %acc, %sq : f32
          tile.yield %a : f32
        }
        %ss = tile.combine add %ss_p : f32
        %r = math.rsqrt %ss : f32
        tile.for %j = %t to 200 step 128 {
          %xv = tile.load %x[%b, %j] : memref<3x200xf32>
          %o = arith.mulf %xv, %r : f32
          tile.store %o, %y[%b, %j] : memref<3x200xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @in_shared(%x: memref<3x200xf32>, %y: memref<3x200xf32>) attributes {schedule = {row_on_chip = 2 : i64}} {
    tile.grid %b to 3 {
      tile.threads %t to 128 {
        %zero = arith.constant 0.000000e+00 : f32
        %ss_p = tile.for %k = %t to 200 step 128 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%b, %k] : memref<3x200xf32>
          %sq = arith.mulf %v, %v : f32
          %a = arith.addf %acc, %sq : f32
          tile.yield %a : f32
        }
        %ss = tile.combine add %ss_p : f32
        %r = math.rsqrt %ss : f32
        tile.for %j = %t to 200 step 128 {
          %xv = tile.load %x[%b, %j] : memref<3x200xf32>
          %o = arith.mulf %xv, %r : f32
          tile.store %o, %y[%b, %j] : memref<3x200xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @in_registers(
// CHECK-SAME:    schedule = {row_on_chip = 1 : i64}
// CHECK:         %k1 = arith.addi %t, %c128 : index
// CHECK-NEXT:    %has1 = arith.cmpi slt, %k1, %c200 : index
// CHECK-NEXT:    %in1 = arith.minsi %k1, %c199 : index
// CHECK-NEXT:    %v = tile.load %x[%b, %t] : memref<3x200xf32>
// CHECK:         %v_1 = tile.load %x[%b, %in1] : memref<3x200xf32>
// CHECK:         %ss_p = arith.select %has1, %a_1, %a : f32
// CHECK-NEXT:    %ss = tile.combine add %ss_p : f32
// CHECK-NOT:     tile.load %x
// CHECK:         %o = arith.mulf %v, %r : f32
// CHECK-NEXT:    tile.store %o, %y[%b, %t] : memref<3x200xf32>
// CHECK-NEXT:    tile.if %has1 {
// CHECK-NEXT:      %o_1 = arith.mulf %v_1, %r : f32
// CHECK-NEXT:      tile.store %o_1, %y[%b, %in1] : memref<3x200xf32>
// CHECK-NEXT:    }
// CHECK-NOT:     tile.for

// CHECK-LABEL: tile.kernel @in_shared(
// CHECK:         %row = tile.shared_alloc : memref<1x200xf32, 3 : i64>
// CHECK:         %ss_p = tile.for %k = %t to 200 step 128
// CHECK-NEXT:      %v = tile.load %x[%b, %k] : memref<3x200xf32>
// CHECK-NEXT:      tile.store %v, %row[%c0, %k] : memref<1x200xf32, 3 : i64>
// CHECK:         %ss = tile.combine add %ss_p : f32
// CHECK-NOT:     tile.barrier
// CHECK:         tile.for %j = %t to 200 step 128 {
// CHECK-NEXT:      %xv = tile.load %row[%c0, %j] : memref<1x200xf32, 3 : i64>
// CHECK-NOT:     tile.load %x
