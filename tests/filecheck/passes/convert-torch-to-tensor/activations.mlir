// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// The piecewise activations, maximum/minimum and triu/tril: one tensor.elementwise each,
// compare-and-select on the kink (an ordered compare is false for NaN, so NaN goes through
// the arithmetic branch, as in PyTorch).

// CHECK-LABEL: func.func @leaky_relu
// CHECK-NEXT:    %{{.*}} = tensor.elementwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[POS:.*]] = arith.cmpf ogt, %[[X]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[SLOPE:.*]] = arith.constant 2.000000e-01 : f32
// CHECK-NEXT:      %[[NEG:.*]] = arith.mulf %[[X]], %[[SLOPE]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[POS]], %[[X]], %[[NEG]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-NEXT:    }
func.func @leaky_relu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.leaky_relu %x {negative_slope = 2.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// elu with aten's coefficients folded: expm1(x * input_scale) * (alpha * scale) below 0,
// x * scale above (scale = 1 costs no multiply).
// CHECK-LABEL: func.func @elu
// CHECK-NEXT:    %{{.*}} = tensor.elementwise(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[IS:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      %[[XS:.*]] = arith.mulf %[[X]], %[[IS]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.expm1 %[[XS]] : f32
// CHECK-NEXT:      %[[A:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[NEG:.*]] = arith.mulf %[[E]], %[[A]] : f32
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[LE:.*]] = arith.cmpf ole, %[[X]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[LE]], %[[NEG]], %[[X]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-NEXT:    }
func.func @elu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.elu %x {alpha = 5.000000e-01 : f64, scale = 1.000000e+00 : f64, input_scale = 2.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// softplus: x itself where beta * x > threshold, else log1p(exp(beta * x)) / beta.
// CHECK-LABEL: func.func @softplus
// CHECK:           %[[BETA:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      %[[BX:.*]] = arith.mulf %[[X:.*]], %[[BETA]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[BX]] : f32
// CHECK-NEXT:      %[[L:.*]] = math.log1p %[[E]] : f32
// CHECK-NEXT:      %[[SOFT:.*]] = arith.divf %[[L]], %[[BETA]] : f32
// CHECK-NEXT:      %[[T:.*]] = arith.constant 2.000000e+01 : f32
// CHECK-NEXT:      %[[ABOVE:.*]] = arith.cmpf ogt, %[[BX]], %[[T]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[ABOVE]], %[[X]], %[[SOFT]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
func.func @softplus(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.softplus %x {beta = 2.000000e+00 : f64, threshold = 2.000000e+01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// maximum picks with an ordered compare, then keeps a NaN lhs (a NaN rhs is already
// picked: `a > NaN` is false). Integers need only the first select.
// CHECK-LABEL: func.func @maximum
// CHECK-NEXT:    %[[Y:.*]] = tensor.index_map(%y) [affine_map<(d0, d1) -> (d1)>] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %{{.*}} = tensor.elementwise(%x, %[[Y]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT:      %[[GT:.*]] = arith.cmpf ogt, %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[P:.*]] = arith.select %[[GT]], %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[NAN:.*]] = arith.cmpf une, %[[A]], %[[A]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[NAN]], %[[A]], %[[P]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-LABEL: func.func @minimum_int
// CHECK:           %[[LT:.*]] = arith.cmpi slt, %[[A:.*]], %[[B:.*]] : i64
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[LT]], %[[A]], %[[B]] : i64
// CHECK-NEXT:      tensor.yield %[[R]] : i64
func.func @maximum(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = torch.maximum %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
func.func @minimum_int(%x: tensor<4x8xi64>, %y: tensor<4x8xi64>) -> tensor<4x8xi64> {
  %r = torch.minimum %x, %y : (tensor<4x8xi64>, tensor<4x8xi64>) -> tensor<4x8xi64>
  func.return %r : tensor<4x8xi64>
}

// triu keeps column - row >= diagonal over the last two dims (coordinates in i64); tril
// keeps column - row <= diagonal.
// CHECK-LABEL: func.func @triu
// CHECK-NEXT:    %{{.*}} = tensor.elementwise(%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[I:.*]] = tensor.index 1 : index
// CHECK-NEXT:      %[[ROW:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT:      %[[J:.*]] = tensor.index 2 : index
// CHECK-NEXT:      %[[COL:.*]] = arith.index_cast %[[J]] : index to i64
// CHECK-NEXT:      %[[D:.*]] = arith.subi %[[COL]], %[[ROW]] : i64
// CHECK-NEXT:      %[[K:.*]] = arith.constant -1 : i64
// CHECK-NEXT:      %[[KEEP:.*]] = arith.cmpi sge, %[[D]], %[[K]] : i64
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[KEEP]], %[[X]], %[[ZERO]] : f32
// CHECK-NEXT:      tensor.yield %[[R]] : f32
// CHECK-LABEL: func.func @tril
// CHECK:           arith.cmpi sle
func.func @triu(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %r = torch.triu %x {diagonal = -1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  func.return %r : tensor<2x4x8xf32>
}
func.func @tril(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.tril %x {diagonal = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// hardsigmoid = relu6(x + 3) / 6; mish = x * tanh(log1p(exp(x)));
// log_sigmoid = min(x, 0) - log1p(exp(-|x|)).
// CHECK-LABEL: func.func @hardsigmoid
// CHECK:           arith.addf
// CHECK-NEXT:      arith.constant 0.000000e+00
// CHECK-NEXT:      arith.cmpf olt
// CHECK-NEXT:      arith.select
// CHECK-NEXT:      arith.constant 6.000000e+00
// CHECK-NEXT:      arith.cmpf ogt
// CHECK-NEXT:      arith.select
// CHECK-NEXT:      arith.divf
// CHECK-LABEL: func.func @mish
// CHECK:           %[[E:.*]] = math.exp %[[X:.*]] : f32
// CHECK-NEXT:      %[[SP:.*]] = math.log1p %[[E]] : f32
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[SP]] : f32
// CHECK-NEXT:      %{{.*}} = arith.mulf %[[X]], %[[T]] : f32
// CHECK-LABEL: func.func @log_sigmoid
// CHECK:           %[[LT:.*]] = arith.cmpf olt, %[[X:.*]], %[[ZERO:.*]] : f32
// CHECK-NEXT:      %[[MIN:.*]] = arith.select %[[LT]], %[[X]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[ABS:.*]] = math.absf %[[X]] : f32
// CHECK-NEXT:      %[[NEG:.*]] = arith.negf %[[ABS]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[NEG]] : f32
// CHECK-NEXT:      %[[L:.*]] = math.log1p %[[E]] : f32
// CHECK-NEXT:      %{{.*}} = arith.subf %[[MIN]], %[[L]] : f32
func.func @hardsigmoid(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.hardsigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
func.func @mish(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.mish %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
func.func @log_sigmoid(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = torch.log_sigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
