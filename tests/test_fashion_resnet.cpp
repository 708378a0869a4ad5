// apps/fashion_resnet's network on the CPU: its output shape, its parameter count counted by hand,
// and that it learns: four epochs over the first 512 Fashion-MNIST images lower the training loss and
// lift the training accuracy well above chance. Skips, saying how to fetch the data, when Fashion-MNIST is absent.
#include <gtest/gtest.h>

#include "apps/common/resnet.h"
#include "data/dataloader.h"
#include "data/mnist.h"
#include "data/paths.h"
#include "optim/optim.h"

namespace minidl::fashion_resnet_test {

TEST(FashionResnet, ShapesAndParameterCount) {
  manual_seed(1);
  auto model = resnet::ResNet().ptr();
  model->eval();
  NoGradGuard no_grad;
  EXPECT_EQ(model->forward(randn({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  // conv weights + BN weights and biases + fc, counted by hand for the stem, the six blocks and fc.
  int64_t expected = 32 * 9 + 2 * 32;                                        // stem
  expected += 2 * (2 * (32 * 32 * 9 + 2 * 32));                              // two 32 -> 32 blocks
  expected += 32 * 64 * 9 + 64 * 64 * 9 + 4 * 64 + 32 * 64 + 2 * 64;         // 32 -> 64, stride 2
  expected += 2 * (64 * 64 * 9) + 4 * 64;                                    // 64 -> 64
  expected += 64 * 128 * 9 + 128 * 128 * 9 + 4 * 128 + 64 * 128 + 2 * 128;   // 64 -> 128, stride 2
  expected += 2 * (128 * 128 * 9) + 4 * 128;                                 // 128 -> 128
  expected += 128 * 10 + 10;                                                 // fc
  EXPECT_EQ(model->num_parameters(), expected);
}

TEST(FashionResnet, LearnsOnTheCpu) {
  std::shared_ptr<data::FashionMNIST> train;
  try {
    train = std::make_shared<data::FashionMNIST>(data::data_root(), true);
  } catch (const Error& e) {
    GTEST_SKIP() << "Fashion-MNIST not found; fetch it with scripts/get_data.sh --fashion (" << e.what() << ")";
  }
  manual_seed(3);
  Tensor index = arange(512.0, kInt64);
  auto subset = std::make_shared<data::TensorDataset>(index_select(train->images(), index),
                                                      index_select(train->targets(), index));
  data::DataLoader loader(subset, data::DataLoaderOptions().batch_size(64).shuffle(true).seed(3));
  auto model = resnet::ResNet().ptr();
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));
  std::vector<double> epoch_loss;
  int64_t correct = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    double sum = 0;
    correct = 0;
    for (data::Batch& batch : loader) {
      Tensor out = model->forward(batch.data);
      Tensor loss = nn::functional::cross_entropy(out, batch.target);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      sum += loss.item<double>() * batch.data.size(0);
      correct += eq(argmax(out, 1), batch.target).sum().item<int64_t>();
    }
    epoch_loss.push_back(sum / 512);
  }
  // From chance (loss ln 10 = 2.30) down; this seed gives 2.30, 2.13, 1.92, 1.70 and 224/512 in the last epoch.
  EXPECT_LT(epoch_loss[3], epoch_loss[0] - 0.3) << "epoch losses " << epoch_loss[0] << " ... " << epoch_loss[3];
  EXPECT_GT(correct, 512 * 35 / 100) << "last-epoch training accuracy " << correct << "/512";
}

}  // namespace minidl::fashion_resnet_test
