// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// Comparisons are one cmpf/cmpi producing i1 (`ne` is unordered: true on NaN, as in
// PyTorch; bools compare unsigned), logical ops are andi/ori/xori on i1, and `where` is an
// arith.select whose operands are broadcast first.

// CHECK-LABEL: func.func @compare
// CHECK-NEXT:    %[[YB:.*]] = tensor.index_map(%y) [affine_map<(d0, d1) -> (d1)>] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[NE:.*]] = tensor.elementwise(%x, %[[YB]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1> {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT:      %[[C:.*]] = arith.cmpf une, %[[A]], %[[B]] : f32
// CHECK-NEXT:      tensor.yield %[[C]] : i1
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[LT:.*]] = tensor.elementwise(%i) : (tensor<4xi64>) -> tensor<4xi1> {
// CHECK-NEXT:    ^bb{{[0-9]+}}(%[[I:.*]]: i64):
// CHECK-NEXT:      %[[THREE:.*]] = arith.constant 3 : i64
// CHECK-NEXT:      %[[C2:.*]] = arith.cmpi slt, %[[I]], %[[THREE]] : i64
// CHECK-NEXT:      tensor.yield %[[C2]] : i1
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[GT:.*]] = tensor.elementwise(%b, %b) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1> {
// CHECK-NEXT:    ^bb{{[0-9]+}}(%[[P:.*]]: i1, %[[Q:.*]]: i1):
// CHECK-NEXT:      %[[C3:.*]] = arith.cmpi ugt, %[[P]], %[[Q]] : i1
// CHECK-NEXT:      tensor.yield %[[C3]] : i1
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[NE]], %[[LT]], %[[GT]]
func.func @compare(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %i: tensor<4xi64>, %b: tensor<4xi1>) -> (tensor<4x8xi1>, tensor<4xi1>, tensor<4xi1>) {
  %ne = torch.ne %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %c = torch.constant {value = 3.000000e+00 : f64} : () -> tensor<i64>
  %lt = torch.lt %i, %c : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
  %gt = torch.gt %b, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return %ne, %lt, %gt : tensor<4x8xi1>, tensor<4xi1>, tensor<4xi1>
}

// A bool splat constant folds into the body as `arith.constant true`.
// CHECK-LABEL: func.func @logic
// CHECK-NEXT:    %[[AND:.*]] = tensor.elementwise(%a) : (tensor<4xi1>) -> tensor<4xi1> {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: i1):
// CHECK-NEXT:      %[[T:.*]] = arith.constant true
// CHECK-NEXT:      %[[R:.*]] = arith.andi %[[X]], %[[T]] : i1
// CHECK-NEXT:      tensor.yield %[[R]] : i1
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[OR:.*]] = tensor.elementwise(%[[AND]], %b)
// CHECK:           arith.ori
// CHECK:         tensor.elementwise(%[[OR]])
// CHECK-NEXT:    ^bb{{[0-9]+}}(%[[Y:.*]]: i1):
// CHECK-NEXT:      %[[T2:.*]] = arith.constant true
// CHECK-NEXT:      arith.xori %[[Y]], %[[T2]] : i1
func.func @logic(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %t = torch.constant {value = 1.000000e+00 : f64} : () -> tensor<i1>
  %and = torch.logical_and %a, %t : (tensor<4xi1>, tensor<i1>) -> tensor<4xi1>
  %or = torch.logical_or %and, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %not = torch.logical_not %or : (tensor<4xi1>) -> tensor<4xi1>
  func.return %not : tensor<4xi1>
}

// masked_fill(x, m, -inf) is where(m, -inf, x): the mask is broadcast, -inf folded.
// CHECK-LABEL: func.func @where
// CHECK-NEXT:    %[[M:.*]] = tensor.index_map(%m) [affine_map<(d0, d1) -> (d0, 0)>] : (tensor<4x1xi1>) -> tensor<4x8xi1>
// CHECK-NEXT:    tensor.elementwise(%[[M]], %x) : (tensor<4x8xi1>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^bb0(%[[C:.*]]: i1, %[[V:.*]]: f32):
// CHECK-NEXT:      %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      %[[S:.*]] = arith.select %[[C]], %[[NINF]], %[[V]] : f32
// CHECK-NEXT:      tensor.yield %[[S]] : f32
func.func @where(%m: tensor<4x1xi1>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ninf = torch.constant {value = 0xFFF0000000000000 : f64} : () -> tensor<f32>
  %r = torch.where %m, %ninf, %x : (tensor<4x1xi1>, tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
