builtin.module {
  tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %x1: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %linear: memref<20x16xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %0 = arith.constant 1.000000e+00 : f32
        tile.for %i0 = %c0 to 20 {
          tile.for %i1 = %c0 to 16 {
            %add = tile.for %r1 = %c0 to 32 iter_args(%acc = %init) -> (f32) {
              %1 = tile.load %x0[%i0, %r1] : memref<20x32xf32>
              %2 = arith.negf %1 : f32
              %3 = math.exp %2 : f32
              %4 = arith.addf %0, %3 : f32
              %5 = arith.divf %1, %4 : f32
              %6 = tile.load %x1[%i0, %r1] : memref<20x32xf32>
              %7 = arith.mulf %5, %6 : f32
              %8 = tile.load %p_0_weight[%i1, %r1] : memref<16x32xf32>
              %9 = arith.mulf %7, %8 : f32
              %10 = arith.addf %acc, %9 : f32
              tile.yield %10 : f32
            }
            tile.store %add, %linear[%i0, %i1] : memref<20x16xf32>
          }
        }
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<20x32xf32> {deplodock.input = "x0"}, %x1: memref<20x32xf32> {deplodock.input = "x1"}, %p_0_weight: memref<16x32xf32> {deplodock.param = "0.weight"}) -> memref<20x16xf32> {
    %linear = tile.alloc : memref<20x16xf32>
    tile.launch @linear_kernel(%x0, %x1, %p_0_weight, %linear) : (memref<20x32xf32>, memref<20x32xf32>, memref<16x32xf32>, memref<20x16xf32>) -> ()
    func.return %linear : memref<20x16xf32>
  }
}

