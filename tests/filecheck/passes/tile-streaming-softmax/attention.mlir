// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=32 bn=16},tile-thread{fm=2 fn=2 mma=0},tile-shared-statistics,tile-chunk-k{bk=16},tile-stage,tile-prologue-product,tile-streaming-softmax' | filecheck %s
// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=32 bn=16},tile-thread{fm=2 fn=2 mma=0},tile-shared-statistics,tile-chunk-k{bk=16},tile-stage,tile-prologue-product,tile-streaming-softmax{enable=false}' | filecheck %s --check-prefix=OFF

// Causal attention over 32 keys in chunks of 16 (see tile-prologue-product/attention.mlir
// for the steps before). Before this pass the block sweeps every key twice before its K
// loop, for the row max and the row sum, each sweep computing every score again.
//
// `tile-streaming-softmax` drops the sweeps. Each chunk stores its scores (scaled and
// masked, before exp) to `%scores_s`; a row pass (4 threads per row, `tile.combine ... width
// 4`) takes the chunk's row max, the running max `m_new = max(m_old, chunk_max)`, writes
// P = exp(y - m_new) into the P slab and updates the running sum `l_new = l_old * alpha +
// chunk_sum`, `alpha = exp(m_old - m_new)` (0 for a row that had seen no key). The running
// statistics alternate between two slots (`%parity`, `%next_parity`) so no element is read
// and written between two barriers. Before the chunk's P.V the accumulators are multiplied
// by their row's alpha; after the K loop they are divided by the row's sum (0 when every
// key of the row was masked).

// CHECK-LABEL: tile.kernel @scaled_dot_product_attention_kernel
// CHECK-SAME:    streaming_softmax = 1
// CHECK-NOT:     tile.combine max
// CHECK:         %online_s = tile.shared_alloc : memref<2x3x32xf32, 3 : i64>
// CHECK:         %scores_s = tile.shared_alloc {scores} : memref<16x32xf32, 3 : i64>
// CHECK:         tile.for %r = %t to 32 step 128 {
// CHECK-NEXT:      tile.store %init_1, %online_s[%c0, %c0, %r]
// CHECK-NEXT:      tile.store %init, %online_s[%c0, %c1, %r]
// CHECK:         tile.for %ko = %c0 to 32 step 16
// CHECK:           %parity = arith.remsi
// CHECK:           tile.store %{{.*}}, %scores_s[%pc, %pr]
// CHECK:           tile.barrier
// CHECK:           %chunk_max = tile.combine max %{{.*}} width 4 : f32
// CHECK-NEXT:      %m_old = tile.load %online_s[%parity, %c0, %row
// CHECK-NEXT:      %l_old = tile.load %online_s[%parity, %c1, %row
// CHECK-NEXT:      %m_new = arith.maximumf %m_old, %chunk_max : f32
// CHECK:             %[[D:.*]] = arith.subf %y_1, %m_new : f32
// CHECK-NEXT:        math.exp %[[D]]
// CHECK:             tile.store %{{.*}}, %x0_x1_a_s[%c_1, %row
// CHECK:           %chunk_sum = tile.combine add %{{.*}} width 4 : f32
// CHECK:           %alpha = arith.select %fresh, %init, %shift : f32
// CHECK:           %l_new = arith.addf %{{.*}}, %chunk_sum : f32
// CHECK:           tile.store %alpha, %online_s[%next_parity, %c2, %row
// CHECK:           %alpha_1 = tile.load %online_s[%next_parity, %c2, %mm]
// CHECK-NEXT:      %rescaled = arith.mulf %acc, %alpha_1 : f32
// CHECK:           tile.for %ki = %c0 to 16 iter_args(%{{.*}} = %rescaled,
// CHECK:         %l_3 = tile.load %row_sum_s[%mm]
// CHECK-NEXT:    %empty = arith.cmpf oeq, %l_3, %init : f32
// CHECK-NEXT:    %[[Q:.*]] = arith.divf %add, %l_3 : f32
// CHECK-NEXT:    arith.select %empty, %init, %[[Q]] : f32

// OFF-LABEL: tile.kernel @scaled_dot_product_attention_kernel
// OFF-SAME:    streaming_softmax = 0
// OFF:         tile.combine max
// OFF:         tile.combine add
// OFF:         tile.for %ko

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
