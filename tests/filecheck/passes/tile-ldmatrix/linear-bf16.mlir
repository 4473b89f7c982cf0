// RUN: deplodock-opt %s -p tile-ldmatrix | filecheck %s
// RUN: deplodock-opt %s -p tile-ldmatrix,tile-ldmatrix | filecheck %s
// RUN: deplodock-opt %s -p 'tile-ldmatrix{ldmatrix=0}' | filecheck %s --check-prefix=OFF

// The bf16 linear of tile-mma/linear-bf16.mlir after `tile-mma`: one warp, one 16 x 8 MMA
// tile, both slabs stored along K (`x0_a_s[m][k]`, `weight_b_s[n][k]`). The four pairs of
// A become one `ldmatrix ... x4`: lane t points at row t % 16 of the tile (register 0's row
// %mm is g, so the row is %mm + (t % 16 - g)) and at k column 8 (t / 16) (register 0's is
// %kq = ki + 2q, so %kq + (8 (t / 16) - 2q)). The two pairs of B become an x2: row t % 8 of
// the 8 weight rows (%bcol is g), k column 8 ((t / 8) % 2). The lane terms are computed
// once, outside the K loops; the MMA takes the fragments in register order. Applied once:
// a second run finds no fragment loads left. With `ldmatrix=0` the pairs stay.

// CHECK:      schedule = {{{.*}}stage = 3 : i64, ldmatrix = 1 : i64}
// CHECK:      %ldm_k_hi16 = arith.subi %ldm_hi16, %ldm_quad2 : index
// CHECK:      %ldm_l16 = arith.remsi %lane_1, %c16 : index
// CHECK-NEXT: %ldm_group = arith.divsi %lane_1, %c4 : index
// CHECK-NEXT: %ldm_mn_l16 = arith.subi %ldm_l16, %ldm_group : index
// CHECK:      %ldm_k_mid8 = arith.subi %ldm_mid8, %ldm_quad2 : index
// CHECK-NEXT: %ldm_l8 = arith.remsi %lane_1, %c8 : index
// CHECK-NEXT: %ldm_mn_l8 = arith.subi %ldm_l8, %ldm_group : index
// CHECK:      tile.for %ki = %c0 to 16 step 16
// CHECK-NEXT:   %kq = arith.addi %ki, %quad2 : index
// CHECK-NEXT:   %[[AK:.*]] = arith.addi %kq, %ldm_k_hi16 : index
// CHECK-NEXT:   %[[AM:.*]] = arith.addi %mm, %ldm_mn_l16 : index
// CHECK-NEXT:   %[[A0:.*]], %[[A1:.*]], %[[A2:.*]], %[[A3:.*]], %[[A4:.*]], %[[A5:.*]], %[[A6:.*]], %[[A7:.*]] = tile.ldmatrix %x0_a_s[%[[AM]], %[[AK]]] x4 : memref<16x16xbf16, 3 : i64>
// CHECK-NEXT:   %[[BK:.*]] = arith.addi %kq, %ldm_k_mid8 : index
// CHECK-NEXT:   %[[BN:.*]] = arith.addi %bcol, %ldm_mn_l8 : index
// CHECK-NEXT:   %[[B0:.*]], %[[B1:.*]], %[[B2:.*]], %[[B3:.*]] = tile.ldmatrix %p_0_weight_b_s[%[[BN]], %[[BK]]] x2 : memref<8x16xbf16, 3 : i64>
// CHECK-NEXT:   tile.mma_sync a(%[[A0]], %[[A1]], %[[A2]], %[[A3]], %[[A4]], %[[A5]], %[[A6]], %[[A7]]) b(%[[B0]], %[[B1]], %[[B2]], %[[B3]])
// CHECK-NOT:  tile.load_vector

// OFF:        ldmatrix = 0 : i64
// OFF-NOT:    tile.ldmatrix
// OFF:        tile.load_vector %x0_a_s[%mm, %kq] width 2
// OFF-NOT:    tile.ldmatrix

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<32x32xbf16>, %p_0_weight: memref<16x32xbf16>, %linear: memref<32x16xbf16>) attributes {schedule = {bm = 16 : i64, bn = 8 : i64, group = 8 : i64, fm = 2 : i64, fn = 2 : i64, mma = 1 : i64, threads = 32 : i64, bk = 16 : i64, stage = 3 : i64}} {
    tile.grid %b to 4 {
      %m0, %n0 = tile.block_tile %b counts [2, 2] sizes [16, 8] group 8
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %c16 = arith.constant 16 : index
        %c32 = arith.constant 32 : index
        %c4 = arith.constant 4 : index
        %c2 = arith.constant 2 : index
        %c8 = arith.constant 8 : index
        %p_0_weight_b_s = tile.shared_alloc {stage = "b"} : memref<8x16xbf16, 3 : i64>
        %x0_a_s = tile.shared_alloc {stage = "a"} : memref<16x16xbf16, 3 : i64>
        %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 4] cells 2 mma
        %nn, %nn_1 = tile.thread_tile %t dim 1 of [8, 4] cells 2 mma
        %lane = arith.remsi %t, %c32 : index
        %group = arith.divsi %lane, %c4 : index
        %quad = arith.remsi %lane, %c4 : index
        %quad2 = arith.muli %quad, %c2 : index
        %0 = arith.subi %nn, %quad2 : index
        %bcol = arith.addi %0, %group : index
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
          %1, %2, %3, %4 = tile.for %ki = %c0 to 16 step 16 iter_args(%5 = %acc, %6 = %acc_1, %7 = %acc_2, %8 = %acc_3) -> (f32, f32, f32, f32) {
            %kq = arith.addi %ki, %quad2 : index
            %kq8 = arith.addi %kq, %c8 : index
            %9, %10 = tile.load_vector %x0_a_s[%mm, %kq] width 2 : memref<16x16xbf16, 3 : i64>
            %11, %12 = tile.load_vector %x0_a_s[%mm_1, %kq] width 2 : memref<16x16xbf16, 3 : i64>
            %13, %14 = tile.load_vector %x0_a_s[%mm, %kq8] width 2 : memref<16x16xbf16, 3 : i64>
            %15, %16 = tile.load_vector %x0_a_s[%mm_1, %kq8] width 2 : memref<16x16xbf16, 3 : i64>
            %17, %18 = tile.load_vector %p_0_weight_b_s[%bcol, %kq] width 2 : memref<8x16xbf16, 3 : i64>
            %19, %20 = tile.load_vector %p_0_weight_b_s[%bcol, %kq8] width 2 : memref<8x16xbf16, 3 : i64>
            %d, %d_1, %d_2, %d_3 = tile.mma_sync a(%9, %10, %11, %12, %13, %14, %15, %16) b(%17, %18, %19, %20) c(%5, %6, %7, %8) : bf16
            tile.yield %d, %d_1, %d_2, %d_3 : f32, f32, f32, f32
          }
          tile.barrier
          tile.yield %1, %2, %3, %4 : f32, f32, f32, f32
        }
        %21 = arith.truncf %add : f32 to bf16
        %22 = arith.truncf %add_1 : f32 to bf16
        %23 = arith.truncf %add_2 : f32 to bf16
        %24 = arith.truncf %add_3 : f32 to bf16
        tile.store %21, %linear[%m, %n] : memref<32x16xbf16>
        tile.store %22, %linear[%m, %n_1] : memref<32x16xbf16>
        tile.store %23, %linear[%m_1, %n] : memref<32x16xbf16>
        tile.store %24, %linear[%m_1, %n_1] : memref<32x16xbf16>
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

