// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @f(%a: tensor<4x64xf32>, %b: tensor<32x16xf32>) -> tensor<4x16xf32> {
  %r = torch.matmul %a, %b : (tensor<4x64xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
  func.return %r : tensor<4x16xf32>
}
// CHECK: torch.matmul: inner dimensions 64 and 32 differ

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<3xf32>) -> tensor<4x8xf32> {
  %r = torch.add %a, %b : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
// CHECK: torch.add: shapes 4x8 and 3 are not broadcastable

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.relu %a : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %a : tensor<4x8xf32>
}
// CHECK: torch.relu: result type tensor<8x4xf32> differs from inferred tensor<4x8xf32>

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  %r = torch.sum %a {dims = array<i64: 1, 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<f32>
  func.return %a : tensor<4x8xf32>
}
// CHECK: torch.sum: dims [1, 0] must be sorted and unique

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.softmax %a {dim = -1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
// CHECK: torch.softmax: dim -1 out of range [0, 2) (dims are normalized, non-negative)

// -----

func.func @f(%a: tensor<4x8xf32>, %w: tensor<4xf32>) -> tensor<4x8xf32> {
  %r = torch.rms_norm %a, %w {normalized_shape = array<i64: 8>, eps = 1.000000e-06 : f64} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
// CHECK: torch.rms_norm: parameter shape 4 differs from 8

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.layer_norm %a {normalized_shape = array<i64: 4>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
// CHECK: torch.layer_norm: normalized_shape 4 is not the trailing shape of 4x8

// -----

func.func @f(%a: tensor<4x8xf32>, %w: tensor<16x4xf32>) -> tensor<4x16xf32> {
  %r = torch.linear %a, %w : (tensor<4x8xf32>, tensor<16x4xf32>) -> tensor<4x16xf32>
  func.return %r : tensor<4x16xf32>
}
// CHECK: torch.linear: inner dimensions 8 and 4 differ

// -----

func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<3x8x4xf32>) -> tensor<2x4x4xf32> {
  %r = torch.bmm %a, %b : (tensor<2x4x8xf32>, tensor<3x8x4xf32>) -> tensor<2x4x4xf32>
  func.return %r : tensor<2x4x4xf32>
}
// CHECK: torch.bmm: batch sizes 2 and 3 differ

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<3x8xf32> {
  %r = torch.reshape %a : (tensor<4x8xf32>) -> tensor<3x8xf32>
  func.return %r : tensor<3x8xf32>
}
// CHECK: torch.reshape: cannot reshape 4x8 (32 elements) to 3x8

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %r = torch.expand %a : (tensor<4x8xf32>) -> tensor<4x16xf32>
  func.return %r : tensor<4x16xf32>
}
// CHECK: torch.expand: cannot expand 4x8 to 4x16

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %r = torch.slice %a {dim = 1 : i64, start = 5 : i64, end = 9 : i64, step = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  func.return %a : tensor<4x8xf32>
}
// CHECK: torch.slice: bounds 5:9:1 not normalized for size 8

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<3x7xf32>) -> tensor<7x8xf32> {
  %r = torch.cat %a, %b {dim = 0 : i64} : (tensor<4x8xf32>, tensor<3x7xf32>) -> tensor<7x8xf32>
  func.return %r : tensor<7x8xf32>
}
// CHECK: torch.cat: input shapes 4x8, 3x7 differ outside dim 0

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %r = torch.permute %a {dims = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %r : tensor<8x4xf32>
}
// CHECK: torch.permute: dims [1, 1] are not a permutation of rank 2

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.gelu %a {approximate = "fast"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
// CHECK: torch.gelu: approximate must be "none" or "tanh", got "fast"

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf16>) -> tensor<4x8xf32> {
  %r = torch.mul %a, %b : (tensor<4x8xf32>, tensor<4x8xf16>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
// CHECK: torch.mul: operands must have the same element type

// -----

func.func @f(%a: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %r = torch.neg %a : (tensor<4x8xf64>) -> tensor<4x8xf64>
  func.return %r : tensor<4x8xf64>
}
// CHECK: torch.neg: element type f64 is not supported

// -----

func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.clamp %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
// CHECK: torch.clamp: needs a min or a max bound (or both)

// -----

func.func @f(%a: tensor<4xi64>) -> tensor<4xi64> {
  %r = torch.clamp %a {max = 2.500000e+00 : f64} : (tensor<4xi64>) -> tensor<4xi64>
  func.return %r : tensor<4xi64>
}
// CHECK: torch.clamp: bounds of an i64 tensor must be integers

// -----

func.func @f(%a: tensor<4xi32>) -> tensor<4xi32> {
  %r = torch.erf %a : (tensor<4xi32>) -> tensor<4xi32>
  func.return %r : tensor<4xi32>
}
// CHECK: torch.erf: needs a float tensor, got i32
