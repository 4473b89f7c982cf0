// RUN: deplodock-opt %s -p convert-loop-to-tile | filecheck %s

// The conversion schedules nothing: the fused RMSNorm becomes one block of one warp in
// which every thread runs every loop whole (serial tile.for from the constant %c0). Correct
// but slow; the tile-* passes map the loops onto blocks and threads. The host ops move to
// the tile dialect, and a schedule written on the loop kernel is kept for those passes.

builtin.module {
  loop.kernel @rms_norm(%x: memref<1x32x2048xf32>, %w: memref<2048xf32>, %y: memref<1x32x2048xf32>) attributes {schedule = {threads = 128 : i64}} {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    %n = arith.constant 2.048000e+03 : f32
    %eps = arith.constant 9.99999997e-07 : f32
    loop.for %i = 0 to 32 {
      %sum = loop.for %k = 0 to 2048 iter_args(%acc = %zero) -> (f32) {
        %v = loop.load %x[%c0, %i, %k] : memref<1x32x2048xf32>
        %sq = arith.mulf %v, %v : f32
        %a = arith.addf %acc, %sq : f32
        loop.yield %a : f32
      }
      %mean = arith.divf %sum, %n : f32
      %me = arith.addf %mean, %eps : f32
      %r = math.rsqrt %me : f32
      loop.for %j = 0 to 2048 {
        %xv = loop.load %x[%c0, %i, %j] : memref<1x32x2048xf32>
        %wv = loop.load %w[%j] : memref<2048xf32>
        %s = arith.mulf %xv, %r : f32
        %o = arith.mulf %s, %wv : f32
        loop.store %o, %y[%c0, %i, %j] : memref<1x32x2048xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x: memref<1x32x2048xf32>, %w: memref<2048xf32>) -> memref<1x32x2048xf32> {
    %y = loop.alloc : memref<1x32x2048xf32>
    loop.launch @rms_norm(%x, %w, %y) : (memref<1x32x2048xf32>, memref<2048xf32>, memref<1x32x2048xf32>) -> ()
    func.return %y : memref<1x32x2048xf32>
  }
}

// CHECK-LABEL: tile.kernel @rms_norm({{.*}}) attributes {schedule = {threads = 128 : i64}} {
// CHECK-NEXT:    tile.grid %b to 1 {
// CHECK-NEXT:      tile.threads %t to 32 {
// CHECK-NEXT:        %c0 = arith.constant 0 : index
// CHECK-NEXT:        %zero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        %n = arith.constant 2.048000e+03 : f32
// CHECK-NEXT:        %eps = arith.constant 1.000000e-06 : f32
// CHECK-NEXT:        tile.for %i = %c0 to 32 {
// CHECK-NEXT:          %sum = tile.for %k = %c0 to 2048 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:            %v = tile.load %x[%c0, %i, %k] : memref<1x32x2048xf32>
// CHECK-NEXT:            %sq = arith.mulf %v, %v : f32
// CHECK-NEXT:            %a = arith.addf %acc, %sq : f32
// CHECK-NEXT:            tile.yield %a : f32
// CHECK-NEXT:          }
// CHECK-NEXT:          %mean = arith.divf %sum, %n : f32
// CHECK-NEXT:          %me = arith.addf %mean, %eps : f32
// CHECK-NEXT:          %r = math.rsqrt %me : f32
// CHECK-NEXT:          tile.for %j = %c0 to 2048 {
// CHECK-NEXT:            %xv = tile.load %x[%c0, %i, %j] : memref<1x32x2048xf32>
// CHECK-NEXT:            %wv = tile.load %w[%j] : memref<2048xf32>
// CHECK-NEXT:            %s = arith.mulf %xv, %r : f32
// CHECK-NEXT:            %o = arith.mulf %s, %wv : f32
// CHECK-NEXT:            tile.store %o, %y[%c0, %i, %j] : memref<1x32x2048xf32>
// CHECK-NEXT:          }
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    tile.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func @forward(%x: memref<1x32x2048xf32>, %w: memref<2048xf32>) -> memref<1x32x2048xf32> {
// CHECK-NEXT:    %y = tile.alloc : memref<1x32x2048xf32>
// CHECK-NEXT:    tile.launch @rms_norm(%x, %w, %y) : (memref<1x32x2048xf32>, memref<2048xf32>, memref<1x32x2048xf32>) -> ()
