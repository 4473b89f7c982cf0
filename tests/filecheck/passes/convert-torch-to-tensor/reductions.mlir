// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// Reductions keep the rank in tensor.reduce; keepdim = false is a squeezing index map.
// mean multiplies the sum by 1/N; softmaxes subtract the row max first.

// CHECK-LABEL: func.func @sum
// CHECK-NEXT:    %[[R:.*]] = tensor.reduce add %x dims [1] : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
// CHECK-NEXT:    %[[S:.*]] = tensor.index_map(%[[R]]) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<2x1x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[S]] : tensor<2x4xf32>

// CHECK-LABEL: func.func @mean
// CHECK-NEXT:    %[[R:.*]] = tensor.reduce add %x dims [0, 2] : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
// CHECK-NEXT:    %[[M:.*]] = tensor.elementwise(%[[R]]) : (tensor<1x3x1xf32>) -> tensor<1x3x1xf32> {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f32):
// CHECK-NEXT:      %[[C:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[V]], %[[C]] : f32
// CHECK-NEXT:      tensor.yield %[[P]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[M]] : tensor<1x3x1xf32>

// CHECK-LABEL: func.func @amax
// CHECK-NEXT:    %[[R:.*]] = tensor.reduce max %x dims [0, 1, 2] : tensor<2x3x4xf32> -> tensor<1x1x1xf32>
// CHECK-NEXT:    tensor.index_map(%[[R]]) [affine_map<() -> (0, 0, 0)>] : (tensor<1x1x1xf32>) -> tensor<f32>

// CHECK-LABEL: func.func @softmax
// CHECK-NEXT:    %[[MX:.*]] = tensor.reduce max %x dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[MB:.*]] = tensor.index_map(%[[MX]]) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.elementwise(%x, %[[MB]])
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[EX:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:      tensor.yield %[[EX]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[SM:.*]] = tensor.reduce add %[[E]] dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// One division per row (its reciprocal), then a multiply per element:
// CHECK-NEXT:    %[[INV:.*]] = tensor.elementwise(%[[SM]]) : (tensor<4x1xf32>) -> tensor<4x1xf32> {
// CHECK-NEXT:    ^bb0(%[[Z:.*]]: f32):
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.divf %[[ONE]], %[[Z]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[IB:.*]] = tensor.index_map(%[[INV]]) [affine_map<(d0, d1) -> (d0, 0)>]
// CHECK-NEXT:    %[[O:.*]] = tensor.elementwise(%[[E]], %[[IB]])
// CHECK-NEXT:    ^bb0(%{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT:      arith.mulf
// CHECK-NEXT:      tensor.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[O]] : tensor<4x8xf32>

// A bf16 softmax computes in f32 (max, exponentials, sum) and rounds once, at the end:
// CHECK-LABEL: func.func @softmax_bf16
// CHECK-NEXT:    %[[W:.*]] = tensor.elementwise(%x) : (tensor<4x8xbf16>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: bf16):
// CHECK-NEXT:      %[[F:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK:         tensor.reduce max %[[W]] dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NOT:     truncf
// CHECK:         tensor.reduce add %{{.*}} dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NOT:     truncf
// CHECK:         tensor.elementwise(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK:           arith.mulf
// CHECK-NEXT:      arith.truncf %{{.*}} : f32 to bf16

// CHECK-LABEL: func.func @log_softmax
// CHECK-NEXT:    %[[MX:.*]] = tensor.reduce max %x dims [0] : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:    %[[MB:.*]] = tensor.index_map(%[[MX]]) [affine_map<(d0, d1) -> (0, d1)>]
// CHECK-NEXT:    %[[SH:.*]] = tensor.elementwise(%x, %[[MB]])
// CHECK:           arith.subf
// CHECK:         %[[E:.*]] = tensor.elementwise(%[[SH]])
// CHECK:           math.exp
// CHECK:         %[[SM:.*]] = tensor.reduce add %[[E]] dims [0] : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:    %[[L:.*]] = tensor.elementwise(%[[SM]]) : (tensor<1x8xf32>) -> tensor<1x8xf32>
// CHECK:           math.log
// CHECK:         %[[LB:.*]] = tensor.index_map(%[[L]]) [affine_map<(d0, d1) -> (0, d1)>]
// CHECK-NEXT:    %[[O:.*]] = tensor.elementwise(%[[SH]], %[[LB]])
// CHECK:           arith.subf
// CHECK:         func.return %[[O]] : tensor<4x8xf32>

// CHECK-NOT: torch.

func.func @sum(%x: tensor<2x3x4xf32>) -> tensor<2x4xf32> {
  %s = torch.sum %x {dims = array<i64: 1>, keepdim = false} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  func.return %s : tensor<2x4xf32>
}
func.func @mean(%x: tensor<2x3x4xf32>) -> tensor<1x3x1xf32> {
  %s = torch.mean %x {dims = array<i64: 0, 2>, keepdim = true} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  func.return %s : tensor<1x3x1xf32>
}
func.func @amax(%x: tensor<2x3x4xf32>) -> tensor<f32> {
  %s = torch.amax %x {dims = array<i64: 0, 1, 2>, keepdim = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  func.return %s : tensor<f32>
}
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = torch.softmax %x {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}
func.func @softmax_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %s = torch.softmax %x {dim = 1 : i64} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  func.return %s : tensor<4x8xbf16>
}
func.func @log_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = torch.log_softmax %x {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}
