// RUN: deplodock-opt %s -p 'tile-schedule{kernel="linear_kernel" knobs="bn=16 bm=16 splits=1"}' | filecheck %s
// RUN: deplodock-opt %s -p 'tile-schedule{knobs="bm=16 bn=16"},tile-block' | filecheck %s --check-prefix=BLOCK
// RUN: not deplodock-opt %s -p 'tile-schedule{kernel="mm" knobs="bm=16"}' 2>&1 | filecheck %s --check-prefix=NAME
// RUN: not deplodock-opt %s -p 'tile-schedule{knobs="bm=16 bn="}' 2>&1 | filecheck %s --check-prefix=KNOB

// The unscheduled linear of tile-block/linear.mlir, whose `schedule` already holds two knobs
// (bm = 64, group = 2). tile-schedule writes the given ones: bm takes its new value in its
// place, bn and splits follow in the order given. tile-block then reads them before its
// options: 16 x 16 tiles, 2 blocks, and the raster group of 2 left from before.

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %p_0_bias: memref<16xf32>, %linear: memref<20x16xf32>) attributes {schedule = {bm = 64 : i64, group = 2 : i64}} {
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

// CHECK:      tile.kernel @linear_kernel({{.*}}) attributes {schedule = {bm = 16 : i64, group = 2 : i64, bn = 16 : i64, splits = 1 : i64}} {
// CHECK-NEXT:   tile.grid %b to 1 {
// CHECK-NEXT:     tile.threads %t to 32 {

// BLOCK:      tile.kernel @linear_kernel({{.*}}) attributes {schedule = {bm = 16 : i64, group = 2 : i64, bn = 16 : i64}}
// BLOCK-NEXT:   tile.grid %b to 2 {
// BLOCK-NEXT:     %m0, %n0 = tile.block_tile %b counts [2, 1] sizes [16, 16] group 2

// NAME: deplodock-opt: error: tile-schedule: no tile.kernel @mm (the module has @linear_kernel)

// KNOB: deplodock-opt: error: tile-schedule: malformed knob 'bn=' (expected name=integer) in knobs="bm=16 bn="
