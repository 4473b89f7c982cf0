// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// rms_norm = x * rsqrt(sum(x*x) / N + eps) * w; layer_norm is two-pass: mean, then the
// biased variance of the centred values. The mean is refined once, m1 + sum(x - m1) / N with
// m1 = sum(x) / N, so a row of equal values centres to exact zeros. Statistics live on the
// reduced shape and are broadcast back by index maps.

// CHECK-LABEL: func.func @rms_norm
// CHECK-NEXT:    %[[SQ:.*]] = tensor.elementwise(%x) : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[V]], %[[V]] : f32
// CHECK-NEXT:      tensor.yield %[[P]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[SS:.*]] = tensor.reduce add %[[SQ]] dims [2] : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.elementwise(%[[SS]]) : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32> {
// CHECK-NEXT:    ^bb0(%[[Z:.*]]: f32):
// CHECK-NEXT:      %[[N:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[Z]], %[[N]] : f32
// CHECK-NEXT:      %[[EPS:.*]] = arith.constant 1.000000e-06 : f32
// CHECK-NEXT:      %[[A:.*]] = arith.addf %[[M]], %[[EPS]] : f32
// CHECK-NEXT:      %[[RS:.*]] = math.rsqrt %[[A]] : f32
// CHECK-NEXT:      tensor.yield %[[RS]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[RB:.*]] = tensor.index_map(%[[R]]) [affine_map<(d0, d1, d2) -> (d0, d1, 0)>] : (tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[WB:.*]] = tensor.index_map(%w) [affine_map<(d0, d1, d2) -> (d2)>] : (tensor<8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[Y:.*]] = tensor.elementwise(%x, %[[RB]], %[[WB]])
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[S:.*]]: f32, %[[W:.*]]: f32):
// CHECK-NEXT:      %[[T:.*]] = arith.mulf %[[X]], %[[S]] : f32
// CHECK-NEXT:      %[[U:.*]] = arith.mulf %[[T]], %[[W]] : f32
// CHECK-NEXT:      tensor.yield %[[U]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x3x8xf32>

// CHECK-LABEL: func.func @layer_norm
// CHECK-NEXT:    %[[S1:.*]] = tensor.reduce add %x dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[M1:.*]] = tensor.elementwise(%[[S1]]) : (tensor<4x1xf32>) -> tensor<4x1xf32>
// CHECK:           arith.constant 1.250000e-01 : f32
// CHECK:         %[[M1B:.*]] = tensor.index_map(%[[M1]]) [affine_map<(d0, d1) -> (d0, 0)>]
// CHECK-NEXT:    %[[RES:.*]] = tensor.elementwise(%x, %[[M1B]])
// CHECK:           arith.subf
// CHECK:         %[[S2:.*]] = tensor.reduce add %[[RES]] dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[MEAN:.*]] = tensor.elementwise(%[[M1]], %[[S2]]) : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
// CHECK:           arith.mulf
// CHECK-NEXT:      arith.addf
// CHECK:         %[[MB:.*]] = tensor.index_map(%[[MEAN]]) [affine_map<(d0, d1) -> (d0, 0)>]
// CHECK-NEXT:    %[[C:.*]] = tensor.elementwise(%x, %[[MB]])
// CHECK:           arith.subf
// CHECK:         %[[SQ:.*]] = tensor.elementwise(%[[C]])
// CHECK:           arith.mulf
// CHECK:         %[[S2:.*]] = tensor.reduce add %[[SQ]] dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.elementwise(%[[S2]])
// CHECK:           arith.constant 1.000000e-05 : f32
// CHECK:           math.rsqrt
// CHECK:         %[[RB:.*]] = tensor.index_map(%[[R]]) [affine_map<(d0, d1) -> (d0, 0)>]
// CHECK-NEXT:    %[[WB:.*]] = tensor.index_map(%w) [affine_map<(d0, d1) -> (d1)>]
// CHECK-NEXT:    %[[BB:.*]] = tensor.index_map(%b) [affine_map<(d0, d1) -> (d1)>]
// CHECK-NEXT:    %[[Y:.*]] = tensor.elementwise(%[[C]], %[[RB]], %[[WB]], %[[BB]])
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[S:.*]]: f32, %[[W:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT:      %[[T:.*]] = arith.mulf %[[X]], %[[S]] : f32
// CHECK-NEXT:      %[[U:.*]] = arith.mulf %[[T]], %[[W]] : f32
// CHECK-NEXT:      %[[V:.*]] = arith.addf %[[U]], %[[B]] : f32
// CHECK-NEXT:      tensor.yield %[[V]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]] : tensor<4x8xf32>

// CHECK-NOT: torch.

func.func @rms_norm(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %y = torch.rms_norm %x, %w {normalized_shape = array<i64: 8>, eps = 1.0e-06 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  func.return %y : tensor<2x3x8xf32>
}
func.func @layer_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = torch.layer_norm %x, %w, %b {normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
