// RUN: deplodock-opt %s -p convert-tensor-to-loop --split-input-file | filecheck %s

// Reduce: free loops over the kept dims, nested reduce loops over the reduced dims (init =
// the kind's identity), the store at index 0 of the reduced dims.
func.func @forward(%x: tensor<2x3x4x5xf32>) -> tensor<2x1x4x1xf32> {
  %r = tensor.reduce max %x dims [1, 3] : tensor<2x3x4x5xf32> -> tensor<2x1x4x1xf32>
  func.return %r : tensor<2x1x4x1xf32>
}

// CHECK:      loop.kernel @r_kernel(%x: memref<2x3x4x5xf32>, %r: memref<2x1x4x1xf32>) {
// CHECK-NEXT:   %init = arith.constant 0xff800000 : f32
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   loop.for %i0 = 0 to 2 {
// CHECK-NEXT:     loop.for %i2 = 0 to 4 {
// CHECK-NEXT:       %max = loop.for %r1 = 0 to 3 iter_args(%acc = %init) -> (f32) {
// CHECK-NEXT:         %max_1 = loop.for %r3 = 0 to 5 iter_args(%acc_1 = %acc) -> (f32) {
// CHECK-NEXT:           %[[V:.*]] = loop.load %x[%i0, %r1, %i2, %r3] : memref<2x3x4x5xf32>
// CHECK-NEXT:           %[[M:.*]] = arith.maximumf %acc_1, %[[V]] : f32
// CHECK-NEXT:           loop.yield %[[M]] : f32
// CHECK-NEXT:         }
// CHECK-NEXT:         loop.yield %max_1 : f32
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.store %max, %r[%i0, %c0, %i2, %c0] : memref<2x1x4x1xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }

// -----

// Identities of the other kinds; a size-1 reduced dim gets no loop. f16 accumulates in f32
// (extf of each load, one truncf before the store).
func.func @forward(%x: tensor<1x8xf16>) -> tensor<1x1xf16> {
  %a = tensor.reduce add %x dims [0] : tensor<1x8xf16> -> tensor<1x8xf16>
  %m = tensor.reduce mul %a dims [1] : tensor<1x8xf16> -> tensor<1x1xf16>
  %n = tensor.reduce min %m dims [0, 1] : tensor<1x1xf16> -> tensor<1x1xf16>
  func.return %n : tensor<1x1xf16>
}

// CHECK:      loop.kernel @a_kernel(%x: memref<1x8xf16>, %a: memref<1x8xf16>) {
// CHECK-NEXT:   %init = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   loop.for %i1 = 0 to 8 {
// CHECK-NEXT:     %[[V:.*]] = loop.load %x[%c0, %i1] : memref<1x8xf16>
// CHECK-NEXT:     %[[W:.*]] = arith.extf %[[V]] : f16 to f32
// CHECK-NEXT:     %[[S:.*]] = arith.addf %init, %[[W]] : f32
// CHECK-NEXT:     %[[T:.*]] = arith.truncf %[[S]] : f32 to f16
// CHECK-NEXT:     loop.store %[[T]], %a[%c0, %i1] : memref<1x8xf16>
// CHECK-NEXT:   }
// CHECK:      loop.kernel @m_kernel(%a: memref<1x8xf16>, %m: memref<1x1xf16>) {
// CHECK-DAG:    %init = arith.constant 1.000000e+00 : f32
// CHECK-DAG:    %c0 = arith.constant 0 : index
// CHECK:        %mul = loop.for %r1 = 0 to 8 iter_args(%acc = %init) -> (f32) {
// CHECK:          arith.mulf %acc, %{{.*}} : f32
// CHECK:        %[[M:.*]] = arith.truncf %mul : f32 to f16
// CHECK-NEXT:   loop.store %[[M]], %m[%c0, %c0] : memref<1x1xf16>
// CHECK:      loop.kernel @n_kernel(%m: memref<1x1xf16>, %n: memref<1x1xf16>) {
// CHECK-NEXT:   %init = arith.constant 0x7f800000 : f32
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   %[[V:.*]] = loop.load %m[%c0, %c0] : memref<1x1xf16>
// CHECK-NEXT:   %[[W:.*]] = arith.extf %[[V]] : f16 to f32
// CHECK-NEXT:   %[[R:.*]] = arith.minimumf %init, %[[W]] : f32
// CHECK-NEXT:   %[[T:.*]] = arith.truncf %[[R]] : f32 to f16
// CHECK-NEXT:   loop.store %[[T]], %n[%c0, %c0] : memref<1x1xf16>
