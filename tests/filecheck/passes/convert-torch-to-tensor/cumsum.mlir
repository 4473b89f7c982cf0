// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// cumsum is one `tensor.scan add` along its dim, after a conversion to the result type
// (PyTorch sums bool and integer inputs as i64); a float input of the result's type goes
// straight to the scan.

// CHECK-LABEL: func.func @cumsum
// CHECK-NEXT:    %[[W:.*]] = tensor.elementwise(%m) : (tensor<2x8xi1>) -> tensor<2x8xi64> {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: i1):
// CHECK-NEXT:      %[[E:.*]] = arith.extui %[[V]] : i1 to i64
// CHECK-NEXT:      tensor.yield %[[E]] : i64
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S:.*]] = tensor.scan add %[[W]] dim 1 : tensor<2x8xi64>
// CHECK-NEXT:    func.return %[[S]] : tensor<2x8xi64>
func.func @cumsum(%m: tensor<2x8xi1>) -> tensor<2x8xi64> {
  %r = torch.cumsum %m {dim = 1 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  func.return %r : tensor<2x8xi64>
}

// CHECK-LABEL: func.func @cumsum_float
// CHECK-NEXT:    %[[S:.*]] = tensor.scan add %x dim 0 : tensor<3x4xbf16>
// CHECK-NEXT:    func.return %[[S]] : tensor<3x4xbf16>
func.func @cumsum_float(%x: tensor<3x4xbf16>) -> tensor<3x4xbf16> {
  %r = torch.cumsum %x {dim = 0 : i64} : (tensor<3x4xbf16>) -> tensor<3x4xbf16>
  func.return %r : tensor<3x4xbf16>
}
