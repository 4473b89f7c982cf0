// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// torch.window: each padded dim is a concat with splat constants (here -inf on dim 1, none
// on dim 2), then one index map reads o * stride + j * dilation.

// CHECK-LABEL: func.func @window
// CHECK-NEXT:    %[[LO:.*]] = tensor.elementwise() : () -> tensor<2x1x6xf32> {
// CHECK-NEXT:      %[[NEG_INF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      tensor.yield %[[NEG_INF]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[HI:.*]] = tensor.elementwise() : () -> tensor<2x1x6xf32> {
// CHECK:         %[[PADDED:.*]] = tensor.index_map(%[[LO]], %x, %[[HI]]) [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, (d1 + -1), d2)>, affine_map<(d0, d1, d2) -> (d0, (d1 + -6), d2)>] concat 1 offsets [0, 1, 6] : (tensor<2x1x6xf32>, tensor<2x5x6xf32>, tensor<2x1x6xf32>) -> tensor<2x7x6xf32>
// CHECK-NEXT:    %[[W:.*]] = tensor.index_map(%[[PADDED]]) [affine_map<(d0, d1, d2, d3, d4) -> (d0, ((d1 * 2) + d3), ((d2 * 3) + (d4 * 2)))>] : (tensor<2x7x6xf32>) -> tensor<2x3x2x3x2xf32>
// CHECK-NEXT:    func.return %[[W]] : tensor<2x3x2x3x2xf32>
func.func @window(%x: tensor<2x5x6xf32>) -> tensor<2x3x2x3x2xf32> {
  %r = torch.window %x {kernel = array<i64: 3, 2>, stride = array<i64: 2, 3>, dilation = array<i64: 1, 2>, low = array<i64: 1, 0>, high = array<i64: 1, 0>, pad_value = 0xfff0000000000000 : f64} : (tensor<2x5x6xf32>) -> tensor<2x3x2x3x2xf32>
  func.return %r : tensor<2x3x2x3x2xf32>
}

// Without padding it is the strided view alone.
// CHECK-LABEL: func.func @unpadded
// CHECK-NEXT:    %[[W:.*]] = tensor.index_map(%x) [affine_map<(d0, d1) -> (((d0 * 2) + d1))>] : (tensor<7xf32>) -> tensor<3x3xf32>
// CHECK-NEXT:    func.return %[[W]] : tensor<3x3xf32>
func.func @unpadded(%x: tensor<7xf32>) -> tensor<3x3xf32> {
  %r = torch.window %x {kernel = array<i64: 3>, stride = array<i64: 2>, dilation = array<i64: 1>, low = array<i64: 0>, high = array<i64: 0>, pad_value = 0.000000e+00 : f64} : (tensor<7xf32>) -> tensor<3x3xf32>
  func.return %r : tensor<3x3xf32>
}
