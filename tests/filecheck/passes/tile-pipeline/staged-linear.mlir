// RUN: deplodock-opt %s -p 'tile-multibuffer{depth=2},tile-pipeline' | filecheck %s

// The staged linear of tile-multibuffer's test, pipelined: chunk 0 is copied before the K
// loop (its copy loops are tagged {chunk = 0}); each iteration then waits at the barrier
// for its own chunk, starts the copy of the next one into the other slot (skipped past the
// last chunk), and only then computes: the copy of chunk c + 1 is in flight while chunk c
// is multiplied.

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %p_0_bias: memref<16xf32>, %linear: memref<20x16xf32>) attributes {schedule = {bm = 16 : i64, bn = 16 : i64, group = 8 : i64, fm = 2 : i64, fn = 2 : i64, threads = 64 : i64, bk = 8 : i64, stage = 3 : i64, vector = 4 : i64, pad_b = 4 : i64, pad_a = 0 : i64}} {
    tile.grid %b to 2 {
      %m0, %n0 = tile.block_tile %b counts [2, 1] sizes [16, 16] group 8
      tile.threads %t to 64 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %c19 = arith.constant 19 : index
        %c20 = arith.constant 20 : index
        %c8 = arith.constant 8 : index
        %c1 = arith.constant 1 : index
        %c2 = arith.constant 2 : index
        %c3 = arith.constant 3 : index
        %p_0_weight_b_s = tile.shared_alloc {stage = "b", pad = 4 : i64} : memref<16x12xf32, 3 : i64>
        %x0_a_s = tile.shared_alloc {stage = "a", pad = 0 : i64} : memref<16x8xf32, 3 : i64>
        %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 8] cells 2 blocked
        %nn, %nn_1 = tile.thread_tile %t dim 1 of [8, 8] cells 2 interleaved
        %m = arith.addi %m0, %mm : index
        %m_1 = arith.addi %m0, %mm_1 : index
        %n = arith.addi %n0, %nn : index
        %n_1 = arith.addi %n0, %nn_1 : index
        %m_c = arith.minsi %m, %c19 : index
        %m_c_1 = arith.minsi %m_1, %c19 : index
        %add, %add_1, %add_2, %add_3 = tile.for %ko = %c0 to 32 step 8 iter_args(%acc = %init, %acc_1 = %init, %acc_2 = %init, %acc_3 = %init) -> (f32, f32, f32, f32) {
          tile.for %l = %t to 128 step 64 {
            %row = arith.divsi %l, %c8 : index
            %col = arith.remsi %l, %c8 : index
            %m_2 = arith.addi %m0, %row : index
            %m_c_2 = arith.minsi %m_2, %c19 : index
            %r1 = arith.addi %ko, %col : index
            %x0_v = tile.load %x0[%m_c_2, %r1] : memref<20x32xf32>
            tile.store %x0_v, %x0_a_s[%row, %col] : memref<16x8xf32, 3 : i64>
          }
          tile.for %l_1 = %t to 128 step 64 {
            %row_1 = arith.divsi %l_1, %c8 : index
            %col_1 = arith.remsi %l_1, %c8 : index
            %n_2 = arith.addi %n0, %row_1 : index
            %r1_1 = arith.addi %ko, %col_1 : index
            %p_0_weight_v = tile.load %p_0_weight[%n_2, %r1_1] : memref<16x32xf32>
            tile.store %p_0_weight_v, %p_0_weight_b_s[%row_1, %col_1] : memref<16x12xf32, 3 : i64>
          }
          tile.barrier
          %0, %1, %2, %3 = tile.for %ki = %c0 to 8 step 4 iter_args(%4 = %acc, %5 = %acc_1, %6 = %acc_2, %7 = %acc_3) -> (f32, f32, f32, f32) {
            %8, %9, %10, %11 = tile.load_vector %x0_a_s[%mm, %ki] width 4 : memref<16x8xf32, 3 : i64>
            %12, %13, %14, %15 = tile.load_vector %x0_a_s[%mm_1, %ki] width 4 : memref<16x8xf32, 3 : i64>
            %16, %17, %18, %19 = tile.load_vector %p_0_weight_b_s[%nn, %ki] width 4 : memref<16x12xf32, 3 : i64>
            %20, %21, %22, %23 = tile.load_vector %p_0_weight_b_s[%nn_1, %ki] width 4 : memref<16x12xf32, 3 : i64>
            %24 = arith.mulf %8, %16 : f32
            %25 = arith.mulf %8, %20 : f32
            %26 = arith.mulf %12, %16 : f32
            %27 = arith.mulf %12, %20 : f32
            %28 = arith.addf %4, %24 : f32
            %29 = arith.addf %5, %25 : f32
            %30 = arith.addf %6, %26 : f32
            %31 = arith.addf %7, %27 : f32
            %32 = arith.mulf %9, %17 : f32
            %33 = arith.mulf %9, %21 : f32
            %34 = arith.mulf %13, %17 : f32
            %35 = arith.mulf %13, %21 : f32
            %36 = arith.addf %28, %32 : f32
            %37 = arith.addf %29, %33 : f32
            %38 = arith.addf %30, %34 : f32
            %39 = arith.addf %31, %35 : f32
            %40 = arith.mulf %10, %18 : f32
            %41 = arith.mulf %10, %22 : f32
            %42 = arith.mulf %14, %18 : f32
            %43 = arith.mulf %14, %22 : f32
            %44 = arith.addf %36, %40 : f32
            %45 = arith.addf %37, %41 : f32
            %46 = arith.addf %38, %42 : f32
            %47 = arith.addf %39, %43 : f32
            %48 = arith.mulf %11, %19 : f32
            %49 = arith.mulf %11, %23 : f32
            %50 = arith.mulf %15, %19 : f32
            %51 = arith.mulf %15, %23 : f32
            %52 = arith.addf %44, %48 : f32
            %53 = arith.addf %45, %49 : f32
            %54 = arith.addf %46, %50 : f32
            %55 = arith.addf %47, %51 : f32
            tile.yield %52, %53, %54, %55 : f32, f32, f32, f32
          }
          tile.barrier
          tile.yield %0, %1, %2, %3 : f32, f32, f32, f32
        }
        %56 = tile.load %p_0_bias[%n] : memref<16xf32>
        %57 = tile.load %p_0_bias[%n_1] : memref<16xf32>
        %58 = arith.addf %add, %56 : f32
        %59 = arith.addf %add_1, %57 : f32
        %60 = arith.addf %add_2, %56 : f32
        %61 = arith.addf %add_3, %57 : f32
        %inside = arith.cmpi slt, %m, %c20 : index
        %inside_1 = arith.cmpi slt, %m_1, %c20 : index
        tile.if %inside {
          tile.store %58, %linear[%m_c, %n] : memref<20x16xf32>
        }
        tile.if %inside {
          tile.store %59, %linear[%m_c, %n_1] : memref<20x16xf32>
        }
        tile.if %inside_1 {
          tile.store %60, %linear[%m_c_1, %n] : memref<20x16xf32>
        }
        tile.if %inside_1 {
          tile.store %61, %linear[%m_c_1, %n_1] : memref<20x16xf32>
        }
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<20x32xf32> {deplodock.input = "x0"}, %p_0_weight: memref<16x32xf32> {deplodock.param = "0.weight"}, %p_0_bias: memref<16xf32> {deplodock.param = "0.bias"}) -> memref<20x16xf32> {
    %linear = tile.alloc : memref<20x16xf32>
    tile.launch @linear_kernel(%x0, %p_0_weight, %p_0_bias, %linear) : (memref<20x32xf32>, memref<16x32xf32>, memref<16xf32>, memref<20x16xf32>) -> ()
    func.return %linear : memref<20x16xf32>
  }
}

// CHECK:      tile.for %l = %t to 128 step 64 {
// CHECK:        tile.store %x0_v, %x0_a_s[%c0, %row, %col]
// CHECK:      } {chunk = 0 : i64}
// CHECK:      tile.for %ko = %c0 to 32 step 8
// CHECK:        tile.barrier
// CHECK-NEXT:   %ko_next = arith.addi %ko, %c8 : index
// CHECK-NEXT:   %has_next = arith.cmpi slt, %ko_next, %c32 : index
// CHECK-NEXT:   %chunk_next = arith.divsi %ko_next, %c8 : index
// CHECK-NEXT:   %slot_next = arith.remsi %chunk_next, %c2 : index
// CHECK-NEXT:   tile.if %has_next {
// CHECK:          tile.store %x0_v_1, %x0_a_s[%slot_next, %row_2, %col_2]
// CHECK:        } {prefetch = 1 : i64}
// CHECK-NEXT:   tile.for %ki
// CHECK:          tile.load_vector %x0_a_s[%slot, %mm, %ki] width 4
