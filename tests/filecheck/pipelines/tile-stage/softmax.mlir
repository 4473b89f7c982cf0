// RUN: deplodock-opt %s -p convert-loop-to-tile,tile-grid-stride,tile-rows-to-blocks,tile-loops-to-threads,tile-cooperative-reduce | filecheck %s
// (the passes of the tile stage, in the order `lower-to-tile` runs them)

// Fused softmax: two cooperative reductions (max, then sum) and a strided free loop.
// T = max(32, next_pow2(50)) = 64.

builtin.module {
  loop.kernel @softmax(%x: memref<4x50xf32>, %y: memref<4x50xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    %ninf = arith.constant 0xFF800000 : f32
    loop.for %i = 0 to 4 {
      %m = loop.for %k = 0 to 50 iter_args(%a = %ninf) -> (f32) {
        %v = loop.load %x[%i, %k] : memref<4x50xf32>
        %a2 = arith.maximumf %a, %v : f32
        loop.yield %a2 : f32
      }
      %s = loop.for %k = 0 to 50 iter_args(%a = %zero) -> (f32) {
        %v = loop.load %x[%i, %k] : memref<4x50xf32>
        %d = arith.subf %v, %m : f32
        %e = math.exp %d : f32
        %a2 = arith.addf %a, %e : f32
        loop.yield %a2 : f32
      }
      loop.for %j = 0 to 50 {
        %v = loop.load %x[%i, %j] : memref<4x50xf32>
        %d = arith.subf %v, %m : f32
        %e = math.exp %d : f32
        %q = arith.divf %e, %s : f32
        loop.store %q, %y[%i, %j] : memref<4x50xf32>
      }
    }
    loop.return
  }
}

// CHECK:       tile.grid %b to 4 {
// CHECK-NEXT:    tile.threads %t to 64 {
// CHECK:           %m_p = tile.for %k = %t to 50 step 64 iter_args(%a = %ninf) -> (f32) {
// CHECK:             arith.maximumf
// CHECK:           %m = tile.combine max %m_p : f32
// CHECK-NEXT:      %s_p = tile.for %k_1 = %t to 50 step 64 iter_args(%a_1 = %zero) -> (f32) {
// CHECK:             arith.subf %{{.*}}, %m : f32
// CHECK:           %s = tile.combine add %s_p : f32
// CHECK-NEXT:      tile.for %j = %t to 50 step 64 {
// CHECK:             %q = arith.divf %{{.*}}, %s : f32
// CHECK-NEXT:        tile.store %q, %y[%b, %j] : memref<4x50xf32>
