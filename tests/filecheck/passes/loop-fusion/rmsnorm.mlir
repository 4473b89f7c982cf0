// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

func.func @forward(%x: tensor<1x8x32xf32> {deplodock.input = "x"}, %w: tensor<32xf32> {deplodock.param = "weight"}) -> tensor<1x8x32xf32> {
  %sq = tensor.elementwise(%x, %x) : (tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32> {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    tensor.yield %m : f32
  }
  %s = tensor.reduce add %sq dims [2] : tensor<1x8x32xf32> -> tensor<1x8x1xf32>
  %ms = tensor.elementwise(%s) : (tensor<1x8x1xf32>) -> tensor<1x8x1xf32> {
  ^bb0(%a: f32):
    %n = arith.constant 3.125000e-02 : f32
    %m = arith.mulf %a, %n : f32
    tensor.yield %m : f32
  }
  %v = tensor.elementwise(%ms) : (tensor<1x8x1xf32>) -> tensor<1x8x1xf32> {
  ^bb0(%a: f32):
    %eps = arith.constant 9.99999997E-7 : f32
    %m = arith.addf %a, %eps : f32
    tensor.yield %m : f32
  }
  %r = tensor.elementwise(%v) : (tensor<1x8x1xf32>) -> tensor<1x8x1xf32> {
  ^bb0(%a: f32):
    %m = math.rsqrt %a : f32
    tensor.yield %m : f32
  }
  %rb = tensor.index_map(%r) [affine_map<(d0, d1, d2) -> (d0, d1, 0)>] : (tensor<1x8x1xf32>) -> tensor<1x8x32xf32>
  %xn = tensor.elementwise(%x, %rb) : (tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32> {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    tensor.yield %m : f32
  }
  %wb = tensor.index_map(%w) [affine_map<(d0, d1, d2) -> (d2)>] : (tensor<32xf32>) -> tensor<1x8x32xf32>
  %y = tensor.elementwise(%xn, %wb) : (tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32> {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    tensor.yield %m : f32
  }
  func.return %y : tensor<1x8x32xf32>
}

// RMSNorm (x*x -> sum -> *1/N -> +eps -> rsqrt -> broadcast -> *x -> *broadcast(w)) is one
// kernel: per row, the sum of squares and the rsqrt are computed once, outside the write
// sweep over the row.
// CHECK:      builtin.module {
// CHECK-NEXT: loop.kernel @s_y_kernel(%x: memref<1x8x32xf32>, %w: memref<32xf32>, %y: memref<1x8x32xf32>) {
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-DAG:    %[[EPS:.*]] = arith.constant 1.000000e-06 : f32
// CHECK-DAG:    %[[N:.*]] = arith.constant 3.125000e-02 : f32
// CHECK-DAG:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:        loop.for %i1 = 0 to 8 {
// CHECK-NEXT:     %[[SUM:.*]] = loop.for %r2 = 0 to 32 iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
// CHECK-NEXT:       %[[A:.*]] = loop.load %x[%c0, %i1, %r2] : memref<1x8x32xf32>
// CHECK-NEXT:       %[[SQ:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK-NEXT:       %[[NEXT:.*]] = arith.addf %[[ACC]], %[[SQ]] : f32
// CHECK-NEXT:       loop.yield %[[NEXT]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[MEAN:.*]] = arith.mulf %[[SUM]], %[[N]] : f32
// CHECK-NEXT:     %[[VAR:.*]] = arith.addf %[[MEAN]], %[[EPS]] : f32
// CHECK-NEXT:     %[[R:.*]] = math.rsqrt %[[VAR]] : f32
// CHECK-NEXT:     loop.for %i2 = 0 to 32 {
// CHECK-NEXT:       %[[X:.*]] = loop.load %x[%c0, %i1, %i2] : memref<1x8x32xf32>
// CHECK-NEXT:       %[[XN:.*]] = arith.mulf %[[X]], %[[R]] : f32
// CHECK-NEXT:       %[[W:.*]] = loop.load %w[%i2] : memref<32xf32>
// CHECK-NEXT:       %[[Y:.*]] = arith.mulf %[[XN]], %[[W]] : f32
// CHECK-NEXT:       loop.store %[[Y]], %y[%c0, %i1, %i2] : memref<1x8x32xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK-NEXT: func.func @forward(%x: memref<1x8x32xf32> {deplodock.input = "x"}, %w: memref<32xf32> {deplodock.param = "weight"}) -> memref<1x8x32xf32> {
// CHECK-NEXT:   %y = loop.alloc : memref<1x8x32xf32>
// CHECK-NEXT:   loop.launch @s_y_kernel(%x, %w, %y) : (memref<1x8x32xf32>, memref<32xf32>, memref<1x8x32xf32>) -> ()
// CHECK-NEXT:   func.return %y : memref<1x8x32xf32>
// CHECK-NEXT: }
