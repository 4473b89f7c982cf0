// RUN: deplodock-opt %s -p 'tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2 quads=0},tile-chunk-k{bk=8},tile-stage,tile-pad-shared' | filecheck %s

// tile-pad-shared counts the bank conflicts of every access of each slab for paddings
// 0, 1, 2, 4: neighbouring threads read the weight slab down a column (rows 8 words apart,
// conflicts) and store both slabs row-major; one more element per row spreads them out.
// (Threads row by row, quads=0: in the default quad order a warp reads other rows.)

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

// CHECK:      %p_0_weight_b_s = tile.shared_alloc {stage = "b", pad = 1 : i64} : memref<16x9xf32, 3 : i64>
// CHECK-NEXT: %x0_a_s = tile.shared_alloc {stage = "a", pad = 1 : i64} : memref<16x9xf32, 3 : i64>
// CHECK:      tile.load %x0_a_s[%mm, %ki]
