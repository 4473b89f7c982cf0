// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

// RMSNorm before a linear of one row (a decode step's M = 1 projection): 8192 output
// columns, each a row reduction over K = 2048 that the tile passes schedule as a GEMV, with
// nothing staged. As the linear's prologue the normalized row x * rsqrt * weight would be
// recomputed for every column, reading 8 bytes (x and the weight) per 4-byte element: 64 MiB
// more than reading it once, past MIN_REREAD_BYTES. So loop-fusion leaves it a kernel of its
// own, which computes the statistic itself (one row: the sum of squares fuses into the
// elementwise normalization) and writes the normalized row once; the linear reads it. With
// 16 rows or more the product is tiled and stages its prologue once per block of columns:
// then the normalization fuses into the linear (norm_into_linear.mlir).

// CHECK-LABEL: loop.kernel @rms_norm_kernel(%x0: memref<1x2048xf32>, %p_1_weight: memref<2048xf32>, %rms_norm: memref<1x2048xf32>)
// CHECK:         math.rsqrt
// CHECK:         loop.store %{{.*}}, %rms_norm[%{{.*}}, %{{.*}}] : memref<1x2048xf32>
// CHECK-LABEL: loop.kernel @linear_kernel(%rms_norm: memref<1x2048xf32>, %p_0_weight: memref<8192x2048xf32>, %linear: memref<1x8192xf32>)
// CHECK-NOT:     math.rsqrt
// CHECK:         loop.load %rms_norm
// CHECK-LABEL: func.func @forward
// CHECK:         loop.launch @rms_norm_kernel(%x0, %p_1_weight, %rms_norm)
// CHECK-NEXT:    %linear = loop.alloc : memref<1x8192xf32>
// CHECK-NEXT:    loop.launch @linear_kernel(%rms_norm, %p_0_weight, %linear)

builtin.module {
  func.func @forward(%x0: tensor<1x2048xf32> {deplodock.input = "x0"}, %p_0_weight: tensor<8192x2048xf32> {deplodock.param = "0.weight"}, %p_1_weight: tensor<2048xf32> {deplodock.param = "1.weight"}) -> tensor<1x8192xf32> {
    %rms_norm = tensor.elementwise(%x0) : (tensor<1x2048xf32>) -> tensor<1x2048xf32> {
    ^bb0(%0: f32):
      %1 = arith.mulf %0, %0 : f32
      tensor.yield %1 : f32
    }
    %rms_norm_1 = tensor.reduce add %rms_norm dims [1] : tensor<1x2048xf32> -> tensor<1x1xf32>
    %rms_norm_2 = tensor.elementwise(%rms_norm_1) : (tensor<1x1xf32>) -> tensor<1x1xf32> {
    ^bb0(%2: f32):
      %3 = arith.constant 0.00048828125 : f32
      %4 = arith.mulf %2, %3 : f32
      %5 = arith.constant 1.1920929e-07 : f32
      %6 = arith.addf %4, %5 : f32
      %7 = math.rsqrt %6 : f32
      tensor.yield %7 : f32
    }
    %rms_norm_3 = tensor.index_map(%rms_norm_2) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<1x1xf32>) -> tensor<1x2048xf32>
    %rms_norm_4 = tensor.index_map(%p_1_weight) [affine_map<(d0, d1) -> (d1)>] : (tensor<2048xf32>) -> tensor<1x2048xf32>
    %rms_norm_5 = tensor.elementwise(%x0, %rms_norm_3, %rms_norm_4) : (tensor<1x2048xf32>, tensor<1x2048xf32>, tensor<1x2048xf32>) -> tensor<1x2048xf32> {
    ^bb0(%8: f32, %9: f32, %10: f32):
      %11 = arith.mulf %8, %9 : f32
      %12 = arith.mulf %11, %10 : f32
      tensor.yield %12 : f32
    }
    %linear = tensor.index_map(%rms_norm_5) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<1x2048xf32>) -> tensor<1x2048x8192xf32>
    %linear_1 = tensor.index_map(%p_0_weight) [affine_map<(d0, d1, d2) -> (d2, d1)>] : (tensor<8192x2048xf32>) -> tensor<1x2048x8192xf32>
    %linear_2 = tensor.elementwise(%linear, %linear_1) : (tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>) -> tensor<1x2048x8192xf32> {
    ^bb0(%13: f32, %14: f32):
      %15 = arith.mulf %13, %14 : f32
      tensor.yield %15 : f32
    }
    %linear_3 = tensor.reduce add %linear_2 dims [1] : tensor<1x2048x8192xf32> -> tensor<1x1x8192xf32>
    %linear_4 = tensor.index_map(%linear_3) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<1x1x8192xf32>) -> tensor<1x8192xf32>
    func.return %linear_4 : tensor<1x8192xf32>
  }
}
