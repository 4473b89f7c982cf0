// RUN: deplodock-opt %s -p convert-tensor-to-loop --split-input-file | filecheck %s

// A gather: free loops over the output, the index load, an index_cast, the source load at
// that row, a store.
func.func @forward(%w: tensor<16x8xf32> {deplodock.param = "w"}, %ids: tensor<2x3xi64> {deplodock.input = "ids"}) -> tensor<2x3x8xf32> {
  %g = tensor.gather %w[%ids] dim 0 : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  func.return %g : tensor<2x3x8xf32>
}

// CHECK:      loop.kernel @g_kernel(%w: memref<16x8xf32>, %ids: memref<2x3xi64>, %g: memref<2x3x8xf32>) {
// CHECK-NEXT:   loop.for %i0 = 0 to 2 {
// CHECK-NEXT:     loop.for %i1 = 0 to 3 {
// CHECK-NEXT:       loop.for %i2 = 0 to 8 {
// CHECK-NEXT:         %[[ID:.*]] = loop.load %ids[%i0, %i1] : memref<2x3xi64>
// CHECK-NEXT:         %[[ROW:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK-NEXT:         %[[V:.*]] = loop.load %w[%[[ROW]], %i2] : memref<16x8xf32>
// CHECK-NEXT:         loop.store %[[V]], %g[%i0, %i1, %i2] : memref<2x3x8xf32>

// -----

// tensor.index becomes the loop index of its dim (the constant 0 for a size-1 dim).
func.func @forward() -> tensor<1x6xi64> {
  %e = tensor.elementwise() : () -> tensor<1x6xi64> {
    %r = tensor.index 0 : index
    %c = tensor.index 1 : index
    %s = arith.addi %r, %c : index
    %v = arith.index_cast %s : index to i64
    tensor.yield %v : i64
  }
  func.return %e : tensor<1x6xi64>
}

// CHECK:      loop.kernel @e_kernel(%e: memref<1x6xi64>) {
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   loop.for %i1 = 0 to 6 {
// CHECK-NEXT:     %s = arith.addi %c0, %i1 : index
// CHECK-NEXT:     %v = arith.index_cast %s : index to i64
// CHECK-NEXT:     loop.store %v, %e[%c0, %i1] : memref<1x6xi64>

// -----

// Integer reductions: the type's minimum as the max identity, arith.maxsi.
func.func @forward(%x: tensor<4x8xi64>) -> tensor<4x1xi64> {
  %r = tensor.reduce max %x dims [1] : tensor<4x8xi64> -> tensor<4x1xi64>
  func.return %r : tensor<4x1xi64>
}

// CHECK:      %init = arith.constant -9223372036854775808 : i64
// CHECK:      %max = loop.for %r1 = 0 to 8 iter_args(%acc = %init) -> (i64) {
// CHECK-NEXT:   %[[V:.*]] = loop.load %x[%i0, %r1] : memref<4x8xi64>
// CHECK-NEXT:   %[[M:.*]] = arith.maxsi %acc, %[[V]] : i64
// CHECK-NEXT:   loop.yield %[[M]] : i64

// -----

// bf16 sums accumulate in f32: extf of each load, one truncf before the store.
func.func @forward(%x: tensor<4x8xbf16>) -> tensor<4x1xbf16> {
  %r = tensor.reduce add %x dims [1] : tensor<4x8xbf16> -> tensor<4x1xbf16>
  func.return %r : tensor<4x1xbf16>
}

// CHECK:      %init = arith.constant 0.000000e+00 : f32
// CHECK:      %add = loop.for %r1 = 0 to 8 iter_args(%acc = %init) -> (f32) {
// CHECK-NEXT:   %[[V:.*]] = loop.load %x[%i0, %r1] : memref<4x8xbf16>
// CHECK-NEXT:   %[[W:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK-NEXT:   %[[S:.*]] = arith.addf %acc, %[[W]] : f32
// CHECK-NEXT:   loop.yield %[[S]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: %[[R:.*]] = arith.truncf %add : f32 to bf16
// CHECK-NEXT: loop.store %[[R]], %r[%i0, %c0] : memref<4x1xbf16>
