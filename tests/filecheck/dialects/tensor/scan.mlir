// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s --print-op-generic | deplodock-opt | filecheck %s

// `tensor.scan <kind> %x dim D`: the inclusive prefix combination along D, same type in and
// out (cumsum is `scan add`); every ReduceKind is a scan kind.
func.func @forward(%a: tensor<4x8xf32>, %h: tensor<2x3xbf16>, %n: tensor<5xi64>) -> tensor<4x8xf32> {
  %s = tensor.scan add %a dim 1 : tensor<4x8xf32>
  %m = tensor.scan max %s dim 0 : tensor<4x8xf32>
  %p = tensor.scan mul %h dim 1 : tensor<2x3xbf16>
  %i = tensor.scan add %n dim 0 : tensor<5xi64>
  func.return %m : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %s = tensor.scan add %a dim 1 : tensor<4x8xf32>
// CHECK-NEXT:    %m = tensor.scan max %s dim 0 : tensor<4x8xf32>
// CHECK-NEXT:    %p = tensor.scan mul %h dim 1 : tensor<2x3xbf16>
// CHECK-NEXT:    %i = tensor.scan add %n dim 0 : tensor<5xi64>
