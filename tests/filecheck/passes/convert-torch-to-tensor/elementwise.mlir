// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// Binary ops broadcast each operand to the result shape (only when needed), then one
// elementwise; a scalar torch.constant operand is folded into the body.

// CHECK-LABEL: func.func @binary
// CHECK-SAME:    (%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[B:.*]] = tensor.index_map(%b) [affine_map<(d0, d1) -> (d1)>] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[S:.*]] = tensor.elementwise(%a, %[[B]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32):
// CHECK-NEXT:      %[[R:.*]] = arith.subf %[[X]], %[[Y]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[M:.*]] = tensor.elementwise(%[[S]]) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb{{[0-9]+}}(%[[X2:.*]]: f32):
// CHECK-NEXT:      %[[C:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[R2:.*]] = arith.mulf %[[X2]], %[[C]] : f32
// CHECK-NEXT:      tensor.yield %[[R2]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[M]] : tensor<4x8xf32>
func.func @binary(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %s = torch.sub %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %c = torch.constant {value = 0.5 : f64} : () -> tensor<f32>
  %m = torch.mul %s, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return %m : tensor<4x8xf32>
}

// Both operands broadcast (outer-product shape).
// CHECK-LABEL: func.func @outer
// CHECK-NEXT:    tensor.index_map(%a) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    tensor.index_map(%b) [affine_map<(d0, d1) -> (d1)>] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    tensor.elementwise
// CHECK:         arith.divf
func.func @outer(%a: tensor<4x1xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %d = torch.div %a, %b : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %d : tensor<4x8xf32>
}

// A constant with no elementwise consumer becomes a zero-input (splat) elementwise.
// CHECK-LABEL: func.func @splat
// CHECK-NEXT:    %{{.*}} = tensor.elementwise() : () -> tensor<2x3xf32> {
// CHECK-NEXT:      %[[C:.*]] = arith.constant 1.500000e+00 : f32
// CHECK-NEXT:      tensor.yield %[[C]] : f32
// CHECK-NEXT:    }
func.func @splat() -> tensor<2x3xf32> {
  %c = torch.constant {value = 1.5 : f64} : () -> tensor<2x3xf32>
  func.return %c : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @activations
// relu
// CHECK:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    arith.maximumf %{{.*}}, %[[Z]] : f32
// sigmoid = 1 / (1 + exp(-x))
// CHECK:         arith.negf
// CHECK-NEXT:    math.exp
// CHECK-NEXT:    arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    arith.divf
// silu = x / (1 + exp(-x))
// CHECK:         ^bb{{[0-9]+}}(%[[X:.*]]: f32):
// CHECK-NEXT:      arith.negf %[[X]]
// CHECK-NEXT:      math.exp
// CHECK-NEXT:      arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[D:.*]] = arith.addf
// CHECK-NEXT:      arith.divf %[[X]], %[[D]] : f32
// gelu (erf) = 0.5 x (1 + erf(x / sqrt 2))
// CHECK:         arith.constant 5.000000e-01 : f32
// CHECK:         arith.constant 0.707106769 : f32
// CHECK:         math.erf
// gelu (tanh)
// CHECK:         arith.constant 4.471500e-02 : f32
// CHECK:         math.tanh
// CHECK:         math.sqrt
// CHECK:         math.rsqrt
// CHECK:         math.log
// CHECK:         math.absf
func.func @activations(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = torch.relu %x : (tensor<8xf32>) -> tensor<8xf32>
  %1 = torch.sigmoid %0 : (tensor<8xf32>) -> tensor<8xf32>
  %2 = torch.silu %1 : (tensor<8xf32>) -> tensor<8xf32>
  %3 = torch.gelu %2 {approximate = "none"} : (tensor<8xf32>) -> tensor<8xf32>
  %4 = torch.gelu %3 {approximate = "tanh"} : (tensor<8xf32>) -> tensor<8xf32>
  %5 = torch.sqrt %4 : (tensor<8xf32>) -> tensor<8xf32>
  %6 = torch.rsqrt %5 : (tensor<8xf32>) -> tensor<8xf32>
  %7 = torch.log %6 : (tensor<8xf32>) -> tensor<8xf32>
  %8 = torch.abs %7 : (tensor<8xf32>) -> tensor<8xf32>
  func.return %8 : tensor<8xf32>
}

// pow: integer exponents multiply, +-0.5 are (r)sqrt, others math.powf.
// CHECK-LABEL: func.func @pow
// CHECK:         ^bb{{[0-9]+}}(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[X2:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-NEXT:      %[[X3:.*]] = arith.mulf %[[X2]], %[[X]] : f32
// CHECK-NEXT:      tensor.yield %[[X3]] : f32
// CHECK:           math.sqrt
// CHECK:           math.rsqrt
// CHECK:           %[[E:.*]] = arith.constant 1.700000e+00 : f32
// CHECK-NEXT:      math.powf %{{.*}}, %[[E]] : f32
func.func @pow(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = torch.pow %x {exponent = 3.0 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  %1 = torch.pow %0 {exponent = 0.5 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  %2 = torch.pow %1 {exponent = -0.5 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  %3 = torch.pow %2 {exponent = 1.7 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  func.return %3 : tensor<8xf32>
}

// CHECK-NOT: torch.
