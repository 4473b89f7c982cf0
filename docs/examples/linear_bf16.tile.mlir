builtin.module {
  tile.kernel @linear_kernel(%x0: memref<32x32xbf16>, %p_0_weight: memref<16x32xbf16>, %linear: memref<32x16xbf16>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        tile.for %i0 = %c0 to 32 {
          tile.for %i1 = %c0 to 16 {
            %add = tile.for %r1 = %c0 to 32 iter_args(%acc = %init) -> (f32) {
              %0 = tile.load %x0[%i0, %r1] : memref<32x32xbf16>
              %1 = tile.load %p_0_weight[%i1, %r1] : memref<16x32xbf16>
              %2 = arith.extf %0 : bf16 to f32
              %3 = arith.extf %1 : bf16 to f32
              %4 = arith.mulf %2, %3 : f32
              %5 = arith.addf %acc, %4 : f32
              tile.yield %5 : f32
            }
            %6 = arith.truncf %add : f32 to bf16
            tile.store %6, %linear[%i0, %i1] : memref<32x16xbf16>
          }
        }
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

