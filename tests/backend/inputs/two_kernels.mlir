// Two kernels and an intermediate buffer: row means (a serial loop per thread, half the
// threads idle), then centering with a bounds check and signed floor/ceil divisions of
// negative indices; a bf16 kernel scales by a bf16 weight.
builtin.module {
  kernel.func @row_mean(%x: memref<16x60xf32>, %mean: memref<16xf32>) grid 1 block 32 {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    %n = arith.constant 6.000000e+01 : f32
    %t = kernel.thread_id : index
    kernel.for %r = %t to 16 step 32 {
      %s = kernel.for %k = %c0 to 60 iter_args(%acc = %zero) -> (f32) {
        %v = kernel.load %x[%r, %k] : memref<16x60xf32>
        %a = arith.addf %acc, %v : f32
        kernel.yield %a : f32
      }
      %m = arith.divf %s, %n : f32
      kernel.store %m, %mean[%r] : memref<16xf32>
    }
    kernel.return
  }
  kernel.func @center(%x: memref<16x60xf32>, %mean: memref<16xf32>, %y: memref<16x60xf32>) grid 2 block 512 {
    %c3 = arith.constant 3 : index
    %c8 = arith.constant 8 : index
    %c60 = arith.constant 60 : index
    %c512 = arith.constant 512 : index
    %c960 = arith.constant 960 : index
    %quarter = arith.constant 2.500000e-01 : f32
    %halff = arith.constant 5.000000e-01 : f32
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %bt = arith.muli %b, %c512 : index
    %i = arith.addi %bt, %t : index
    %in = arith.cmpi slt, %i, %c960 : index
    kernel.if %in {
      %r = arith.floordivsi %i, %c60 : index
      %c = arith.remsi %i, %c60 : index
      %v = kernel.load %x[%r, %c] : memref<16x60xf32>
      %m = kernel.load %mean[%r] : memref<16xf32>
      %d = arith.subf %v, %m : f32
      %rs = arith.subi %r, %c8 : index
      %fq = arith.floordivsi %rs, %c3 : index
      %cq = arith.ceildivsi %rs, %c3 : index
      %fi = arith.index_cast %fq : index to i32
      %ci = arith.index_cast %cq : index to i32
      %ff = arith.sitofp %fi : i32 to f32
      %cf = arith.sitofp %ci : i32 to f32
      %f1 = arith.mulf %ff, %halff : f32
      %f2 = arith.mulf %cf, %quarter : f32
      %o1 = arith.addf %d, %f1 : f32
      %o = arith.addf %o1, %f2 : f32
      kernel.store %o, %y[%r, %c] : memref<16x60xf32>
    }
    kernel.return
  }
  kernel.func @scale_bf16(%y: memref<16x60xf32>, %w: memref<60xbf16>, %z: memref<16x60xbf16>) grid 2 block 480 {
    %c60 = arith.constant 60 : index
    %c480 = arith.constant 480 : index
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %bt = arith.muli %b, %c480 : index
    %i = arith.addi %bt, %t : index
    %r = arith.floordivsi %i, %c60 : index
    %c = arith.remsi %i, %c60 : index
    %v = kernel.load %y[%r, %c] : memref<16x60xf32>
    %vb = arith.truncf %v : f32 to bf16
    %wv = kernel.load %w[%c] : memref<60xbf16>
    %p = arith.mulf %vb, %wv : bf16
    kernel.store %p, %z[%r, %c] : memref<16x60xbf16>
    kernel.return
  }
  func.func @forward(%x: memref<16x60xf32> {deplodock.input = "x"}, %w: memref<60xbf16> {deplodock.param = "w"}) -> (memref<16x60xf32>, memref<16x60xbf16>) {
    %mean = kernel.alloc : memref<16xf32>
    %y = kernel.alloc : memref<16x60xf32>
    %z = kernel.alloc : memref<16x60xbf16>
    kernel.launch @row_mean(%x, %mean) : (memref<16x60xf32>, memref<16xf32>) -> ()
    kernel.launch @center(%x, %mean, %y) : (memref<16x60xf32>, memref<16xf32>, memref<16x60xf32>) -> ()
    kernel.launch @scale_bf16(%y, %w, %z) : (memref<16x60xf32>, memref<60xbf16>, memref<16x60xbf16>) -> ()
    func.return %y, %z : memref<16x60xf32>, memref<16x60xbf16>
  }
}
