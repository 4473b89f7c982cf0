// RUN: deplodock-opt %s -p convert-loop-to-tile,tile-grid-stride,tile-rows-to-blocks,tile-loops-to-threads,tile-cooperative-reduce | filecheck %s
// (the passes of the tile stage, in the order `lower-to-tile` runs them)

// relu((x + b) @ w): the free loops (m, n) around the reduction are the rows, one block
// per output element; the k loop is split between the threads and combined.

builtin.module {
  loop.kernel @mm(%x: memref<16x64xf32>, %bias: memref<64xf32>, %w: memref<64x8xf32>, %o: memref<16x8xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %m = 0 to 16 {
      loop.for %n = 0 to 8 {
        %acc = loop.for %k = 0 to 64 iter_args(%a = %zero) -> (f32) {
          %xv = loop.load %x[%m, %k] : memref<16x64xf32>
          %bv = loop.load %bias[%k] : memref<64xf32>
          %s = arith.addf %xv, %bv : f32
          %wv = loop.load %w[%k, %n] : memref<64x8xf32>
          %p = arith.mulf %s, %wv : f32
          %a2 = arith.addf %a, %p : f32
          loop.yield %a2 : f32
        }
        %r = arith.maximumf %acc, %zero : f32
        loop.store %r, %o[%m, %n] : memref<16x8xf32>
      }
    }
    loop.return
  }
}

// CHECK:       tile.grid %b to 128 {
// CHECK-NEXT:    tile.threads %t to 64 {
// CHECK-DAG:       %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:       %zero = arith.constant 0.000000e+00 : f32
// CHECK:           %m = arith.floordivsi %b, %[[C8]] : index
// CHECK-NEXT:      %n = arith.remsi %b, %[[C8]] : index
// CHECK-NEXT:      %acc_p = tile.for %k = %t to 64 step 64 iter_args(%a = %zero) -> (f32) {
// CHECK:             %wv = tile.load %w[%k, %n] : memref<64x8xf32>
// CHECK:             tile.yield %a2 : f32
// CHECK-NEXT:      }
// CHECK-NEXT:      %acc = tile.combine add %acc_p : f32
// CHECK-NEXT:      %r = arith.maximumf %acc, %zero : f32
// CHECK-NEXT:      tile.store %r, %o[%m, %n] : memref<16x8xf32>
