// A grid-stride elementwise kernel over a 2-D buffer touching most arith/math ops.
builtin.module {
  kernel.func @pointwise(%x: memref<4x300xf32>, %y: memref<4x300xf32>) grid 4 block 128 {
    %c128 = arith.constant 128 : index
    %c300 = arith.constant 300 : index
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %bt = arith.muli %b, %c128 : index
    %g = arith.addi %bt, %t : index
    kernel.for %i = %g to 1200 step 512 {
      %r = arith.floordivsi %i, %c300 : index
      %c = arith.remsi %i, %c300 : index
      %v = kernel.load %x[%r, %c] : memref<4x300xf32>
      %half = arith.constant 5.000000e-01 : f32
      %one = arith.constant 1.000000e+00 : f32
      %zero = arith.constant 0.000000e+00 : f32
      %isq2 = arith.constant 0.707106769 : f32
      %p15 = arith.constant 1.500000e+00 : f32
      %u = arith.mulf %v, %isq2 : f32
      %e = math.erf %u : f32
      %e1 = arith.addf %e, %one : f32
      %hv = arith.mulf %v, %half : f32
      %gelu = arith.mulf %hv, %e1 : f32
      %th = math.tanh %v : f32
      %av = math.absf %v : f32
      %nav = arith.negf %av : f32
      %ex = math.exp %nav : f32
      %te = arith.mulf %th, %ex : f32
      %vv = arith.mulf %v, %v : f32
      %l1 = arith.addf %vv, %one : f32
      %lg = math.log %l1 : f32
      %sq = math.sqrt %av : f32
      %mx = arith.maximumf %v, %zero : f32
      %mn = arith.minimumf %v, %zero : f32
      %pw = math.powf %av, %p15 : f32
      %den = arith.addf %av, %one : f32
      %dv = arith.divf %pw, %den : f32
      %isneg = arith.cmpf olt, %v, %zero : f32
      %ng = arith.negf %gelu : f32
      %sel = arith.select %isneg, %gelu, %ng : f32
      %s1 = arith.addf %sel, %te : f32
      %s2 = arith.addf %s1, %lg : f32
      %s3 = arith.subf %s2, %sq : f32
      %s4 = arith.addf %mx, %mn : f32
      %s5 = arith.subf %s3, %s4 : f32
      %s6 = arith.addf %s5, %dv : f32
      kernel.store %s6, %y[%r, %c] : memref<4x300xf32>
    }
    kernel.return
  }
  func.func @forward(%x: memref<4x300xf32> {deplodock.input = "x"}) -> memref<4x300xf32> {
    %y = kernel.alloc : memref<4x300xf32>
    kernel.launch @pointwise(%x, %y) : (memref<4x300xf32>, memref<4x300xf32>) -> ()
    func.return %y : memref<4x300xf32>
  }
}
