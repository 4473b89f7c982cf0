// RUN: deplodock-opt %s -p tile-grid-stride | filecheck %s
// RUN: deplodock-opt %s -p 'tile-grid-stride{threads=64 max_blocks=2}' | filecheck %s --check-prefix=SMALL

// An unscheduled elementwise kernel (as convert-loop-to-tile leaves it) gets one thread
// per element, grid-stride: the 10 x 30 nest becomes one loop over N = 300 elements,
// T = 256 threads per block, G = ceil(300 / 256) = 2 blocks, and thread t of block b runs
// lin = b*T + t, then lin + G*T, ... while lin < N, delinearizing lin into (i, j). The
// knobs used are recorded in `schedule`. With threads=64 max_blocks=2: G = min(5, 2) = 2.
// A kernel that already says `schedule = {threads = 32}` keeps its own block size.

builtin.module {
  tile.kernel @add_exp(%a: memref<10x30xf32>, %bias: memref<30xf32>, %o: memref<10x30xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 10 {
          tile.for %j = %c0 to 30 {
            %av = tile.load %a[%i, %j] : memref<10x30xf32>
            %bv = tile.load %bias[%j] : memref<30xf32>
            %s = arith.addf %av, %bv : f32
            %e = math.exp %s : f32
            tile.store %e, %o[%i, %j] : memref<10x30xf32>
          }
        }
      }
    }
    tile.return
  }
  tile.kernel @neg(%a: memref<100xf32>, %o: memref<100xf32>) attributes {schedule = {threads = 32 : i64}} {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        tile.for %i = %c0 to 100 {
          %v = tile.load %a[%i] : memref<100xf32>
          %n = arith.negf %v : f32
          tile.store %n, %o[%i] : memref<100xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @add_exp({{.*}}) attributes {schedule = {threads = 256 : i64, max_blocks = 1024 : i64}} {
// CHECK-NEXT:    tile.grid %b to 2 {
// CHECK-NEXT:      tile.threads %t to 256 {
// CHECK-NEXT:        %c256 = arith.constant 256 : index
// CHECK-NEXT:        %c30 = arith.constant 30 : index
// CHECK-NEXT:        %[[BASE:.*]] = arith.muli %b, %c256 : index
// CHECK-NEXT:        %start = arith.addi %[[BASE]], %t : index
// CHECK-NEXT:        tile.for %lin = %start to 300 step 512 {
// CHECK-NEXT:          %i = arith.floordivsi %lin, %c30 : index
// CHECK-NEXT:          %j = arith.remsi %lin, %c30 : index
// CHECK-NEXT:          %av = tile.load %a[%i, %j] : memref<10x30xf32>
// CHECK-NEXT:          %bv = tile.load %bias[%j] : memref<30xf32>
// CHECK-NEXT:          %s = arith.addf %av, %bv : f32
// CHECK-NEXT:          %e = math.exp %s : f32
// CHECK-NEXT:          tile.store %e, %o[%i, %j] : memref<10x30xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }

// CHECK-LABEL: tile.kernel @neg({{.*}}) attributes {schedule = {threads = 32 : i64, max_blocks = 1024 : i64}} {
// CHECK-NEXT:    tile.grid %b to 4 {
// CHECK-NEXT:      tile.threads %t to 32 {
// CHECK:             tile.for %i = %start to 100 step 128 {

// SMALL:       tile.grid %b to 2 {
// SMALL-NEXT:    tile.threads %t to 64 {
// SMALL:           tile.for %lin = %start to 300 step 128 {
