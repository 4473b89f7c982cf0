// RUN: deplodock-opt %s -p convert-loop-to-tile | filecheck %s
// RUN: deplodock-opt %s -p 'convert-loop-to-tile{block_size=64 max_blocks=2}' | filecheck %s --check-prefix=SMALL

// One thread per element, grid-stride: N = 10 * 30 = 300, T = 256, G = 2.

builtin.module {
  loop.kernel @add_exp(%a: memref<10x30xf32>, %bias: memref<30xf32>, %o: memref<10x30xf32>) {
    loop.for %i = 0 to 10 {
      loop.for %j = 0 to 30 {
        %av = loop.load %a[%i, %j] : memref<10x30xf32>
        %bv = loop.load %bias[%j] : memref<30xf32>
        %s = arith.addf %av, %bv : f32
        %e = math.exp %s : f32
        loop.store %e, %o[%i, %j] : memref<10x30xf32>
      }
    }
    loop.return
  }
  func.func @forward(%a: memref<10x30xf32>, %bias: memref<30xf32>) -> memref<10x30xf32> {
    %o = loop.alloc : memref<10x30xf32>
    loop.launch @add_exp(%a, %bias, %o) : (memref<10x30xf32>, memref<30xf32>, memref<10x30xf32>) -> ()
    func.return %o : memref<10x30xf32>
  }
}

// CHECK-LABEL: tile.kernel @add_exp(%a: memref<10x30xf32>, %bias: memref<30xf32>, %o: memref<10x30xf32>) {
// CHECK-NEXT:    tile.grid %b to 2 {
// CHECK-NEXT:      tile.threads %t to 256 {
// CHECK-DAG:         %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG:         %[[C30:.*]] = arith.constant 30 : index
// CHECK:             %[[BASE:.*]] = arith.muli %b, %[[C256]] : index
// CHECK-NEXT:        %start = arith.addi %[[BASE]], %t : index
// CHECK-NEXT:        tile.for %lin = %start to 300 step 512 {
// CHECK-NEXT:          %i = arith.floordivsi %lin, %[[C30]] : index
// CHECK-NEXT:          %j = arith.remsi %lin, %[[C30]] : index
// CHECK-NEXT:          %av = tile.load %a[%i, %j] : memref<10x30xf32>
// CHECK-NEXT:          %bv = tile.load %bias[%j] : memref<30xf32>
// CHECK-NEXT:          %s = arith.addf %av, %bv : f32
// CHECK-NEXT:          %e = math.exp %s : f32
// CHECK-NEXT:          tile.store %e, %o[%i, %j] : memref<10x30xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    tile.return
// CHECK-NEXT:  }
// CHECK:       func.func @forward
// CHECK-NEXT:    %o = tile.alloc : memref<10x30xf32>
// CHECK-NEXT:    tile.launch @add_exp(%a, %bias, %o) : (memref<10x30xf32>, memref<30xf32>, memref<10x30xf32>) -> ()
// CHECK-NEXT:    func.return %o : memref<10x30xf32>
// CHECK-NOT:   loop.

// SMALL:       tile.grid %b to 2 {
// SMALL-NEXT:    tile.threads %t to 64 {
// SMALL:           tile.for %lin = %start to 300 step 128 {
