// RUN: deplodock-opt %s -p convert-tensor-to-loop | filecheck %s

// Recurrence: a free loop over the batch around one carried loop over the steps. The step
// loop carries the row of the result that holds the previous state (4, past the last row,
// before the first step, when the state is %h instead), so it carries a value and stores
// inside: the scheduling passes keep it serial, a thread per batch row. A reverse GRU walks
// t = 3 - s; each hidden unit j takes its three gates' dot products in one reduce loop.
func.func @forward(%g: tensor<4x2x6xf32>, %w: tensor<6x2xf32>, %b: tensor<6xf32>, %h: tensor<2x2xf32>) -> tensor<4x2x2xf32> {
  %s = tensor.recurrence gru reverse (%g, %w, %b, %h) : (tensor<4x2x6xf32>, tensor<6x2xf32>, tensor<6xf32>, tensor<2x2xf32>) -> tensor<4x2x2xf32>
  func.return %s : tensor<4x2x2xf32>
}

// CHECK:      loop.kernel @s_kernel(%g: memref<4x2x6xf32>, %w: memref<6x2xf32>, %b: memref<6xf32>, %h: memref<2x2xf32>, %s: memref<4x2x2xf32>) {
// CHECK:        loop.for %i1 = 0 to 2 {
// CHECK-NEXT:     %last = loop.for %[[S:.*]] = 0 to 4 iter_args(%prev = %c4) -> (index) {
// CHECK-NEXT:       %t = arith.subi %c3, %[[S]] : index
// CHECK-NEXT:       %first = arith.cmpi eq, %prev, %c4 : index
// CHECK-NEXT:       %row = arith.select %first, %c0, %prev : index
// CHECK-NEXT:       loop.for %j = 0 to 2 {
// CHECK:              %dot0, %dot1, %dot2 = loop.for %k = 0 to 2 iter_args({{.*}}) -> (f32, f32, f32) {
// CHECK-NEXT:           %[[H0:.*]] = loop.load %h[%i1, %k] : memref<2x2xf32>
// CHECK-NEXT:           %[[HS:.*]] = loop.load %s[%row, %i1, %k] : memref<4x2x2xf32>
// CHECK-NEXT:           %{{.*}} = arith.select %first, %[[H0]], %[[HS]] : f32
// CHECK:              math.tanh
// CHECK:              loop.store %{{.*}}, %s[%t, %i1, %j] : memref<4x2x2xf32>
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.yield %t : index
// CHECK-NEXT:     }
// CHECK-NEXT:   }
