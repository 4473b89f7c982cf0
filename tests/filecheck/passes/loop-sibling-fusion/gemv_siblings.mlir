// RUN: deplodock-opt %s -p loop-sibling-fusion | filecheck %s

// Two GEMVs of one vector (a decode step's key and value projections, M = 1): one free loop
// over the 8 output columns, a dot product over K in each. They share a launch: the fused
// row body holds both dot products, one after the other, and both stores. @gemm (a
// reduction under two free loops, rows and columns) keeps its own launch.

// CHECK-LABEL: loop.kernel @k_proj_kernel(%x: memref<64xf32>, %wk: memref<8x64xf32>, %yk: memref<8xf32>, %wv: memref<8x64xf32>, %yv: memref<8xf32>) {
// CHECK-NEXT:    %zero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %zero_1 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    loop.for %n = 0 to 8 {
// CHECK-NEXT:      %dot = loop.for %k = 0 to 64 iter_args(%acc = %zero) -> (f32) {
// CHECK:             loop.load %wk[%n, %k]
// CHECK:           loop.store %dot, %yk[%n] : memref<8xf32>
// CHECK-NEXT:      %dot_1 = loop.for %k_1 = 0 to 64 iter_args(%acc_1 = %zero_1) -> (f32) {
// CHECK:             loop.load %wv[%n, %k_1]
// CHECK:           loop.store %dot_1, %yv[%n] : memref<8xf32>
// CHECK-LABEL: loop.kernel @gemm_kernel
// CHECK-LABEL: func.func @forward
// CHECK:         loop.launch @k_proj_kernel(%x, %wk, %yk, %wv, %yv)
// CHECK-NEXT:    %z = loop.alloc : memref<4x8xf32>
// CHECK-NEXT:    loop.launch @gemm_kernel(%a, %wk, %z)

builtin.module {
  loop.kernel @k_proj_kernel(%x: memref<64xf32>, %wk: memref<8x64xf32>, %yk: memref<8xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %n = 0 to 8 {
      %dot = loop.for %k = 0 to 64 iter_args(%acc = %zero) -> (f32) {
        %xv = loop.load %x[%k] : memref<64xf32>
        %w = loop.load %wk[%n, %k] : memref<8x64xf32>
        %m = arith.mulf %xv, %w : f32
        %s = arith.addf %acc, %m : f32
        loop.yield %s : f32
      }
      loop.store %dot, %yk[%n] : memref<8xf32>
    }
    loop.return
  }
  loop.kernel @v_proj_kernel(%x: memref<64xf32>, %wv: memref<8x64xf32>, %yv: memref<8xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %n = 0 to 8 {
      %dot = loop.for %k = 0 to 64 iter_args(%acc = %zero) -> (f32) {
        %xv = loop.load %x[%k] : memref<64xf32>
        %w = loop.load %wv[%n, %k] : memref<8x64xf32>
        %m = arith.mulf %xv, %w : f32
        %s = arith.addf %acc, %m : f32
        loop.yield %s : f32
      }
      loop.store %dot, %yv[%n] : memref<8xf32>
    }
    loop.return
  }
  loop.kernel @gemm_kernel(%a: memref<4x64xf32>, %w: memref<8x64xf32>, %z: memref<4x8xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %m = 0 to 4 {
      loop.for %n = 0 to 8 {
        %dot = loop.for %k = 0 to 64 iter_args(%acc = %zero) -> (f32) {
          %av = loop.load %a[%m, %k] : memref<4x64xf32>
          %wv = loop.load %w[%n, %k] : memref<8x64xf32>
          %p = arith.mulf %av, %wv : f32
          %s = arith.addf %acc, %p : f32
          loop.yield %s : f32
        }
        loop.store %dot, %z[%m, %n] : memref<4x8xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x: memref<64xf32>, %wk: memref<8x64xf32>, %wv: memref<8x64xf32>, %a: memref<4x64xf32>) -> (memref<8xf32>, memref<8xf32>, memref<4x8xf32>) {
    %yk = loop.alloc : memref<8xf32>
    loop.launch @k_proj_kernel(%x, %wk, %yk) : (memref<64xf32>, memref<8x64xf32>, memref<8xf32>) -> ()
    %yv = loop.alloc : memref<8xf32>
    loop.launch @v_proj_kernel(%x, %wv, %yv) : (memref<64xf32>, memref<8x64xf32>, memref<8xf32>) -> ()
    %z = loop.alloc : memref<4x8xf32>
    loop.launch @gemm_kernel(%a, %wk, %z) : (memref<4x64xf32>, memref<8x64xf32>, memref<4x8xf32>) -> ()
    func.return %yk, %yv, %z : memref<8xf32>, memref<8xf32>, memref<4x8xf32>
  }
}
