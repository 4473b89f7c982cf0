// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

func.func @forward(%x: tensor<16x64xf32> {deplodock.input = "x"}, %b: tensor<64xf32> {deplodock.param = "b"}, %w: tensor<64x16xf32> {deplodock.param = "w"}) -> tensor<16x16xf32> {
  %bb = tensor.index_map(%b) [affine_map<(d0, d1) -> (d1)>] : (tensor<64xf32>) -> tensor<16x64xf32>
  %xb = tensor.elementwise(%x, %bb) : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32> {
  ^bb0(%p: f32, %q: f32):
    %t = arith.addf %p, %q : f32
    tensor.yield %t : f32
  }
  %xe = tensor.index_map(%xb) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<16x64xf32>) -> tensor<16x64x16xf32>
  %we = tensor.index_map(%w) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<64x16xf32>) -> tensor<16x64x16xf32>
  %pr = tensor.elementwise(%xe, %we) : (tensor<16x64x16xf32>, tensor<16x64x16xf32>) -> tensor<16x64x16xf32> {
  ^bb0(%p: f32, %q: f32):
    %t = arith.mulf %p, %q : f32
    tensor.yield %t : f32
  }
  %s = tensor.reduce add %pr dims [1] : tensor<16x64x16xf32> -> tensor<16x1x16xf32>
  %mm = tensor.index_map(%s) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<16x1x16xf32>) -> tensor<16x16xf32>
  %r = tensor.elementwise(%mm) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%p: f32):
    %z = arith.constant 0.000000e+00 : f32
    %t = arith.maximumf %p, %z : f32
    tensor.yield %t : f32
  }
  func.return %r : tensor<16x16xf32>
}

// relu((x + b) @ w), the matmul decomposed as broadcast-multiply-reduce-squeeze, is one
// kernel: the 16x64x16 product is never materialised.
// CHECK:      builtin.module {
// CHECK-NEXT: loop.kernel @s_r_kernel(%x: memref<16x64xf32>, %b: memref<64xf32>, %w: memref<64x16xf32>, %r: memref<16x16xf32>) {
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   loop.for %i0 = 0 to 16 {
// CHECK-NEXT:     loop.for %i1 = 0 to 16 {
// CHECK-NEXT:       %[[DOT:.*]] = loop.for %r1 = 0 to 64 iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
// CHECK-NEXT:         %[[P:.*]] = loop.load %x[%i0, %r1] : memref<16x64xf32>
// CHECK-NEXT:         %[[Q:.*]] = loop.load %b[%r1] : memref<64xf32>
// CHECK-NEXT:         %[[T:.*]] = arith.addf %[[P]], %[[Q]] : f32
// CHECK-NEXT:         %[[WV:.*]] = loop.load %w[%r1, %i1] : memref<64x16xf32>
// CHECK-NEXT:         %[[M:.*]] = arith.mulf %[[T]], %[[WV]] : f32
// CHECK-NEXT:         %[[S:.*]] = arith.addf %[[ACC]], %[[M]] : f32
// CHECK-NEXT:         loop.yield %[[S]] : f32
// CHECK-NEXT:       }
// CHECK-NEXT:       %[[RELU:.*]] = arith.maximumf %[[DOT]], %[[ZERO]] : f32
// CHECK-NEXT:       loop.store %[[RELU]], %r[%i0, %i1] : memref<16x16xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK-NOT:  16x64x16
// CHECK:        %r = loop.alloc : memref<16x16xf32>
// CHECK-NEXT:   loop.launch @s_r_kernel(%x, %b, %w, %r)
// CHECK-NEXT:   func.return %r : memref<16x16xf32>
// CHECK-NOT:  16x64x16
