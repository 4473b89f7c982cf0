// RUN: deplodock-opt %s -p convert-loop-to-tile --verify-diagnostics | filecheck %s
// RUN: deplodock-opt %s -p 'convert-loop-to-tile{block_size=100}' --verify-diagnostics | filecheck %s --check-prefix=BS

// A nest that reads what a sibling nest wrote would need a grid-wide barrier.

builtin.module {
  loop.kernel @chain(%a: memref<8xf32>, %t: memref<8xf32>, %o: memref<8xf32>) {
    loop.for %i = 0 to 8 {
      %v = loop.load %a[%i] : memref<8xf32>
      loop.store %v, %t[%i] : memref<8xf32>
    }
    loop.for %i = 0 to 8 {
      %v = loop.load %t[%i] : memref<8xf32>
      loop.store %v, %o[%i] : memref<8xf32>
    }
    loop.return
  }
}

// CHECK: convert-loop-to-tile: @chain reads %t after a sibling loop nest writes it (needs a grid-wide barrier)
// BS: convert-loop-to-tile: block_size 100 must be a multiple of 32 in [32, 1024]
