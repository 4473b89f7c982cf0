// RUN: deplodock-opt %s -p tile-grid-stride | filecheck %s
// RUN: deplodock-opt %s -p tile-rows-to-blocks,tile-rows,tile-cooperative-reduce | filecheck %s --check-prefix=ROWS

// A scan kernel (a carried loop that stores its running value at every step) is scheduled
// like an elementwise one: its carried loop is a *recurrence*, not a reduction threads could
// split (`nests.is_recurrence`), so the 3 x 4 independent scans become a grid-stride loop,
// one thread per scan, each running its 5 steps serially. The row passes leave it alone
// (the second run: still one block of one warp, the nest untouched).

// CHECK:      tile.threads %t to 256 {
// CHECK:        %start = arith.addi %{{.*}}, %t : index
// CHECK-NEXT:   tile.for %lin = %start to 12 step 256 {
// CHECK-NEXT:     %i0 = arith.floordivsi %lin, %c4 : index
// CHECK-NEXT:     %i2 = arith.remsi %lin, %c4 : index
// CHECK-NEXT:     %add = tile.for %r1 = %c0 to 5 iter_args(%acc = %init) -> (f32) {
// CHECK:            tile.store %{{.*}}, %s[%i0, %r1, %i2] : memref<3x5x4xbf16>

// ROWS:      tile.grid %b to 1 {
// ROWS-NEXT:   tile.threads %t to 32 {
// ROWS-NEXT:     %c0 = arith.constant 0 : index
// ROWS-NEXT:     %init = arith.constant 0.000000e+00 : f32
// ROWS-NEXT:     tile.for %i0 = %c0 to 3 {

builtin.module {
  tile.kernel @s_kernel(%x: memref<3x5x4xbf16>, %s: memref<3x5x4xbf16>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        tile.for %i0 = %c0 to 3 {
          tile.for %i2 = %c0 to 4 {
            %add = tile.for %r1 = %c0 to 5 iter_args(%acc = %init) -> (f32) {
              %0 = tile.load %x[%i0, %r1, %i2] : memref<3x5x4xbf16>
              %1 = arith.extf %0 : bf16 to f32
              %2 = arith.addf %acc, %1 : f32
              %3 = arith.truncf %2 : f32 to bf16
              tile.store %3, %s[%i0, %r1, %i2] : memref<3x5x4xbf16>
              tile.yield %2 : f32
            }
          }
        }
      }
    }
    tile.return
  }
  func.func @forward(%x: memref<3x5x4xbf16>) -> memref<3x5x4xbf16> {
    %s = tile.alloc : memref<3x5x4xbf16>
    tile.launch @s_kernel(%x, %s) : (memref<3x5x4xbf16>, memref<3x5x4xbf16>) -> ()
    func.return %s : memref<3x5x4xbf16>
  }
}

