// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s --print-op-generic | deplodock-opt | filecheck %s

builtin.module {
  tile.kernel @rms_norm(%x: memref<1x4x64xf32>, %w: memref<64xf32>, %y: memref<1x4x64xf32>) {
    tile.grid %b to 4 {
      tile.threads %t to 64 {
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.000000e+00 : f32
        %sum_p = tile.for %k = %t to 64 step 64 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%c0, %b, %k] : memref<1x4x64xf32>
          %sq = arith.mulf %v, %v : f32
          %n = arith.addf %acc, %sq : f32
          tile.yield %n : f32
        }
        %sum = tile.combine add %sum_p : f32
        %m = tile.combine max %sum_p : f32
        tile.for %j = %t to 64 step 64 {
          %xv = tile.load %x[%c0, %b, %j] : memref<1x4x64xf32>
          %wv = tile.load %w[%j] : memref<64xf32>
          %o = arith.mulf %xv, %wv : f32
          tile.store %o, %y[%c0, %b, %j] : memref<1x4x64xf32>
        }
        tile.for %s = %c0 to 8 {
          tile.store %sum, %y[%c0, %b, %s] : memref<1x4x64xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @scheduled(%x: memref<256xf32>) attributes {schedule = {block_size = 128 : i64}} {
    tile.grid %b to 2 {
      tile.threads %t to 128 {
        %c128 = arith.constant 128 : index
        %base = arith.muli %b, %c128 : index
        %start = arith.addi %base, %t : index
        %r:2 = tile.for %i = %start to 256 step 256 iter_args(%a = %c128, %p = %c128) -> (index, index) {
          tile.yield %p, %a : index, index
        }
      }
    }
    tile.return
  }
  func.func @forward(%x: memref<1x4x64xf32> {deplodock.input = "x"}, %w: memref<64xf32> {deplodock.param = "weight"}) -> memref<1x4x64xf32> {
    %y = tile.alloc : memref<1x4x64xf32>
    tile.launch @rms_norm(%x, %w, %y) : (memref<1x4x64xf32>, memref<64xf32>, memref<1x4x64xf32>) -> ()
    func.return %y : memref<1x4x64xf32>
  }
}

// CHECK-LABEL: tile.kernel @rms_norm(%x: memref<1x4x64xf32>, %w: memref<64xf32>, %y: memref<1x4x64xf32>) {
// CHECK-NEXT:    tile.grid %b to 4 {
// CHECK-NEXT:      tile.threads %t to 64 {
// CHECK:             %sum_p = tile.for %k = %t to 64 step 64 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:          %v = tile.load %x[%c0, %b, %k] : memref<1x4x64xf32>
// CHECK:               tile.yield %n : f32
// CHECK-NEXT:        }
// CHECK-NEXT:        %sum = tile.combine add %sum_p : f32
// CHECK-NEXT:        %m = tile.combine max %sum_p : f32
// CHECK-NEXT:        tile.for %j = %t to 64 step 64 {
// CHECK:               tile.store %o, %y[%c0, %b, %j] : memref<1x4x64xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:        tile.for %s = %c0 to 8 {
// CHECK-NEXT:          tile.store %sum, %y[%c0, %b, %s] : memref<1x4x64xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    tile.return
// CHECK-NEXT:  }
// CHECK-LABEL: tile.kernel @scheduled(%x: memref<256xf32>) attributes {schedule = {block_size = 128 : i64}} {
// CHECK:         %r, %{{.*}} = tile.for %i = %start to 256 step 256 iter_args(%a = %c128, %p = %c128) -> (index, index) {
// CHECK-NEXT:      tile.yield %p, %a : index, index
// CHECK-NEXT:    }
// CHECK:       func.func @forward
// CHECK-NEXT:    %y = tile.alloc : memref<1x4x64xf32>
// CHECK-NEXT:    tile.launch @rms_norm(%x, %w, %y) : (memref<1x4x64xf32>, memref<64xf32>, memref<1x4x64xf32>) -> ()
// CHECK-NEXT:    func.return %y : memref<1x4x64xf32>
