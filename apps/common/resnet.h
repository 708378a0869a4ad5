#pragma once
// The residual network of apps/fashion_resnet, sized for 28x28 grayscale images: a 3x3 convolution
// stem, three stages of basic blocks (conv-BN-ReLU-conv-BN plus the input, a strided 1x1
// convolution where the shape changes), global average pooling and one linear layer, built as
// torchvision's ResNet is.
#include "minidl.h"
#include "nn/nn.h"

namespace resnet {

using namespace minidl;

/// conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU.
class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(out))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", nn::BatchNorm2d(out))) {
    // Where the block changes the shape, the input is projected to it (torchvision's "option B").
    if (stride != 1 || in != out)
      shortcut = register_module(
          "shortcut", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                     nn::BatchNorm2d(out)));
  }

  Tensor forward(const Tensor& x) override {
    Tensor y = relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return relu(y + (shortcut.get() ? shortcut(x) : x));
  }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential shortcut{nullptr};
};
MINIDL_MODULE(BasicBlock);

/// 28x28x1 -> 32 channels at 28x28 -> 64 at 14x14 -> 128 at 7x7 -> pooled -> 10 classes.
class ResNetImpl : public nn::Module {
 public:
  ResNetImpl()
      : stem(register_module("stem", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1).bias(false)),
                                                    nn::BatchNorm2d(32), nn::ReLU()))),
        stages(register_module("stages", nn::Sequential(BasicBlock(32, 32, 1), BasicBlock(32, 32, 1),
                                                        BasicBlock(32, 64, 2), BasicBlock(64, 64, 1),
                                                        BasicBlock(64, 128, 2), BasicBlock(128, 128, 1)))),
        pool(register_module("pool", nn::AdaptiveAvgPool2d(1))),
        fc(register_module("fc", nn::Linear(128, 10))) {
    // He initialization for the convolutions, and each block's last BN scaled to zero so that every
    // block starts as the identity (as torchvision's zero_init_residual).
    for (auto& [name, m] : named_modules()) {
      if (auto* conv = dynamic_cast<nn::Conv2dImpl*>(m.get()))
        nn::init::kaiming_normal_(conv->weight, 0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
      if (auto* block = dynamic_cast<BasicBlockImpl*>(m.get())) nn::init::zeros_(block->bn2->weight);
    }
  }

  Tensor forward(const Tensor& x) override { return fc(flatten(pool(stages(stem(x))), 1)); }

  nn::Sequential stem, stages;
  nn::AdaptiveAvgPool2d pool;
  nn::Linear fc;
};
MINIDL_MODULE(ResNet);

}  // namespace resnet
