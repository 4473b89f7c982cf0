// RUN: deplodock-opt %s -p loop-fusion | filecheck %s
// RUN: deplodock-opt %s -p 'loop-fusion{attention=false}' | filecheck %s --check-prefix=OFF

// Causal attention over 32 keys as `loop-fusion{attention=false}` leaves it: the score
// matrix `%attention_scores` (1 x 1 x 32 x 1 x 32: queries by keys) written by one kernel
// and read by the softmax and P.V kernel, three times per row (max, sum, product).
//
// By default the scores are a *score matrix* (`_score_matrix`): a contraction's output
// that the consumer reads only inside reductions over one dimension (the keys), as row
// statistics and as a contraction operand, with 32 keys a whole number of 16-key chunks
// and 32 query rows to block. It fuses although that recomputes a reduction: each read of
// a score becomes the dot product q . k over the head dimension, and no buffer with two
// sequence dimensions is left. The tile passes compute each score once per K chunk
// (`tile-prologue-product`, `tile-streaming-softmax`).

// CHECK-NOT:   loop.kernel @attention_scores_kernel
// CHECK-LABEL: loop.kernel @scaled_dot_product_attention_kernel(%x0: memref<1x1x32x16xf32>, %x1: memref<1x1x32x16xf32>, %x2: memref<1x1x32x16xf32>, %scaled_dot_product_attention: memref<1x1x32x16xf32>)
// CHECK:         %max = loop.for %r3 = 0 to 32 iter_args
// CHECK-NEXT:      %add = loop.for %r3_1 = 0 to 16 iter_args
// CHECK-NEXT:        loop.load %x0[%c0, %c0, %i2, %r3_1]
// CHECK-NEXT:        loop.load %x1[%c0, %c0, %r3, %r3_1]
// CHECK:         loop.for %i3 = 0 to 16 {
// CHECK-NEXT:      loop.for %r3_4 = 0 to 32 iter_args
// CHECK-NEXT:        loop.for %r3_5 = 0 to 16 iter_args
// CHECK:           loop.load %x2[%c0, %c0, %r3_4, %i3]
// CHECK:       func.func @forward
// CHECK-NOT:     loop.alloc : memref<1x1x32x1x32xf32>
// CHECK:         loop.launch @scaled_dot_product_attention_kernel(%x0, %x1, %x2,

// OFF: loop.kernel @attention_scores_kernel
// OFF: loop.kernel @scaled_dot_product_attention_kernel(%attention_scores: memref<1x1x32x1x32xf32>

builtin.module {
  loop.kernel @attention_scores_kernel(%x0: memref<1x1x32x16xf32>, %x1: memref<1x1x32x16xf32>, %attention_scores: memref<1x1x32x1x32xf32>) {
    %c0 = arith.constant 0 : index
    %init = arith.constant 0.000000e+00 : f32
    loop.for %i2 = 0 to 32 {
      loop.for %i4 = 0 to 32 {
        %add = loop.for %r3 = 0 to 16 iter_args(%acc = %init) -> (f32) {
          %0 = loop.load %x0[%c0, %c0, %i2, %r3] : memref<1x1x32x16xf32>
          %1 = loop.load %x1[%c0, %c0, %i4, %r3] : memref<1x1x32x16xf32>
          %2 = arith.mulf %0, %1 : f32
          %3 = arith.addf %acc, %2 : f32
          loop.yield %3 : f32
        }
        loop.store %add, %attention_scores[%c0, %c0, %i2, %c0, %i4] : memref<1x1x32x1x32xf32>
      }
    }
    loop.return
  }
  loop.kernel @scaled_dot_product_attention_kernel(%attention_scores: memref<1x1x32x1x32xf32>, %x2: memref<1x1x32x16xf32>, %scaled_dot_product_attention: memref<1x1x32x16xf32>) {
    %c0 = arith.constant 0 : index
    %init = arith.constant 0.000000e+00 : f32
    %init_1 = arith.constant 0xff800000 : f32
    %0 = arith.constant 2.500000e-01 : f32
    loop.for %i2 = 0 to 32 {
      %max = loop.for %r3 = 0 to 32 iter_args(%acc = %init_1) -> (f32) {
        %1 = loop.load %attention_scores[%c0, %c0, %i2, %c0, %r3] : memref<1x1x32x1x32xf32>
        %2 = arith.mulf %1, %0 : f32
        %3 = arith.cmpi sle, %r3, %i2 : index
        %4 = arith.select %3, %2, %init_1 : f32
        %5 = arith.maximumf %acc, %4 : f32
        loop.yield %5 : f32
      }
      %add = loop.for %r3_1 = 0 to 32 iter_args(%acc_1 = %init) -> (f32) {
        %6 = loop.load %attention_scores[%c0, %c0, %i2, %c0, %r3_1] : memref<1x1x32x1x32xf32>
        %7 = arith.mulf %6, %0 : f32
        %8 = arith.cmpi sle, %r3_1, %i2 : index
        %9 = arith.select %8, %7, %init_1 : f32
        %10 = arith.cmpf oeq, %max, %init_1 : f32
        %11 = arith.subf %9, %max : f32
        %12 = math.exp %11 : f32
        %13 = arith.select %10, %init, %12 : f32
        %14 = arith.addf %acc_1, %13 : f32
        loop.yield %14 : f32
      }
      loop.for %i3 = 0 to 16 {
        %add_1 = loop.for %r3_2 = 0 to 32 iter_args(%acc_2 = %init) -> (f32) {
          %15 = loop.load %attention_scores[%c0, %c0, %i2, %c0, %r3_2] : memref<1x1x32x1x32xf32>
          %16 = arith.mulf %15, %0 : f32
          %17 = arith.cmpi sle, %r3_2, %i2 : index
          %18 = arith.select %17, %16, %init_1 : f32
          %19 = arith.cmpf oeq, %max, %init_1 : f32
          %20 = arith.subf %18, %max : f32
          %21 = math.exp %20 : f32
          %22 = arith.select %19, %init, %21 : f32
          %23 = arith.cmpf oeq, %add, %init : f32
          %24 = arith.divf %22, %add : f32
          %25 = arith.select %23, %init, %24 : f32
          %26 = loop.load %x2[%c0, %c0, %r3_2, %i3] : memref<1x1x32x16xf32>
          %27 = arith.mulf %25, %26 : f32
          %28 = arith.addf %acc_2, %27 : f32
          loop.yield %28 : f32
        }
        loop.store %add_1, %scaled_dot_product_attention[%c0, %c0, %i2, %i3] : memref<1x1x32x16xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x0: memref<1x1x32x16xf32> {deplodock.input = "x0"}, %x1: memref<1x1x32x16xf32> {deplodock.input = "x1"}, %x2: memref<1x1x32x16xf32> {deplodock.input = "x2"}) -> memref<1x1x32x16xf32> {
    %attention_scores = loop.alloc : memref<1x1x32x1x32xf32>
    loop.launch @attention_scores_kernel(%x0, %x1, %attention_scores) : (memref<1x1x32x16xf32>, memref<1x1x32x16xf32>, memref<1x1x32x1x32xf32>) -> ()
    %scaled_dot_product_attention = loop.alloc : memref<1x1x32x16xf32>
    loop.launch @scaled_dot_product_attention_kernel(%attention_scores, %x2, %scaled_dot_product_attention) : (memref<1x1x32x1x32xf32>, memref<1x1x32x16xf32>, memref<1x1x32x16xf32>) -> ()
    func.return %scaled_dot_product_attention : memref<1x1x32x16xf32>
  }
}
