// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// amin is a min-reduce. argmax / argmin: the extreme value m along dim, then a min-reduce of
// one i64 offer per position (float: j for NaN, n + j for m, 2n otherwise), then r mod n.

// CHECK-LABEL: func.func @argmax
// CHECK-NEXT:    %[[M:.*]] = tensor.reduce max %x dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[MB:.*]] = tensor.index_map(%[[M]]) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[OFFERS:.*]] = tensor.elementwise(%x, %[[MB]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi64> {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f32, %[[MV:.*]]: f32):
// CHECK-NEXT:      %[[I:.*]] = tensor.index 1 : index
// CHECK-NEXT:      %[[J:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT:      %[[HIT:.*]] = arith.cmpf oeq, %[[V]], %[[MV]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.constant 8 : i64
// CHECK-NEXT:      %[[NJ:.*]] = arith.addi %[[J]], %[[N]] : i64
// CHECK-NEXT:      %[[TWO_N:.*]] = arith.constant 16 : i64
// CHECK-NEXT:      %[[AT:.*]] = arith.select %[[HIT]], %[[NJ]], %[[TWO_N]] : i64
// CHECK-NEXT:      %[[NAN:.*]] = arith.cmpf une, %[[V]], %[[V]] : f32
// CHECK-NEXT:      %[[OFFER:.*]] = arith.select %[[NAN]], %[[J]], %[[AT]] : i64
// CHECK-NEXT:      tensor.yield %[[OFFER]] : i64
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[FIRST:.*]] = tensor.reduce min %[[OFFERS]] dims [1] : tensor<4x8xi64> -> tensor<4x1xi64>
// CHECK-NEXT:    %[[IDX:.*]] = tensor.elementwise(%[[FIRST]]) : (tensor<4x1xi64>) -> tensor<4x1xi64> {
// CHECK-NEXT:    ^bb0(%[[R:.*]]: i64):
// CHECK-NEXT:      %[[N2:.*]] = arith.constant 8 : i64
// CHECK-NEXT:      %[[GE:.*]] = arith.cmpi sge, %[[R]], %[[N2]] : i64
// CHECK-NEXT:      %[[RN:.*]] = arith.subi %[[R]], %[[N2]] : i64
// CHECK-NEXT:      %[[MOD:.*]] = arith.select %[[GE]], %[[RN]], %[[R]] : i64
// CHECK-NEXT:      tensor.yield %[[MOD]] : i64
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[OUT:.*]] = tensor.index_map(%[[IDX]]) [affine_map<(d0) -> (d0, 0)>] : (tensor<4x1xi64>) -> tensor<4xi64>
// CHECK-NEXT:    func.return %[[OUT]] : tensor<4xi64>
func.func @argmax(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  %r = torch.argmax %x {dim = 1 : i64, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xi64>
  func.return %r : tensor<4xi64>
}

// Integers have no NaN: the offer is j or n, and keepdim keeps the reduced shape.
// CHECK-LABEL: func.func @argmin_int
// CHECK-NEXT:    %[[M:.*]] = tensor.reduce min %x dims [0] : tensor<4x8xi64> -> tensor<1x8xi64>
// CHECK:           %[[HIT:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : i64
// CHECK-NEXT:      %[[N:.*]] = arith.constant 4 : i64
// CHECK-NEXT:      %[[OFFER:.*]] = arith.select %[[HIT]], %{{.*}}, %[[N]] : i64
// CHECK-NEXT:      tensor.yield %[[OFFER]] : i64
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[FIRST:.*]] = tensor.reduce min %{{.*}} dims [0] : tensor<4x8xi64> -> tensor<1x8xi64>
// CHECK-NEXT:    func.return %[[FIRST]] : tensor<1x8xi64>
func.func @argmin_int(%x: tensor<4x8xi64>) -> tensor<1x8xi64> {
  %r = torch.argmin %x {dim = 0 : i64, keepdim = true} : (tensor<4x8xi64>) -> tensor<1x8xi64>
  func.return %r : tensor<1x8xi64>
}

// CHECK-LABEL: func.func @amin
// CHECK-NEXT:    %[[R:.*]] = tensor.reduce min %x dims [0] : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:    %[[S:.*]] = tensor.index_map(%[[R]]) [affine_map<(d0) -> (0, d0)>] : (tensor<1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT:    func.return %[[S]] : tensor<8xf32>
func.func @amin(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %r = torch.amin %x {dims = array<i64: 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  func.return %r : tensor<8xf32>
}
