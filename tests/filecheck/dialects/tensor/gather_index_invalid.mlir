// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @index_rank() -> tensor<4xi64> {
  %e = tensor.elementwise() : () -> tensor<4xi64> {
    %i = tensor.index 1 : index
    %v = arith.index_cast %i : index to i64
    tensor.yield %v : i64
  }
  func.return %e : tensor<4xi64>
}
// CHECK: tensor.index: dim 1 out of range for a result of rank 1

// -----

func.func @index_parent() -> index {
  %i = tensor.index 0 : index
  func.return %i : index
}
// CHECK: 'tensor.index' expects parent op 'tensor.elementwise'

// -----

func.func @gather_shape(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  %g = tensor.gather %w[%i] dim 0 : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x8xf32>
  func.return %g : tensor<3x8xf32>
}
// CHECK: tensor.gather: result shape [3, 8] must be [3, 4]

// -----

func.func @gather_indices(%w: tensor<8x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  %g = tensor.gather %w[%i] dim 0 : (tensor<8x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  func.return %g : tensor<3x4xf32>
}
// CHECK: tensor.gather: indices must be i64 or i32, got f32

// -----

func.func @gather_dim(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %g = tensor.gather %w[%i] dim 2 : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  func.return %g : tensor<3x4xf32>
}
// CHECK: tensor.gather: dim 2 out of range for rank 2

// -----

func.func @gather_type(%w: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf16> {
  %g = tensor.gather %w[%i] dim 0 : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf16>
  func.return %g : tensor<3x4xf16>
}
// CHECK: tensor.gather: result element type differs from the source's
