// RUN: deplodock-opt %s -p 'tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-chunk-k{bk=8},tile-stage' | filecheck %s

// A fused prologue: the down projection of an MLP reads silu(x0) * x1, not a buffer.
// tile-stage stages the *computed* operand: one slab, filled by a copy that loads x0 and
// x1 and computes silu(x0) * x1 once per element and block. The %ki loop reads the slab
// and only multiplies; without this, every thread would recompute the prologue for each
// of its row cells, once per thread column (16x the exp for a 16x16 thread grid).

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %x1: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %linear: memref<20x16xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %0 = arith.constant 1.000000e+00 : f32
        tile.for %i0 = %c0 to 20 {
          tile.for %i1 = %c0 to 16 {
            %add = tile.for %r1 = %c0 to 32 iter_args(%acc = %init) -> (f32) {
              %1 = tile.load %x0[%i0, %r1] : memref<20x32xf32>
              %2 = arith.negf %1 : f32
              %3 = math.exp %2 : f32
              %4 = arith.addf %0, %3 : f32
              %5 = arith.divf %1, %4 : f32
              %6 = tile.load %x1[%i0, %r1] : memref<20x32xf32>
              %7 = arith.mulf %5, %6 : f32
              %8 = tile.load %p_0_weight[%i1, %r1] : memref<16x32xf32>
              %9 = arith.mulf %7, %8 : f32
              %10 = arith.addf %acc, %9 : f32
              tile.yield %10 : f32
            }
            tile.store %add, %linear[%i0, %i1] : memref<20x16xf32>
          }
        }
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<20x32xf32> {deplodock.input = "x0"}, %x1: memref<20x32xf32> {deplodock.input = "x1"}, %p_0_weight: memref<16x32xf32> {deplodock.param = "0.weight"}) -> memref<20x16xf32> {
    %linear = tile.alloc : memref<20x16xf32>
    tile.launch @linear_kernel(%x0, %x1, %p_0_weight, %linear) : (memref<20x32xf32>, memref<20x32xf32>, memref<16x32xf32>, memref<20x16xf32>) -> ()
    func.return %linear : memref<20x16xf32>
  }
}


// CHECK:      %p_0_weight_b_s = tile.shared_alloc {stage = "b"} : memref<16x8xf32, 3 : i64>
// CHECK-NEXT: %x0_x1_a_s = tile.shared_alloc {stage = "a"} : memref<16x8xf32, 3 : i64>
// CHECK:      tile.for %ko = %c0 to 32 step 8
// CHECK-NEXT:   tile.for %l = %t to 128 step 64 {
// CHECK:          %[[G:.*]] = tile.load %x0[%m_c_2, %r1]
// CHECK-NEXT:     %[[NEG:.*]] = arith.negf %[[G]]
// CHECK-NEXT:     %[[E:.*]] = math.exp %[[NEG]]
// CHECK-NEXT:     %[[D:.*]] = arith.addf %0, %[[E]]
// CHECK-NEXT:     %[[S:.*]] = arith.divf %[[G]], %[[D]]
// CHECK-NEXT:     %[[U:.*]] = tile.load %x1[%m_c_2, %r1]
// CHECK-NEXT:     %x0_x1_v = arith.mulf %[[S]], %[[U]]
// CHECK-NEXT:     tile.store %x0_x1_v, %x0_x1_a_s[%row, %col]
// CHECK:        tile.store %p_0_weight_v, %p_0_weight_b_s[%row_1, %col_1]
// CHECK:        tile.barrier
// CHECK-NEXT:   tile.for %ki
// CHECK-NOT:      math.exp
// CHECK:          tile.load %x0_x1_a_s[%mm, %ki]
// CHECK-NOT:      math.exp
// CHECK:        tile.barrier
// CHECK-NEXT:   tile.yield
