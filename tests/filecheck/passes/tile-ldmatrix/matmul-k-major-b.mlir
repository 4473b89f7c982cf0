// RUN: deplodock-opt %s -p tile-ldmatrix | filecheck %s

// `x0 @ x1` in bf16 with x1 stored K x N: `tile-stage` keeps its slab `x1_b_s[k][n]`, so
// the B fragment's k pairs are two elements one row apart (`tile-mma` reads them one at a
// time). N is the contiguous axis: the x2 is transposed. Lane t points at k row t % 16 of
// the chunk (%kq is ki + 2q: %kq + (t % 16 - 2q)) and at the tile's first column (%bcol is
// g: %bcol - g); `.trans` hands lane l rows 2 (l % 4) and + 1 of column l / 4, which is
// b0..b3. A is still stored along K: an untransposed x4. The single loads and their k + 1
// index math go away.

// CHECK:      %ldm_k_l16 = arith.subi %ldm_l16, %ldm_quad2 : index
// CHECK-NEXT: %ldm_mn_origin = arith.subi %c0, %ldm_group : index
// CHECK:      tile.ldmatrix %x0_a_s[%{{.*}}, %{{.*}}] x4 : memref<16x16xbf16, 3 : i64>
// CHECK-NEXT: %[[BK:.*]] = arith.addi %kq, %ldm_k_l16 : index
// CHECK-NEXT: %[[BN:.*]] = arith.addi %bcol, %ldm_mn_origin : index
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = tile.ldmatrix %x1_b_s[%[[BK]], %[[BN]]] x2 trans : memref<16x8xbf16, 3 : i64>
// CHECK-NEXT: tile.mma_sync
// CHECK-NOT:  tile.load %x1_b_s

builtin.module {
  tile.kernel @matmul_kernel(%x0: memref<16x32xbf16>, %x1: memref<32x8xbf16>, %matmul: memref<16x8xbf16>) attributes {schedule = {bm = 16 : i64, bn = 8 : i64, group = 8 : i64, fm = 2 : i64, fn = 2 : i64, mma = 1 : i64, threads = 32 : i64, bk = 16 : i64, stage = 3 : i64}} {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %c16 = arith.constant 16 : index
        %c8 = arith.constant 8 : index
        %c32 = arith.constant 32 : index
        %c4 = arith.constant 4 : index
        %c2 = arith.constant 2 : index
        %c1 = arith.constant 1 : index
        %x1_b_s = tile.shared_alloc {stage = "b"} : memref<16x8xbf16, 3 : i64>
        %x0_a_s = tile.shared_alloc {stage = "a"} : memref<16x16xbf16, 3 : i64>
        %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 4] cells 2 mma
        %nn, %nn_1 = tile.thread_tile %t dim 1 of [8, 4] cells 2 mma
        %lane = arith.remsi %t, %c32 : index
        %group = arith.divsi %lane, %c4 : index
        %quad = arith.remsi %lane, %c4 : index
        %quad2 = arith.muli %quad, %c2 : index
        %0 = arith.subi %nn, %quad2 : index
        %bcol = arith.addi %0, %group : index
        %add, %add_1, %add_2, %add_3 = tile.for %ko = %c0 to 32 step 16 iter_args(%acc = %init, %acc_1 = %init, %acc_2 = %init, %acc_3 = %init) -> (f32, f32, f32, f32) {
          tile.for %l = %t to 256 step 32 {
            %row = arith.divsi %l, %c16 : index
            %col = arith.remsi %l, %c16 : index
            %r1 = arith.addi %ko, %col : index
            %x0_v = tile.load %x0[%row, %r1] : memref<16x32xbf16>
            tile.store %x0_v, %x0_a_s[%row, %col] : memref<16x16xbf16, 3 : i64>
          }
          tile.for %l_1 = %t to 128 step 32 {
            %row_1 = arith.divsi %l_1, %c8 : index
            %col_1 = arith.remsi %l_1, %c8 : index
            %r1_1 = arith.addi %ko, %row_1 : index
            %x1_v = tile.load %x1[%r1_1, %col_1] : memref<32x8xbf16>
            tile.store %x1_v, %x1_b_s[%row_1, %col_1] : memref<16x8xbf16, 3 : i64>
          }
          tile.barrier
          %1, %2, %3, %4 = tile.for %ki = %c0 to 16 step 16 iter_args(%5 = %acc, %6 = %acc_1, %7 = %acc_2, %8 = %acc_3) -> (f32, f32, f32, f32) {
            %kq = arith.addi %ki, %quad2 : index
            %kq8 = arith.addi %kq, %c8 : index
            %9, %10 = tile.load_vector %x0_a_s[%mm, %kq] width 2 : memref<16x16xbf16, 3 : i64>
            %11, %12 = tile.load_vector %x0_a_s[%mm_1, %kq] width 2 : memref<16x16xbf16, 3 : i64>
            %13, %14 = tile.load_vector %x0_a_s[%mm, %kq8] width 2 : memref<16x16xbf16, 3 : i64>
            %15, %16 = tile.load_vector %x0_a_s[%mm_1, %kq8] width 2 : memref<16x16xbf16, 3 : i64>
            %17 = tile.load %x1_b_s[%kq, %bcol] : memref<16x8xbf16, 3 : i64>
            %18 = arith.addi %kq, %c1 : index
            %19 = tile.load %x1_b_s[%18, %bcol] : memref<16x8xbf16, 3 : i64>
            %20 = tile.load %x1_b_s[%kq8, %bcol] : memref<16x8xbf16, 3 : i64>
            %21 = arith.addi %kq8, %c1 : index
            %22 = tile.load %x1_b_s[%21, %bcol] : memref<16x8xbf16, 3 : i64>
            %d, %d_1, %d_2, %d_3 = tile.mma_sync a(%9, %10, %11, %12, %13, %14, %15, %16) b(%17, %19, %20, %22) c(%5, %6, %7, %8) : bf16
            tile.yield %d, %d_1, %d_2, %d_3 : f32, f32, f32, f32
          }
          tile.barrier
          tile.yield %1, %2, %3, %4 : f32, f32, f32, f32
        }
        %23 = arith.truncf %add : f32 to bf16
        %24 = arith.truncf %add_1 : f32 to bf16
        %25 = arith.truncf %add_2 : f32 to bf16
        %26 = arith.truncf %add_3 : f32 to bf16
        tile.store %23, %matmul[%mm, %nn] : memref<16x8xbf16>
        tile.store %24, %matmul[%mm, %nn_1] : memref<16x8xbf16>
        tile.store %25, %matmul[%mm_1, %nn] : memref<16x8xbf16>
        tile.store %26, %matmul[%mm_1, %nn_1] : memref<16x8xbf16>
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<16x32xbf16> {deplodock.input = "x0"}, %x1: memref<32x8xbf16> {deplodock.input = "x1"}) -> memref<16x8xbf16> {
    %matmul = tile.alloc : memref<16x8xbf16>
    tile.launch @matmul_kernel(%x0, %x1, %matmul) : (memref<16x32xbf16>, memref<32x8xbf16>, memref<16x8xbf16>) -> ()
    func.return %matmul : memref<16x8xbf16>
  }
}

