// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=32 bn=16},tile-thread{fm=2 fn=2 mma=0},tile-shared-statistics,tile-chunk-k{bk=16},tile-stage,tile-prologue-product' | filecheck %s
// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=32 bn=16},tile-thread{fm=2 fn=2 mma=0},tile-shared-statistics,tile-chunk-k{bk=16},tile-stage,tile-prologue-product{enable=false}' | filecheck %s --check-prefix=OFF

// Causal attention over 32 keys, head dim 16, as one loop kernel (`loop-fusion` recomputes
// the score q . k wherever the softmax and P.V read it). `tile-stage` copies each K chunk's
// P = exp(q . k * scale - max) / sum into the `a` slab, one element per copy iteration,
// each with a dot product of its own over the 16 head elements.
//
// `tile-prologue-product` makes the copy a register tile: each of the 128 threads owns 2 x 2
// of the 32 x 16 chunk (rows `%pr`, key columns `%pc`), the queries of the block go to
// shared memory once before the K loop (`%x0_a_s`), the chunk's keys once per chunk
// (`%x1_b_s`), and one loop carries the 4 sums: 2 + 2 loads for 4 multiply-adds. The rest of
// each element (scale, mask, exp, / sum, the store into the slab) is replicated per cell.
//
// With `enable=false` each element keeps its own dot product in the copy loop.

// CHECK-LABEL: tile.kernel @scaled_dot_product_attention_kernel
// CHECK-SAME:    prologue_product = 1
// CHECK:         %x0_a_s = tile.shared_alloc {stage = "a"} : memref<32x16xf32, 3 : i64>
// CHECK:         %x0_x1_a_s = tile.shared_alloc {stage = "a"} : memref<16x32xf32, 3 : i64>
// CHECK:         tile.store %x0_v, %x0_a_s[%row, %col]
// CHECK:         tile.for %ko = %c0 to 32 step 16
// CHECK-NEXT:      %pr, %pr_1 = tile.thread_tile %t dim 0 of [16, 8] cells 2 blocked
// CHECK-NEXT:      %pc, %pc_1 = tile.thread_tile %t dim 1 of [16, 8] cells 2 interleaved
// CHECK:           tile.store %x1_v, %x1_b_s[%row_1, %col_1]
// CHECK:           tile.barrier
// CHECK-NEXT:      %[[S:.*]], %[[S1:.*]], %[[S2:.*]], %[[S3:.*]] = tile.for %r3_5 = %c0 to 16 iter_args
// CHECK-NEXT:        %[[Q:.*]] = tile.load %x0_a_s[%pr, %r3_5]
// CHECK-NEXT:        %[[Q1:.*]] = tile.load %x0_a_s[%pr_1, %r3_5]
// CHECK-NEXT:        %[[K:.*]] = tile.load %x1_b_s[%pc, %r3_5]
// CHECK-NEXT:        %[[K1:.*]] = tile.load %x1_b_s[%pc_1, %r3_5]
// CHECK-NEXT:        arith.mulf %[[Q]], %[[K]]
// CHECK:           arith.mulf %[[S]], %0
// CHECK:           math.exp
// CHECK:           tile.store %x0_x1_v, %x0_x1_a_s[%pc, %pr]
// CHECK-NEXT:      tile.store %x0_x1_v_1, %x0_x1_a_s[%pc_1, %pr]
// CHECK-NEXT:      tile.store %x0_x1_v_2, %x0_x1_a_s[%pc, %pr_1]
// CHECK-NEXT:      tile.store %x0_x1_v_3, %x0_x1_a_s[%pc_1, %pr_1]

// OFF-LABEL: tile.kernel @scaled_dot_product_attention_kernel
// OFF-SAME:    prologue_product = 0
// OFF:         tile.for %ko
// OFF:           tile.for %l{{.*}} = %t to 512 step 128 {
// OFF:             tile.for %{{.*}} = %c0 to 16 iter_args
// OFF:               tile.load %x0[
// OFF:               tile.load %x1[

builtin.module {
  loop.kernel @scaled_dot_product_attention_kernel(%x0: memref<1x1x32x16xf32>, %x1: memref<1x1x32x16xf32>, %x2: memref<1x1x32x16xf32>, %scaled_dot_product_attention: memref<1x1x32x16xf32>) {
    %c0 = arith.constant 0 : index
    %init = arith.constant 0.000000e+00 : f32
    %init_1 = arith.constant 0xff800000 : f32
    %0 = arith.constant 2.500000e-01 : f32
    loop.for %i2 = 0 to 32 {
      %max = loop.for %r3 = 0 to 32 iter_args(%acc = %init_1) -> (f32) {
        %add = loop.for %r3_1 = 0 to 16 iter_args(%acc_1 = %init) -> (f32) {
          %1 = loop.load %x0[%c0, %c0, %i2, %r3_1] : memref<1x1x32x16xf32>
          %2 = loop.load %x1[%c0, %c0, %r3, %r3_1] : memref<1x1x32x16xf32>
          %3 = arith.mulf %1, %2 : f32
          %4 = arith.addf %acc_1, %3 : f32
          loop.yield %4 : f32
        }
        %5 = arith.mulf %add, %0 : f32
        %6 = arith.cmpi sle, %r3, %i2 : index
        %7 = arith.select %6, %5, %init_1 : f32
        %8 = arith.maximumf %acc, %7 : f32
        loop.yield %8 : f32
      }
      %add_1 = loop.for %r3_2 = 0 to 32 iter_args(%acc_2 = %init) -> (f32) {
        %add_2 = loop.for %r3_3 = 0 to 16 iter_args(%acc_3 = %init) -> (f32) {
          %9 = loop.load %x0[%c0, %c0, %i2, %r3_3] : memref<1x1x32x16xf32>
          %10 = loop.load %x1[%c0, %c0, %r3_2, %r3_3] : memref<1x1x32x16xf32>
          %11 = arith.mulf %9, %10 : f32
          %12 = arith.addf %acc_3, %11 : f32
          loop.yield %12 : f32
        }
        %13 = arith.mulf %add_2, %0 : f32
        %14 = arith.cmpi sle, %r3_2, %i2 : index
        %15 = arith.select %14, %13, %init_1 : f32
        %16 = arith.cmpf oeq, %max, %init_1 : f32
        %17 = arith.subf %15, %max : f32
        %18 = math.exp %17 : f32
        %19 = arith.select %16, %init, %18 : f32
        %20 = arith.addf %acc_2, %19 : f32
        loop.yield %20 : f32
      }
      loop.for %i3 = 0 to 16 {
        %add_3 = loop.for %r3_4 = 0 to 32 iter_args(%acc_4 = %init) -> (f32) {
          %add_4 = loop.for %r3_5 = 0 to 16 iter_args(%acc_5 = %init) -> (f32) {
            %21 = loop.load %x0[%c0, %c0, %i2, %r3_5] : memref<1x1x32x16xf32>
            %22 = loop.load %x1[%c0, %c0, %r3_4, %r3_5] : memref<1x1x32x16xf32>
            %23 = arith.mulf %21, %22 : f32
            %24 = arith.addf %acc_5, %23 : f32
            loop.yield %24 : f32
          }
          %25 = arith.mulf %add_4, %0 : f32
          %26 = arith.cmpi sle, %r3_4, %i2 : index
          %27 = arith.select %26, %25, %init_1 : f32
          %28 = arith.cmpf oeq, %max, %init_1 : f32
          %29 = arith.subf %27, %max : f32
          %30 = math.exp %29 : f32
          %31 = arith.select %28, %init, %30 : f32
          %32 = arith.cmpf oeq, %add_1, %init : f32
          %33 = arith.divf %31, %add_1 : f32
          %34 = arith.select %32, %init, %33 : f32
          %35 = loop.load %x2[%c0, %c0, %r3_4, %i3] : memref<1x1x32x16xf32>
          %36 = arith.mulf %34, %35 : f32
          %37 = arith.addf %acc_4, %36 : f32
          loop.yield %37 : f32
        }
        loop.store %add_3, %scaled_dot_product_attention[%c0, %c0, %i2, %i3] : memref<1x1x32x16xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x0: memref<1x1x32x16xf32> {deplodock.input = "x0"}, %x1: memref<1x1x32x16xf32> {deplodock.input = "x1"}, %x2: memref<1x1x32x16xf32> {deplodock.input = "x2"}) -> memref<1x1x32x16xf32> {
    %scaled_dot_product_attention = loop.alloc : memref<1x1x32x16xf32>
    loop.launch @scaled_dot_product_attention_kernel(%x0, %x1, %x2, %scaled_dot_product_attention) : (memref<1x1x32x16xf32>, memref<1x1x32x16xf32>, memref<1x1x32x16xf32>, memref<1x1x32x16xf32>) -> ()
    func.return %scaled_dot_product_attention : memref<1x1x32x16xf32>
  }
}
