// RUN: deplodock-opt %s -p convert-tensor-to-loop | filecheck %s
// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s --check-prefix=FUSED

// A pad (a concat of one tensor with constant fills, what `padding=` lowers to) is one nest,
// not one per piece: the source is loaded at the index clamped into its segment [1, 4] (so
// in bounds), and selects keep the fill outside the segment. The fills are no inputs of the
// kernel: their own kernels have no reader, and loop-fusion drops them.
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x1xf32> {
  %lo = tensor.elementwise() : () -> tensor<2x1xf32> {
    %z = arith.constant 0.000000e+00 : f32
    tensor.yield %z : f32
  }
  %hi = tensor.elementwise() : () -> tensor<2x2xf32> {
    %z = arith.constant 0.000000e+00 : f32
    tensor.yield %z : f32
  }
  %p = tensor.index_map(%lo, %x, %hi) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 - 1)>, affine_map<(d0, d1) -> (d0, d1 - 5)>] concat 1 offsets [0, 1, 5] : (tensor<2x1xf32>, tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<2x7xf32>
  %s = tensor.reduce max %p dims [1] : tensor<2x7xf32> -> tensor<2x1xf32>
  func.return %s : tensor<2x1xf32>
}

// CHECK:      loop.kernel @p_kernel(%x: memref<2x4xf32>, %p: memref<2x7xf32>) {
// CHECK:        loop.for %i0 = 0 to 2 {
// CHECK-NEXT:     loop.for %i1 = 0 to 7 {
// CHECK-NEXT:       %[[LO:.*]] = arith.maxsi %i1, %c1 : index
// CHECK-NEXT:       %[[IN:.*]] = arith.minsi %[[LO]], %c4 : index
// CHECK-NEXT:       %[[COL:.*]] = arith.addi %[[IN]], %c_neg1 : index
// CHECK-NEXT:       %[[X:.*]] = loop.load %x[%i0, %[[COL]]] : memref<2x4xf32>
// CHECK-NEXT:       %[[BEFORE_HI:.*]] = arith.cmpi slt, %i1, %c5 : index
// CHECK-NEXT:       %[[V:.*]] = arith.select %[[BEFORE_HI]], %[[X]], %[[ZERO:.*]] : f32
// CHECK-NEXT:       %[[IN_LO:.*]] = arith.cmpi slt, %i1, %c1 : index
// CHECK-NEXT:       %[[P:.*]] = arith.select %[[IN_LO]], %[[ZERO]], %[[V]] : f32
// CHECK-NEXT:       loop.store %[[P]], %p[%i0, %i1] : memref<2x7xf32>
// CHECK:      func.func @forward
// CHECK:        loop.launch @p_kernel(%x, %p)

// The reduction reads the padded row through the select: one kernel, no padded copy.
// FUSED-NOT:  loop.kernel @lo_kernel
// FUSED-NOT:  loop.kernel @p_kernel
// FUSED:      loop.kernel @s_kernel(%x: memref<2x4xf32>, %s: memref<2x1xf32>) {
// FUSED:        loop.for %r1 = 0 to 7
// FUSED:          loop.load %x
// FUSED:          arith.select
// FUSED:      func.func @forward
// FUSED-NEXT:   %s = loop.alloc : memref<2x1xf32>
// FUSED-NEXT:   loop.launch @s_kernel(%x, %s)
// FUSED-NEXT:   func.return %s
