// RUN: deplodock-opt %s -p tile-vectorize-rows | filecheck %s

// A group's strided row reduction reads `row_vector` consecutive elements per load.
// @gemv is one row of a bf16 GEMV per warp (as tile-rows leaves it: lane %t % 32, the row
// from the block and the warp): 512 = 2 x 32 lanes x 8, so each lane reads 8 bf16 of x and
// of its weight row as one 16-byte `tile.load_vector` per trip, from element %lane * 8 on,
// and the loop steps 256. The body is repeated once per element, each copy adding to the
// sum the one before left (%a, %a_1, ... %a_7): the same sum, in the same order per lane.
// @sum_of_squares asks for 2 on its schedule (a tuned or replayed knob wins over the
// widest, which would be 4 floats). @ragged_rows has rows of 100, not a multiple of
// 32 lanes x 4: lanes 0 to 24 read 4 floats each, the others none (the bound stops them).
// @odd_rows has rows of 99, a multiple of no width: it stays scalar, row_vector = 1.

// CHECK-LABEL: tile.kernel @gemv
// CHECK-SAME:    schedule = {row_vector = 8 : i64}
// CHECK:         %lane8 = arith.muli %lane, %c8 : index
// CHECK:         tile.for %k = %lane8 to 512 step 256 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:      %xv, %xv_1, %xv_2, %xv_3, %xv_4, %xv_5, %xv_6, %xv_7 = tile.load_vector %x[%c0, %k] width 8
// CHECK-NEXT:      %wv, %wv_1, %wv_2, %wv_3, %wv_4, %wv_5, %wv_6, %wv_7 = tile.load_vector %w[%row, %k] width 8
// CHECK:           %a = arith.addf %acc, %m : f32
// CHECK:           %m_1 = arith.mulf %xf_1, %wf_1 : f32
// CHECK-NEXT:      %a_1 = arith.addf %a, %m_1 : f32
// CHECK:           %a_7 = arith.addf %a_6, %m_7 : f32
// CHECK-NEXT:      tile.yield %a_7 : f32
// CHECK:         tile.combine add %p width 32 : f32

// CHECK-LABEL: tile.kernel @sum_of_squares
// CHECK-SAME:    schedule = {row_vector = 2 : i64}
// CHECK:         tile.for %k = %t2 to 128 step 64
// CHECK-NEXT:      %v, %v_1 = tile.load_vector %x[%b, %k] width 2 : memref<8x128xf32>
// CHECK-NEXT:      %sq = arith.mulf %v, %v : f32
// CHECK-NEXT:      %a = arith.addf %acc, %sq : f32
// CHECK-NEXT:      %sq_1 = arith.mulf %v_1, %v_1 : f32
// CHECK-NEXT:      %a_1 = arith.addf %a, %sq_1 : f32
// CHECK-NEXT:      tile.yield %a_1 : f32

// CHECK-LABEL: tile.kernel @ragged_rows
// CHECK-SAME:    schedule = {row_vector = 4 : i64}
// CHECK:         tile.for %k = %t4 to 100 step 128
// CHECK-NEXT:      tile.load_vector %x[%b, %k] width 4 : memref<8x100xf32>

// CHECK-LABEL: tile.kernel @odd_rows
// CHECK-SAME:    schedule = {row_vector = 1 : i64}
// CHECK:         tile.for %k = %t to 99 step 32
// CHECK-NEXT:      tile.load %x[%b, %k]

builtin.module {
  tile.kernel @gemv(%x: memref<1x512xbf16>, %w: memref<64x512xbf16>, %y: memref<1x64xbf16>) {
    tile.grid %b to 32 {
      tile.threads %t to 64 {
        %c0 = arith.constant 0 : index
        %c32 = arith.constant 32 : index
        %c2 = arith.constant 2 : index
        %zero = arith.constant 0.000000e+00 : f32
        %group = arith.floordivsi %t, %c32 : index
        %lane = arith.remsi %t, %c32 : index
        %0 = arith.muli %b, %c2 : index
        %row = arith.addi %0, %group : index
        %is_lead = arith.cmpi eq, %lane, %c0 : index
        %p = tile.for %k = %lane to 512 step 32 iter_args(%acc = %zero) -> (f32) {
          %xv = tile.load %x[%c0, %k] : memref<1x512xbf16>
          %wv = tile.load %w[%row, %k] : memref<64x512xbf16>
          %xf = arith.extf %xv : bf16 to f32
          %wf = arith.extf %wv : bf16 to f32
          %m = arith.mulf %xf, %wf : f32
          %a = arith.addf %acc, %m : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p width 32 : f32
        %o = arith.truncf %s : f32 to bf16
        tile.if %is_lead {
          tile.store %o, %y[%c0, %row] : memref<1x64xbf16>
        }
      }
    }
    tile.return
  }
  tile.kernel @sum_of_squares(%x: memref<8x128xf32>, %y: memref<8xf32>) attributes {schedule = {row_vector = 2 : i64}} {
    tile.grid %b to 8 {
      tile.threads %t to 32 {
        %zero = arith.constant 0.000000e+00 : f32
        %c0 = arith.constant 0 : index
        %p = tile.for %k = %t to 128 step 32 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%b, %k] : memref<8x128xf32>
          %sq = arith.mulf %v, %v : f32
          %a = arith.addf %acc, %sq : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p : f32
        %lead = arith.cmpi eq, %t, %c0 : index
        tile.if %lead {
          tile.store %s, %y[%b] : memref<8xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @ragged_rows(%x: memref<8x100xf32>, %y: memref<8xf32>) {
    tile.grid %b to 8 {
      tile.threads %t to 32 {
        %zero = arith.constant 0.000000e+00 : f32
        %c0 = arith.constant 0 : index
        %p = tile.for %k = %t to 100 step 32 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%b, %k] : memref<8x100xf32>
          %a = arith.addf %acc, %v : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p : f32
        %lead = arith.cmpi eq, %t, %c0 : index
        tile.if %lead {
          tile.store %s, %y[%b] : memref<8xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @odd_rows(%x: memref<8x99xf32>, %y: memref<8xf32>) {
    tile.grid %b to 8 {
      tile.threads %t to 32 {
        %zero = arith.constant 0.000000e+00 : f32
        %c0 = arith.constant 0 : index
        %p = tile.for %k = %t to 99 step 32 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%b, %k] : memref<8x99xf32>
          %a = arith.addf %acc, %v : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p : f32
        %lead = arith.cmpi eq, %t, %c0 : index
        tile.if %lead {
          tile.store %s, %y[%b] : memref<8xf32>
        }
      }
    }
    tile.return
  }
}
