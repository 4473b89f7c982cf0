// RUN: deplodock-opt %s -p "tile-rows{min_blocks=1}" | filecheck %s

// Short rows, several per block. @row_sum sums 10 rows of 100: a warp per row (W = 32,
// `row_threads`) and 8 rows per block (`rows_per_block`), so 2 blocks of 256 threads.
// Thread %t works on row %b * 8 + %t / 32 at lane %t % 32; 10 is not a multiple of 8, so
// the row is clamped (%row_in, loads stay in bounds) and stores are guarded (%in_rows).
// The reduction is strided over the group's lanes and combined over aligned groups of 32
// threads (`width 32`); its result, held by all 32 lanes, is stored by lane 0 only.
// @rms_norm has 16 rows of 7: 8 threads per row (a power of two under a warp), 32 rows
// per block would give one block of 256 with half idle, so 16 rows -> 128 threads. The
// rows fill the block exactly and every store is in the strided loop: no guard at all.
// @long_rows has rows of 8192 (256 threads per row = a whole block): left alone for
// tile-rows-to-blocks.

builtin.module {
  tile.kernel @row_sum(%x: memref<10x100xf32>, %y: memref<10xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        tile.for %i = %c0 to 10 {
          %sum = tile.for %k = %c0 to 100 iter_args(%acc = %zero) -> (f32) {
            %v = tile.load %x[%i, %k] : memref<10x100xf32>
            %a = arith.addf %acc, %v : f32
            tile.yield %a : f32
          }
          tile.store %sum, %y[%i] : memref<10xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @rms_norm(%x: memref<16x7xf32>, %y: memref<16x7xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %n = arith.constant 7.000000e+00 : f32
        tile.for %i = %c0 to 16 {
          %ss = tile.for %k = %c0 to 7 iter_args(%acc = %zero) -> (f32) {
            %v = tile.load %x[%i, %k] : memref<16x7xf32>
            %sq = arith.mulf %v, %v : f32
            %a = arith.addf %acc, %sq : f32
            tile.yield %a : f32
          }
          %mean = arith.divf %ss, %n : f32
          %r = math.rsqrt %mean : f32
          tile.for %j = %c0 to 7 {
            %xv = tile.load %x[%i, %j] : memref<16x7xf32>
            %o = arith.mulf %xv, %r : f32
            tile.store %o, %y[%i, %j] : memref<16x7xf32>
          }
        }
      }
    }
    tile.return
  }
  tile.kernel @long_rows(%x: memref<4x8192xf32>, %y: memref<4xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        tile.for %i = %c0 to 4 {
          %sum = tile.for %k = %c0 to 8192 iter_args(%acc = %zero) -> (f32) {
            %v = tile.load %x[%i, %k] : memref<4x8192xf32>
            %a = arith.addf %acc, %v : f32
            tile.yield %a : f32
          }
          tile.store %sum, %y[%i] : memref<4xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @row_sum(
// CHECK-SAME:    schedule = {row_threads = 32 : i64, rows_per_block = 8 : i64, threads = 256 : i64}
// CHECK:         tile.grid %b to 2 {
// CHECK-NEXT:      tile.threads %t to 256 {
// CHECK:             %group = arith.floordivsi %t, %c32 : index
// CHECK-NEXT:        %lane = arith.remsi %t, %c32 : index
// CHECK-NEXT:        %[[B8:.*]] = arith.muli %b, %c8 : index
// CHECK-NEXT:        %row = arith.addi %[[B8]], %group : index
// CHECK-NEXT:        %in_rows = arith.cmpi slt, %row, %c10 : index
// CHECK-NEXT:        %row_in = arith.minsi %row, %c9 : index
// CHECK-NEXT:        %is_lead = arith.cmpi eq, %lane, %c0 : index
// CHECK-NEXT:        %lead_in_rows = arith.andi %is_lead, %in_rows : i1
// CHECK-NEXT:        %sum_p = tile.for %k = %lane to 100 step 32 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:          %v = tile.load %x[%row_in, %k] : memref<10x100xf32>
// CHECK:             %sum = tile.combine add %sum_p width 32 : f32
// CHECK-NEXT:        tile.if %lead_in_rows {
// CHECK-NEXT:          tile.store %sum, %y[%row_in] : memref<10xf32>
// CHECK-NEXT:        }

// CHECK-LABEL: tile.kernel @rms_norm(
// CHECK-SAME:    schedule = {row_threads = 8 : i64, rows_per_block = 16 : i64, threads = 128 : i64}
// CHECK:         tile.grid %b to 1 {
// CHECK-NEXT:      tile.threads %t to 128 {
// CHECK:             %ss_p = tile.for %k = %lane to 7 step 8
// CHECK:             %ss = tile.combine add %ss_p width 8 : f32
// CHECK:             tile.for %j = %lane to 7 step 8 {
// CHECK-NEXT:          %xv = tile.load %x[%row, %j] : memref<16x7xf32>
// CHECK-NEXT:          %o = arith.mulf %xv, %r : f32
// CHECK-NEXT:          tile.store %o, %y[%row, %j] : memref<16x7xf32>
// CHECK-NEXT:        }

// CHECK-LABEL: tile.kernel @long_rows(
// CHECK-NOT:     schedule
// CHECK:         tile.grid %b to 1 {
// CHECK-NEXT:      tile.threads %t to 32 {
// CHECK:             tile.for %i = %c0 to 4 {
