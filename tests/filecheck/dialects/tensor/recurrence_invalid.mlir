// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @gates(%g: tensor<5x2x9xf32>, %w: tensor<12x3xf32>, %b: tensor<12xf32>, %h: tensor<2x3xf32>, %c: tensor<2x3xf32>) -> tensor<5x2x6xf32> {
  %s = "tensor.recurrence"(%g, %w, %b, %h, %c) <{cell = #tensor<cell lstm>}> : (tensor<5x2x9xf32>, tensor<12x3xf32>, tensor<12xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x2x6xf32>
  func.return %s : tensor<5x2x6xf32>
}
// CHECK: tensor.recurrence: the lstm cell of hidden size 3 needs gates (T, B, 12), weight (12, 3), bias (12); got (5, 2, 9), (12, 3), (12,)

// -----

func.func @no_cell_state(%g: tensor<5x2x12xf32>, %w: tensor<12x3xf32>, %b: tensor<12xf32>, %h: tensor<2x3xf32>) -> tensor<5x2x6xf32> {
  %s = "tensor.recurrence"(%g, %w, %b, %h) <{cell = #tensor<cell lstm>}> : (tensor<5x2x12xf32>, tensor<12x3xf32>, tensor<12xf32>, tensor<2x3xf32>) -> tensor<5x2x6xf32>
  func.return %s : tensor<5x2x6xf32>
}
// CHECK: tensor.recurrence: c0 is given exactly when the cell is an LSTM

// -----

func.func @result(%g: tensor<5x2x3xf32>, %w: tensor<3x3xf32>, %b: tensor<3xf32>, %h: tensor<2x3xf32>) -> tensor<5x2x6xf32> {
  %s = "tensor.recurrence"(%g, %w, %b, %h) <{cell = #tensor<cell rnn_tanh>}> : (tensor<5x2x3xf32>, tensor<3x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> tensor<5x2x6xf32>
  func.return %s : tensor<5x2x6xf32>
}
// CHECK: tensor.recurrence: result shape [5, 2, 6] must be [5, 2, 3]
