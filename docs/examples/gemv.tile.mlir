builtin.module {
  tile.kernel @gemv(%x: memref<1x256xf32>, %w: memref<64x256xf32>, %y: memref<1x64xf32>) {
    tile.grid %b to 8 {
      tile.threads %t to 256 {
        %c0 = arith.constant 0 : index
        %c32 = arith.constant 32 : index
        %c8 = arith.constant 8 : index
        %zero = arith.constant 0.000000e+00 : f32
        %group = arith.floordivsi %t, %c32 : index
        %lane = arith.remsi %t, %c32 : index
        %0 = arith.muli %b, %c8 : index
        %row = arith.addi %0, %group : index
        %is_lead = arith.cmpi eq, %lane, %c0 : index
        %p = tile.for %k = %lane to 256 step 32 iter_args(%acc = %zero) -> (f32) {
          %xv = tile.load %x[%c0, %k] : memref<1x256xf32>
          %wv = tile.load %w[%row, %k] : memref<64x256xf32>
          %m = arith.mulf %xv, %wv : f32
          %a = arith.addf %acc, %m : f32
          tile.yield %a : f32
        }
        %s = tile.combine add %p width 32 : f32
        tile.if %is_lead {
          tile.store %s, %y[%c0, %row] : memref<1x64xf32>
        }
      }
    }
    tile.return
  }
}
