// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier rules of the LLM ops: element types of masks and indices, GQA head counts,
// attention shapes, arange and cast shapes.

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = torch.eq %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: torch.eq: result type tensor<4xf32> differs from inferred tensor<4xi1>

// -----

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = torch.logical_and %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return %a : tensor<4xf32>
}
// CHECK: torch.logical_and: operands must be i1, got f32

// -----

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = torch.where %a, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
// CHECK: torch.where: condition must be i1, got f32

// -----

func.func @f(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  %r = torch.where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
// CHECK: torch.where: input and other must have the same element type

// -----

func.func @f(%a: tensor<4xf32>) -> tensor<2x2xf16> {
  %r = torch.cast %a : (tensor<4xf32>) -> tensor<2x2xf16>
  func.return %r : tensor<2x2xf16>
}
// CHECK: torch.cast: result shape 2x2 differs from the input shape 4

// -----

func.func @f() -> tensor<2x3xi64> {
  %r = torch.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : () -> tensor<2x3xi64>
  func.return %r : tensor<2x3xi64>
}
// CHECK: torch.arange: result must have rank 1, got 2x3

// -----

func.func @f() -> tensor<3xi1> {
  %r = torch.constant {value = 2.000000e+00 : f64} : () -> tensor<3xi1>
  func.return %r : tensor<3xi1>
}
// CHECK: torch.constant: a bool constant must be 0 or 1

// -----

func.func @f(%w: tensor<16x8xf32>, %i: tensor<3xf32>) -> tensor<3x8xf32> {
  %r = torch.embedding %w, %i : (tensor<16x8xf32>, tensor<3xf32>) -> tensor<3x8xf32>
  func.return %r : tensor<3x8xf32>
}
// CHECK: torch.embedding: indices must be i64 or i32, got f32

// -----

func.func @f(%w: tensor<16x8xf32>, %i: tensor<3xi64>, %j: tensor<4xi64>) -> tensor<3xf32> {
  %r = torch.index %w, %i, %j : (tensor<16x8xf32>, tensor<3xi64>, tensor<4xi64>) -> tensor<3xf32>
  func.return %r : tensor<3xf32>
}
// CHECK: torch.index: shapes 3 and 4 are not broadcastable

// -----

func.func @f(%x: tensor<4x8xi1>) -> tensor<4x8xi1> {
  %r = torch.cumsum %x {dim = 1 : i64} : (tensor<4x8xi1>) -> tensor<4x8xi1>
  func.return %r : tensor<4x8xi1>
}
// CHECK: torch.cumsum: result type tensor<4x8xi1> differs from inferred tensor<4x8xi64>

// -----

func.func @f(%q: tensor<1x4x6x8xf32>, %kv: tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32> {
  %r = torch.scaled_dot_product_attention %q, %kv, %kv {is_causal = true, scale = 1.0 : f64, enable_gqa = false} : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>
  func.return %r : tensor<1x4x6x8xf32>
}
// CHECK: torch.scaled_dot_product_attention: 4 query heads and 2 key/value heads need enable_gqa (divisible)

// -----

func.func @f(%q: tensor<1x4x6x8xf32>, %kv: tensor<1x4x6x4xf32>) -> tensor<1x4x6x8xf32> {
  %r = torch.scaled_dot_product_attention %q, %kv, %kv {is_causal = true, scale = 1.0 : f64, enable_gqa = false} : (tensor<1x4x6x8xf32>, tensor<1x4x6x4xf32>, tensor<1x4x6x4xf32>) -> tensor<1x4x6x8xf32>
  func.return %r : tensor<1x4x6x8xf32>
}
// CHECK: torch.scaled_dot_product_attention: shapes 1x4x6x8, 1x4x6x4, 1x4x6x4 do not match

// -----

func.func @f(%q: tensor<1x4x6x8xf32>, %m: tensor<5x6xi1>) -> tensor<1x4x6x8xf32> {
  %r = torch.scaled_dot_product_attention %q, %q, %q, %m {is_causal = false, scale = 1.0 : f64, enable_gqa = false} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<5x6xi1>) -> tensor<1x4x6x8xf32>
  func.return %r : tensor<1x4x6x8xf32>
}
// CHECK: torch.scaled_dot_product_attention: shapes 5x6 and 1x4x6x6 are not broadcastable

// -----

func.func @f(%q: tensor<1x4x6x8xf32>, %m: tensor<6x6xi64>) -> tensor<1x4x6x8xf32> {
  %r = torch.scaled_dot_product_attention %q, %q, %q, %m {is_causal = false, scale = 1.0 : f64, enable_gqa = false} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<6x6xi64>) -> tensor<1x4x6x8xf32>
  func.return %r : tensor<1x4x6x8xf32>
}
// CHECK: torch.scaled_dot_product_attention: attn_mask must be i1 or f32, got i64
