builtin.module {
  loop.kernel @matmul_kernel(%x0: memref<32x40xf32>, %x1: memref<40x96xf32>, %matmul: memref<32x96xf32>) {
    %init = arith.constant 0.000000e+00 : f32
    %0 = arith.constant 1.000000e+00 : f32
    %init_1 = arith.constant 0xff800000 : f32
    loop.for %i0 = 0 to 32 {
      %max = loop.for %r1 = 0 to 40 iter_args(%acc = %init_1) -> (f32) {
        %1 = loop.load %x0[%i0, %r1] : memref<32x40xf32>
        %2 = arith.maximumf %acc, %1 : f32
        loop.yield %2 : f32
      }
      %add = loop.for %r1_1 = 0 to 40 iter_args(%acc_1 = %init) -> (f32) {
        %3 = loop.load %x0[%i0, %r1_1] : memref<32x40xf32>
        %4 = arith.subf %3, %max : f32
        %5 = math.exp %4 : f32
        %6 = arith.addf %acc_1, %5 : f32
        loop.yield %6 : f32
      }
      %7 = arith.divf %0, %add : f32
      loop.for %i1 = 0 to 96 {
        %add_1 = loop.for %r1_2 = 0 to 40 iter_args(%acc_2 = %init) -> (f32) {
          %8 = loop.load %x0[%i0, %r1_2] : memref<32x40xf32>
          %9 = arith.subf %8, %max : f32
          %10 = math.exp %9 : f32
          %11 = arith.mulf %10, %7 : f32
          %12 = loop.load %x1[%r1_2, %i1] : memref<40x96xf32>
          %13 = arith.mulf %11, %12 : f32
          %14 = arith.addf %acc_2, %13 : f32
          loop.yield %14 : f32
        }
        loop.store %add_1, %matmul[%i0, %i1] : memref<32x96xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x0: memref<32x40xf32> {deplodock.input = "x0"}, %x1: memref<40x96xf32> {deplodock.input = "x1"}) -> memref<32x96xf32> {
    %matmul = loop.alloc : memref<32x96xf32>
    loop.launch @matmul_kernel(%x0, %x1, %matmul) : (memref<32x40xf32>, memref<40x96xf32>, memref<32x96xf32>) -> ()
    func.return %matmul : memref<32x96xf32>
  }
}
