// RUN: deplodock-opt %s -p tile-mma | filecheck %s

// A row statistic too long for a lane's registers beside the K loop (issue 40). softmax(x)
// @ V over 1100 keys: `tile-shared-statistics` gives each warp a row and strides the row's
// max and sum over the 32 lanes (`%r2 = %lane to 1100 step 32`, 35 elements a lane, more
// than the 32 cells it keeps in registers). That sweep is a reduce loop that carries a value,
// but it starts at the lane, not at a constant: it is no K loop, and tile-mma leaves it as
// it is (it used to assert "not a serial tile.for" on it, so no model compiled past 1024
// tokens). The product's `ki` loop still goes to the tensor cores, as tf32x3.

// CHECK:      %max_p = tile.for %r2 = %[[LANE:.*]] to 1100 step 32 iter_args(%acc = %init_1) -> (f32) {
// CHECK-NEXT:   tile.load %x0[%c0, %m_2, %r2]
// CHECK-NEXT:   arith.maximumf
// CHECK:      %add_p = tile.for %r2_1 = %[[LANE]] to 1100 step 32 iter_args(%acc_1 = %init) -> (f32) {
// CHECK:      tile.for %ki = %c0 to 64 step 8 iter_args(
// CHECK:        tile.split_tf32
// CHECK:        tile.mma_sync a({{.*}}) b({{.*}}) c({{.*}}) {correction} : tf32
// CHECK:        tile.mma_sync a({{.*}}) b({{.*}}) c({{.*}}) {correction} : tf32
// CHECK:        %d, %d_1, %d_2, %d_3 = tile.mma_sync a({{.*}}) b({{.*}}) c({{.*}}) : tf32
// CHECK-NOT:    arith.mulf
// CHECK:        tile.yield %d, %d_1, %d_2, %d_3

builtin.module {
  tile.kernel @matmul_kernel(%x0: memref<1x32x1100xf32>, %x1: memref<1x1100x16xf32>, %matmul: memref<1x32x16xf32>) attributes {schedule = {bm = 32 : i64, bn = 32 : i64, group = 8 : i64, fm = 2 : i64, fn = 2 : i64, mma = 1 : i64, threads = 256 : i64, shared_statistics = 1 : i64, bk = 64 : i64, stage = 3 : i64}} {
    tile.grid %b to 1 {
      %m0, %n0 = tile.block_tile %b counts [1, 1] sizes [32, 32] group 8
      tile.threads %t to 256 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %0 = arith.constant 1.000000e+00 : f32
        %init_1 = arith.constant 0xff800000 : f32
        %c15 = arith.constant 15 : index
        %c16 = arith.constant 16 : index
        %c32 = arith.constant 32 : index
        %c8 = arith.constant 8 : index
        %c1 = arith.constant 1 : index
        %c1088 = arith.constant 1088 : index
        %c64 = arith.constant 64 : index
        %x1_b_s = tile.shared_alloc {stage = "b"} : memref<64x32xf32, 3 : i64>
        %prologue_a_s = tile.shared_alloc {stage = "a"} : memref<32x64xf32, 3 : i64>
        %mm, %mm_1 = tile.thread_tile %t dim 0 of [16, 16] cells 2 mma
        %nn, %nn_1 = tile.thread_tile %t dim 1 of [16, 16] cells 2 mma
        %m = arith.addi %m0, %mm : index
        %m_1 = arith.addi %m0, %mm_1 : index
        %n = arith.addi %n0, %nn : index
        %n_1 = arith.addi %n0, %nn_1 : index
        %n_c = arith.minsi %n, %c15 : index
        %n_c_1 = arith.minsi %n_1, %c15 : index
        %stats_s = tile.shared_alloc {statistics} : memref<2x32xf32, 3 : i64>
        %warp = arith.floordivsi %t, %c32 : index
        %lane = arith.remsi %t, %c32 : index
        %is_lead = arith.cmpi eq, %lane, %c0 : index
        tile.for %rr = %c0 to 4 {
          %1 = arith.muli %rr, %c8 : index
          %sr = arith.addi %1, %warp : index
          %m_2 = arith.addi %m0, %sr : index
          %max_p = tile.for %r2 = %lane to 1100 step 32 iter_args(%acc = %init_1) -> (f32) {
            %2 = tile.load %x0[%c0, %m_2, %r2] : memref<1x32x1100xf32>
            %3 = arith.maximumf %acc, %2 : f32
            tile.yield %3 : f32
          }
          %max = tile.combine max %max_p width 32 : f32
          %add_p = tile.for %r2_1 = %lane to 1100 step 32 iter_args(%acc_1 = %init) -> (f32) {
            %4 = tile.load %x0[%c0, %m_2, %r2_1] : memref<1x32x1100xf32>
            %5 = arith.subf %4, %max : f32
            %6 = math.exp %5 : f32
            %7 = arith.addf %acc_1, %6 : f32
            tile.yield %7 : f32
          }
          %add = tile.combine add %add_p width 32 : f32
          tile.if %is_lead {
            tile.store %max, %stats_s[%c0, %sr] : memref<2x32xf32, 3 : i64>
            tile.store %add, %stats_s[%c1, %sr] : memref<2x32xf32, 3 : i64>
          }
        } {rolled}
        tile.barrier
        %max_1 = tile.load %stats_s[%c0, %mm] : memref<2x32xf32, 3 : i64>
        %add_1 = tile.load %stats_s[%c1, %mm] : memref<2x32xf32, 3 : i64>
        %max_2 = tile.load %stats_s[%c0, %mm_1] : memref<2x32xf32, 3 : i64>
        %add_2 = tile.load %stats_s[%c1, %mm_1] : memref<2x32xf32, 3 : i64>
        %8 = arith.divf %0, %add_1 : f32
        %9 = arith.divf %0, %add_2 : f32
        %10, %11, %12, %13 = tile.for %ko = %c0 to 1088 step 64 iter_args(%acc_2 = %init, %acc_3 = %init, %acc_4 = %init, %acc_5 = %init) -> (f32, f32, f32, f32) {
          tile.for %l = %t to 2048 step 256 {
            %row = arith.divsi %l, %c64 : index
            %col = arith.remsi %l, %c64 : index
            %m_3 = arith.addi %m0, %row : index
            %max_3 = tile.load %stats_s[%c0, %row] : memref<2x32xf32, 3 : i64>
            %add_3 = tile.load %stats_s[%c1, %row] : memref<2x32xf32, 3 : i64>
            %14 = arith.divf %0, %add_3 : f32
            %r2_2 = arith.addi %ko, %col : index
            %15 = tile.load %x0[%c0, %m_3, %r2_2] : memref<1x32x1100xf32>
            %16 = arith.subf %15, %max_3 : f32
            %17 = math.exp %16 : f32
            %prologue_v = arith.mulf %17, %14 : f32
            tile.store %prologue_v, %prologue_a_s[%row, %col] : memref<32x64xf32, 3 : i64>
          }
          tile.for %l_1 = %t to 2048 step 256 {
            %row_1 = arith.divsi %l_1, %c32 : index
            %col_1 = arith.remsi %l_1, %c32 : index
            %n_2 = arith.addi %n0, %col_1 : index
            %n_c_2 = arith.minsi %n_2, %c15 : index
            %r2_3 = arith.addi %ko, %row_1 : index
            %x1_v = tile.load %x1[%c0, %r2_3, %n_c_2] : memref<1x1100x16xf32>
            tile.store %x1_v, %x1_b_s[%row_1, %col_1] : memref<64x32xf32, 3 : i64>
          }
          tile.barrier
          %18, %19, %20, %21 = tile.for %ki = %c0 to 64 iter_args(%acc_6 = %acc_2, %acc_7 = %acc_3, %acc_8 = %acc_4, %acc_9 = %acc_5) -> (f32, f32, f32, f32) {
            %22 = tile.load %prologue_a_s[%mm, %ki] : memref<32x64xf32, 3 : i64>
            %23 = tile.load %prologue_a_s[%mm_1, %ki] : memref<32x64xf32, 3 : i64>
            %24 = tile.load %x1_b_s[%ki, %nn] : memref<64x32xf32, 3 : i64>
            %25 = tile.load %x1_b_s[%ki, %nn_1] : memref<64x32xf32, 3 : i64>
            %26 = arith.mulf %22, %24 : f32
            %27 = arith.mulf %22, %25 : f32
            %28 = arith.mulf %23, %24 : f32
            %29 = arith.mulf %23, %25 : f32
            %30 = arith.addf %acc_6, %26 : f32
            %31 = arith.addf %acc_7, %27 : f32
            %32 = arith.addf %acc_8, %28 : f32
            %33 = arith.addf %acc_9, %29 : f32
            tile.yield %30, %31, %32, %33 : f32, f32, f32, f32
          }
          tile.barrier
          tile.yield %18, %19, %20, %21 : f32, f32, f32, f32
        }
        %add_4, %add_5, %add_6, %add_7 = tile.for %r2_4 = %c1088 to 1100 iter_args(%acc_10 = %10, %acc_11 = %11, %acc_12 = %12, %acc_13 = %13) -> (f32, f32, f32, f32) {
          %34 = tile.load %x0[%c0, %m, %r2_4] : memref<1x32x1100xf32>
          %35 = tile.load %x0[%c0, %m_1, %r2_4] : memref<1x32x1100xf32>
          %36 = arith.subf %34, %max_1 : f32
          %37 = arith.subf %35, %max_2 : f32
          %38 = math.exp %36 : f32
          %39 = math.exp %37 : f32
          %40 = arith.mulf %38, %8 : f32
          %41 = arith.mulf %39, %9 : f32
          %42 = tile.load %x1[%c0, %r2_4, %n_c] : memref<1x1100x16xf32>
          %43 = tile.load %x1[%c0, %r2_4, %n_c_1] : memref<1x1100x16xf32>
          %44 = arith.mulf %40, %42 : f32
          %45 = arith.mulf %40, %43 : f32
          %46 = arith.mulf %41, %42 : f32
          %47 = arith.mulf %41, %43 : f32
          %48 = arith.addf %acc_10, %44 : f32
          %49 = arith.addf %acc_11, %45 : f32
          %50 = arith.addf %acc_12, %46 : f32
          %51 = arith.addf %acc_13, %47 : f32
          tile.yield %48, %49, %50, %51 : f32, f32, f32, f32
        }
        %inside = arith.cmpi slt, %n, %c16 : index
        %inside_1 = arith.cmpi slt, %n_1, %c16 : index
        tile.if %inside {
          tile.store %add_4, %matmul[%c0, %m, %n_c] : memref<1x32x16xf32>
        }
        tile.if %inside_1 {
          tile.store %add_5, %matmul[%c0, %m, %n_c_1] : memref<1x32x16xf32>
        }
        tile.if %inside {
          tile.store %add_6, %matmul[%c0, %m_1, %n_c] : memref<1x32x16xf32>
        }
        tile.if %inside_1 {
          tile.store %add_7, %matmul[%c0, %m_1, %n_c_1] : memref<1x32x16xf32>
        }
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<1x32x1100xf32> {deplodock.input = "x0"}, %x1: memref<1x1100x16xf32> {deplodock.input = "x1"}) -> memref<1x32x16xf32> {
    %matmul = tile.alloc : memref<1x32x16xf32>
    tile.launch @matmul_kernel(%x0, %x1, %matmul) : (memref<1x32x1100xf32>, memref<1x1100x16xf32>, memref<1x32x16xf32>) -> ()
    func.return %matmul : memref<1x32x16xf32>
  }
}

