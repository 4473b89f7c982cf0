// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// erf, clamp and hardswish: one tensor.elementwise each.

// CHECK-LABEL: func.func @erf
// CHECK-NEXT:    %{{.*}} = tensor.elementwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[R:.*]] = math.erf %[[X]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-NEXT:    }
func.func @erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.erf %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// clamp is compare-and-select, min first: an ordered compare is false for NaN, so a NaN
// input comes through both selects (PyTorch propagates it).
// CHECK-LABEL: func.func @clamp
// CHECK-NEXT:    %{{.*}} = tensor.elementwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[LO:.*]] = arith.constant -5.000000e-01 : f32
// CHECK-NEXT:      %[[BELOW:.*]] = arith.cmpf olt, %[[X]], %[[LO]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.select %[[BELOW]], %[[LO]], %[[X]] : f32
// CHECK-NEXT:      %[[HI:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[ABOVE:.*]] = arith.cmpf ogt, %[[Y]], %[[HI]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[ABOVE]], %[[HI]], %[[Y]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-NEXT:    }
func.func @clamp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.clamp %x {min = -5.000000e-01 : f64, max = 5.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// One bound: one compare and one select. Integer tensors compare with cmpi.
// CHECK-LABEL: func.func @clamp_min
// CHECK:           arith.cmpf olt
// CHECK-NEXT:      arith.select
// CHECK-NEXT:      tensor.yield
// CHECK-LABEL: func.func @clamp_max_int
// CHECK:           %[[HI:.*]] = arith.constant 3 : i64
// CHECK-NEXT:      %[[ABOVE:.*]] = arith.cmpi sgt, %{{.*}}, %[[HI]] : i64
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[ABOVE]], %[[HI]], %{{.*}} : i64
// CHECK-NEXT:      tensor.yield %[[R]] : i64
func.func @clamp_min(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = torch.clamp %x {min = 0.000000e+00 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  func.return %r : tensor<8xf32>
}
func.func @clamp_max_int(%x: tensor<8xi64>) -> tensor<8xi64> {
  %r = torch.clamp %x {max = 3.000000e+00 : f64} : (tensor<8xi64>) -> tensor<8xi64>
  func.return %r : tensor<8xi64>
}

// A NaN bound makes every element NaN (as in PyTorch).
// CHECK-LABEL: func.func @clamp_nan_bound
// CHECK:           %[[NAN:.*]] = arith.constant 0x7fc00000 : f32
// CHECK-NEXT:      tensor.yield %[[NAN]] : f32
func.func @clamp_nan_bound(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = torch.clamp %x {min = 0x7FF8000000000000 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  func.return %r : tensor<8xf32>
}

// hardswish = x * relu6(x + 3) / 6, relu6 being the same clamp to [0, 6].
// CHECK-LABEL: func.func @hardswish
// CHECK-NEXT:    %{{.*}} = tensor.elementwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[THREE:.*]] = arith.constant 3.000000e+00 : f32
// CHECK-NEXT:      %[[SHIFTED:.*]] = arith.addf %[[X]], %[[THREE]] : f32
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[BELOW:.*]] = arith.cmpf olt, %[[SHIFTED]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.select %[[BELOW]], %[[ZERO]], %[[SHIFTED]] : f32
// CHECK-NEXT:      %[[SIX:.*]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT:      %[[ABOVE:.*]] = arith.cmpf ogt, %[[Y]], %[[SIX]] : f32
// CHECK-NEXT:      %[[RELU6:.*]] = arith.select %[[ABOVE]], %[[SIX]], %[[Y]] : f32
// CHECK-NEXT:      %[[PRODUCT:.*]] = arith.mulf %[[X]], %[[RELU6]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.divf %[[PRODUCT]], %[[SIX]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-NEXT:    }
func.func @hardswish(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.hardswish %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
