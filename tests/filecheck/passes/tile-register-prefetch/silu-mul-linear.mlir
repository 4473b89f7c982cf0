// RUN: deplodock-opt %s -p 'tile-register-prefetch{min_cells=1}' | filecheck %s
// RUN: deplodock-opt %s -p tile-register-prefetch | filecheck %s --check-prefix=SMALL
// RUN: deplodock-opt %s -p 'tile-register-prefetch{enable=false}' | filecheck %s --check-prefix=OFF

// `silu(x0) * x1` feeding a linear, pipelined (tile-pipeline, tile-async-copy): the weight
// chunk goes through cp.async, but the prologue's operand is computed on its way into shared
// memory, so its copy loop loads, computes and stores before the chunk's FMAs, and the store
// waits for the loads. The pass moves the loads (from the clamped K offset %ko_load, always in
// bounds) before the FMAs and the silu and the store after them, under %has_next. 128 vector
// elements for 256 threads: a partial round, so threads past the end load element 127 again
// and skip the store (%has_element).

// CHECK:      tile.kernel @linear_kernel
// CHECK-SAME: register_prefetch = 1
// CHECK:      tile.for %ko
// CHECK:        %ko_load = arith.minsi %ko_next, %c48 : index
// CHECK-NEXT:   %l_load = arith.minsi %t, %c127 : index
// CHECK-NEXT:   %has_element = arith.cmpi slt, %t, %c128 : index
// CHECK:        %r1_2 = arith.addi %ko_load, %col4_2 : index
// CHECK-NEXT:   %[[G0:.*]], %[[G1:.*]], %[[G2:.*]], %[[G3:.*]] = tile.load_vector %x0[%m_3, %r1_2] width 4
// CHECK-NEXT:   %[[U0:.*]], %{{.*}}, %{{.*}}, %{{.*}} = tile.load_vector %x1[%m_3, %r1_2] width 4
// CHECK-NEXT:   tile.if %has_next {
// CHECK-NOT:      math.exp
// CHECK:          tile.copy_async %p_0_weight_b_s[%slot_next
// CHECK:        } {prefetch = 1 : i64}
// CHECK:        tile.async_commit
// CHECK-NEXT:   tile.for %ki
// CHECK:        tile.if %has_next {
// CHECK-NEXT:     tile.if %has_element {
// CHECK-NEXT:       %[[N0:.*]] = arith.negf %[[G0]] : f32
// CHECK:            math.exp %[[N0]] : f32
// CHECK:            %x0_x1_v_4 = arith.mulf %{{.*}}, %[[U0]] : f32
// CHECK:            tile.store_vector %x0_x1_v_4, {{.*}}, %x0_x1_a_s[%slot_next, %row_2, %col4_2]
// CHECK-NEXT:     }
// CHECK-NEXT:   } {register_prefetch = 1 : i64}

// By default only threads with 16 or more accumulators prefetch: this one has 2 x 2, so it
// keeps its copy (a small register tile runs at high occupancy, which hides the stall).
// SMALL:      register_prefetch = 0
// SMALL-NOT:  %ko_load

// Off: the kernel is left as it was; the knob records the decision.
// OFF:      register_prefetch = 0
// OFF:      tile.if %has_next {
// OFF-NEXT:   tile.for %l_2 = %t to 128 step 256 {
// OFF:          math.exp
// OFF:          tile.store_vector
// OFF-NOT:  {register_prefetch = 1 : i64}

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<32x64xf32>, %x1: memref<32x64xf32>, %p_0_weight: memref<32x64xf32>, %linear: memref<32x32xf32>) attributes {schedule = {bm = 32 : i64, bn = 32 : i64, group = 8 : i64, fm = 2 : i64, fn = 2 : i64, threads = 256 : i64, bk = 16 : i64, stage = 3 : i64, vector = 4 : i64, pad_b = 4 : i64, swizzle_b = 0 : i64, pad_a = 0 : i64, swizzle_a = 0 : i64, depth = 2 : i64, pipeline = 1 : i64, async = 1 : i64}} {
    tile.grid %b to 1 {
      %m0, %n0 = tile.block_tile %b counts [1, 1] sizes [32, 32] group 8
      tile.threads %t to 256 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %0 = arith.constant 1.000000e+00 : f32
        %c16 = arith.constant 16 : index
        %c1 = arith.constant 1 : index
        %c2 = arith.constant 2 : index
        %c3 = arith.constant 3 : index
        %c4 = arith.constant 4 : index
        %c64 = arith.constant 64 : index
        %p_0_weight_b_s = tile.shared_alloc {stage = "b", pad = 4 : i64, depth = 2 : i64} : memref<2x32x20xf32, 3 : i64>
        %x0_x1_a_s = tile.shared_alloc {stage = "a", pad = 0 : i64, depth = 2 : i64} : memref<2x32x16xf32, 3 : i64>
        %mm, %mm_1 = tile.thread_tile %t dim 0 of [16, 16] cells 2 blocked
        %nn, %nn_1 = tile.thread_tile %t dim 1 of [16, 16] cells 2 interleaved
        %m = arith.addi %m0, %mm : index
        %m_1 = arith.addi %m0, %mm_1 : index
        %n = arith.addi %n0, %nn : index
        %n_1 = arith.addi %n0, %nn_1 : index
        tile.for %l = %t to 128 step 256 {
          %row = arith.divsi %l, %c4 : index
          %col = arith.remsi %l, %c4 : index
          %col4 = arith.muli %col, %c4 : index
          %m_2 = arith.addi %m0, %row : index
          %r1 = arith.addi %c0, %col4 : index
          %1, %2, %3, %4 = tile.load_vector %x0[%m_2, %r1] width 4 : memref<32x64xf32>
          %5 = arith.negf %1 : f32
          %6 = arith.negf %2 : f32
          %7 = arith.negf %3 : f32
          %8 = arith.negf %4 : f32
          %9 = math.exp %5 : f32
          %10 = math.exp %6 : f32
          %11 = math.exp %7 : f32
          %12 = math.exp %8 : f32
          %13 = arith.addf %0, %9 : f32
          %14 = arith.addf %0, %10 : f32
          %15 = arith.addf %0, %11 : f32
          %16 = arith.addf %0, %12 : f32
          %17 = arith.divf %1, %13 : f32
          %18 = arith.divf %2, %14 : f32
          %19 = arith.divf %3, %15 : f32
          %20 = arith.divf %4, %16 : f32
          %21, %22, %23, %24 = tile.load_vector %x1[%m_2, %r1] width 4 : memref<32x64xf32>
          %x0_x1_v = arith.mulf %17, %21 : f32
          %x0_x1_v_1 = arith.mulf %18, %22 : f32
          %x0_x1_v_2 = arith.mulf %19, %23 : f32
          %x0_x1_v_3 = arith.mulf %20, %24 : f32
          tile.store_vector %x0_x1_v, %x0_x1_v_1, %x0_x1_v_2, %x0_x1_v_3, %x0_x1_a_s[%c0, %row, %col4] : memref<2x32x16xf32, 3 : i64>
        } {chunk = 0 : i64}
        tile.for %l_1 = %t to 128 step 256 {
          %row_1 = arith.divsi %l_1, %c4 : index
          %col_1 = arith.remsi %l_1, %c4 : index
          %col4_1 = arith.muli %col_1, %c4 : index
          %n_2 = arith.addi %n0, %row_1 : index
          %r1_1 = arith.addi %c0, %col4_1 : index
          tile.copy_async %p_0_weight_b_s[%c0, %row_1, %col4_1], %p_0_weight[%n_2, %r1_1], 16 : memref<2x32x20xf32, 3 : i64>, memref<32x64xf32>
        } {chunk = 0 : i64}
        tile.async_commit
        %add, %add_1, %add_2, %add_3 = tile.for %ko = %c0 to 64 step 16 iter_args(%acc = %init, %acc_1 = %init, %acc_2 = %init, %acc_3 = %init) -> (f32, f32, f32, f32) {
          %chunk = arith.divsi %ko, %c16 : index
          %slot = arith.remsi %chunk, %c2 : index
          tile.async_wait 0
          tile.barrier
          %ko_next = arith.addi %ko, %c16 : index
          %has_next = arith.cmpi slt, %ko_next, %c64 : index
          %chunk_next = arith.divsi %ko_next, %c16 : index
          %slot_next = arith.remsi %chunk_next, %c2 : index
          tile.if %has_next {
            tile.for %l_2 = %t to 128 step 256 {
              %row_2 = arith.divsi %l_2, %c4 : index
              %col_2 = arith.remsi %l_2, %c4 : index
              %col4_2 = arith.muli %col_2, %c4 : index
              %m_3 = arith.addi %m0, %row_2 : index
              %r1_2 = arith.addi %ko_next, %col4_2 : index
              %25, %26, %27, %28 = tile.load_vector %x0[%m_3, %r1_2] width 4 : memref<32x64xf32>
              %29 = arith.negf %25 : f32
              %30 = arith.negf %26 : f32
              %31 = arith.negf %27 : f32
              %32 = arith.negf %28 : f32
              %33 = math.exp %29 : f32
              %34 = math.exp %30 : f32
              %35 = math.exp %31 : f32
              %36 = math.exp %32 : f32
              %37 = arith.addf %0, %33 : f32
              %38 = arith.addf %0, %34 : f32
              %39 = arith.addf %0, %35 : f32
              %40 = arith.addf %0, %36 : f32
              %41 = arith.divf %25, %37 : f32
              %42 = arith.divf %26, %38 : f32
              %43 = arith.divf %27, %39 : f32
              %44 = arith.divf %28, %40 : f32
              %45, %46, %47, %48 = tile.load_vector %x1[%m_3, %r1_2] width 4 : memref<32x64xf32>
              %x0_x1_v_4 = arith.mulf %41, %45 : f32
              %x0_x1_v_5 = arith.mulf %42, %46 : f32
              %x0_x1_v_6 = arith.mulf %43, %47 : f32
              %x0_x1_v_7 = arith.mulf %44, %48 : f32
              tile.store_vector %x0_x1_v_4, %x0_x1_v_5, %x0_x1_v_6, %x0_x1_v_7, %x0_x1_a_s[%slot_next, %row_2, %col4_2] : memref<2x32x16xf32, 3 : i64>
            }
            tile.for %l_3 = %t to 128 step 256 {
              %row_3 = arith.divsi %l_3, %c4 : index
              %col_3 = arith.remsi %l_3, %c4 : index
              %col4_3 = arith.muli %col_3, %c4 : index
              %n_3 = arith.addi %n0, %row_3 : index
              %r1_3 = arith.addi %ko_next, %col4_3 : index
              tile.copy_async %p_0_weight_b_s[%slot_next, %row_3, %col4_3], %p_0_weight[%n_3, %r1_3], 16 : memref<2x32x20xf32, 3 : i64>, memref<32x64xf32>
            }
          } {prefetch = 1 : i64}
          tile.async_commit
          %49, %50, %51, %52 = tile.for %ki = %c0 to 16 step 4 iter_args(%53 = %acc, %54 = %acc_1, %55 = %acc_2, %56 = %acc_3) -> (f32, f32, f32, f32) {
            %57, %58, %59, %60 = tile.load_vector %x0_x1_a_s[%slot, %mm, %ki] width 4 : memref<2x32x16xf32, 3 : i64>
            %61, %62, %63, %64 = tile.load_vector %x0_x1_a_s[%slot, %mm_1, %ki] width 4 : memref<2x32x16xf32, 3 : i64>
            %65, %66, %67, %68 = tile.load_vector %p_0_weight_b_s[%slot, %nn, %ki] width 4 : memref<2x32x20xf32, 3 : i64>
            %69, %70, %71, %72 = tile.load_vector %p_0_weight_b_s[%slot, %nn_1, %ki] width 4 : memref<2x32x20xf32, 3 : i64>
            %73 = arith.mulf %57, %65 : f32
            %74 = arith.mulf %57, %69 : f32
            %75 = arith.mulf %61, %65 : f32
            %76 = arith.mulf %61, %69 : f32
            %77 = arith.addf %53, %73 : f32
            %78 = arith.addf %54, %74 : f32
            %79 = arith.addf %55, %75 : f32
            %80 = arith.addf %56, %76 : f32
            %81 = arith.mulf %58, %66 : f32
            %82 = arith.mulf %58, %70 : f32
            %83 = arith.mulf %62, %66 : f32
            %84 = arith.mulf %62, %70 : f32
            %85 = arith.addf %77, %81 : f32
            %86 = arith.addf %78, %82 : f32
            %87 = arith.addf %79, %83 : f32
            %88 = arith.addf %80, %84 : f32
            %89 = arith.mulf %59, %67 : f32
            %90 = arith.mulf %59, %71 : f32
            %91 = arith.mulf %63, %67 : f32
            %92 = arith.mulf %63, %71 : f32
            %93 = arith.addf %85, %89 : f32
            %94 = arith.addf %86, %90 : f32
            %95 = arith.addf %87, %91 : f32
            %96 = arith.addf %88, %92 : f32
            %97 = arith.mulf %60, %68 : f32
            %98 = arith.mulf %60, %72 : f32
            %99 = arith.mulf %64, %68 : f32
            %100 = arith.mulf %64, %72 : f32
            %101 = arith.addf %93, %97 : f32
            %102 = arith.addf %94, %98 : f32
            %103 = arith.addf %95, %99 : f32
            %104 = arith.addf %96, %100 : f32
            tile.yield %101, %102, %103, %104 : f32, f32, f32, f32
          }
          tile.yield %49, %50, %51, %52 : f32, f32, f32, f32
        }
        tile.store %add, %linear[%m, %n] : memref<32x32xf32>
        tile.store %add_1, %linear[%m, %n_1] : memref<32x32xf32>
        tile.store %add_2, %linear[%m_1, %n] : memref<32x32xf32>
        tile.store %add_3, %linear[%m_1, %n_1] : memref<32x32xf32>
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<32x64xf32> {deplodock.input = "x0"}, %x1: memref<32x64xf32> {deplodock.input = "x1"}, %p_0_weight: memref<32x64xf32> {deplodock.param = "0.weight"}) -> memref<32x32xf32> {
    %linear = tile.alloc : memref<32x32xf32>
    tile.launch @linear_kernel(%x0, %x1, %p_0_weight, %linear) : (memref<32x64xf32>, memref<32x64xf32>, memref<32x64xf32>, memref<32x32xf32>) -> ()
    func.return %linear : memref<32x32xf32>
  }
}

