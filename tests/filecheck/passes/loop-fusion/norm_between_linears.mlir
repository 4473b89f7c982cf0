// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

// linear -> LayerNorm -> linear has attention's shape: the first product's columns are
// reduced over by row statistics (mean, variance) and by the second product. But there is
// no softmax (no exp) to stream, so the first product is not a score matrix: fused, it
// would be recomputed for every statistic and every output column. It stays a kernel; the
// norm's statistics and the second product are one kernel.
func.func @forward(%x0: tensor<32x64xf32>, %x1: tensor<64x32xf32>, %x2: tensor<32x48xf32>) -> tensor<32x48xf32> {
  %matmul = tensor.index_map(%x0) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<32x64xf32>) -> tensor<32x64x32xf32>
  %matmul_1 = tensor.index_map(%x1) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<64x32xf32>) -> tensor<32x64x32xf32>
  %matmul_2 = tensor.elementwise(%matmul, %matmul_1) : (tensor<32x64x32xf32>, tensor<32x64x32xf32>) -> tensor<32x64x32xf32> {
  ^bb0(%0: f32, %1: f32):
    %2 = arith.mulf %0, %1 : f32
    tensor.yield %2 : f32
  }
  %matmul_3 = tensor.reduce add %matmul_2 dims [1] : tensor<32x64x32xf32> -> tensor<32x1x32xf32>
  %matmul_4 = tensor.index_map(%matmul_3) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<32x1x32xf32>) -> tensor<32x32xf32>
  %layer_norm = tensor.reduce add %matmul_4 dims [1] : tensor<32x32xf32> -> tensor<32x1xf32>
  %layer_norm_1 = tensor.elementwise(%layer_norm) : (tensor<32x1xf32>) -> tensor<32x1xf32> {
  ^bb0(%3: f32):
    %4 = arith.constant 3.125000e-02 : f32
    %5 = arith.mulf %3, %4 : f32
    tensor.yield %5 : f32
  }
  %layer_norm_2 = tensor.index_map(%layer_norm_1) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<32x1xf32>) -> tensor<32x32xf32>
  %layer_norm_3 = tensor.elementwise(%matmul_4, %layer_norm_2) : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32> {
  ^bb0(%6: f32, %7: f32):
    %8 = arith.subf %6, %7 : f32
    tensor.yield %8 : f32
  }
  %layer_norm_4 = tensor.reduce add %layer_norm_3 dims [1] : tensor<32x32xf32> -> tensor<32x1xf32>
  %layer_norm_5 = tensor.elementwise(%layer_norm_1, %layer_norm_4) : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<32x1xf32> {
  ^bb0(%9: f32, %10: f32):
    %11 = arith.constant 3.125000e-02 : f32
    %12 = arith.mulf %10, %11 : f32
    %13 = arith.addf %9, %12 : f32
    tensor.yield %13 : f32
  }
  %layer_norm_6 = tensor.index_map(%layer_norm_5) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<32x1xf32>) -> tensor<32x32xf32>
  %layer_norm_7 = tensor.elementwise(%matmul_4, %layer_norm_6) : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32> {
  ^bb0(%14: f32, %15: f32):
    %16 = arith.subf %14, %15 : f32
    tensor.yield %16 : f32
  }
  %layer_norm_8 = tensor.elementwise(%layer_norm_7) : (tensor<32x32xf32>) -> tensor<32x32xf32> {
  ^bb0(%17: f32):
    %18 = arith.mulf %17, %17 : f32
    tensor.yield %18 : f32
  }
  %layer_norm_9 = tensor.reduce add %layer_norm_8 dims [1] : tensor<32x32xf32> -> tensor<32x1xf32>
  %layer_norm_10 = tensor.elementwise(%layer_norm_9) : (tensor<32x1xf32>) -> tensor<32x1xf32> {
  ^bb0(%19: f32):
    %20 = arith.constant 3.125000e-02 : f32
    %21 = arith.mulf %19, %20 : f32
    %22 = arith.constant 1.000000e-05 : f32
    %23 = arith.addf %21, %22 : f32
    %24 = math.rsqrt %23 : f32
    tensor.yield %24 : f32
  }
  %layer_norm_11 = tensor.index_map(%layer_norm_10) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<32x1xf32>) -> tensor<32x32xf32>
  %layer_norm_12 = tensor.elementwise(%layer_norm_7, %layer_norm_11) : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32> {
  ^bb0(%25: f32, %26: f32):
    %27 = arith.mulf %25, %26 : f32
    tensor.yield %27 : f32
  }
  %matmul_5 = tensor.index_map(%layer_norm_12) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<32x32xf32>) -> tensor<32x32x48xf32>
  %matmul_6 = tensor.index_map(%x2) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<32x48xf32>) -> tensor<32x32x48xf32>
  %matmul_7 = tensor.elementwise(%matmul_5, %matmul_6) : (tensor<32x32x48xf32>, tensor<32x32x48xf32>) -> tensor<32x32x48xf32> {
  ^bb0(%28: f32, %29: f32):
    %30 = arith.mulf %28, %29 : f32
    tensor.yield %30 : f32
  }
  %matmul_8 = tensor.reduce add %matmul_7 dims [1] : tensor<32x32x48xf32> -> tensor<32x1x48xf32>
  %matmul_9 = tensor.index_map(%matmul_8) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<32x1x48xf32>) -> tensor<32x48xf32>
  func.return %matmul_9 : tensor<32x48xf32>
}

// CHECK:      loop.kernel @matmul_kernel(%x0: memref<32x64xf32>, %x1: memref<64x32xf32>, %matmul: memref<32x1x32xf32>) {
// CHECK:      loop.kernel @matmul_kernel_2(%matmul: memref<32x1x32xf32>, %x2: memref<32x48xf32>, %matmul_1: memref<32x48xf32>) {
// CHECK-NOT:    loop.for %{{.*}} = 0 to 64
// CHECK:      func.func @forward
// CHECK:        loop.launch @matmul_kernel(%x0, %x1, %matmul)
// CHECK:        loop.launch @matmul_kernel_2(%matmul, %x2, %matmul_1)
