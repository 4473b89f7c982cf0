// rms_norm over rows of 512: strided cooperative loop, warp shuffles, shared memory, barrier.
builtin.module {
  kernel.func @rms_norm(%x: memref<1x8x512xf32>, %w: memref<512xf32>, %y: memref<1x8x512xf32>) grid 8 block 128 {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %zero = arith.constant 0.000000e+00 : f32
    %n = arith.constant 5.120000e+02 : f32
    %eps = arith.constant 9.99999997e-07 : f32
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %red = kernel.shared_alloc : memref<4xf32, 3>
    %s = kernel.for %k = %t to 512 step 128 iter_args(%acc = %zero) -> (f32) {
      %v = kernel.load %x[%c0, %b, %k] : memref<1x8x512xf32>
      %sq = arith.mulf %v, %v : f32
      %nacc = arith.addf %acc, %sq : f32
      kernel.yield %nacc : f32
    }
    %s16 = kernel.shfl_xor %s, 16 : f32
    %a16 = arith.addf %s, %s16 : f32
    %s8 = kernel.shfl_xor %a16, 8 : f32
    %a8 = arith.addf %a16, %s8 : f32
    %s4 = kernel.shfl_xor %a8, 4 : f32
    %a4 = arith.addf %a8, %s4 : f32
    %s2 = kernel.shfl_xor %a4, 2 : f32
    %a2 = arith.addf %a4, %s2 : f32
    %s1 = kernel.shfl_xor %a2, 1 : f32
    %a1 = arith.addf %a2, %s1 : f32
    %lane = arith.remsi %t, %c32 : index
    %warp = arith.floordivsi %t, %c32 : index
    %is0 = arith.cmpi eq, %lane, %c0 : index
    kernel.if %is0 {
      kernel.store %a1, %red[%warp] : memref<4xf32, 3>
    }
    kernel.barrier
    %tot = kernel.for %i = %c0 to 4 iter_args(%p = %zero) -> (f32) {
      %r = kernel.load %red[%i] : memref<4xf32, 3>
      %q = arith.addf %p, %r : f32
      kernel.yield %q : f32
    }
    %mean = arith.divf %tot, %n : f32
    %me = arith.addf %mean, %eps : f32
    %inv = math.rsqrt %me : f32
    kernel.for %j = %t to 512 step 128 {
      %xv = kernel.load %x[%c0, %b, %j] : memref<1x8x512xf32>
      %wv = kernel.load %w[%j] : memref<512xf32>
      %o1 = arith.mulf %xv, %inv : f32
      %o = arith.mulf %o1, %wv : f32
      kernel.store %o, %y[%c0, %b, %j] : memref<1x8x512xf32>
    }
    kernel.return
  }
  func.func @forward(%x: memref<1x8x512xf32> {deplodock.input = "x"}, %w: memref<512xf32> {deplodock.param = "weight"}) -> memref<1x8x512xf32> {
    %y = kernel.alloc : memref<1x8x512xf32>
    kernel.launch @rms_norm(%x, %w, %y) : (memref<1x8x512xf32>, memref<512xf32>, memref<1x8x512xf32>) -> ()
    func.return %y : memref<1x8x512xf32>
  }
}
