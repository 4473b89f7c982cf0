// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// Contractions: index-map both operands onto (batch..., M, K, N), multiply, reduce K,
// squeeze K. linear reads its weight transposed through the map, then adds the bias.

// CHECK-LABEL: func.func @matmul
// CHECK-NEXT:    %[[A:.*]] = tensor.index_map(%a) [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] : (tensor<2x3x5xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NEXT:    %[[B:.*]] = tensor.index_map(%b) [affine_map<(d0, d1, d2, d3) -> (d2, d3)>] : (tensor<5x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NEXT:    %[[P:.*]] = tensor.elementwise(%[[A]], %[[B]]) : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[X]], %[[Y]] : f32
// CHECK-NEXT:      tensor.yield %[[M]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S:.*]] = tensor.reduce add %[[P]] dims [2] : tensor<2x3x5x4xf32> -> tensor<2x3x1x4xf32>
// CHECK-NEXT:    %[[O:.*]] = tensor.index_map(%[[S]]) [affine_map<(d0, d1, d2) -> (d0, d1, 0, d2)>] : (tensor<2x3x1x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    func.return %[[O]] : tensor<2x3x4xf32>

// A 1-D rhs has no N dim; the lhs already has the space's shape, so it is not mapped.
// CHECK-LABEL: func.func @matvec
// CHECK-NEXT:    %[[V:.*]] = tensor.index_map(%v) [affine_map<(d0, d1) -> (d1)>] : (tensor<5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:    %[[P:.*]] = tensor.elementwise(%a, %[[V]])
// CHECK:         %[[S:.*]] = tensor.reduce add %[[P]] dims [1] : tensor<3x5xf32> -> tensor<3x1xf32>
// CHECK-NEXT:    tensor.index_map(%[[S]]) [affine_map<(d0) -> (d0, 0)>] : (tensor<3x1xf32>) -> tensor<3xf32>

// CHECK-LABEL: func.func @bmm
// CHECK-NEXT:    tensor.index_map(%a) [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] : (tensor<2x3x5xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NEXT:    tensor.index_map(%b) [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>] : (tensor<2x5x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NEXT:    tensor.elementwise
// CHECK:         tensor.reduce add %{{.*}} dims [2] : tensor<2x3x5x4xf32> -> tensor<2x3x1x4xf32>

// CHECK-LABEL: func.func @linear
// CHECK-NEXT:    %[[X:.*]] = tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<3x8xf32>) -> tensor<3x8x4xf32>
// CHECK-NEXT:    %[[W:.*]] = tensor.index_map(%w) [affine_map<(d0, d1, d2) -> (d2, d1)>] : (tensor<4x8xf32>) -> tensor<3x8x4xf32>
// CHECK-NEXT:    %[[P:.*]] = tensor.elementwise(%[[X]], %[[W]])
// CHECK:         %[[S:.*]] = tensor.reduce add %[[P]] dims [1] : tensor<3x8x4xf32> -> tensor<3x1x4xf32>
// CHECK-NEXT:    %[[Q:.*]] = tensor.index_map(%[[S]]) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<3x1x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[B:.*]] = tensor.index_map(%b) [affine_map<(d0, d1) -> (d1)>] : (tensor<4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[O:.*]] = tensor.elementwise(%[[Q]], %[[B]])
// CHECK:           arith.addf
// CHECK:         func.return %[[O]] : tensor<3x4xf32>

// CHECK-NOT: torch.

func.func @matmul(%a: tensor<2x3x5xf32>, %b: tensor<5x4xf32>) -> tensor<2x3x4xf32> {
  %y = torch.matmul %a, %b : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
func.func @matvec(%a: tensor<3x5xf32>, %v: tensor<5xf32>) -> tensor<3xf32> {
  %y = torch.matmul %a, %v : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}
func.func @bmm(%a: tensor<2x3x5xf32>, %b: tensor<2x5x4xf32>) -> tensor<2x3x4xf32> {
  %y = torch.bmm %a, %b : (tensor<2x3x5xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
func.func @linear(%x: tensor<3x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %y = torch.linear %x, %w, %b : (tensor<3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
