// RUN: deplodock-opt %s -p convert-tensor-to-loop --split-input-file | filecheck %s

// Elementwise: free loops over the output (none for the size-1 dim), one load per distinct
// input, the scalar body (constants hoisted to the kernel top), a store; the signature
// switches to memrefs.
func.func @forward(%x: tensor<1x4x8xf32> {deplodock.input = "x"}, %y: tensor<1x4x8xf32> {deplodock.input = "y"}) -> tensor<1x4x8xf32> {
  %s = tensor.elementwise(%x, %y, %x) : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %two = arith.constant 2.000000e+00 : f32
    %m = arith.mulf %a, %b : f32
    %n = arith.mulf %m, %c : f32
    %o = arith.addf %n, %two : f32
    tensor.yield %o : f32
  }
  func.return %s : tensor<1x4x8xf32>
}

// CHECK:      loop.kernel @s_kernel(%x: memref<1x4x8xf32>, %y: memref<1x4x8xf32>, %s: memref<1x4x8xf32>) {
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   %two = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:   loop.for %i1 = 0 to 4 {
// CHECK-NEXT:     loop.for %i2 = 0 to 8 {
// CHECK-NEXT:       %a = loop.load %x[%c0, %i1, %i2] : memref<1x4x8xf32>
// CHECK-NEXT:       %b = loop.load %y[%c0, %i1, %i2] : memref<1x4x8xf32>
// CHECK-NEXT:       %m = arith.mulf %a, %b : f32
// CHECK-NEXT:       %n = arith.mulf %m, %a : f32
// CHECK-NEXT:       %o = arith.addf %n, %two : f32
// CHECK-NEXT:       loop.store %o, %s[%c0, %i1, %i2] : memref<1x4x8xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK-NEXT: func.func @forward(%x: memref<1x4x8xf32> {deplodock.input = "x"}, %y: memref<1x4x8xf32> {deplodock.input = "y"}) -> memref<1x4x8xf32> {
// CHECK-NEXT:   %s = loop.alloc : memref<1x4x8xf32>
// CHECK-NEXT:   loop.launch @s_kernel(%x, %y, %s) : (memref<1x4x8xf32>, memref<1x4x8xf32>, memref<1x4x8xf32>) -> ()
// CHECK-NEXT:   func.return %s : memref<1x4x8xf32>
// CHECK-NEXT: }

// -----

// Without name hints kernels are named after the op, numbered in program order; a zero-input
// elementwise is a splat; a rank-0 result has no loop and no index.
func.func @forward(%0: tensor<f32>) -> tensor<2xf32> {
  %1 = tensor.elementwise(%0) : (tensor<f32>) -> tensor<f32> {
  ^bb0(%2: f32):
    %3 = math.exp %2 : f32
    tensor.yield %3 : f32
  }
  %4 = tensor.elementwise() : () -> tensor<2xf32> {
    %5 = arith.constant 1.500000e+00 : f32
    tensor.yield %5 : f32
  }
  func.return %4 : tensor<2xf32>
}

// CHECK:      loop.kernel @elementwise_kernel(%{{.*}}: memref<f32>, %[[OUT:.*]]: memref<f32>) {
// CHECK-NEXT:   %[[V:.*]] = loop.load %{{.*}}[] : memref<f32>
// CHECK-NEXT:   %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:   loop.store %[[E]], %[[OUT]][] : memref<f32>
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK-NEXT: loop.kernel @elementwise_kernel_2(%[[OUT2:.*]]: memref<2xf32>) {
// CHECK-NEXT:   %[[C:.*]] = arith.constant 1.500000e+00 : f32
// CHECK-NEXT:   loop.for %i0 = 0 to 2 {
// CHECK-NEXT:     loop.store %[[C]], %[[OUT2]][%i0] : memref<2xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK-NEXT: func.func @forward(%{{.*}}: memref<f32>) -> memref<2xf32> {
// CHECK-NEXT:   %[[A:.*]] = loop.alloc : memref<f32>
// CHECK-NEXT:   loop.launch @elementwise_kernel(%{{.*}}, %[[A]]) : (memref<f32>, memref<f32>) -> ()
// CHECK-NEXT:   %[[B:.*]] = loop.alloc : memref<2xf32>
// CHECK-NEXT:   loop.launch @elementwise_kernel_2(%[[B]]) : (memref<2xf32>) -> ()
// CHECK-NEXT:   func.return %[[B]] : memref<2xf32>
// CHECK-NEXT: }

