// RUN: deplodock-opt %s -p 'tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-chunk-k{bk=16},tile-stage,tile-vectorize,tile-pad-shared{swizzle_b=2}' | filecheck %s
// RUN: deplodock-opt %s -p 'tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-chunk-k{bk=16},tile-stage,tile-vectorize,tile-pad-shared' | filecheck %s --check-prefix=DEFAULT

// A swizzle instead of a pad. Each thread reads 16 bytes of the weight slab down a column
// (`%p_0_weight_b_s[%nn, %ki] width 4`). Rows of 16 floats put two rows in every 128 bytes,
// so the 8 lanes of a quarter-warp meet 4-way in the banks. `swizzle = 2` stores the four
// 16-byte chunks of row r in the order `chunk ^ (r / 2) % 4`: the 8 rows land in 8
// different bank quads, and the rows stay 16 floats long (16-byte aligned, no extra bytes).
// Only the allocation changes here: indices stay logical until convert-tile-to-kernel.
//
// By default the bank analysis compares both and charges the swizzle one XOR per access;
// on this kernel padding the weight rows by 4 floats is as conflict-free and needs no XOR.

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

// CHECK:      schedule = {{{.*}}pad_b = 0 : i64, swizzle_b = 2 : i64, pad_a = 0 : i64, swizzle_a = 0 : i64}
// CHECK:      %p_0_weight_b_s = tile.shared_alloc {stage = "b", pad = 0 : i64, swizzle = 2 : i64} : memref<16x16xf32, 3 : i64>
// CHECK-NEXT: %x0_a_s = tile.shared_alloc {stage = "a", pad = 0 : i64} : memref<16x16xf32, 3 : i64>
// CHECK:      tile.store %p_0_weight_v, %p_0_weight_b_s[%row_1, %col_1]
// CHECK:      tile.load_vector %p_0_weight_b_s[%nn, %ki] width 4

// DEFAULT:    %p_0_weight_b_s = tile.shared_alloc {stage = "b", pad = 4 : i64} : memref<16x20xf32, 3 : i64>
// DEFAULT:    %x0_a_s = tile.shared_alloc {stage = "a", pad = 0 : i64} : memref<16x16xf32, 3 : i64>
