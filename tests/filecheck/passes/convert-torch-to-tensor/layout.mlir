// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// Every layout op is one tensor.index_map from output to input coordinates (none for an
// identity). Reshapes delinearize only inside groups of dims with equal element counts.

// CHECK-LABEL: func.func @transpose
// CHECK-NEXT:    %[[Y:.*]] = tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d2, d1, d0)>] : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
// CHECK-NEXT:    func.return %[[Y]]

// CHECK-LABEL: func.func @permute
// CHECK-NEXT:    tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d2, d0, d1)>] : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>

// CHECK-LABEL: func.func @reshape_merge
// CHECK-NEXT:    tensor.index_map(%x) [affine_map<(d0, d1) -> ((d0 floordiv 3), (d0 mod 3), d1)>] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>

// CHECK-LABEL: func.func @reshape_mixed
// CHECK-NEXT:    tensor.index_map(%x) [affine_map<(d0, d1) -> ((((d0 * 6) + d1) floordiv 12), ((((d0 * 6) + d1) floordiv 4) mod 3), (((d0 * 6) + d1) mod 4))>] : (tensor<2x3x4xf32>) -> tensor<4x6xf32>

// CHECK-LABEL: func.func @reshape_split
// CHECK-NEXT:    tensor.index_map(%x) [affine_map<(d0, d1, d2, d3) -> (((d0 * 3) + d2), d3)>] : (tensor<6x4xf32>) -> tensor<2x1x3x4xf32>

// CHECK-LABEL: func.func @reshape_same
// CHECK-NEXT:    func.return %x : tensor<6x4xf32>

// CHECK-LABEL: func.func @unsqueeze
// CHECK-NEXT:    tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d0, d2)>] : (tensor<3x4xf32>) -> tensor<3x1x4xf32>

// CHECK-LABEL: func.func @expand
// CHECK-NEXT:    tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d1, 0)>] : (tensor<3x1xf32>) -> tensor<2x3x4xf32>

// CHECK-LABEL: func.func @slice
// CHECK-NEXT:    tensor.index_map(%x) [affine_map<(d0, d1) -> (d0, ((d1 * 2) + 1))>] : (tensor<3x8xf32>) -> tensor<3x3xf32>

// CHECK-LABEL: func.func @cat
// CHECK-NEXT:    tensor.index_map(%a, %b, %c) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, (d1 + -3))>, affine_map<(d0, d1) -> (d0, (d1 + -4))>] concat 1 offsets [0, 3, 4] : (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>

// CHECK-NOT: torch.

func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %y = torch.transpose %x {dim0 = 0 : i64, dim1 = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  func.return %y : tensor<4x3x2xf32>
}
func.func @permute(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %y = torch.permute %x {dims = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  func.return %y : tensor<3x4x2xf32>
}
func.func @reshape_merge(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %y = torch.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  func.return %y : tensor<6x4xf32>
}
func.func @reshape_mixed(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %y = torch.reshape %x : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
  func.return %y : tensor<4x6xf32>
}
func.func @reshape_split(%x: tensor<6x4xf32>) -> tensor<2x1x3x4xf32> {
  %y = torch.reshape %x : (tensor<6x4xf32>) -> tensor<2x1x3x4xf32>
  func.return %y : tensor<2x1x3x4xf32>
}
func.func @reshape_same(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  %y = torch.reshape %x : (tensor<6x4xf32>) -> tensor<6x4xf32>
  func.return %y : tensor<6x4xf32>
}
func.func @unsqueeze(%x: tensor<3x4xf32>) -> tensor<3x1x4xf32> {
  %y = torch.unsqueeze %x {dim = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x1x4xf32>
  func.return %y : tensor<3x1x4xf32>
}
func.func @expand(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %y = torch.expand %x : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
func.func @slice(%x: tensor<3x8xf32>) -> tensor<3x3xf32> {
  %y = torch.slice %x {dim = 1 : i64, start = 1 : i64, end = 7 : i64, step = 2 : i64} : (tensor<3x8xf32>) -> tensor<3x3xf32>
  func.return %y : tensor<3x3xf32>
}
func.func @cat(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>, %c: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %y = torch.cat %a, %b, %c {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}
