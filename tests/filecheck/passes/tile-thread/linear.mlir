// RUN: deplodock-opt %s -p 'tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2}' | filecheck %s
// RUN: deplodock-opt %s -p 'tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2 quads=0}' | filecheck %s --check-prefix=ROWS

// tile-thread on the blocked linear: an 8 x 8 thread grid (64 threads), each with 2 x 2
// register cells, rows and columns interleaved (a thread's cells 8 apart). The threads are
// ordered in 2 x 2 quads (`quads`): lanes n and n ^ 1 share a row, n and n ^ 2 a column, so
// once the operands are read from shared memory as vectors, those reads come in pairs of
// equal addresses (twice the shared bandwidth). The K loop is interchanged with the cells and
// carries the 4 accumulators; x is loaded once per row cell, the weight once per column cell.
// With quads=0 the threads go row by row and a thread's rows are adjacent (blocked).

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %p_0_bias: memref<16xf32>, %linear: memref<20x16xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        tile.for %i0 = %c0 to 20 {
          tile.for %i1 = %c0 to 16 {
            %add = tile.for %r1 = %c0 to 32 iter_args(%acc = %init) -> (f32) {
              %0 = tile.load %x0[%i0, %r1] : memref<20x32xf32>
              %1 = tile.load %p_0_weight[%i1, %r1] : memref<16x32xf32>
              %2 = arith.mulf %0, %1 : f32
              %3 = arith.addf %acc, %2 : f32
              tile.yield %3 : f32
            }
            %4 = tile.load %p_0_bias[%i1] : memref<16xf32>
            %5 = arith.addf %add, %4 : f32
            tile.store %5, %linear[%i0, %i1] : memref<20x16xf32>
          }
        }
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<20x32xf32> {deplodock.input = "x0"}, %p_0_weight: memref<16x32xf32> {deplodock.param = "0.weight"}, %p_0_bias: memref<16xf32> {deplodock.param = "0.bias"}) -> memref<20x16xf32> {
    %linear = tile.alloc : memref<20x16xf32>
    tile.launch @linear_kernel(%x0, %p_0_weight, %p_0_bias, %linear) : (memref<20x32xf32>, memref<16x32xf32>, memref<16xf32>, memref<20x16xf32>) -> ()
    func.return %linear : memref<20x16xf32>
  }
}

// CHECK:      tile.threads %t to 64 {
// CHECK:        %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 8] cells 2 interleaved quads
// CHECK-NEXT:   %nn, %nn_1 = tile.thread_tile %t dim 1 of [8, 8] cells 2 interleaved quads
// CHECK:        %add, %add_1, %add_2, %add_3 = tile.for %r1 = %c0 to 32 iter_args(%acc = %init, %acc_1 = %init, %acc_2 = %init, %acc_3 = %init)
// CHECK-NEXT:     %0 = tile.load %x0[%m_c, %r1]
// CHECK-NEXT:     %1 = tile.load %x0[%m_c_1, %r1]
// CHECK-NEXT:     %2 = tile.load %p_0_weight[%n, %r1]
// CHECK-NEXT:     %3 = tile.load %p_0_weight[%n_1, %r1]
// CHECK-COUNT-4:  arith.mulf
// CHECK-COUNT-4:  arith.addf %acc
// CHECK:        tile.if %inside {
// CHECK-NEXT:     tile.store %{{.*}}, %linear[%m_c, %n]

// ROWS:         quads = 0 : i64
// ROWS:         %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 8] cells 2 blocked
// ROWS-NEXT:    %nn, %nn_1 = tile.thread_tile %t dim 1 of [8, 8] cells 2 interleaved
