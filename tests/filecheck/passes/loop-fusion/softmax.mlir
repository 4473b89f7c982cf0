// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

func.func @forward(%x: tensor<4x16xf32> {deplodock.input = "x"}) -> tensor<4x16xf32> {
  %m = tensor.reduce max %x dims [1] : tensor<4x16xf32> -> tensor<4x1xf32>
  %mb = tensor.index_map(%m) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x16xf32>
  %d = tensor.elementwise(%x, %mb) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.subf %a, %b : f32
    tensor.yield %t : f32
  }
  %e = tensor.elementwise(%d) : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32):
    %t = math.exp %a : f32
    tensor.yield %t : f32
  }
  %s = tensor.reduce add %e dims [1] : tensor<4x16xf32> -> tensor<4x1xf32>
  %sb = tensor.index_map(%s) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xf32>) -> tensor<4x16xf32>
  %y = tensor.elementwise(%e, %sb) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: f32, %b: f32):
    %t = arith.divf %a, %b : f32
    tensor.yield %t : f32
  }
  func.return %y : tensor<4x16xf32>
}

// Softmax is one kernel with three sweeps per row: max, sum of exp, write. The two copies
// of the max loop (one inlined through the sum, one through the write) are merged.
// CHECK:      builtin.module {
// CHECK-NEXT: loop.kernel @s_y_kernel(%x: memref<4x16xf32>, %y: memref<4x16xf32>) {
// CHECK-DAG:    %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-DAG:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:        loop.for %i0 = 0 to 4 {
// CHECK-NEXT:     %[[MAX:.*]] = loop.for %{{.*}} = 0 to 16 iter_args(%{{.*}} = %[[NINF]]) -> (f32) {
// CHECK:            arith.maximumf
// CHECK:          }
// CHECK-NEXT:     %[[SUM:.*]] = loop.for %{{.*}} = 0 to 16 iter_args(%{{.*}} = %[[ZERO]]) -> (f32) {
// CHECK:            arith.subf %{{.*}}, %[[MAX]] : f32
// CHECK-NEXT:       math.exp
// CHECK-NEXT:       arith.addf
// CHECK:          }
// CHECK-NEXT:     loop.for %i1 = 0 to 16 {
// CHECK-NEXT:       %[[A:.*]] = loop.load %x[%i0, %i1] : memref<4x16xf32>
// CHECK-NEXT:       %[[D:.*]] = arith.subf %[[A]], %[[MAX]] : f32
// CHECK-NEXT:       %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:       %[[Q:.*]] = arith.divf %[[E]], %[[SUM]] : f32
// CHECK-NEXT:       loop.store %[[Q]], %y[%i0, %i1] : memref<4x16xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK-NEXT: func.func @forward
// CHECK-NEXT:   %y = loop.alloc : memref<4x16xf32>
// CHECK-NEXT:   loop.launch @s_y_kernel(%x, %y)
// CHECK-NEXT:   func.return %y
