// RUN: deplodock-opt %s -p 'tile-split-k{splits=4}' | filecheck %s

// A 20 x 32 @ 32 x 16 linear with a bias (docs/examples/linear.tile.mlir), split 4 ways
// along K. The kernel keeps its name and becomes the *partial* kernel: an outer loop %s
// over the 4 slices, K walked 8 at a time from s * 8, the raw sum stored to the workspace
// %ws[s, i, j]. The bias moves to @linear_kernel_combine, which adds the 4 partials of each
// output in order (a fixed order: the result does not depend on the blocks' schedule).
// Each kernel keeps only the buffers it touches; the host allocates %ws and launches both.

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %p_0_bias: memref<16xf32>, %linear: memref<20x16xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        tile.for %i0 = %c0 to 20 {
          tile.for %i1 = %c0 to 16 {
            %add = tile.for %r1 = %c0 to 32 iter_args(%acc = %init) -> (f32) {
              %0 = tile.load %x0[%i0, %r1] : memref<20x32xf32>
              %1 = tile.load %p_0_weight[%i1, %r1] : memref<16x32xf32>
              %2 = arith.mulf %0, %1 : f32
              %3 = arith.addf %acc, %2 : f32
              tile.yield %3 : f32
            }
            %4 = tile.load %p_0_bias[%i1] : memref<16xf32>
            %5 = arith.addf %add, %4 : f32
            tile.store %5, %linear[%i0, %i1] : memref<20x16xf32>
          }
        }
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<20x32xf32> {deplodock.input = "x0"}, %p_0_weight: memref<16x32xf32> {deplodock.param = "0.weight"}, %p_0_bias: memref<16xf32> {deplodock.param = "0.bias"}) -> memref<20x16xf32> {
    %linear = tile.alloc : memref<20x16xf32>
    tile.launch @linear_kernel(%x0, %p_0_weight, %p_0_bias, %linear) : (memref<20x32xf32>, memref<16x32xf32>, memref<16xf32>, memref<20x16xf32>) -> ()
    func.return %linear : memref<20x16xf32>
  }
}

// CHECK:      tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %ws: memref<4x20x16xf32>) attributes {schedule = {splits = 4 : i64}}
// CHECK:          tile.for %s = %c0 to 4 {
// CHECK-NEXT:       tile.for %i0 = %c0 to 20 {
// CHECK-NEXT:         tile.for %i1 = %c0 to 16 {
// CHECK-NEXT:           %add = tile.for %r1 = %c0 to 8 iter_args(%acc = %init) -> (f32) {
// CHECK-NEXT:             %slice = arith.muli %s, %c8 : index
// CHECK-NEXT:             %k = arith.addi %slice, %r1 : index
// CHECK-NEXT:             tile.load %x0[%i0, %k]
// CHECK-NEXT:             tile.load %p_0_weight[%i1, %k]
// CHECK:                tile.store %add, %ws[%s, %i0, %i1] : memref<4x20x16xf32>
// CHECK:      tile.kernel @linear_kernel_combine(%p_0_bias: memref<16xf32>, %linear: memref<20x16xf32>, %ws: memref<4x20x16xf32>) {
// CHECK:            tile.for %i0 = %c0 to 20 {
// CHECK-NEXT:         tile.for %i1 = %c0 to 16 {
// CHECK-NEXT:           %[[P0:.*]] = tile.load %ws[%c0, %i0, %i1]
// CHECK-NEXT:           %[[P1:.*]] = tile.load %ws[%c1, %i0, %i1]
// CHECK-NEXT:           %[[S1:.*]] = arith.addf %[[P0]], %[[P1]] : f32
// CHECK-NEXT:           %[[P2:.*]] = tile.load %ws[%c2, %i0, %i1]
// CHECK-NEXT:           %[[S2:.*]] = arith.addf %[[S1]], %[[P2]] : f32
// CHECK-NEXT:           %[[P3:.*]] = tile.load %ws[%c3, %i0, %i1]
// CHECK-NEXT:           %add = arith.addf %[[S2]], %[[P3]] : f32
// CHECK-NEXT:           %[[BIAS:.*]] = tile.load %p_0_bias[%i1]
// CHECK-NEXT:           %[[OUT:.*]] = arith.addf %add, %[[BIAS]] : f32
// CHECK-NEXT:           tile.store %[[OUT]], %linear[%i0, %i1]
// CHECK:      func.func @forward
// CHECK-NEXT:   %linear = tile.alloc : memref<20x16xf32>
// CHECK-NEXT:   %ws = tile.alloc : memref<4x20x16xf32>
// CHECK-NEXT:   tile.launch @linear_kernel(%x0, %p_0_weight, %ws)
// CHECK-NEXT:   tile.launch @linear_kernel_combine(%p_0_bias, %linear, %ws)
