// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s --print-op-generic | deplodock-opt | filecheck %s

func.func @forward(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %h: tensor<2x3xf16>) -> tensor<4x16xf32> {
  %e = tensor.elementwise(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    %t = math.exp %s : f32
    tensor.yield %t : f32
  }
  %k = tensor.elementwise() : () -> tensor<4x8xf32> {
    %c = arith.constant 2.5 : f32
    tensor.yield %c : f32
  }
  %hn = tensor.elementwise(%h) {tag = "neg"} : (tensor<2x3xf16>) -> tensor<2x3xf16> {
  ^bb0(%v: f16):
    %n = arith.negf %v : f16
    tensor.yield %n : f16
  }
  %r = tensor.reduce add %e dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  %m = tensor.reduce max %k dims [0, 1] : tensor<4x8xf32> -> tensor<1x1xf32>
  %p = tensor.reduce mul %e dims [] : tensor<4x8xf32> -> tensor<4x8xf32>
  %q = tensor.reduce min %hn dims [0] : tensor<2x3xf16> -> tensor<1x3xf16>
  %t = tensor.index_map(%r) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %tr = tensor.index_map(%t) [affine_map<(d0, d1) -> (d1, d0)>] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %rs = tensor.index_map(%tr) [affine_map<(d0) -> (d0 floordiv 4, d0 mod 4)>] : (tensor<8x4xf32>) -> tensor<32xf32>
  %s0 = tensor.index_map(%m) [affine_map<() -> (0, 0)>] : (tensor<1x1xf32>) -> tensor<f32>
  %c = tensor.index_map(%a, %t) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 - 8)>] concat 1 offsets [0, 8] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @forward
// CHECK:      %e = tensor.elementwise(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%x: f32, %y: f32):
// CHECK-NEXT:   %s = arith.addf %x, %y : f32
// CHECK-NEXT:   %t = math.exp %s : f32
// CHECK-NEXT:   tensor.yield %t : f32
// CHECK-NEXT: }
// CHECK-NEXT: %k = tensor.elementwise() : () -> tensor<4x8xf32> {
// CHECK-NEXT:   %c = arith.constant 2.500000e+00 : f32
// CHECK-NEXT:   tensor.yield %c : f32
// CHECK-NEXT: }
// CHECK-NEXT: %hn = tensor.elementwise(%h) {tag = "neg"} : (tensor<2x3xf16>) -> tensor<2x3xf16> {
// CHECK-NEXT: ^bb{{[0-9]+}}(%v: f16):
// CHECK:      %r = tensor.reduce add %e dims [1] : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %m = tensor.reduce max %k dims [0, 1] : tensor<4x8xf32> -> tensor<1x1xf32>
// CHECK-NEXT: %p = tensor.reduce mul %e dims [] : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %q = tensor.reduce min %hn dims [0] : tensor<2x3xf16> -> tensor<1x3xf16>
// CHECK-NEXT: %t_1 = tensor.index_map(%r) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %tr = tensor.index_map(%t_1) [affine_map<(d0, d1) -> (d1, d0)>] : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %rs = tensor.index_map(%tr) [affine_map<(d0) -> ((d0 floordiv 4), (d0 mod 4))>] : (tensor<8x4xf32>) -> tensor<32xf32>
// CHECK-NEXT: %s0 = tensor.index_map(%m) [affine_map<() -> (0, 0)>] : (tensor<1x1xf32>) -> tensor<f32>
// CHECK-NEXT: %c_1 = tensor.index_map(%a, %t_1) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, (d1 + -8))>] concat 1 offsets [0, 8] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: func.return %c_1 : tensor<4x16xf32>
