// RUN: deplodock-opt %s -p loop-sibling-fusion | filecheck %s

// Two independent elementwise kernels over the same nest share one launch.
// @cos_kernel and @sin_kernel (a decode step's rotary cosines and sines) both read %angle
// over 4 x 128: one kernel, %angle passed once, the sine's row op (%s) placed at its level
// before the inner loop, each element's two stores in one iteration. The fused launch takes
// the second launch's place. @scale_kernel reads the cosines the fused kernel writes, so it
// stays a launch of its own; @row_sum_kernel reduces under two free loops (rows, then
// columns), and is left alone too.

// CHECK-LABEL: loop.kernel @cos_kernel(%angle: memref<4x128xf32>, %c: memref<4x128xf32>, %s: memref<4x128xf32>) {
// CHECK-NEXT:    %two = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    loop.for %i = 0 to 4 {
// CHECK-NEXT:      %half = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      loop.for %j = 0 to 128 {
// CHECK-NEXT:        %a = loop.load %angle[%i, %j] : memref<4x128xf32>
// CHECK-NEXT:        %cos = math.cos %a : f32
// CHECK-NEXT:        loop.store %cos, %c[%i, %j] : memref<4x128xf32>
// CHECK-NEXT:        %a_1 = loop.load %angle[%i, %j] : memref<4x128xf32>
// CHECK-NEXT:        %sin = math.sin %a_1 : f32
// CHECK-NEXT:        %sin2 = arith.mulf %sin, %two : f32
// CHECK-NEXT:        %sin3 = arith.mulf %sin2, %half : f32
// CHECK-NEXT:        loop.store %sin3, %s[%i, %j] : memref<4x128xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NOT:   @sin_kernel
// CHECK-LABEL: func.func @forward
// CHECK:         %s = loop.alloc : memref<4x128xf32>
// CHECK-NEXT:    loop.launch @cos_kernel(%angle, %c, %s)
// CHECK-NEXT:    %y = loop.alloc : memref<4x128xf32>
// CHECK-NEXT:    loop.launch @scale_kernel(%c, %y)
// CHECK-NEXT:    %r = loop.alloc : memref<4x128xf32>
// CHECK-NEXT:    loop.launch @row_sum_kernel(%angle, %r)

builtin.module {
  loop.kernel @cos_kernel(%angle: memref<4x128xf32>, %c: memref<4x128xf32>) {
    loop.for %i = 0 to 4 {
      loop.for %j = 0 to 128 {
        %a = loop.load %angle[%i, %j] : memref<4x128xf32>
        %cos = math.cos %a : f32
        loop.store %cos, %c[%i, %j] : memref<4x128xf32>
      }
    }
    loop.return
  }
  loop.kernel @sin_kernel(%angle: memref<4x128xf32>, %s: memref<4x128xf32>) {
    %two = arith.constant 2.000000e+00 : f32
    loop.for %i = 0 to 4 {
      %half = arith.constant 5.000000e-01 : f32
      loop.for %j = 0 to 128 {
        %a = loop.load %angle[%i, %j] : memref<4x128xf32>
        %sin = math.sin %a : f32
        %sin2 = arith.mulf %sin, %two : f32
        %sin3 = arith.mulf %sin2, %half : f32
        loop.store %sin3, %s[%i, %j] : memref<4x128xf32>
      }
    }
    loop.return
  }
  loop.kernel @scale_kernel(%c: memref<4x128xf32>, %y: memref<4x128xf32>) {
    loop.for %i = 0 to 4 {
      loop.for %j = 0 to 128 {
        %v = loop.load %c[%i, %j] : memref<4x128xf32>
        %w = arith.addf %v, %v : f32
        loop.store %w, %y[%i, %j] : memref<4x128xf32>
      }
    }
    loop.return
  }
  loop.kernel @row_sum_kernel(%angle: memref<4x128xf32>, %r: memref<4x128xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to 4 {
      %sum = loop.for %k = 0 to 128 iter_args(%acc = %zero) -> (f32) {
        %a = loop.load %angle[%i, %k] : memref<4x128xf32>
        %n = arith.addf %acc, %a : f32
        loop.yield %n : f32
      }
      loop.for %j = 0 to 128 {
        loop.store %sum, %r[%i, %j] : memref<4x128xf32>
      }
    }
    loop.return
  }
  func.func @forward(%angle: memref<4x128xf32>) -> (memref<4x128xf32>, memref<4x128xf32>, memref<4x128xf32>) {
    %c = loop.alloc : memref<4x128xf32>
    loop.launch @cos_kernel(%angle, %c) : (memref<4x128xf32>, memref<4x128xf32>) -> ()
    %s = loop.alloc : memref<4x128xf32>
    loop.launch @sin_kernel(%angle, %s) : (memref<4x128xf32>, memref<4x128xf32>) -> ()
    %y = loop.alloc : memref<4x128xf32>
    loop.launch @scale_kernel(%c, %y) : (memref<4x128xf32>, memref<4x128xf32>) -> ()
    %r = loop.alloc : memref<4x128xf32>
    loop.launch @row_sum_kernel(%angle, %r) : (memref<4x128xf32>, memref<4x128xf32>) -> ()
    func.return %y, %s, %r : memref<4x128xf32>, memref<4x128xf32>, memref<4x128xf32>
  }
}
