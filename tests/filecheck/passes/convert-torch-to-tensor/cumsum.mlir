// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// cumsum along dim 1 of size n: spread x over a new trailing dim j (x[b, j] at [b, i, j]),
// keep j <= i (tensor.index comparisons), converted to the i64 result, sum over j, drop j.

// CHECK-LABEL: func.func @cumsum
// CHECK-NEXT:    %[[S:.*]] = tensor.index_map(%m) [affine_map<(d0, d1, d2) -> (d0, d2)>] : (tensor<2x8xi1>) -> tensor<2x8x8xi1>
// CHECK-NEXT:    %[[K:.*]] = tensor.elementwise(%[[S]]) : (tensor<2x8x8xi1>) -> tensor<2x8x8xi64> {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: i1):
// CHECK-NEXT:      %[[J:.*]] = tensor.index 2 : index
// CHECK-NEXT:      %[[I:.*]] = tensor.index 1 : index
// CHECK-NEXT:      %[[KEEP:.*]] = arith.cmpi sle, %[[J]], %[[I]] : index
// CHECK-NEXT:      %[[W:.*]] = arith.extui %[[V]] : i1 to i64
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0 : i64
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[KEEP]], %[[W]], %[[Z]] : i64
// CHECK-NEXT:      tensor.yield %[[R]] : i64
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[T:.*]] = tensor.reduce add %[[K]] dims [2] : tensor<2x8x8xi64> -> tensor<2x8x1xi64>
// CHECK-NEXT:    %[[O:.*]] = tensor.index_map(%[[T]]) [affine_map<(d0, d1) -> (d0, d1, 0)>] : (tensor<2x8x1xi64>) -> tensor<2x8xi64>
// CHECK-NEXT:    func.return %[[O]] : tensor<2x8xi64>
func.func @cumsum(%m: tensor<2x8xi1>) -> tensor<2x8xi64> {
  %r = torch.cumsum %m {dim = 1 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  func.return %r : tensor<2x8xi64>
}
