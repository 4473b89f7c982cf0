builtin.module {
  func.func @forward(%x0: tensor<1x128x5632xf32> {deplodock.input = "x0"}, %x1: tensor<1x128x5632xf32> {deplodock.input = "x1"}) -> tensor<1x128x5632xf32> {
    %silu = torch.silu %x0 : (tensor<1x128x5632xf32>) -> tensor<1x128x5632xf32>
    %mul = torch.mul %silu, %x1 : (tensor<1x128x5632xf32>, tensor<1x128x5632xf32>) -> tensor<1x128x5632xf32>
    func.return %mul : tensor<1x128x5632xf32>
  }
}
