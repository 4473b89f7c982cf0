// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s --print-op-generic | deplodock-opt | filecheck %s

// Every torch op, printed back in its custom syntax (round trip).

func.func @forward(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<16x8xf32>, %m: tensor<2x4x8xf32>, %h: tensor<4x8xf16>) -> tensor<4x8xf32> {
  %c = torch.constant {value = 1.000000e+00 : f64} : () -> tensor<f32>
  %c2 = torch.constant {value = -5.000000e-01 : f64} : () -> tensor<4x8xbf16>
  %add = torch.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %sub = torch.sub %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %mul = torch.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %div = torch.div %c, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %neg = torch.neg %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %exp = torch.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %log = torch.log %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sqrt = torch.sqrt %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %rsqrt = torch.rsqrt %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %abs = torch.abs %h : (tensor<4x8xf16>) -> tensor<4x8xf16>
  %relu = torch.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sig = torch.sigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %tanh = torch.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %silu = torch.silu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %gelu = torch.gelu %x {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %pow = torch.pow %x {exponent = 2.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %erf = torch.erf %h : (tensor<4x8xf16>) -> tensor<4x8xf16>
  %hsw = torch.hardswish %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %hsig = torch.hardsigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %mish = torch.mish %h : (tensor<4x8xf16>) -> tensor<4x8xf16>
  %lsig = torch.log_sigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %leaky = torch.leaky_relu %x {negative_slope = 1.000000e-02 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %elu = torch.elu %x {alpha = 1.000000e+00 : f64, scale = 1.000000e+00 : f64, input_scale = 1.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %softplus = torch.softplus %x {beta = 1.000000e+00 : f64, threshold = 2.000000e+01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %maximum = torch.maximum %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %minimum = torch.minimum %c, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %triu = torch.triu %m {diagonal = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %tril = torch.tril %x {diagonal = -2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %clamp = torch.clamp %x {min = -5.000000e-01 : f64, max = 5.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %clamp_min = torch.clamp %x {min = 0.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %clamp_max = torch.clamp %h {max = 6.000000e+00 : f64} : (tensor<4x8xf16>) -> tensor<4x8xf16>
  %sum = torch.sum %x {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  %mean = torch.mean %x {dims = array<i64: 0, 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<1x1xf32>
  %amax = torch.amax %x {dims = array<i64: 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  %amin = torch.amin %x {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %argmax = torch.argmax %x {dim = 1 : i64, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xi64>
  %argmin = torch.argmin %h {dim = 0 : i64, keepdim = true} : (tensor<4x8xf16>) -> tensor<1x8xi64>
  %sm = torch.softmax %x {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %lsm = torch.log_softmax %x {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %rms = torch.rms_norm %x, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-06 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %rms0 = torch.rms_norm %x {normalized_shape = array<i64: 4, 8>, eps = 1.000000e-06 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %ln = torch.layer_norm %x, %b, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %ln1 = torch.layer_norm %x, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %ln2 = torch.layer_norm %x, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64, operandSegmentSizes = array<i32: 1, 0, 1>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %ln3 = torch.layer_norm %x {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = torch.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %mm = torch.matmul %x, %t : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %mv = torch.matmul %m, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4xf32>
  %m2 = torch.permute %m {dims = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %bmm = torch.bmm %m, %m2 : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %bias = torch.slice %w {dim = 1 : i64, start = 0 : i64, end = 1 : i64, step = 1 : i64} : (tensor<16x8xf32>) -> tensor<16x1xf32>
  %bias1 = torch.reshape %bias : (tensor<16x1xf32>) -> tensor<16xf32>
  %lin = torch.linear %x, %w, %bias1 : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %lin0 = torch.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %r = torch.reshape %x : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
  %u = torch.unsqueeze %b {dim = 0 : i64} : (tensor<8xf32>) -> tensor<1x8xf32>
  %e = torch.expand %u : (tensor<1x8xf32>) -> tensor<3x4x8xf32>
  %s = torch.slice %x {dim = 1 : i64, start = 1 : i64, end = 8 : i64, step = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x3xf32>
  %cat = torch.cat %x, %x, %s {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x19xf32>
  %win = torch.window %m {kernel = array<i64: 3>, stride = array<i64: 2>, dilation = array<i64: 1>, low = array<i64: 1>, high = array<i64: 1>, pad_value = 0.000000e+00 : f64} : (tensor<2x4x8xf32>) -> tensor<2x4x4x3xf32>
  func.return %add : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT: %c = torch.constant {value = 1.000000e+00 : f64} : () -> tensor<f32>
// CHECK-NEXT: %c2 = torch.constant {value = -5.000000e-01 : f64} : () -> tensor<4x8xbf16>
// CHECK-NEXT: %add = torch.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %sub = torch.sub %x, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: %mul = torch.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %div = torch.div %c, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %neg = torch.neg %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %exp = torch.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %log = torch.log %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %sqrt = torch.sqrt %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %rsqrt = torch.rsqrt %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %abs = torch.abs %h : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-NEXT: %relu = torch.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %sig = torch.sigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %tanh = torch.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %silu = torch.silu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %gelu = torch.gelu %x {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %pow = torch.pow %x {exponent = 2.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %erf = torch.erf %h : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-NEXT: %hsw = torch.hardswish %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %hsig = torch.hardsigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %mish = torch.mish %h : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-NEXT: %lsig = torch.log_sigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %leaky = torch.leaky_relu %x {negative_slope = 1.000000e-02 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %elu = torch.elu %x {alpha = 1.000000e+00 : f64, scale = 1.000000e+00 : f64, input_scale = 1.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %softplus = torch.softplus %x {beta = 1.000000e+00 : f64, threshold = 2.000000e+01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %maximum = torch.maximum %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %minimum = torch.minimum %c, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %triu = torch.triu %m {diagonal = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %tril = torch.tril %x {diagonal = -2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %clamp = torch.clamp %x {min = -5.000000e-01 : f64, max = 5.000000e-01 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %clamp_min = torch.clamp %x {min = 0.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %clamp_max = torch.clamp %h {max = 6.000000e+00 : f64} : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-NEXT: %sum = torch.sum %x {dims = array<i64: 1>, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %mean = torch.mean %x {dims = array<i64: 0, 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<1x1xf32>
// CHECK-NEXT: %amax = torch.amax %x {dims = array<i64: 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %amin = torch.amin %x {dims = array<i64: 1>, keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %argmax = torch.argmax %x {dim = 1 : i64, keepdim = false} : (tensor<4x8xf32>) -> tensor<4xi64>
// CHECK-NEXT: %argmin = torch.argmin %h {dim = 0 : i64, keepdim = true} : (tensor<4x8xf16>) -> tensor<1x8xi64>
// CHECK-NEXT: %sm = torch.softmax %x {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %lsm = torch.log_softmax %x {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %rms = torch.rms_norm %x, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-06 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %rms0 = torch.rms_norm %x {normalized_shape = array<i64: 4, 8>, eps = 1.000000e-06 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %ln = torch.layer_norm %x, %b, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %ln1 = torch.layer_norm %x, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %ln2 = torch.layer_norm %x, %b {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64, operandSegmentSizes = array<i32: 1, 0, 1>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %ln3 = torch.layer_norm %x {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %t = torch.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %mm = torch.matmul %x, %t : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %mv = torch.matmul %m, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %m2 = torch.permute %m {dims = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %bmm = torch.bmm %m, %m2 : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT: %bias = torch.slice %w {dim = 1 : i64, start = 0 : i64, end = 1 : i64, step = 1 : i64} : (tensor<16x8xf32>) -> tensor<16x1xf32>
// CHECK-NEXT: %bias1 = torch.reshape %bias : (tensor<16x1xf32>) -> tensor<16xf32>
// CHECK-NEXT: %lin = torch.linear %x, %w, %bias1 : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %lin0 = torch.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %r = torch.reshape %x : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
// CHECK-NEXT: %u = torch.unsqueeze %b {dim = 0 : i64} : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: %e = torch.expand %u : (tensor<1x8xf32>) -> tensor<3x4x8xf32>
// CHECK-NEXT: %s = torch.slice %x {dim = 1 : i64, start = 1 : i64, end = 8 : i64, step = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %cat = torch.cat %x, %x, %s {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x19xf32>
// CHECK-NEXT: %win = torch.window %m {kernel = array<i64: 3>, stride = array<i64: 2>, dilation = array<i64: 1>, low = array<i64: 1>, high = array<i64: 1>, pad_value = 0.000000e+00 : f64} : (tensor<2x4x8xf32>) -> tensor<2x4x4x3xf32>
// CHECK-NEXT: func.return %add : tensor<4x8xf32>
