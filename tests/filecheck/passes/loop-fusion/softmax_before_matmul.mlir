// RUN: deplodock-opt %s -p 'convert-tensor-to-loop,loop-fusion{row-statistics=false}' | filecheck %s

func.func @forward(%x0: tensor<4x16xf32> {deplodock.input = "x0"}, %x1: tensor<16x8xf32> {deplodock.input = "x1"}) -> tensor<4x8xf32> {
  %softmax = tensor.reduce max %x0 dims [1] : tensor<4x16xf32> -> tensor<4x1xf32>
  %softmax_1 = tensor.index_map(%softmax) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x16xf32>
  %softmax_2 = tensor.elementwise(%x0, %softmax_1) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%0: f32, %1: f32):
    %2 = arith.subf %0, %1 : f32
    %3 = math.exp %2 : f32
    tensor.yield %3 : f32
  }
  %softmax_3 = tensor.reduce add %softmax_2 dims [1] : tensor<4x16xf32> -> tensor<4x1xf32>
  %softmax_4 = tensor.elementwise(%softmax_3) : (tensor<4x1xf32>) -> tensor<4x1xf32> {
  ^bb0(%4: f32):
    %5 = arith.constant 1.000000e+00 : f32
    %6 = arith.divf %5, %4 : f32
    tensor.yield %6 : f32
  }
  %softmax_5 = tensor.index_map(%softmax_4) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x16xf32>
  %softmax_6 = tensor.elementwise(%softmax_2, %softmax_5) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%7: f32, %8: f32):
    %9 = arith.mulf %7, %8 : f32
    tensor.yield %9 : f32
  }
  %matmul = tensor.index_map(%softmax_6) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<4x16xf32>) -> tensor<4x16x8xf32>
  %matmul_1 = tensor.index_map(%x1) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<16x8xf32>) -> tensor<4x16x8xf32>
  %matmul_2 = tensor.elementwise(%matmul, %matmul_1) : (tensor<4x16x8xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32> {
  ^bb0(%10: f32, %11: f32):
    %12 = arith.mulf %10, %11 : f32
    tensor.yield %12 : f32
  }
  %matmul_3 = tensor.reduce add %matmul_2 dims [1] : tensor<4x16x8xf32> -> tensor<4x1x8xf32>
  %matmul_4 = tensor.index_map(%matmul_3) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<4x1x8xf32>) -> tensor<4x8xf32>
  func.return %matmul_4 : tensor<4x8xf32>
}

// softmax(x) @ w with `row-statistics=false` (by default, over so few columns, both
// statistics fuse into the contraction: row_statistic.mlir). The row max and the row sum
// of exp(x - max) feed the contraction, so neither is cloned into it; the elementwise
// rest (exp, * 1/sum) is its prologue. The max has two readers, the sum's kernel and the contraction: the sum's
// kernel, a reduction over the same rows that runs first, takes it over. It computes the
// max itself and also stores it, and the max's own launch goes: two statistics, one kernel.
// CHECK:      loop.kernel @softmax_kernel(%x0: memref<4x16xf32>, %softmax: memref<4x1xf32>, %softmax_1: memref<4x1xf32>) {
// CHECK:        loop.for %i0 = 0 to 4 {
// CHECK-NEXT:     %max = loop.for %r1 = 0 to 16 iter_args
// CHECK:            arith.maximumf
// CHECK:          loop.store %max, %softmax[%i0, %c0] : memref<4x1xf32>
// CHECK-NEXT:     %add = loop.for %r1_1 = 0 to 16 iter_args
// CHECK:            arith.subf %{{.*}}, %max : f32
// CHECK:          loop.store %add, %softmax_1[%i0, %c0] : memref<4x1xf32>
// CHECK:      loop.kernel @matmul_kernel(%x0: memref<4x16xf32>, %softmax: memref<4x1xf32>, %softmax_1: memref<4x1xf32>, %x1: memref<16x8xf32>, %matmul: memref<4x8xf32>) {
// CHECK:        func.func @forward
// CHECK-NEXT:     %softmax = loop.alloc
// CHECK-NEXT:     %softmax_1 = loop.alloc
// CHECK-NEXT:     loop.launch @softmax_kernel(%x0, %softmax, %softmax_1)
// CHECK-NEXT:     %matmul = loop.alloc
// CHECK-NEXT:     loop.launch @matmul_kernel(%x0, %softmax, %softmax_1, %x1, %matmul)
// CHECK-NEXT:     func.return %matmul
