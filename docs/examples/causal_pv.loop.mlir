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
}
