// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s --print-op-generic | deplodock-opt | filecheck %s

// `tensor.recurrence <cell> [reverse] (gates, weight, bias, h0[, c0])`: one recurrent layer
// over the sequence; the result is every step's state, h then c for the LSTM.
func.func @forward(%g: tensor<5x2x12xf32>, %w: tensor<12x3xf32>, %b: tensor<12xf32>, %h: tensor<2x3xf32>, %c: tensor<2x3xf32>, %r: tensor<5x2x3xf32>, %rw: tensor<3x3xf32>, %rb: tensor<3xf32>) -> tensor<5x2x6xf32> {
  %lstm = tensor.recurrence lstm reverse (%g, %w, %b, %h, %c) : (tensor<5x2x12xf32>, tensor<12x3xf32>, tensor<12xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x2x6xf32>
  %rnn = tensor.recurrence rnn_relu (%r, %rw, %rb, %h) : (tensor<5x2x3xf32>, tensor<3x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> tensor<5x2x3xf32>
  func.return %lstm : tensor<5x2x6xf32>
}

// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %lstm = tensor.recurrence lstm reverse (%g, %w, %b, %h, %c) : (tensor<5x2x12xf32>, tensor<12x3xf32>, tensor<12xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x2x6xf32>
// CHECK-NEXT:    %rnn = tensor.recurrence rnn_relu (%r, %rw, %rb, %h) : (tensor<5x2x3xf32>, tensor<3x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> tensor<5x2x3xf32>
