// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-chunk-k{bk=8},tile-stage,tile-vectorize,tile-pad-shared,tile-multibuffer{depth=2},tile-pipeline,tile-async-copy,tile-causal-skip' | filecheck %s
// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-chunk-k{bk=8},tile-stage,tile-vectorize,tile-pad-shared,tile-multibuffer{depth=2},tile-pipeline,tile-async-copy,tile-causal-skip,convert-tile-to-kernel' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=16 bn=16},tile-thread{fm=2 fn=2},tile-chunk-k{bk=8},tile-stage,tile-vectorize,tile-pad-shared,tile-multibuffer{depth=2},tile-pipeline,tile-async-copy,tile-causal-skip{enable=false}' | filecheck %s --check-prefix=OFF

// Causal attention's P.V over 40 keys (the loop kernel that `loop-fusion` leaves: the row
// max and sum are inputs), scheduled in blocks of 16 query rows and chunks of 8 keys, two
// slots, pipelined. The copy of a chunk computes p = exp(s - max) / sum with the mask
// `key <= query` (`arith.cmpi sle, %r3, %i2`): past the diagonal s is -inf, exp gives 0,
// and 0 / sum is 0. So the block of rows m0..m0+15 needs only the chunks up to the one
// holding key m0 + 15: `kend` = min(40, ((m0 + 15) / 8 + 1) * 8), i.e. 16, 32 and 40 for
// the blocks at m0 = 0, 16 and 32. The K loop's bound stays the constant 40: the loop runs
// %j from %skip = 40 - kend and recovers the chunk start %ko = %j - %skip, and the
// pipeline stops fetching at kend instead of 40.
//
// With `enable=false` the kernel records `causal_skip = 0` and keeps every chunk.
//
// @masked_scores multiplies V by the masked score itself (-inf past the diagonal, not 0):
// the chunks past the diagonal change the result, and the loop is left as it was.

// CHECK-LABEL: tile.kernel @scaled_dot_product_attention_kernel_3
// CHECK-SAME:    causal_skip = 1
// CHECK:         %m0{{.*}} = tile.block_tile
// CHECK:         } {chunk = 0 : i64}
// CHECK:         %last_key = arith.addi %m0{{.*}}, %c15 : index
// CHECK-NEXT:    %last_key_chunk = arith.floordivsi %last_key, %c8 : index
// CHECK-NEXT:    %visible_chunks = arith.addi %last_key_chunk, %c1 : index
// CHECK-NEXT:    %visible_end = arith.muli %visible_chunks, %c8 : index
// CHECK-NEXT:    %kend = arith.minsi %visible_end, %c40 : index
// CHECK-NEXT:    %skip = arith.subi %c40, %kend : index
// CHECK-NEXT:    tile.for %j = %skip to 40 step 8 iter_args
// CHECK-NEXT:      %ko = arith.subi %j, %skip : index
// CHECK:           %has_next = arith.cmpi slt, %ko_next, %kend : index

// CHECK-LABEL: tile.kernel @masked_scores
// CHECK-NOT:     causal_skip
// CHECK-NOT:     %skip
// CHECK:         tile.for %ko = %c0 to 40 step 8 iter_args

// OFF-LABEL: tile.kernel @scaled_dot_product_attention_kernel_3
// OFF-SAME:    causal_skip = 0
// OFF-NOT:     %skip
// OFF:         tile.for %ko = %c0 to 40 step 8 iter_args

// CUDA:      const int kend = ((m0 + 15) / 8 + 1) * 8 < 40 ? ((m0 + 15) / 8 + 1) * 8 : 40;
// CUDA-NEXT: const int skip = 40 - kend;
// CUDA:      for (int j = skip; j < 40; j += 8) {
// CUDA-NEXT:   const int ko = j - skip;
// CUDA:        if (ko_next < kend) {

builtin.module {
  loop.kernel @scaled_dot_product_attention_kernel_3(%scaled_dot_product_attention: memref<1x2x40x1x40xf32>, %scaled_dot_product_attention_1: memref<1x2x40x1xf32>, %scaled_dot_product_attention_2: memref<1x2x40x1xf32>, %x2: memref<1x2x40x16xf32>, %scaled_dot_product_attention_3: memref<1x2x40x16xf32>) {
    %c0 = arith.constant 0 : index
    %init = arith.constant 0.000000e+00 : f32
    %0 = arith.constant 0xff800000 : f32
    %1 = arith.constant 2.500000e-01 : f32
    loop.for %i1 = 0 to 2 {
      loop.for %i2 = 0 to 40 {
        %2 = loop.load %scaled_dot_product_attention_1[%c0, %i1, %i2, %c0] : memref<1x2x40x1xf32>
        %3 = loop.load %scaled_dot_product_attention_2[%c0, %i1, %i2, %c0] : memref<1x2x40x1xf32>
        loop.for %i3 = 0 to 16 {
          %add = loop.for %r3 = 0 to 40 iter_args(%acc = %init) -> (f32) {
            %4 = loop.load %scaled_dot_product_attention[%c0, %i1, %i2, %c0, %r3] : memref<1x2x40x1x40xf32>
            %5 = arith.mulf %4, %1 : f32
            %6 = arith.cmpi sle, %r3, %i2 : index
            %7 = arith.select %6, %5, %0 : f32
            %8 = arith.cmpf oeq, %2, %0 : f32
            %9 = arith.subf %7, %2 : f32
            %10 = math.exp %9 : f32
            %11 = arith.select %8, %init, %10 : f32
            %12 = arith.cmpf oeq, %3, %init : f32
            %13 = arith.divf %11, %3 : f32
            %14 = arith.select %12, %init, %13 : f32
            %15 = loop.load %x2[%c0, %i1, %r3, %i3] : memref<1x2x40x16xf32>
            %16 = arith.mulf %14, %15 : f32
            %17 = arith.addf %acc, %16 : f32
            loop.yield %17 : f32
          }
          loop.store %add, %scaled_dot_product_attention_3[%c0, %i1, %i2, %i3] : memref<1x2x40x16xf32>
        }
      }
    }
    loop.return
  }
  loop.kernel @masked_scores(%scaled_dot_product_attention: memref<1x2x40x1x40xf32>, %scaled_dot_product_attention_1: memref<1x2x40x1xf32>, %scaled_dot_product_attention_2: memref<1x2x40x1xf32>, %x2: memref<1x2x40x16xf32>, %scaled_dot_product_attention_3: memref<1x2x40x16xf32>) {
    %c0 = arith.constant 0 : index
    %init = arith.constant 0.000000e+00 : f32
    %0 = arith.constant 0xff800000 : f32
    %1 = arith.constant 2.500000e-01 : f32
    loop.for %i1 = 0 to 2 {
      loop.for %i2 = 0 to 40 {
        %2 = loop.load %scaled_dot_product_attention_1[%c0, %i1, %i2, %c0] : memref<1x2x40x1xf32>
        %3 = loop.load %scaled_dot_product_attention_2[%c0, %i1, %i2, %c0] : memref<1x2x40x1xf32>
        loop.for %i3 = 0 to 16 {
          %add = loop.for %r3 = 0 to 40 iter_args(%acc = %init) -> (f32) {
            %4 = loop.load %scaled_dot_product_attention[%c0, %i1, %i2, %c0, %r3] : memref<1x2x40x1x40xf32>
            %5 = arith.mulf %4, %1 : f32
            %6 = arith.cmpi sle, %r3, %i2 : index
            %7 = arith.select %6, %5, %0 : f32
            %8 = arith.cmpf oeq, %2, %0 : f32
            %9 = arith.subf %7, %2 : f32
            %10 = math.exp %9 : f32
            %11 = arith.select %8, %init, %10 : f32
            %12 = arith.cmpf oeq, %3, %init : f32
            %13 = arith.divf %11, %3 : f32
            %14 = arith.select %12, %init, %13 : f32
            %15 = loop.load %x2[%c0, %i1, %r3, %i3] : memref<1x2x40x16xf32>
            %16 = arith.mulf %7, %15 : f32
            %17 = arith.addf %acc, %16 : f32
            loop.yield %17 : f32
          }
          loop.store %add, %scaled_dot_product_attention_3[%c0, %i1, %i2, %i3] : memref<1x2x40x16xf32>
        }
      }
    }
    loop.return
  }
}
