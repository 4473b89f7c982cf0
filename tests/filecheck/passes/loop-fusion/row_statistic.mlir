// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

func.func @forward(%x0: tensor<32x16xf32> {deplodock.input = "x0"}, %x1: tensor<16x64xf32> {deplodock.input = "x1"}) -> tensor<32x64xf32> {
  %softmax = tensor.reduce max %x0 dims [1] : tensor<32x16xf32> -> tensor<32x1xf32>
  %softmax_1 = tensor.index_map(%softmax) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<32x1xf32>) -> tensor<32x16xf32>
  %softmax_2 = tensor.elementwise(%x0, %softmax_1) : (tensor<32x16xf32>, tensor<32x16xf32>) -> tensor<32x16xf32> {
  ^bb0(%0: f32, %1: f32):
    %2 = arith.subf %0, %1 : f32
    %3 = math.exp %2 : f32
    tensor.yield %3 : f32
  }
  %softmax_3 = tensor.reduce add %softmax_2 dims [1] : tensor<32x16xf32> -> tensor<32x1xf32>
  %softmax_4 = tensor.elementwise(%softmax_3) : (tensor<32x1xf32>) -> tensor<32x1xf32> {
  ^bb0(%4: f32):
    %5 = arith.constant 1.000000e+00 : f32
    %6 = arith.divf %5, %4 : f32
    tensor.yield %6 : f32
  }
  %softmax_5 = tensor.index_map(%softmax_4) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<32x1xf32>) -> tensor<32x16xf32>
  %softmax_6 = tensor.elementwise(%softmax_2, %softmax_5) : (tensor<32x16xf32>, tensor<32x16xf32>) -> tensor<32x16xf32> {
  ^bb0(%7: f32, %8: f32):
    %9 = arith.mulf %7, %8 : f32
    tensor.yield %9 : f32
  }
  %matmul = tensor.index_map(%softmax_6) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<32x16xf32>) -> tensor<32x16x64xf32>
  %matmul_1 = tensor.index_map(%x1) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<16x64xf32>) -> tensor<32x16x64xf32>
  %matmul_2 = tensor.elementwise(%matmul, %matmul_1) : (tensor<32x16x64xf32>, tensor<32x16x64xf32>) -> tensor<32x16x64xf32> {
  ^bb0(%10: f32, %11: f32):
    %12 = arith.mulf %10, %11 : f32
    tensor.yield %12 : f32
  }
  %matmul_3 = tensor.reduce add %matmul_2 dims [1] : tensor<32x16x64xf32> -> tensor<32x1x64xf32>
  %matmul_4 = tensor.index_map(%matmul_3) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<32x1x64xf32>) -> tensor<32x64xf32>
  func.return %matmul_4 : tensor<32x64xf32>
}

// softmax(x) @ w, x of 32 rows and w of 64 columns (SDPA's P.V has a head dimension of 64
// or 128). The row max and row sum still feed the contraction, but each is read once per
// row, outside the K loop, by at most 256 columns, and there are rows enough to block (16
// or more): they are cloned in, between the output loops, and the kernels of
// softmax_before_matmul.mlir become one. tile-block then keeps them as
// row statistics and tile-shared-statistics computes them once per block row.
// CHECK:      loop.kernel @matmul_kernel(%x0: memref<32x16xf32>, %x1: memref<16x64xf32>, %matmul: memref<32x64xf32>) {
// CHECK:        loop.for %i0 = 0 to 32 {
// CHECK-NEXT:     %max = loop.for %r1 = 0 to 16 iter_args
// CHECK:            arith.maximumf
// CHECK:          %add = loop.for %r1_1 = 0 to 16 iter_args
// CHECK:            arith.subf %{{.*}}, %max : f32
// CHECK:          %[[INV:.*]] = arith.divf %{{.*}}, %add : f32
// CHECK-NEXT:     loop.for %i1 = 0 to 64 {
// CHECK-NEXT:       loop.for %r1_2 = 0 to 16 iter_args
// CHECK-NOT:          loop.for
// CHECK:              arith.mulf %{{.*}}, %[[INV]] : f32
// CHECK:        func.func @forward
// CHECK-NEXT:     %matmul = loop.alloc
// CHECK-NEXT:     loop.launch @matmul_kernel(%x0, %x1, %matmul)
// CHECK-NEXT:     func.return %matmul
