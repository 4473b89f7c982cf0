// RUN: deplodock-opt %s -p 'tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-chunk-k{bk=16},tile-stage,tile-vectorize,tile-pad-shared{swizzle_b=2},convert-tile-to-kernel' | filecheck %s

// A swizzled slab (`tile.shared_alloc {swizzle = 2}`, see tile-pad-shared/swizzle.mlir)
// becomes a plain `kernel.shared_alloc` whose every access XORs its column with the mask of
// its row: `swz = ((row / 2) % 4) * 4` (4 chunks of 4 floats). The mask is computed where the
// row is defined: once per thread for its fixed rows `%tn` and `%nn`, so the K loop pays one
// XOR per read; a copy's row changes with each element, so its mask is in the copy loop.

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %p_0_bias: memref<16xf32>, %linear: memref<20x16xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        tile.for %i0 = %c0 to 20 {
          tile.for %i1 = %c0 to 16 {
            %add = tile.for %r1 = %c0 to 32 iter_args(%acc = %init) -> (f32) {
              %0 = tile.load %x0[%i0, %r1] : memref<20x32xf32>
              %1 = tile.load %p_0_weight[%i1, %r1] : memref<16x32xf32>
              %2 = arith.mulf %0, %1 : f32
              %3 = arith.addf %acc, %2 : f32
              tile.yield %3 : f32
            }
            %4 = tile.load %p_0_bias[%i1] : memref<16xf32>
            %5 = arith.addf %add, %4 : f32
            tile.store %5, %linear[%i0, %i1] : memref<20x16xf32>
          }
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

// CHECK:      %p_0_weight_b_s = kernel.shared_alloc : memref<16x16xf32, 3 : i64>
// CHECK:      %nn = arith.addi %tn
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT: %swz_phase = arith.divsi %nn, %[[TWO]] : index
// CHECK-NEXT: %[[FOUR:.*]] = arith.constant 4 : index
// CHECK-NEXT: %swz_chunk = arith.remsi %swz_phase, %[[FOUR]] : index
// CHECK-NEXT: %[[G:.*]] = arith.constant 4 : index
// CHECK-NEXT: %swz = arith.muli %swz_chunk, %[[G]] : index
// CHECK:      kernel.for %l_1
// CHECK:        %row_1 = arith.divsi %l_1, %c16 : index
// CHECK:        %swz_2 = arith.muli
// CHECK:        %col_swz = arith.xori %col_1, %swz_2 : index
// CHECK-NEXT:   kernel.store %p_0_weight_v, %p_0_weight_b_s[%row_1, %col_swz]
// CHECK:      kernel.barrier
// CHECK:      kernel.for %ki
// CHECK:        %ki_swz = arith.xori %ki, %swz_{{[0-9]+}} : index
// CHECK-NEXT:   kernel.load_vector %p_0_weight_b_s[%tn, %ki_swz] width 4
// CHECK:        %ki_swz_1 = arith.xori %ki, %swz : index
// CHECK-NEXT:   kernel.load_vector %p_0_weight_b_s[%nn, %ki_swz_1] width 4
