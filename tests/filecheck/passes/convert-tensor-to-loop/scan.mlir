// RUN: deplodock-opt %s -p convert-tensor-to-loop | filecheck %s

// Scan: free loops over the other dims around one carried loop along the scan dim, which
// stores its running value at every step (that store is what keeps it serial: the
// scheduling passes never split a carried loop that stores). A bf16 scan carries an f32
// value (init 0.0 : f32, each load widened) and rounds each stored prefix.
func.func @forward(%x: tensor<3x5x4xbf16>) -> tensor<3x5x4xbf16> {
  %s = tensor.scan add %x dim 1 : tensor<3x5x4xbf16>
  func.return %s : tensor<3x5x4xbf16>
}

// CHECK:      loop.kernel @s_kernel(%x: memref<3x5x4xbf16>, %s: memref<3x5x4xbf16>) {
// CHECK-NEXT:   %init = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   loop.for %i0 = 0 to 3 {
// CHECK-NEXT:     loop.for %i2 = 0 to 4 {
// CHECK-NEXT:       %add = loop.for %r1 = 0 to 5 iter_args(%acc = %init) -> (f32) {
// CHECK-NEXT:         %[[V:.*]] = loop.load %x[%i0, %r1, %i2] : memref<3x5x4xbf16>
// CHECK-NEXT:         %[[W:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK-NEXT:         %[[A:.*]] = arith.addf %acc, %[[W]] : f32
// CHECK-NEXT:         %[[R:.*]] = arith.truncf %[[A]] : f32 to bf16
// CHECK-NEXT:         loop.store %[[R]], %s[%i0, %r1, %i2] : memref<3x5x4xbf16>
// CHECK-NEXT:         loop.yield %[[A]] : f32
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
