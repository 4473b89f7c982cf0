// RUN: deplodock-opt %s -p 'convert-loop-to-tile{block_size=32}' | filecheck %s

// Sibling nests (concat) get one grid-stride loop each, in one threads region; a nest
// with a non-zero lower bound offsets its delinearized iv.

builtin.module {
  loop.kernel @cat(%x: memref<4x8xf32>, %y: memref<4x5xf32>, %o: memref<4x13xf32>) {
    loop.for %i = 0 to 4 {
      loop.for %j = 0 to 8 {
        %v = loop.load %x[%i, %j] : memref<4x8xf32>
        loop.store %v, %o[%i, %j] : memref<4x13xf32>
      }
    }
    %c8 = arith.constant 8 : index
    loop.for %i = 0 to 4 {
      loop.for %j = 8 to 13 {
        %jy = arith.subi %j, %c8 : index
        %v = loop.load %y[%i, %jy] : memref<4x5xf32>
        loop.store %v, %o[%i, %j] : memref<4x13xf32>
      }
    }
    loop.return
  }
}

// CHECK:       tile.grid %b to 1 {
// CHECK-NEXT:    tile.threads %t to 32 {
// CHECK:           %start = arith.addi %{{.*}}, %t : index
// CHECK-NEXT:      tile.for %lin = %start to 32 step 32 {
// CHECK:             tile.store %v, %o[%i, %j] : memref<4x13xf32>
// CHECK:           tile.for %lin_1 = %start to 20 step 32 {
// CHECK-NEXT:        %i_1 = arith.floordivsi %lin_1, %[[C5:.*]] : index
// CHECK-NEXT:        %[[R:.*]] = arith.remsi %lin_1, %[[C5]] : index
// CHECK-NEXT:        %j_1 = arith.addi %[[R]], %[[C8:.*]] : index
// CHECK-NEXT:        %jy = arith.subi %j_1, %{{.*}} : index
// CHECK-NEXT:        %v_1 = tile.load %y[%i_1, %jy] : memref<4x5xf32>
// CHECK-NEXT:        tile.store %v_1, %o[%i_1, %j_1] : memref<4x13xf32>
