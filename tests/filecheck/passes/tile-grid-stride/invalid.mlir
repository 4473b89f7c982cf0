// RUN: deplodock-opt %s -p tile-grid-stride --split-input-file --verify-diagnostics | filecheck %s
// RUN: deplodock-opt %s -p 'tile-grid-stride{threads=100}' --split-input-file --verify-diagnostics | filecheck %s --check-prefix=THREADS

// A nest that reads what a sibling nest wrote would need a grid-wide barrier: the blocks of
// one launch do not wait for each other. And a block is whole warps, at most 1024 threads.

builtin.module {
  tile.kernel @chain(%a: memref<8xf32>, %t: memref<8xf32>, %o: memref<8xf32>) {
    tile.grid %b to 1 {
      tile.threads %tid to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 8 {
          %v = tile.load %a[%i] : memref<8xf32>
          tile.store %v, %t[%i] : memref<8xf32>
        }
        tile.for %i_1 = %c0 to 8 {
          %v_1 = tile.load %t[%i_1] : memref<8xf32>
          tile.store %v_1, %o[%i_1] : memref<8xf32>
        }
      }
    }
    tile.return
  }
}

// -----

builtin.module {
  tile.kernel @copy(%a: memref<8xf32>, %o: memref<8xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 8 {
          %v = tile.load %a[%i] : memref<8xf32>
          tile.store %v, %o[%i] : memref<8xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK: tile-grid-stride: @chain reads %t after a sibling loop nest writes it (needs a grid-wide barrier)
// THREADS: tile.kernel @copy: threads 100 must be a multiple of 32 in [32, 1024]
