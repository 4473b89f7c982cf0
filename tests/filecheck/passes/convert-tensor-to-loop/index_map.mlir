// RUN: deplodock-opt %s -p convert-tensor-to-loop --split-input-file | filecheck %s

// Index maps: the affine map becomes arith index ops (constants folded, common
// subexpressions shared); broadcast and transpose are plain index permutations.
func.func @forward(%x: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<16x4xf32> {
  %t = tensor.index_map(%x) [affine_map<(d0, d1) -> ((d0 * 4 + d1) floordiv 16, (d0 * 4 + d1) mod 16)>] : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %u = tensor.index_map(%b) [affine_map<(d0, d1) -> (d1 * 1 + 0)>] : (tensor<16xf32>) -> tensor<4x16xf32>
  %v = tensor.index_map(%u) [affine_map<(d0, d1) -> (d1, d0)>] : (tensor<4x16xf32>) -> tensor<16x4xf32>
  func.return %t : tensor<16x4xf32>
}

// CHECK:      loop.kernel @t_kernel(%x: memref<4x16xf32>, %t: memref<16x4xf32>) {
// CHECK-NEXT:   %c4 = arith.constant 4 : index
// CHECK-NEXT:   %c16 = arith.constant 16 : index
// CHECK-NEXT:   loop.for %i0 = 0 to 16 {
// CHECK-NEXT:     loop.for %i1 = 0 to 4 {
// CHECK-NEXT:       %[[M:.*]] = arith.muli %i0, %c4 : index
// CHECK-NEXT:       %[[L:.*]] = arith.addi %[[M]], %i1 : index
// CHECK-NEXT:       %[[D:.*]] = arith.floordivsi %[[L]], %c16 : index
// CHECK-NEXT:       %[[R:.*]] = arith.remsi %[[L]], %c16 : index
// CHECK-NEXT:       %[[V:.*]] = loop.load %x[%[[D]], %[[R]]] : memref<4x16xf32>
// CHECK-NEXT:       loop.store %[[V]], %t[%i0, %i1] : memref<16x4xf32>
// CHECK:      loop.kernel @u_kernel(%b: memref<16xf32>, %u: memref<4x16xf32>) {
// CHECK-NEXT:   loop.for %i0 = 0 to 4 {
// CHECK-NEXT:     loop.for %i1 = 0 to 16 {
// CHECK-NEXT:       %[[V:.*]] = loop.load %b[%i1] : memref<16xf32>
// CHECK-NEXT:       loop.store %[[V]], %u[%i0, %i1] : memref<4x16xf32>
// CHECK:      loop.kernel @v_kernel(%u: memref<4x16xf32>, %v: memref<16x4xf32>) {
// CHECK-NEXT:   loop.for %i0 = 0 to 16 {
// CHECK-NEXT:     loop.for %i1 = 0 to 4 {
// CHECK-NEXT:       %[[V:.*]] = loop.load %u[%i1, %i0] : memref<4x16xf32>
// CHECK-NEXT:       loop.store %[[V]], %v[%i0, %i1] : memref<16x4xf32>

// -----

// Concat: one loop nest per source over its own segment of the output, so every load is
// in bounds; a one-wide segment has no loop.
func.func @forward(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>, %c: tensor<2x2xf32>) -> tensor<2x6xf32> {
  %r = tensor.index_map(%a, %b, %c) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 - 3)>, affine_map<(d0, d1) -> (d0, d1 - 4)>] concat 1 offsets [0, 3, 4] : (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
  func.return %r : tensor<2x6xf32>
}

// CHECK:      loop.kernel @r_kernel(%a: memref<2x3xf32>, %b: memref<2x1xf32>, %c: memref<2x2xf32>, %r: memref<2x6xf32>) {
// CHECK-NEXT:   %c3 = arith.constant 3 : index
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   %c_neg4 = arith.constant -4 : index
// CHECK-NEXT:   loop.for %i0 = 0 to 2 {
// CHECK-NEXT:     loop.for %i1 = 0 to 3 {
// CHECK-NEXT:       %[[A:.*]] = loop.load %a[%i0, %i1] : memref<2x3xf32>
// CHECK-NEXT:       loop.store %[[A]], %r[%i0, %i1] : memref<2x6xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.for %i0_1 = 0 to 2 {
// CHECK-NEXT:     %[[B:.*]] = loop.load %b[%i0_1, %c0] : memref<2x1xf32>
// CHECK-NEXT:     loop.store %[[B]], %r[%i0_1, %c3] : memref<2x6xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.for %i0_2 = 0 to 2 {
// CHECK-NEXT:     loop.for %i1_1 = 4 to 6 {
// CHECK-NEXT:       %[[S:.*]] = arith.addi %i1_1, %c_neg4 : index
// CHECK-NEXT:       %[[C:.*]] = loop.load %c[%i0_2, %[[S]]] : memref<2x2xf32>
// CHECK-NEXT:       loop.store %[[C]], %r[%i0_2, %i1_1] : memref<2x6xf32>
