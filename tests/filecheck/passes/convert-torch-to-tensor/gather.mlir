// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// embedding is one tensor.gather along dim 0. Advanced indexing of k leading dims flattens
// them: one elementwise over the broadcast index shape computes the wrapped flat index
// (i < 0 ? i + size : i, times the stride), an index map reshapes the source, one gather.

// CHECK-LABEL: func.func @embedding
// CHECK-NEXT:    %[[R:.*]] = tensor.gather %w[%ids] dim 0 : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<2x3x8xf32>
func.func @embedding(%w: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
  %r = torch.embedding %w, %ids : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  func.return %r : tensor<2x3x8xf32>
}

// CHECK-LABEL: func.func @index
// CHECK-NEXT:    %[[I:.*]] = tensor.index_map(%i) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<3x1xi64>) -> tensor<3x5xi64>
// CHECK-NEXT:    %[[J:.*]] = tensor.index_map(%j) [affine_map<(d0, d1) -> (d1)>] : (tensor<5xi32>) -> tensor<3x5xi32>
// CHECK-NEXT:    %[[FLAT:.*]] = tensor.elementwise(%[[I]], %[[J]]) : (tensor<3x5xi64>, tensor<3x5xi32>) -> tensor<3x5xi64> {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: i64, %[[B:.*]]: i32):
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-NEXT:      %[[NEG:.*]] = arith.cmpi slt, %[[A]], %[[ZERO]] : i64
// CHECK-NEXT:      %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-NEXT:      %[[UP:.*]] = arith.addi %[[A]], %[[FOUR]] : i64
// CHECK-NEXT:      %[[AW:.*]] = arith.select %[[NEG]], %[[UP]], %[[A]] : i64
// CHECK-NEXT:      %[[SIX:.*]] = arith.constant 6 : i64
// CHECK-NEXT:      %[[ROW:.*]] = arith.muli %[[AW]], %[[SIX]] : i64
// CHECK-NEXT:      %[[B64:.*]] = arith.extsi %[[B]] : i32 to i64
// CHECK:           %[[SUM:.*]] = arith.addi %[[ROW]], %{{.*}} : i64
// CHECK-NEXT:      tensor.yield %[[SUM]] : i64
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[SRC:.*]] = tensor.index_map(%x) [affine_map<(d0, d1) -> ((d0 floordiv 6), (d0 mod 6), d1)>] : (tensor<4x6x8xf32>) -> tensor<24x8xf32>
// CHECK-NEXT:    %[[G:.*]] = tensor.gather %[[SRC]][%[[FLAT]]] dim 0 : (tensor<24x8xf32>, tensor<3x5xi64>) -> tensor<3x5x8xf32>
// CHECK-NEXT:    func.return %[[G]]
func.func @index(%x: tensor<4x6x8xf32>, %i: tensor<3x1xi64>, %j: tensor<5xi32>) -> tensor<3x5x8xf32> {
  %r = torch.index %x, %i, %j : (tensor<4x6x8xf32>, tensor<3x1xi64>, tensor<5xi32>) -> tensor<3x5x8xf32>
  func.return %r : tensor<3x5x8xf32>
}
