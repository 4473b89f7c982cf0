// RUN: deplodock-opt %s -p tile-clamp-masked-loads | filecheck %s

// The row statistics of causal attention: each thread loads the score s[row, key] and keeps
// it only where key <= row (`select(key <= row, s * scale, -inf)`). Past the diagonal the
// value is thrown away, so the load may read any in-bounds element: it reads s[row, row],
// at min(key, row), and the masked half of the row is never fetched.
//
// @two_uses: the loaded value also feeds a sum that ignores the mask: left alone.
// @strict: the mask is key < row, written row > key: the kept keys are still at most the
// row, so the load is clamped the same way.
// @diagonal: the mask keeps key == row only, not a bound: left alone.

builtin.module {
  tile.kernel @masked(%s: memref<64x64xf32>, %out: memref<64xf32>) {
    tile.grid %row to 64 {
      tile.threads %key to 64 {
        %scale = arith.constant 1.250000e-01 : f32
        %neg_inf = arith.constant 0xff800000 : f32
        %v = tile.load %s[%row, %key] : memref<64x64xf32>
        %scaled = arith.mulf %v, %scale : f32
        %keep = arith.cmpi sle, %key, %row : index
        %p = arith.select %keep, %scaled, %neg_inf : f32
        %m = tile.combine max %p : f32
        tile.store %m, %out[%row] : memref<64xf32>
      }
    }
    tile.return
  }
  tile.kernel @two_uses(%s: memref<64x64xf32>, %out: memref<64xf32>) {
    tile.grid %row to 64 {
      tile.threads %key to 64 {
        %neg_inf = arith.constant 0xff800000 : f32
        %v = tile.load %s[%row, %key] : memref<64x64xf32>
        %keep = arith.cmpi sle, %key, %row : index
        %p = arith.select %keep, %v, %neg_inf : f32
        %q = arith.addf %p, %v : f32
        %m = tile.combine add %q : f32
        tile.store %m, %out[%row] : memref<64xf32>
      }
    }
    tile.return
  }
  tile.kernel @strict(%s: memref<64x64xf32>, %out: memref<64xf32>) {
    tile.grid %row to 64 {
      tile.threads %key to 64 {
        %neg_inf = arith.constant 0xff800000 : f32
        %v = tile.load %s[%row, %key] : memref<64x64xf32>
        %keep = arith.cmpi sgt, %row, %key : index
        %p = arith.select %keep, %v, %neg_inf : f32
        %m = tile.combine max %p : f32
        tile.store %m, %out[%row] : memref<64xf32>
      }
    }
    tile.return
  }
  tile.kernel @diagonal(%s: memref<64x64xf32>, %out: memref<64xf32>) {
    tile.grid %row to 64 {
      tile.threads %key to 64 {
        %neg_inf = arith.constant 0xff800000 : f32
        %v = tile.load %s[%row, %key] : memref<64x64xf32>
        %keep = arith.cmpi eq, %key, %row : index
        %p = arith.select %keep, %v, %neg_inf : f32
        %m = tile.combine max %p : f32
        tile.store %m, %out[%row] : memref<64xf32>
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @masked
// CHECK:         %safe = arith.minsi %key, %row : index
// CHECK-NEXT:    %v = tile.load %s[%row, %safe] : memref<64x64xf32>
// CHECK:         %keep = arith.cmpi sle, %key, %row : index

// CHECK-LABEL: tile.kernel @two_uses
// CHECK-NOT:     arith.minsi
// CHECK:         %v = tile.load %s[%row, %key] : memref<64x64xf32>

// CHECK-LABEL: tile.kernel @strict
// CHECK:         %safe = arith.minsi %key, %row : index
// CHECK-NEXT:    %v = tile.load %s[%row, %safe] : memref<64x64xf32>

// CHECK-LABEL: tile.kernel @diagonal
// CHECK-NOT:     arith.minsi
// CHECK:         %v = tile.load %s[%row, %key] : memref<64x64xf32>
