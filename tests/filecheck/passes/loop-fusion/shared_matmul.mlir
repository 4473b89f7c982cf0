// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

func.func @forward(%x: tensor<4x64xf32> {deplodock.input = "x"}, %w: tensor<64x16xf32> {deplodock.param = "w"}) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %xe = tensor.index_map(%x) [affine_map<(d0, d1, d2) -> (d0, d1)>] : (tensor<4x64xf32>) -> tensor<4x64x16xf32>
  %we = tensor.index_map(%w) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<64x16xf32>) -> tensor<4x64x16xf32>
  %p = tensor.elementwise(%xe, %we) : (tensor<4x64x16xf32>, tensor<4x64x16xf32>) -> tensor<4x64x16xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.mulf %a, %b : f32
    tensor.yield %t : f32
  }
  %s = tensor.reduce add %p dims [1] : tensor<4x64x16xf32> -> tensor<4x1x16xf32>
  %h = tensor.index_map(%s) [affine_map<(d0, d1) -> (d0, 0, d1)>] : (tensor<4x1x16xf32>) -> tensor<4x16xf32>
  %r = tensor.elementwise(%h) : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32):
    %z = arith.constant 0.000000e+00 : f32
    %t = arith.maximumf %a, %z : f32
    tensor.yield %t : f32
  }
  func.return %h, %r : tensor<4x16xf32>, tensor<4x16xf32>
}

// x @ w is returned and also feeds the relu. Cloning the matmul into the copy to %h or into
// the relu would run its 64-long reduction twice (its kernel stays for the other reader),
// so both read the matmul's result: one reduce loop in the whole module.
// CHECK:      builtin.module {
// CHECK-NEXT:   loop.kernel @s_kernel(%x: memref<4x64xf32>, %w: memref<64x16xf32>, %s: memref<4x1x16xf32>) {
// CHECK:          loop.for %r1 = 0 to 64 iter_args
// CHECK:        loop.kernel @h_kernel(%s: memref<4x1x16xf32>, %h: memref<4x16xf32>) {
// CHECK-NOT:      iter_args
// CHECK:        loop.kernel @r_kernel(%s: memref<4x1x16xf32>, %r: memref<4x16xf32>) {
// CHECK-NOT:      iter_args
// CHECK:        func.func @forward
// CHECK:          loop.launch @s_kernel(%x, %w, %s)
// CHECK:          loop.launch @h_kernel(%s, %h)
// CHECK:          loop.launch @r_kernel(%s, %r)
// CHECK-NEXT:     func.return %h, %r
