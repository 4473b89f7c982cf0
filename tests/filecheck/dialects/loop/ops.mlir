// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s --print-op-generic | deplodock-opt | filecheck %s

builtin.module {
  loop.kernel @rms_norm(%x: memref<1x32x64xf32>, %w: memref<64xf32>, %y: memref<1x32x64xf32>) {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to 32 {
      %sum = loop.for %k = 0 to 64 iter_args(%acc = %zero) -> (f32) {
        %v = loop.load %x[%c0, %i, %k] : memref<1x32x64xf32>
        %sq = arith.mulf %v, %v : f32
        %n = arith.addf %acc, %sq : f32
        loop.yield %n : f32
      }
      %r = math.rsqrt %sum : f32
      loop.for %j = 0 to 64 {
        %a = loop.load %x[%c0, %i, %j] : memref<1x32x64xf32>
        %b = loop.load %w[%j] : memref<64xf32>
        %o = arith.mulf %a, %r : f32
        %p = arith.mulf %o, %b : f32
        loop.store %p, %y[%c0, %i, %j] : memref<1x32x64xf32>
      }
    }
    loop.return
  }
  loop.kernel @two_results(%x: memref<8x8xf16>, %y: memref<8xf16>) attributes {note = "hi"} {
    %lo = arith.constant 0.000000e+00 : f16
    %one = arith.constant 1.000000e+00 : f16
    loop.for %i = 2 to 8 step 3 {
      %s, %m = loop.for %k = 0 to 8 step 2 iter_args(%a = %lo, %b = %one) -> (f16, f16) {
        %v = loop.load %x[%i, %k] : memref<8x8xf16>
        %a2 = arith.addf %a, %v : f16
        %b2 = arith.maximumf %b, %v : f16
        loop.yield %a2, %b2 : f16, f16
      } {tag}
      %t = arith.addf %s, %m : f16
      loop.store %t, %y[%i] : memref<8xf16>
    }
    loop.return
  }
  loop.kernel @empty() {
    loop.return
  }
  func.func @forward(%x: memref<1x32x64xf32> {deplodock.input = "x"}, %w: memref<64xf32> {deplodock.param = "weight"}) -> memref<1x32x64xf32> {
    %y = loop.alloc : memref<1x32x64xf32>
    loop.launch @rms_norm(%x, %w, %y) : (memref<1x32x64xf32>, memref<64xf32>, memref<1x32x64xf32>) -> ()
    loop.launch @empty() : () -> ()
    func.return %y : memref<1x32x64xf32>
  }
}

// CHECK:      loop.kernel @rms_norm(%x: memref<1x32x64xf32>, %w: memref<64xf32>, %y: memref<1x32x64xf32>) {
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   %zero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   loop.for %i = 0 to 32 {
// CHECK-NEXT:     %sum = loop.for %k = 0 to 64 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:       %v = loop.load %x[%c0, %i, %k] : memref<1x32x64xf32>
// CHECK-NEXT:       %sq = arith.mulf %v, %v : f32
// CHECK-NEXT:       %n = arith.addf %acc, %sq : f32
// CHECK-NEXT:       loop.yield %n : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %r = math.rsqrt %sum : f32
// CHECK-NEXT:     loop.for %j = 0 to 64 {
// CHECK-NEXT:       %a = loop.load %x[%c0, %i, %j] : memref<1x32x64xf32>
// CHECK-NEXT:       %b = loop.load %w[%j] : memref<64xf32>
// CHECK-NEXT:       %o = arith.mulf %a, %r : f32
// CHECK-NEXT:       %p = arith.mulf %o, %b : f32
// CHECK-NEXT:       loop.store %p, %y[%c0, %i, %j] : memref<1x32x64xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK-NEXT: loop.kernel @two_results(%x: memref<8x8xf16>, %y: memref<8xf16>) attributes {note = "hi"} {
// CHECK:        loop.for %i = 2 to 8 step 3 {
// CHECK-NEXT:     %s, %m = loop.for %k = 0 to 8 step 2 iter_args(%a = %lo, %b = %one) -> (f16, f16) {
// CHECK:            loop.yield %a2, %b2 : f16, f16
// CHECK-NEXT:     } {tag}
// CHECK:      loop.kernel @empty() {
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK:      func.func @forward(%x: memref<1x32x64xf32> {deplodock.input = "x"}, %w: memref<64xf32> {deplodock.param = "weight"}) -> memref<1x32x64xf32> {
// CHECK-NEXT:   %y = loop.alloc : memref<1x32x64xf32>
// CHECK-NEXT:   loop.launch @rms_norm(%x, %w, %y) : (memref<1x32x64xf32>, memref<64xf32>, memref<1x32x64xf32>) -> ()
// CHECK-NEXT:   loop.launch @empty() : () -> ()
// CHECK-NEXT:   func.return %y : memref<1x32x64xf32>
// CHECK-NEXT: }
