// RUN: deplodock-opt %s -p tile-grid-stride,tile-vectorize | filecheck %s
// RUN: deplodock-opt %s -p 'tile-grid-stride,tile-vectorize{width=2}' | filecheck %s --check-prefix=TWO

// A grid-stride elementwise kernel whose accesses are all contiguous along %lin (offset
// lin + 0 in each buffer, innermost extent 100 a multiple of 4) moves 4 elements per thread
// and access: the loop starts at %start * 4 and strides 4x as far, each load is a
// load_vector, the add is repeated per element, the store is a store_vector. The grid
// shrinks to ceil(1000 / (256 * 4)) = 1 block. The bias kernel reads %bias[%j] (a
// broadcast: not contiguous in %lin) and is left alone.

builtin.module {
  tile.kernel @add(%x: memref<10x100xf32>, %y: memref<10x100xf32>, %o: memref<10x100xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 10 {
          tile.for %j = %c0 to 100 {
            %v = tile.load %x[%i, %j] : memref<10x100xf32>
            %w = tile.load %y[%i, %j] : memref<10x100xf32>
            %s = arith.addf %v, %w : f32
            tile.store %s, %o[%i, %j] : memref<10x100xf32>
          }
        }
      }
    }
    tile.return
  }
  tile.kernel @bias(%x: memref<10x100xf32>, %bias: memref<100xf32>, %o: memref<10x100xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 10 {
          tile.for %j = %c0 to 100 {
            %v = tile.load %x[%i, %j] : memref<10x100xf32>
            %w = tile.load %bias[%j] : memref<100xf32>
            %s = arith.addf %v, %w : f32
            tile.store %s, %o[%i, %j] : memref<10x100xf32>
          }
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @add
// CHECK-SAME:    schedule = {threads = 256 : i64, max_blocks = 1024 : i64, vector = 4 : i64}
// CHECK:         tile.grid %b to 1 {
// CHECK:           %start = arith.addi %{{.*}}, %t : index
// CHECK-NEXT:      %start4 = arith.muli %start, %c4 : index
// CHECK-NEXT:      tile.for %lin = %start4 to 1000 step 1024 {
// CHECK-NEXT:        %i = arith.floordivsi %lin, %c100 : index
// CHECK-NEXT:        %j = arith.remsi %lin, %c100 : index
// CHECK-NEXT:        %v, %v_1, %v_2, %v_3 = tile.load_vector %x[%i, %j] width 4 : memref<10x100xf32>
// CHECK-NEXT:        %w, %w_1, %w_2, %w_3 = tile.load_vector %y[%i, %j] width 4 : memref<10x100xf32>
// CHECK-NEXT:        %s = arith.addf %v, %w : f32
// CHECK-NEXT:        %s_1 = arith.addf %v_1, %w_1 : f32
// CHECK-NEXT:        %s_2 = arith.addf %v_2, %w_2 : f32
// CHECK-NEXT:        %s_3 = arith.addf %v_3, %w_3 : f32
// CHECK-NEXT:        tile.store_vector %s, %s_1, %s_2, %s_3, %o[%i, %j] : memref<10x100xf32>
// CHECK-NEXT:      }
// CHECK-LABEL: tile.kernel @bias
// CHECK-SAME:    schedule = {threads = 256 : i64, max_blocks = 1024 : i64}}
// CHECK:         tile.grid %b to 4 {
// CHECK:           tile.for %lin = %start to 1000 step 1024 {
// CHECK-NOT:       load_vector

// TWO:         tile.grid %b to 2 {
// TWO:         tile.for %lin = %start2 to 1000 step 1024 {
// TWO:           %v, %v_1 = tile.load_vector %x[%i, %j] width 2 : memref<10x100xf32>
// TWO:           tile.store_vector %s, %s_1, %o[%i, %j] : memref<10x100xf32>
