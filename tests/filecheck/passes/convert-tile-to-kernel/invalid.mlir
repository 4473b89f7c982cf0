// RUN: deplodock-opt %s -p convert-tile-to-kernel --split-input-file --verify-diagnostics | filecheck %s

tile.kernel @combine_in_strided_loop(%x: memref<256xf32>, %y: memref<256xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 64 {
      tile.for %k = %t to 256 step 64 {
        %v = tile.load %x[%k] : memref<256xf32>
        %s = tile.combine add %v : f32
        tile.store %s, %y[%k] : memref<256xf32>
      }
    }
  }
  tile.return
}
// CHECK: tile.combine: inside a thread-strided loop, where not every thread takes part

// -----

tile.kernel @two_sizes(%x: memref<256xf32>) {
  tile.grid %b to 1 {
    tile.threads %t to 64 {
    }
    tile.threads %u to 128 {
    }
  }
  tile.return
}
// CHECK: tile.kernel @two_sizes: expected tile.threads regions of one size in its tile.grid, found sizes [64, 128]
