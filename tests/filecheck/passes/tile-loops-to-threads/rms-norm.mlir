// RUN: deplodock-opt %s -p tile-loops-to-threads | filecheck %s
// RUN: deplodock-opt %s -p 'tile-loops-to-threads{max_threads=1024}' | filecheck %s --check-prefix=BIG

// The threads of a block share its loops. First the block size: the longest loop of the
// row body has 2048 iterations, so T = next_pow2(2048) = 2048 capped at max_threads (256
// by default; 1024 with max_threads=1024). Then the free loop %j is strided over the
// threads (thread t runs j = t, t + 256, ...). The reduce loop %k is left serial: splitting
// a reduction needs a combine, which is tile-cooperative-reduce's decision.
// @short_rows: rows of 50 need only T = 64.

builtin.module {
  tile.kernel @rms_norm(%x: memref<1x32x2048xf32>, %w: memref<2048xf32>, %y: memref<1x32x2048xf32>) {
    tile.grid %b to 32 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %n = arith.constant 2.048000e+03 : f32
        %eps = arith.constant 1.000000e-06 : f32
        %sum = tile.for %k = %c0 to 2048 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%c0, %b, %k] : memref<1x32x2048xf32>
          %sq = arith.mulf %v, %v : f32
          %a = arith.addf %acc, %sq : f32
          tile.yield %a : f32
        }
        %mean = arith.divf %sum, %n : f32
        %me = arith.addf %mean, %eps : f32
        %r = math.rsqrt %me : f32
        tile.for %j = %c0 to 2048 {
          %xv = tile.load %x[%c0, %b, %j] : memref<1x32x2048xf32>
          %wv = tile.load %w[%j] : memref<2048xf32>
          %s = arith.mulf %xv, %r : f32
          %o = arith.mulf %s, %wv : f32
          tile.store %o, %y[%c0, %b, %j] : memref<1x32x2048xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @short_rows(%x: memref<4x50xf32>, %y: memref<4x50xf32>) {
    tile.grid %b to 4 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %j = %c0 to 50 {
          %v = tile.load %x[%b, %j] : memref<4x50xf32>
          %e = math.exp %v : f32
          tile.store %e, %y[%b, %j] : memref<4x50xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @rms_norm({{.*}}) attributes {schedule = {threads = 256 : i64}} {
// CHECK-NEXT:    tile.grid %b to 32 {
// CHECK-NEXT:      tile.threads %t to 256 {
// CHECK:             %sum = tile.for %k = %c0 to 2048 iter_args(%acc = %zero) -> (f32) {
// CHECK:             %r = math.rsqrt %me : f32
// CHECK-NEXT:        tile.for %j = %t to 2048 step 256 {
// CHECK-NEXT:          %xv = tile.load %x[%c0, %b, %j] : memref<1x32x2048xf32>
// CHECK-NEXT:          %wv = tile.load %w[%j] : memref<2048xf32>
// CHECK-NEXT:          %s = arith.mulf %xv, %r : f32
// CHECK-NEXT:          %o = arith.mulf %s, %wv : f32
// CHECK-NEXT:          tile.store %o, %y[%c0, %b, %j] : memref<1x32x2048xf32>
// CHECK-NEXT:        }

// CHECK-LABEL: tile.kernel @short_rows({{.*}}) attributes {schedule = {threads = 64 : i64}} {
// CHECK-NEXT:    tile.grid %b to 4 {
// CHECK-NEXT:      tile.threads %t to 64 {
// CHECK-NEXT:        tile.for %j = %t to 50 step 64 {

// BIG:       tile.threads %t to 1024 {
// BIG:         tile.for %j = %t to 2048 step 1024 {
