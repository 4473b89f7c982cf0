// RUN: deplodock-opt %s -p "tile-online-softmax{max_cells=0}" | filecheck %s

// Softmax after the thread mapping sweeps its row three times: the max (%max_p, combined
// into %max), the sum of exp(x - %max) (%add_p, combined into %add), then the output.
// The first two sweeps fuse into one that carries the running max %m_run and the sum
// %s_run rescaled to it: each step multiplies the sum by exp(%m_run - new max) and adds
// exp(x - new max). A max of -inf is shifted by 0 instead (%shift), so rows or threads
// that saw only -inf add 0, not NaN. After the sweep the max combine is as before, each
// thread's sum is rescaled to the block's max (%add_p) and then add-combined. The second
// load of the same element in the fused body reuses the first (%0).
// `max_cells=0` forces the fusion: by default a row that stays in registers (at most 32
// elements a thread) is not fused, since re-sweeping registers is free.

builtin.module {
  tile.kernel @softmax_kernel(%x0: memref<3x100xf32>, %softmax: memref<3x100xf32>) {
    tile.grid %b to 3 {
      tile.threads %t to 128 {
        %init = arith.constant 0.000000e+00 : f32
        %init_1 = arith.constant 0xff800000 : f32
        %max_p = tile.for %r1 = %t to 100 step 128 iter_args(%acc = %init_1) -> (f32) {
          %0 = tile.load %x0[%b, %r1] : memref<3x100xf32>
          %1 = arith.maximumf %acc, %0 : f32
          tile.yield %1 : f32
        }
        %max = tile.combine max %max_p : f32
        %add_p = tile.for %r1_1 = %t to 100 step 128 iter_args(%acc_1 = %init) -> (f32) {
          %2 = tile.load %x0[%b, %r1_1] : memref<3x100xf32>
          %3 = arith.subf %2, %max : f32
          %4 = math.exp %3 : f32
          %5 = arith.addf %acc_1, %4 : f32
          tile.yield %5 : f32
        }
        %add = tile.combine add %add_p : f32
        tile.for %i1 = %t to 100 step 128 {
          %6 = tile.load %x0[%b, %i1] : memref<3x100xf32>
          %7 = arith.subf %6, %max : f32
          %8 = math.exp %7 : f32
          %9 = arith.divf %8, %add : f32
          tile.store %9, %softmax[%b, %i1] : memref<3x100xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @softmax_kernel(
// CHECK-SAME:    schedule = {online_softmax = 1 : i64}
// CHECK:         %ninf = arith.constant 0xff800000 : f32
// CHECK-NEXT:    %fzero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %max_p, %add_p_run = tile.for %r1 = %t to 100 step 128 iter_args(%m_run = %init_1, %s_run = %init) -> (f32, f32) {
// CHECK-NEXT:      %[[X:.*]] = tile.load %x0[%b, %r1] : memref<3x100xf32>
// CHECK-NEXT:      %[[M:.*]] = arith.maximumf %m_run, %[[X]] : f32
// CHECK-NEXT:      %[[IS:.*]] = arith.cmpf oeq, %[[M]], %ninf : f32
// CHECK-NEXT:      %shift = arith.select %[[IS]], %fzero, %[[M]] : f32
// CHECK-NEXT:      %[[D:.*]] = arith.subf %m_run, %shift : f32
// CHECK-NEXT:      %rescale = math.exp %[[D]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.mulf %s_run, %rescale : f32
// CHECK-NEXT:      %[[Z:.*]] = arith.subf %[[X]], %shift : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[Z]] : f32
// CHECK-NEXT:      %[[A:.*]] = arith.addf %[[S]], %[[E]] : f32
// CHECK-NEXT:      tile.yield %[[M]], %[[A]] : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %max = tile.combine max %max_p : f32
// CHECK:         %add_p = arith.mulf %add_p_run, %{{.*}} : f32
// CHECK-NEXT:    %add = tile.combine add %add_p : f32
// CHECK-NEXT:    tile.for %i1 = %t to 100 step 128 {
