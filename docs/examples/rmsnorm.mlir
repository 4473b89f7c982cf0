builtin.module {
  func.func @forward(%x0: tensor<1x32x2048xf32> {deplodock.input = "x0"}, %p_0_weight: tensor<2048xf32> {deplodock.param = "0.weight"}) -> tensor<1x32x2048xf32> {
    %rms_norm = torch.rms_norm %x0, %p_0_weight {normalized_shape = array<i64: 2048>, eps = 1.1920928955078125e-07 : f64} : (tensor<1x32x2048xf32>, tensor<2048xf32>) -> tensor<1x32x2048xf32>
    func.return %rms_norm : tensor<1x32x2048xf32>
  }
}
