// RUN: deplodock-opt %s -p 'tile-block{bm=16 bn=16}' | filecheck %s

// A 20 x 32 @ 32 x 16 linear, unscheduled (docs/examples/linear.tile.mlir). tile-block gives
// each block a 16 x 16 tile of the output: 2 blocks, whose origins tile.block_tile computes.
// The output loops become the cell loops %mm, %nn; 20 rows do not fill 2 tiles of 16, so a
// cell's row is clamped (arith.minsi) for what it loads and its store sits in a tile.if.

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

// CHECK:      tile.kernel @linear_kernel({{.*}}) attributes {schedule = {bm = 16 : i64, bn = 16 : i64, group = 8 : i64}}
// CHECK-NEXT:   tile.grid %b to 2 {
// CHECK-NEXT:     %m0, %n0 = tile.block_tile %b counts [2, 1] sizes [16, 16] group 8
// CHECK-NEXT:     tile.threads %t to 32 {
// CHECK:            tile.for %mm = %c0 to 16 {
// CHECK-NEXT:         tile.for %nn = %c0 to 16 {
// CHECK-NEXT:           %m = arith.addi %m0, %mm : index
// CHECK-NEXT:           %n = arith.addi %n0, %nn : index
// CHECK-NEXT:           %m_c = arith.minsi %m, %c19 : index
// CHECK:                tile.load %x0[%m_c, %r1]
// CHECK:                %inside = arith.cmpi slt, %m, %c20 : index
// CHECK-NEXT:           tile.if %inside {
// CHECK-NEXT:             tile.store %{{.*}}, %linear[%m_c, %n]
