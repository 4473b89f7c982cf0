// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

func.func @forward(%x: tensor<4x64xf32> {deplodock.input = "x"}, %w1: tensor<64x16xf32> {deplodock.param = "w1"}, %w2: tensor<16x64xf32> {deplodock.param = "w2"}) -> tensor<4x64xf32> {
  %xe = tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<4x64xf32>) -> tensor<4x64x16xf32>
  %w1e = tensor.index_map(%w1) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<64x16xf32>) -> tensor<4x64x16xf32>
  %p1 = tensor.elementwise(%xe, %w1e) : (tensor<4x64x16xf32>, tensor<4x64x16xf32>) -> tensor<4x64x16xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.mulf %a, %b : f32
    tensor.yield %t : f32
  }
  %s1 = tensor.reduce add %p1 dims [1] : tensor<4x64x16xf32> -> tensor<4x1x16xf32>
  %h = tensor.index_map(%s1) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<4x1x16xf32>) -> tensor<4x16xf32>
  %r = tensor.elementwise(%h) : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32):
    %z = arith.constant 0.000000e+00 : f32
    %t = arith.maximumf %a, %z : f32
    tensor.yield %t : f32
  }
  %re = tensor.index_map(%r) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<4x16xf32>) -> tensor<4x16x64xf32>
  %w2e = tensor.index_map(%w2) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<16x64xf32>) -> tensor<4x16x64xf32>
  %p2 = tensor.elementwise(%re, %w2e) : (tensor<4x16x64xf32>, tensor<4x16x64xf32>) -> tensor<4x16x64xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.mulf %a, %b : f32
    tensor.yield %t : f32
  }
  %s2 = tensor.reduce add %p2 dims [1] : tensor<4x16x64xf32> -> tensor<4x1x64xf32>
  %y = tensor.index_map(%s2) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<4x1x64xf32>) -> tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}

// relu(x @ w1) @ w2. Launches are visited from the last one back, so each kernel pulls in
// its producers one lifted kernel at a time and the recompute guard sees the final loop
// order: re-running the 64-long first matmul for each of the 64 output columns is over
// budget, so the cut falls at the first matmul's result. No broadcast product buffer
// (4x64x16 or 4x16x64) exists; the relu is inlined into the second matmul.
// CHECK:      builtin.module {
// CHECK-NEXT:   loop.kernel @s1_kernel(%x: memref<4x64xf32>, %w1: memref<64x16xf32>, %s1: memref<4x1x16xf32>) {
// CHECK:          %[[D:.*]] = loop.for %r1 = 0 to 64 iter_args
// CHECK:          loop.store %[[D]], %s1[%i0, %c0, %i2] : memref<4x1x16xf32>
// CHECK:        loop.kernel @s2_y_kernel(%s1: memref<4x1x16xf32>, %w2: memref<16x64xf32>, %y: memref<4x64xf32>) {
// CHECK:            %{{.*}} = loop.for %r1 = 0 to 16 iter_args
// CHECK-NEXT:         %[[H:.*]] = loop.load %s1[%i0, %c0, %r1] : memref<4x1x16xf32>
// CHECK-NEXT:         %[[R:.*]] = arith.maximumf %[[H]], %{{.*}} : f32
// CHECK:        func.func @forward
// CHECK-NEXT:     %s1 = loop.alloc : memref<4x1x16xf32>
// CHECK-NEXT:     loop.launch @s1_kernel(%x, %w1, %s1)
// CHECK-NEXT:     %y = loop.alloc : memref<4x64xf32>
// CHECK-NEXT:     loop.launch @s2_y_kernel(%s1, %w2, %y)
// CHECK-NEXT:     func.return %y : memref<4x64xf32>
