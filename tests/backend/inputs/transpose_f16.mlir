// f16 transpose through a padded 2-D shared tile: x[32, 64] -> y[64, 32], 32 columns per block.
builtin.module {
  kernel.func @transpose(%x: memref<32x64xf16>, %y: memref<64x32xf16>) grid 2 block 128 {
    %c32 = arith.constant 32 : index
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %tile = kernel.shared_alloc : memref<32x33xf16, 3>
    %col0 = arith.muli %b, %c32 : index
    %twice = arith.constant 2.000000e+00 : f16
    kernel.for %e = %t to 1024 step 128 {
      %r = arith.floordivsi %e, %c32 : index
      %c = arith.remsi %e, %c32 : index
      %xc = arith.addi %col0, %c : index
      %v = kernel.load %x[%r, %xc] : memref<32x64xf16>
      %v2 = arith.mulf %v, %twice : f16
      kernel.store %v2, %tile[%r, %c] : memref<32x33xf16, 3>
    }
    kernel.barrier
    %one = arith.constant 1.000000e+00 : f32
    kernel.for %e = %t to 1024 step 128 {
      %r = arith.floordivsi %e, %c32 : index
      %c = arith.remsi %e, %c32 : index
      %v = kernel.load %tile[%c, %r] : memref<32x33xf16, 3>
      %w = arith.extf %v : f16 to f32
      %w1 = arith.addf %w, %one : f32
      %h = arith.truncf %w1 : f32 to f16
      %yr = arith.addi %col0, %r : index
      kernel.store %h, %y[%yr, %c] : memref<64x32xf16>
    }
    kernel.return
  }
  func.func @forward(%x: memref<32x64xf16> {deplodock.input = "x"}) -> memref<64x32xf16> {
    %y = kernel.alloc : memref<64x32xf16>
    kernel.launch @transpose(%x, %y) : (memref<32x64xf16>, memref<64x32xf16>) -> ()
    func.return %y : memref<64x32xf16>
  }
}
