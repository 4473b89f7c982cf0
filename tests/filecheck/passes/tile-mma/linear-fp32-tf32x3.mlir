// RUN: deplodock-opt %s -p tile-mma | filecheck %s
// RUN: deplodock-opt %s -p tile-mma,tile-mma | filecheck %s

// The fp32 linear of linear-bf16.mlir, same cells (one warp, 16 x 8, `mma`). An fp32 product
// goes on the tensor cores as tf32x3: each K step of 8 is an m16n8k8 on tf32 values, and each
// fragment element x is split once into tf32 values hi + lo (`tile.split_tf32`). Lane l reads
// A at rows %mm (g) and %mm_1 (g + 8), k = q and q + 4 (single elements: tf32 has one per
// register), and B at weight row %bcol = 8j + g, the same k. Three MMAs per tile, the two
// corrections first (lo_a hi_b, hi_a lo_b, marked `correction`: they refine products, they
// are not more of them), then hi_a hi_b: products as accurate as fp32 FMAs.

// CHECK:      %quad = arith.remsi %lane, %c4 : index
// CHECK:      tile.barrier
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = tile.for %ki = %c0 to 16 step 8 iter_args(%[[C0:.*]] = %acc, %[[C1:.*]] = %acc_1, %[[C2:.*]] = %acc_2, %[[C3:.*]] = %acc_3)
// CHECK-NEXT:   %kq = arith.addi %ki, %quad : index
// CHECK-NEXT:   %kq4 = arith.addi %kq, %c4 : index
// CHECK-NEXT:   %[[A0:.*]] = tile.load %x0_a_s[%mm, %kq]
// CHECK-NEXT:   %[[A1:.*]] = tile.load %x0_a_s[%mm_1, %kq]
// CHECK-NEXT:   %[[A2:.*]] = tile.load %x0_a_s[%mm, %kq4]
// CHECK-NEXT:   %[[A3:.*]] = tile.load %x0_a_s[%mm_1, %kq4]
// CHECK-NEXT:   %[[B0:.*]] = tile.load %p_0_weight_b_s[%bcol, %kq]
// CHECK-NEXT:   %[[B1:.*]] = tile.load %p_0_weight_b_s[%bcol, %kq4]
// CHECK-NEXT:   %hi, %lo = tile.split_tf32 %[[A0]]
// CHECK-NEXT:   %hi_1, %lo_1 = tile.split_tf32 %[[A1]]
// CHECK-NEXT:   %hi_2, %lo_2 = tile.split_tf32 %[[A2]]
// CHECK-NEXT:   %hi_3, %lo_3 = tile.split_tf32 %[[A3]]
// CHECK-NEXT:   %hi_4, %lo_4 = tile.split_tf32 %[[B0]]
// CHECK-NEXT:   %hi_5, %lo_5 = tile.split_tf32 %[[B1]]
// CHECK-NEXT:   %[[E0:.*]], %[[E1:.*]], %[[E2:.*]], %[[E3:.*]] = tile.mma_sync a(%lo, %lo_1, %lo_2, %lo_3) b(%hi_4, %hi_5) c(%[[C0]], %[[C1]], %[[C2]], %[[C3]]) {correction} : tf32
// CHECK-NEXT:   %[[F0:.*]], %[[F1:.*]], %[[F2:.*]], %[[F3:.*]] = tile.mma_sync a(%hi, %hi_1, %hi_2, %hi_3) b(%lo_4, %lo_5) c(%[[E0]], %[[E1]], %[[E2]], %[[E3]]) {correction} : tf32
// CHECK-NEXT:   %d, %d_1, %d_2, %d_3 = tile.mma_sync a(%hi, %hi_1, %hi_2, %hi_3) b(%hi_4, %hi_5) c(%[[F0]], %[[F1]], %[[F2]], %[[F3]]) : tf32
// CHECK-NEXT:   tile.yield %d, %d_1, %d_2, %d_3 : f32, f32, f32, f32
// CHECK-NOT:  arith.mulf
// CHECK:      tile.store

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<32x32xf32>, %p_0_weight: memref<16x32xf32>, %linear: memref<32x16xf32>) attributes {schedule = {bm = 16 : i64, bn = 8 : i64, group = 8 : i64, fm = 2 : i64, fn = 2 : i64, mma = 1 : i64, threads = 32 : i64, bk = 16 : i64, stage = 3 : i64}} {
    tile.grid %b to 4 {
      %m0, %n0 = tile.block_tile %b counts [2, 2] sizes [16, 8] group 8
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        %c16 = arith.constant 16 : index
        %p_0_weight_b_s = tile.shared_alloc {stage = "b"} : memref<8x16xf32, 3 : i64>
        %x0_a_s = tile.shared_alloc {stage = "a"} : memref<16x16xf32, 3 : i64>
        %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 4] cells 2 mma
        %nn, %nn_1 = tile.thread_tile %t dim 1 of [8, 4] cells 2 mma
        %m = arith.addi %m0, %mm : index
        %m_1 = arith.addi %m0, %mm_1 : index
        %n = arith.addi %n0, %nn : index
        %n_1 = arith.addi %n0, %nn_1 : index
        %add, %add_1, %add_2, %add_3 = tile.for %ko = %c0 to 32 step 16 iter_args(%acc = %init, %acc_1 = %init, %acc_2 = %init, %acc_3 = %init) -> (f32, f32, f32, f32) {
          tile.for %l = %t to 256 step 32 {
            %row = arith.divsi %l, %c16 : index
            %col = arith.remsi %l, %c16 : index
            %m_2 = arith.addi %m0, %row : index
            %r1 = arith.addi %ko, %col : index
            %x0_v = tile.load %x0[%m_2, %r1] : memref<32x32xf32>
            tile.store %x0_v, %x0_a_s[%row, %col] : memref<16x16xf32, 3 : i64>
          }
          tile.for %l_1 = %t to 128 step 32 {
            %row_1 = arith.divsi %l_1, %c16 : index
            %col_1 = arith.remsi %l_1, %c16 : index
            %n_2 = arith.addi %n0, %row_1 : index
            %r1_1 = arith.addi %ko, %col_1 : index
            %p_0_weight_v = tile.load %p_0_weight[%n_2, %r1_1] : memref<16x32xf32>
            tile.store %p_0_weight_v, %p_0_weight_b_s[%row_1, %col_1] : memref<8x16xf32, 3 : i64>
          }
          tile.barrier
          %0, %1, %2, %3 = tile.for %ki = %c0 to 16 iter_args(%acc_4 = %acc, %acc_5 = %acc_1, %acc_6 = %acc_2, %acc_7 = %acc_3) -> (f32, f32, f32, f32) {
            %4 = tile.load %x0_a_s[%mm, %ki] : memref<16x16xf32, 3 : i64>
            %5 = tile.load %x0_a_s[%mm_1, %ki] : memref<16x16xf32, 3 : i64>
            %6 = tile.load %p_0_weight_b_s[%nn, %ki] : memref<8x16xf32, 3 : i64>
            %7 = tile.load %p_0_weight_b_s[%nn_1, %ki] : memref<8x16xf32, 3 : i64>
            %12 = arith.mulf %4, %6 : f32
            %13 = arith.mulf %4, %7 : f32
            %14 = arith.mulf %5, %6 : f32
            %15 = arith.mulf %5, %7 : f32
            %16 = arith.addf %acc_4, %12 : f32
            %17 = arith.addf %acc_5, %13 : f32
            %18 = arith.addf %acc_6, %14 : f32
            %19 = arith.addf %acc_7, %15 : f32
            tile.yield %16, %17, %18, %19 : f32, f32, f32, f32
          }
          tile.barrier
          tile.yield %0, %1, %2, %3 : f32, f32, f32, f32
        }
        tile.store %add, %linear[%m, %n] : memref<32x16xf32>
        tile.store %add_1, %linear[%m, %n_1] : memref<32x16xf32>
        tile.store %add_2, %linear[%m_1, %n] : memref<32x16xf32>
        tile.store %add_3, %linear[%m_1, %n_1] : memref<32x16xf32>
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<32x32xf32> {deplodock.input = "x0"}, %p_0_weight: memref<16x32xf32> {deplodock.param = "0.weight"}) -> memref<32x16xf32> {
    %linear = tile.alloc : memref<32x16xf32>
    tile.launch @linear_kernel(%x0, %p_0_weight, %linear) : (memref<32x32xf32>, memref<16x32xf32>, memref<32x16xf32>) -> ()
    func.return %linear : memref<32x16xf32>
  }
}

