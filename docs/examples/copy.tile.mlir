// A stage's asynchronous copy of a 128 x 32 slab (16 bytes, 8 to a row) by 128 threads:
// docs/scheduling.md runs tile-unroll and tile-hoist-invariant on it.
builtin.module {
  tile.kernel @copy(%x: memref<128x32xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 128 {
        %c8 = arith.constant 8 : index
        %c4 = arith.constant 4 : index
        %x_s = tile.shared_alloc {stage = "a", pad = 0 : i64} : memref<128x32xf32, 3 : i64>
        tile.for %l = %t to 1024 step 128 {
          %row = arith.divsi %l, %c8 : index
          %col = arith.remsi %l, %c8 : index
          %col4 = arith.muli %col, %c4 : index
          tile.copy_async %x_s[%row, %col4], %x[%row, %col4], 16 : memref<128x32xf32, 3 : i64>, memref<128x32xf32>
        }
        tile.async_commit
        tile.async_wait 0
      }
    }
    tile.return
  }
}
