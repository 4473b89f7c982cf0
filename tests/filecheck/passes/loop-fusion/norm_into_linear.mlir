// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

// RMSNorm feeding a linear of 512 output columns. The sum of squares is a reduction whose
// value feeds the linear's K loop, broadcast along the output columns %i1: past 256 columns
// loop-fusion does not clone it there (each block of columns would recompute it; at most 256,
// SDPA's head dimension, it fuses: row_statistic.mlir). It stays a kernel writing one statistic per row; the elementwise steps
// after it (scale, eps, rsqrt, the weights) fuse into the linear as its prologue.

builtin.module {
  func.func @forward(%x0: tensor<8x32xf32> {deplodock.input = "x0"}, %p_0_weight: tensor<512x32xf32> {deplodock.param = "0.weight"}, %p_1_weight: tensor<32xf32> {deplodock.param = "1.weight"}) -> tensor<8x512xf32> {
    %rms_norm = tensor.elementwise(%x0) : (tensor<8x32xf32>) -> tensor<8x32xf32> {
    ^bb0(%0: f32):
      %1 = arith.mulf %0, %0 : f32
      tensor.yield %1 : f32
    }
    %rms_norm_1 = tensor.reduce add %rms_norm dims [1] : tensor<8x32xf32> -> tensor<8x1xf32>
    %rms_norm_2 = tensor.elementwise(%rms_norm_1) : (tensor<8x1xf32>) -> tensor<8x1xf32> {
    ^bb0(%2: f32):
      %3 = arith.constant 3.125000e-02 : f32
      %4 = arith.mulf %2, %3 : f32
      %5 = arith.constant 1.1920929e-07 : f32
      %6 = arith.addf %4, %5 : f32
      %7 = math.rsqrt %6 : f32
      tensor.yield %7 : f32
    }
    %rms_norm_3 = tensor.index_map(%rms_norm_2) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<8x1xf32>) -> tensor<8x32xf32>
    %rms_norm_4 = tensor.index_map(%p_1_weight) [affine_map<(d0, d1) -> (d1)>] : (tensor<32xf32>) -> tensor<8x32xf32>
    %rms_norm_5 = tensor.elementwise(%x0, %rms_norm_3, %rms_norm_4) : (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32> {
    ^bb0(%8: f32, %9: f32, %10: f32):
      %11 = arith.mulf %8, %9 : f32
      %12 = arith.mulf %11, %10 : f32
      tensor.yield %12 : f32
    }
    %linear = tensor.index_map(%rms_norm_5) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<8x32xf32>) -> tensor<8x32x512xf32>
    %linear_1 = tensor.index_map(%p_0_weight) [affine_map<(d0, d1, d2) -> (d2, d1)>] : (tensor<512x32xf32>) -> tensor<8x32x512xf32>
    %linear_2 = tensor.elementwise(%linear, %linear_1) : (tensor<8x32x512xf32>, tensor<8x32x512xf32>) -> tensor<8x32x512xf32> {
    ^bb0(%13: f32, %14: f32):
      %15 = arith.mulf %13, %14 : f32
      tensor.yield %15 : f32
    }
    %linear_3 = tensor.reduce add %linear_2 dims [1] : tensor<8x32x512xf32> -> tensor<8x1x512xf32>
    %linear_4 = tensor.index_map(%linear_3) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<8x1x512xf32>) -> tensor<8x512xf32>
    func.return %linear_4 : tensor<8x512xf32>
  }
}

// CHECK:      loop.kernel @rms_norm_kernel(%x0: memref<8x32xf32>, %rms_norm: memref<8x1xf32>)
// CHECK:        loop.for %r1 = 0 to 32
// CHECK:        loop.store %add, %rms_norm[%i0, %c0]
// CHECK:      loop.kernel @linear_kernel(%x0: memref<8x32xf32>, %rms_norm: memref<8x1xf32>,
// CHECK:        loop.for %i0 = 0 to 8 {
// CHECK-NEXT:     %[[S:.*]] = loop.load %rms_norm[%i0, %c0]
// CHECK:          %[[R:.*]] = math.rsqrt
// CHECK-NEXT:     loop.for %i1 = 0 to 512 {
// CHECK-NEXT:       %add = loop.for %r1 = 0 to 32
// CHECK-NOT:          math.rsqrt
// CHECK:              arith.mulf %{{.*}}, %[[R]]
// CHECK:            loop.yield
// CHECK:      loop.launch @rms_norm_kernel
// CHECK-NEXT: %linear = loop.alloc
// CHECK-NEXT: loop.launch @linear_kernel
