// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// Casts are one elementwise with the arith conversion op (f16 <-> bf16 through f32, to bool
// is `!= 0`, bool to int zero-extends); arange is a zero-input elementwise over
// `tensor.index 0`; cos and sin are math ops.

// CHECK-LABEL: func.func @casts
// CHECK:         ^bb0(%{{.*}}: bf16):
// CHECK-NEXT:      arith.extf %{{.*}} : bf16 to f32
// CHECK:         ^bb{{[0-9]+}}(%{{.*}}: f32):
// CHECK-NEXT:      arith.truncf %{{.*}} : f32 to bf16
// CHECK:         ^bb{{[0-9]+}}(%{{.*}}: bf16):
// CHECK-NEXT:      %[[W:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT:      arith.truncf %[[W]] : f32 to f16
// CHECK:         arith.sitofp %{{.*}} : i64 to f32
// CHECK:         arith.fptosi %{{.*}} : f32 to i64
// CHECK:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    arith.cmpf une, %{{.*}}, %[[Z]] : f32
// CHECK:         arith.extui %{{.*}} : i1 to i64
// CHECK:         arith.trunci %{{.*}} : i64 to i32
func.func @casts(%h: tensor<4xbf16>, %f: tensor<4xf32>, %i: tensor<4xi64>, %b: tensor<4xi1>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xf16>, tensor<4xf32>, tensor<4xi64>, tensor<4xi1>, tensor<4xi64>, tensor<4xi32>) {
  %0 = torch.cast %h : (tensor<4xbf16>) -> tensor<4xf32>
  %1 = torch.cast %f : (tensor<4xf32>) -> tensor<4xbf16>
  %2 = torch.cast %h : (tensor<4xbf16>) -> tensor<4xf16>
  %3 = torch.cast %i : (tensor<4xi64>) -> tensor<4xf32>
  %4 = torch.cast %f : (tensor<4xf32>) -> tensor<4xi64>
  %5 = torch.cast %f : (tensor<4xf32>) -> tensor<4xi1>
  %6 = torch.cast %b : (tensor<4xi1>) -> tensor<4xi64>
  %7 = torch.cast %i : (tensor<4xi64>) -> tensor<4xi32>
  func.return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4xf32>, tensor<4xbf16>, tensor<4xf16>, tensor<4xf32>, tensor<4xi64>, tensor<4xi1>, tensor<4xi64>, tensor<4xi32>
}

// CHECK-LABEL: func.func @arange
// CHECK-NEXT:    %{{.*}} = tensor.elementwise() : () -> tensor<16xi64> {
// CHECK-NEXT:      %[[I:.*]] = tensor.index 0 : index
// CHECK-NEXT:      %[[V:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT:      tensor.yield %[[V]] : i64
// CHECK-NEXT:    }
// CHECK-NEXT:    %{{.*}} = tensor.elementwise() : () -> tensor<6xf32> {
// CHECK-NEXT:      %[[J:.*]] = tensor.index 0 : index
// CHECK-NEXT:      %[[K:.*]] = arith.index_cast %[[J]] : index to i64
// CHECK-NEXT:      %[[F:.*]] = arith.sitofp %[[K]] : i64 to f32
// CHECK-NEXT:      %[[STEP:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[F]], %[[STEP]] : f32
// CHECK-NEXT:      %[[START:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.addf %[[M]], %[[START]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
func.func @arange() -> (tensor<16xi64>, tensor<6xf32>) {
  %a = torch.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : () -> tensor<16xi64>
  %b = torch.arange {start = 1.000000e+00 : f64, step = 5.000000e-01 : f64} : () -> tensor<6xf32>
  func.return %a, %b : tensor<16xi64>, tensor<6xf32>
}

// CHECK-LABEL: func.func @trig
// CHECK:         math.cos %{{.*}} : f32
// CHECK:         math.sin %{{.*}} : f32
func.func @trig(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = torch.cos %x : (tensor<4xf32>) -> tensor<4xf32>
  %s = torch.sin %c : (tensor<4xf32>) -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}
