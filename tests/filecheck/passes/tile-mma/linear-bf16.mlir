// RUN: deplodock-opt %s -p tile-mma | filecheck %s
// RUN: deplodock-opt %s -p tile-mma,tile-mma | filecheck %s

// One warp owns a 16 x 8 tile of a bf16 linear (`tile-thread{fm=2 fn=2 mma=1}`): lane l
// holds the cells of rows g, g + 8 and columns 2q, 2q + 1 (g = l / 4, q = l % 4), which is
// where mma.sync m16n8k16 leaves its C fragment. The K chunk (16) becomes one MMA: the lane
// loads its A fragment (rows %mm and %mm_1, k pairs at 2q and 2q + 8) and its B fragment
// (weight row 8j + g: %bcol, the same k pairs) as 32-bit pairs, and the four accumulators go
// through the MMA in fragment order (c0 = row g col 2q, c1 = col 2q + 1, c2, c3 = row g + 8).
// The rewritten loop no longer matches: running the pass twice changes nothing.

// CHECK:      %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 4] cells 2 mma
// CHECK-NEXT: %nn, %nn_1 = tile.thread_tile %t dim 1 of [8, 4] cells 2 mma
// CHECK-NEXT: %lane = arith.remsi %t, %c32 : index
// CHECK-NEXT: %group = arith.divsi %lane, %c4 : index
// CHECK-NEXT: %quad = arith.remsi %lane, %c4 : index
// CHECK-NEXT: %quad2 = arith.muli %quad, %c2 : index
// CHECK-NEXT: %[[W:.*]] = arith.subi %nn, %quad2 : index
// CHECK-NEXT: %bcol = arith.addi %[[W]], %group : index
// CHECK:      tile.barrier
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = tile.for %ki = %c0 to 16 step 16 iter_args(%[[C0:.*]] = %acc, %[[C1:.*]] = %acc_1, %[[C2:.*]] = %acc_2, %[[C3:.*]] = %acc_3)
// CHECK-NEXT:   %kq = arith.addi %ki, %quad2 : index
// CHECK-NEXT:   %kq8 = arith.addi %kq, %c8 : index
// CHECK-NEXT:   %[[A0:.*]], %[[A1:.*]] = tile.load_vector %x0_a_s[%mm, %kq] width 2
// CHECK-NEXT:   %[[A2:.*]], %[[A3:.*]] = tile.load_vector %x0_a_s[%mm_1, %kq] width 2
// CHECK-NEXT:   %[[A4:.*]], %[[A5:.*]] = tile.load_vector %x0_a_s[%mm, %kq8] width 2
// CHECK-NEXT:   %[[A6:.*]], %[[A7:.*]] = tile.load_vector %x0_a_s[%mm_1, %kq8] width 2
// CHECK-NEXT:   %[[B0:.*]], %[[B1:.*]] = tile.load_vector %p_0_weight_b_s[%bcol, %kq] width 2
// CHECK-NEXT:   %[[B2:.*]], %[[B3:.*]] = tile.load_vector %p_0_weight_b_s[%bcol, %kq8] width 2
// CHECK-NEXT:   %d, %d_1, %d_2, %d_3 = tile.mma_sync a(%[[A0]], %[[A1]], %[[A2]], %[[A3]], %[[A4]], %[[A5]], %[[A6]], %[[A7]]) b(%[[B0]], %[[B1]], %[[B2]], %[[B3]]) c(%[[C0]], %[[C1]], %[[C2]], %[[C3]]) : bf16
// CHECK-NEXT:   tile.yield %d, %d_1, %d_2, %d_3 : f32, f32, f32, f32
// CHECK-NOT:  arith.mulf
// CHECK:      tile.store

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<32x32xbf16>, %p_0_weight: memref<16x32xbf16>, %linear: memref<32x16xbf16>) attributes {schedule = {bm = 16 : i64, bn = 8 : i64, group = 8 : i64, fm = 2 : i64, fn = 2 : i64, mma = 1 : i64, threads = 32 : i64, bk = 16 : i64, stage = 3 : i64}} {
    tile.grid %b to 4 {
      %m0, %n0 = tile.block_tile %b counts [2, 2] sizes [16, 8] group 8
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %c16 = arith.constant 16 : index
        %p_0_weight_b_s = tile.shared_alloc {stage = "b"} : memref<8x16xbf16, 3 : i64>
        %x0_a_s = tile.shared_alloc {stage = "a"} : memref<16x16xbf16, 3 : i64>
        %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 4] cells 2 mma
        %nn, %nn_1 = tile.thread_tile %t dim 1 of [8, 4] cells 2 mma
        %m = arith.addi %m0, %mm : index
        %m_1 = arith.addi %m0, %mm_1 : index
        %n = arith.addi %n0, %nn : index
        %n_1 = arith.addi %n0, %nn_1 : index
        %add, %add_1, %add_2, %add_3 = tile.for %ko = %c0 to 32 step 16 iter_args(%acc = %init, %acc_1 = %init, %acc_2 = %init, %acc_3 = %init) -> (f32, f32, f32, f32) {
          tile.for %l = %t to 256 step 32 {
            %row = arith.divsi %l, %c16 : index
            %col = arith.remsi %l, %c16 : index
            %m_2 = arith.addi %m0, %row : index
            %r1 = arith.addi %ko, %col : index
            %x0_v = tile.load %x0[%m_2, %r1] : memref<32x32xbf16>
            tile.store %x0_v, %x0_a_s[%row, %col] : memref<16x16xbf16, 3 : i64>
          }
          tile.for %l_1 = %t to 128 step 32 {
            %row_1 = arith.divsi %l_1, %c16 : index
            %col_1 = arith.remsi %l_1, %c16 : index
            %n_2 = arith.addi %n0, %row_1 : index
            %r1_1 = arith.addi %ko, %col_1 : index
            %p_0_weight_v = tile.load %p_0_weight[%n_2, %r1_1] : memref<16x32xbf16>
            tile.store %p_0_weight_v, %p_0_weight_b_s[%row_1, %col_1] : memref<8x16xbf16, 3 : i64>
          }
          tile.barrier
          %0, %1, %2, %3 = tile.for %ki = %c0 to 16 iter_args(%acc_4 = %acc, %acc_5 = %acc_1, %acc_6 = %acc_2, %acc_7 = %acc_3) -> (f32, f32, f32, f32) {
            %4 = tile.load %x0_a_s[%mm, %ki] : memref<16x16xbf16, 3 : i64>
            %5 = tile.load %x0_a_s[%mm_1, %ki] : memref<16x16xbf16, 3 : i64>
            %6 = tile.load %p_0_weight_b_s[%nn, %ki] : memref<8x16xbf16, 3 : i64>
            %7 = tile.load %p_0_weight_b_s[%nn_1, %ki] : memref<8x16xbf16, 3 : i64>
            %8 = arith.extf %4 : bf16 to f32
            %9 = arith.extf %5 : bf16 to f32
            %10 = arith.extf %6 : bf16 to f32
            %11 = arith.extf %7 : bf16 to f32
            %12 = arith.mulf %8, %10 : f32
            %13 = arith.mulf %8, %11 : f32
            %14 = arith.mulf %9, %10 : f32
            %15 = arith.mulf %9, %11 : f32
            %16 = arith.addf %acc_4, %12 : f32
            %17 = arith.addf %acc_5, %13 : f32
            %18 = arith.addf %acc_6, %14 : f32
            %19 = arith.addf %acc_7, %15 : f32
            tile.yield %16, %17, %18, %19 : f32, f32, f32, f32
          }
          tile.barrier
          tile.yield %0, %1, %2, %3 : f32, f32, f32, f32
        }
        %20 = arith.truncf %add : f32 to bf16
        %21 = arith.truncf %add_1 : f32 to bf16
        %22 = arith.truncf %add_2 : f32 to bf16
        %23 = arith.truncf %add_3 : f32 to bf16
        tile.store %20, %linear[%m, %n] : memref<32x16xbf16>
        tile.store %21, %linear[%m, %n_1] : memref<32x16xbf16>
        tile.store %22, %linear[%m_1, %n] : memref<32x16xbf16>
        tile.store %23, %linear[%m_1, %n_1] : memref<32x16xbf16>
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<32x32xbf16> {deplodock.input = "x0"}, %p_0_weight: memref<16x32xbf16> {deplodock.param = "0.weight"}) -> memref<32x16xbf16> {
    %linear = tile.alloc : memref<32x16xbf16>
    tile.launch @linear_kernel(%x0, %p_0_weight, %linear) : (memref<32x32xbf16>, memref<16x32xbf16>, memref<32x16xbf16>) -> ()
    func.return %linear : memref<32x16xbf16>
  }
}

