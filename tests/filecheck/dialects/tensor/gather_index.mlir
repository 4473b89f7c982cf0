// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s --print-op-generic | deplodock-opt | filecheck %s

// tensor.gather (a data-dependent read along one dim) and tensor.index (the coordinate of
// the element an elementwise body computes); mixed element types inside elementwise.

// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %g = tensor.gather %w[%ids] dim 0 : (tensor<256x64xf32>, tensor<1x16xi64>) -> tensor<1x16x64xf32>
// CHECK-NEXT:    %g1 = tensor.gather %w[%cols] dim 1 : (tensor<256x64xf32>, tensor<3xi32>) -> tensor<256x3xf32>
// CHECK-NEXT:    %mask = tensor.elementwise() : () -> tensor<16x16xi1> {
// CHECK-NEXT:      %i = tensor.index 0 : index
// CHECK-NEXT:      %j = tensor.index 1 : index
// CHECK-NEXT:      %keep = arith.cmpi sle, %j, %i : index
// CHECK-NEXT:      tensor.yield %keep : i1
// CHECK-NEXT:    }
// CHECK-NEXT:    %sel = tensor.elementwise(%mask, %s) : (tensor<16x16xi1>, tensor<16x16xf32>) -> tensor<16x16xf32> {
// CHECK-NEXT:    ^bb0(%m: i1, %v: f32):
// CHECK-NEXT:      %ninf = arith.constant 0xff800000 : f32
// CHECK-NEXT:      %r = arith.select %m, %v, %ninf : f32
// CHECK-NEXT:      tensor.yield %r : f32
// CHECK-NEXT:    }
func.func @forward(%w: tensor<256x64xf32>, %ids: tensor<1x16xi64>, %cols: tensor<3xi32>, %s: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %g = tensor.gather %w[%ids] dim 0 : (tensor<256x64xf32>, tensor<1x16xi64>) -> tensor<1x16x64xf32>
  %g1 = tensor.gather %w[%cols] dim 1 : (tensor<256x64xf32>, tensor<3xi32>) -> tensor<256x3xf32>
  %mask = tensor.elementwise() : () -> tensor<16x16xi1> {
    %i = tensor.index 0 : index
    %j = tensor.index 1 : index
    %keep = arith.cmpi sle, %j, %i : index
    tensor.yield %keep : i1
  }
  %sel = tensor.elementwise(%mask, %s) : (tensor<16x16xi1>, tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%m: i1, %v: f32):
    %ninf = arith.constant 0xff800000 : f32
    %r = arith.select %m, %v, %ninf : f32
    tensor.yield %r : f32
  }
  func.return %sel : tensor<16x16xf32>
}
