// RUN: deplodock-opt %s -p 'tile-grid-stride{threads=32}' | filecheck %s

// Sibling nests (a concat: two sources written to two ranges of %o) get one grid-stride
// loop each, in one threads region, sharing %start; the block count comes from the larger
// nest (32 elements -> 1 block of 32). A nest whose inner loop starts at 8 adds the start
// back after delinearizing (%j_1 = lin mod 5 + 8).

builtin.module {
  tile.kernel @cat(%x: memref<4x8xf32>, %y: memref<4x5xf32>, %o: memref<4x13xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 4 {
          tile.for %j = %c0 to 8 {
            %v = tile.load %x[%i, %j] : memref<4x8xf32>
            tile.store %v, %o[%i, %j] : memref<4x13xf32>
          }
        }
        %c8 = arith.constant 8 : index
        tile.for %i_1 = %c0 to 4 {
          tile.for %j_1 = %c8 to 13 {
            %jy = arith.subi %j_1, %c8 : index
            %v_1 = tile.load %y[%i_1, %jy] : memref<4x5xf32>
            tile.store %v_1, %o[%i_1, %j_1] : memref<4x13xf32>
          }
        }
      }
    }
    tile.return
  }
}

// CHECK:       tile.grid %b to 1 {
// CHECK-NEXT:    tile.threads %t to 32 {
// CHECK:           %start = arith.addi %{{.*}}, %t : index
// CHECK-NEXT:      tile.for %lin = %start to 32 step 32 {
// CHECK-NEXT:        %i = arith.floordivsi %lin, %[[C8:.*]] : index
// CHECK-NEXT:        %j = arith.remsi %lin, %[[C8]] : index
// CHECK-NEXT:        %v = tile.load %x[%i, %j] : memref<4x8xf32>
// CHECK-NEXT:        tile.store %v, %o[%i, %j] : memref<4x13xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      %[[OFFSET:.*]] = arith.constant 8 : index
// CHECK-NEXT:      tile.for %lin_1 = %start to 20 step 32 {
// CHECK-NEXT:        %i_1 = arith.floordivsi %lin_1, %[[C5:.*]] : index
// CHECK-NEXT:        %[[R:.*]] = arith.remsi %lin_1, %[[C5]] : index
// CHECK-NEXT:        %j_1 = arith.addi %[[R]], %[[C8]] : index
// CHECK-NEXT:        %jy = arith.subi %j_1, %[[OFFSET]] : index
// CHECK-NEXT:        %v_1 = tile.load %y[%i_1, %jy] : memref<4x5xf32>
// CHECK-NEXT:        tile.store %v_1, %o[%i_1, %j_1] : memref<4x13xf32>
// CHECK-NEXT:      }
