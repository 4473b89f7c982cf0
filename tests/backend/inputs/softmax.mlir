// Online softmax, one warp per row: a two-value reduce loop, a shared-memory combine, and a
// loop whose yield reads an iter_arg it also updates ((a, b) -> (a + b, a); 5 steps from
// (1, 2) give a = 18, so the output is scaled by a / 18 = 1 only if the C code assigns both
// from the old values).
builtin.module {
  kernel.func @softmax(%x: memref<8x96xf32>, %y: memref<8x96xf32>) grid 8 block 32 {
    %c0 = arith.constant 0 : index
    %ninf = arith.constant 0xFF800000 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %one = arith.constant 1.000000e+00 : f32
    %two = arith.constant 2.000000e+00 : f32
    %c18 = arith.constant 1.800000e+01 : f32
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %sm = kernel.shared_alloc : memref<32xf32, 3>
    %ss = kernel.shared_alloc : memref<32xf32, 3>
    %m, %s = kernel.for %k = %t to 96 step 32 iter_args(%mi = %ninf, %si = %zero) -> (f32, f32) {
      %v = kernel.load %x[%b, %k] : memref<8x96xf32>
      %mn = arith.maximumf %mi, %v : f32
      %d = arith.subf %mi, %mn : f32
      %ed = math.exp %d : f32
      %sc = arith.mulf %si, %ed : f32
      %dv = arith.subf %v, %mn : f32
      %ev = math.exp %dv : f32
      %sn = arith.addf %sc, %ev : f32
      kernel.yield %mn, %sn : f32, f32
    }
    kernel.store %m, %sm[%t] : memref<32xf32, 3>
    kernel.store %s, %ss[%t] : memref<32xf32, 3>
    kernel.barrier
    %gm, %gs = kernel.for %i = %c0 to 32 iter_args(%am = %ninf, %as = %zero) -> (f32, f32) {
      %om = kernel.load %sm[%i] : memref<32xf32, 3>
      %os = kernel.load %ss[%i] : memref<32xf32, 3>
      %nm = arith.maximumf %am, %om : f32
      %d1 = arith.subf %am, %nm : f32
      %e1 = math.exp %d1 : f32
      %p1 = arith.mulf %as, %e1 : f32
      %d2 = arith.subf %om, %nm : f32
      %e2 = math.exp %d2 : f32
      %p2 = arith.mulf %os, %e2 : f32
      %ns = arith.addf %p1, %p2 : f32
      kernel.yield %nm, %ns : f32, f32
    }
    %fa, %fb = kernel.for %f = %c0 to 5 iter_args(%a = %one, %bb = %two) -> (f32, f32) {
      %na = arith.addf %a, %bb : f32
      kernel.yield %na, %a : f32, f32
    }
    %scale = arith.divf %fa, %c18 : f32
    kernel.for %j = %t to 96 step 32 {
      %v = kernel.load %x[%b, %j] : memref<8x96xf32>
      %dj = arith.subf %v, %gm : f32
      %ej = math.exp %dj : f32
      %pj = arith.divf %ej, %gs : f32
      %oj = arith.mulf %pj, %scale : f32
      kernel.store %oj, %y[%b, %j] : memref<8x96xf32>
    }
    kernel.return
  }
  func.func @forward(%x: memref<8x96xf32> {deplodock.input = "x"}) -> memref<8x96xf32> {
    %y = kernel.alloc : memref<8x96xf32>
    kernel.launch @softmax(%x, %y) : (memref<8x96xf32>, memref<8x96xf32>) -> ()
    func.return %y : memref<8x96xf32>
  }
}
